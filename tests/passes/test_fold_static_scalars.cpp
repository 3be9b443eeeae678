// fold_static_scalars: static scalar values become literals; dead where branches disappear.
#include <gtest/gtest.h>

#include "pass_test_support.h"
#include "passes/fold_static_scalars.h"

namespace fieldflow::pass_tests {
namespace {

ir::Program flag_program() {
  ProgramBuilder pb("flagged");
  auto a = pb.field("a", {I, K}, DType::float64);
  auto b = pb.field("b", {I, K}, DType::float64);
  auto out = pb.field("out", {I, K}, DType::float64);
  auto flag = pb.scalar("flag", DType::boolean);
  auto nk = pb.scalar("nk", DType::int32);
  pb.call("pick", where(flag & (nk > 2), a * 2.0, concat_where(K < nk - 1, b(K + 1), b)), {out},
          {{I, 0, 4}, {K, 0, nk}});
  return pb.build();
}

// A true condition keeps the first branch only: b is no longer read.
TEST(FoldStaticScalars, TrueFlagKeepsTheFirstBranch) {
  auto s = schedule_of(flag_program());
  passes::fold_static_scalars(s, {{"flag", Scalar(true)}, {"nk", Scalar(std::int32_t{5})}});
  const std::string text = ir::print(s.program);
  EXPECT_EQ(text.find("where"), std::string::npos) << text;
  EXPECT_EQ(text.find("b("), std::string::npos) << text;
  EXPECT_NE(text.find("K: [0, 5)"), std::string::npos) << text;
}

// A false flag keeps the second branch, with the static bound folded into its concat_where.
TEST(FoldStaticScalars, FalseFlagKeepsTheSecondBranchWithAConstantBound) {
  auto s = schedule_of(flag_program());
  passes::fold_static_scalars(s, {{"flag", Scalar(false)}, {"nk", Scalar(std::int32_t{5})}});
  const std::string text = ir::print(s.program);
  EXPECT_EQ(text.find("= where("), std::string::npos) << text;
  EXPECT_NE(text.find("concat_where(K < 4"), std::string::npos) << text;
  EXPECT_EQ(text.find("mul("), std::string::npos) << "a * 2.0 is gone: " << text;
}

// Only one of two scalars static: the other stays a parameter read at run time.
TEST(FoldStaticScalars, NonStaticScalarsStay) {
  auto s = schedule_of(flag_program());
  passes::fold_static_scalars(s, {{"nk", Scalar(std::int32_t{1})}});
  const std::string text = ir::print(s.program);
  // nk > 2 is false for nk = 1, so flag & false folds only if flag is known: the where stays.
  EXPECT_NE(text.find("= where("), std::string::npos) << text;
  EXPECT_NE(text.find("flag"), std::string::npos) << text;
  EXPECT_NE(text.find("K: [0, 1)"), std::string::npos) << text;
}

// Bounds through operations (n / 2, minimum, maximum, //, %) fold inside the operations: the
// static value replaces the parameter there too, and an operation of constants becomes one.
// The fold kept the operation's printed form as a plain name, which ir::verify then refused as
// "not an int scalar parameter" (fuzzer seed 50, docs/reliability.md class 27).
TEST(FoldStaticScalars, BoundsThroughOperationsFoldInside) {
  ProgramBuilder pb("ops");
  auto a = pb.field("a", {I, K}, DType::float64), out = pb.field("out", {I, K}, DType::float64);
  auto n = pb.scalar("n", DType::int32), nk = pb.scalar("nk", DType::int32);
  pb.call("c", concat_where(K < minimum(nk, Expr(3)) + 1, a, a * 2.0), {out},
          {{I, maximum(Expr(0), n - 2), minimum(n, floor_divide(n, Expr(2)) + 1)}, {K, nk % Expr(4), nk}});
  auto s = schedule_of(pb.build());
  passes::fold_static_scalars(s, {{"n", Scalar(std::int32_t{7})}, {"nk", Scalar(std::int32_t{6})}});
  const std::string text = ir::print(s.program);
  EXPECT_NE(text.find("I: [5, 4)"), std::string::npos) << text;  // max(0, 5), min(7, 3 + 1)
  EXPECT_NE(text.find("K: [2, 6)"), std::string::npos) << text;  // 6 % 4
  EXPECT_NE(text.find("concat_where(K < 4"), std::string::npos) << text;  // min(6, 3) + 1
  EXPECT_EQ(text.find("min("), std::string::npos) << text;
  // Only nk static: the operations on n stay, and read n alone.
  auto partly = schedule_of(pb.build());
  passes::fold_static_scalars(partly, {{"nk", Scalar(std::int32_t{6})}});
  EXPECT_EQ(partly.program.stmts[0].domain[0].lo.parameters(), std::vector<std::string>{"n"});
  EXPECT_EQ(partly.program.stmts[0].domain[0].lo.evaluate({{"n", 9}}), 7);
  EXPECT_EQ(partly.program.stmts[0].domain[0].hi.evaluate({{"n", 9}}), 5);
}

// Without static values the program is unchanged.
TEST(FoldStaticScalars, NoValuesNoChange) {
  const ir::Program p = flag_program();
  auto s = schedule_of(p);
  passes::fold_static_scalars(s, {});
  EXPECT_EQ(ir::print(s.program), ir::print(p));
}

}  // namespace
}  // namespace fieldflow::pass_tests
