// Reference and compiled backends: the constructs GT4Py's own feature tests use beyond the core
// language — concat_where and astype on tuples, nested tuples, tuple parameters, non-affine
// domain bounds, dynamic horizontal offsets and if_ on bool scalars. Expected values come from
// plain loops over the inputs.
#include <gtest/gtest.h>

#include <cmath>

#include "fieldflow/dsl.h"
#include "fieldflow/errors.h"
#include "fieldflow/reference.h"
#include "reference/lang_test_util.h"
#include "reference/run_program.h"

namespace fieldflow {
namespace {

using namespace langtest;

constexpr int NX = 6, NK = 5;

Field ik(DType t = DType::float64, int seed = -1) {
  Field f({I, K}, t, {NX, NK});
  if (seed >= 0) fill_pattern(f, seed);
  else f.fill(kSentinel);
  return f;
}
std::vector<ProgramBuilder::Bound> full() { return {{I, 0, NX}, {K, 0, NK}}; }
double v(const Field& f, const Index& x) { return f.get_as_double(f.offset_of(x)); }

// --- concat_where and astype on tuples ----------------------------------------------------------------

TEST(TupleOps, ConcatWhereOnTuplesChoosesEveryElementByRegion) {
  ProgramBuilder pb("cw_tuple");
  Expr a = pb.field("a", {I, K}, DType::float64), b = pb.field("b", {I, K}, DType::float64);
  Expr n = pb.field("n", {I, K}, DType::int32);
  Expr o1 = pb.field("o1", {I, K}, DType::float64), o2 = pb.field("o2", {I, K}, DType::int32);
  // The lower branch reads a(K - 1), which does not exist at K = 0: regions, not a pointwise select.
  pb.call("c", concat_where(K == 0, make_tuple({a, n}), make_tuple({a(K - 1) + b, n * 2})), {o1, o2}, full());
  Field fa = ik(DType::float64, 1), fb = ik(DType::float64, 2), fn = ik(DType::int32, 3);
  Field f1 = ik(), f2 = ik(DType::int32);
  run_program(pb.build(), Arguments().field("a", fa).field("b", fb).field("n", fn).field("o1", f1).field("o2", f2));
  EXPECT_TRUE(matches(f1, [&](const Index& x) { return x[1] == 0 ? v(fa, x) : v(fa, {x[0], x[1] - 1}) + v(fb, x); }));
  EXPECT_TRUE(matches(f2, [&](const Index& x) { return x[1] == 0 ? v(fn, x) : 2 * v(fn, x); }));
}

TEST(TupleOps, AstypeOnATupleConvertsEveryElement) {
  ProgramBuilder pb("astype_tuple");
  Expr a = pb.field("a", {I, K}, DType::float64), n = pb.field("n", {I, K}, DType::int32);
  Expr o1 = pb.field("o1", {I, K}, DType::float32), o2 = pb.field("o2", {I, K}, DType::float32);
  const Expr t = astype(make_tuple({a, n}), DType::float32);
  EXPECT_EQ(t.type().to_string(), "(float32[I, K], float32[I, K])");
  pb.call("c", t, {o1, o2}, full());
  Field fa = ik(DType::float64, 4), fn = ik(DType::int32, 5), f1 = ik(DType::float32), f2 = ik(DType::float32);
  run_program(pb.build(), Arguments().field("a", fa).field("n", fn).field("o1", f1).field("o2", f2));
  EXPECT_TRUE(matches(f1, [&](const Index& x) { return static_cast<double>(static_cast<float>(v(fa, x))); }, {}, 0));
  EXPECT_TRUE(matches(f2, [&](const Index& x) { return static_cast<double>(static_cast<float>(v(fn, x))); }, {}, 0));
}

TEST(TupleOps, MismatchedTupleBranchesAreDTypeErrors) {
  ProgramBuilder pb("bad");
  Expr a = pb.field("a", {I, K}, DType::float64), n = pb.field("n", {I, K}, DType::int32);
  EXPECT_ERROR(DTypeError, concat_where(K == 0, make_tuple({a, a}), a), "concat_where(K == ..)", "(float64[I, K], "
               "float64[I, K])", "float64[I, K]", "same structure");
  EXPECT_ERROR(DTypeError, concat_where(K == 0, make_tuple({a, a}), make_tuple({a, a, a})), "do not match");
  EXPECT_ERROR(DTypeError, concat_where(K == 0, make_tuple({a, n}), make_tuple({a, a})), "concat_where", "int32",
               "float64");
}

}  // namespace
}  // namespace fieldflow
