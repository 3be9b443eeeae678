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

// Without static values the program is unchanged.
TEST(FoldStaticScalars, NoValuesNoChange) {
  const ir::Program p = flag_program();
  auto s = schedule_of(p);
  passes::fold_static_scalars(s, {});
  EXPECT_EQ(ir::print(s.program), ir::print(p));
}

}  // namespace
}  // namespace fieldflow::pass_tests
