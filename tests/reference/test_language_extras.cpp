// Reference and compiled backends: the constructs GT4Py's own feature tests use beyond the core
// language — concat_where and astype on tuples, nested tuples, tuple parameters, non-affine
// domain bounds, dynamic horizontal offsets and if_ on bool scalars. Expected values come from
// plain loops over the inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

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

// --- nested tuples ----------------------------------------------------------------------------------------

// An operator returning a nested tuple: (sum, (difference, product > 0)).
Expr sum_and_rest(const Expr& a, const Expr& b) { return make_tuple({a + b, make_tuple({a - b, a * b > 0})}); }

TEST(NestedTuples, ReturnedPassedAndWrittenToNestedOutputs) {
  ProgramBuilder pb("nested");
  Expr a = pb.field("a", {I, K}, DType::float64), b = pb.field("b", {I, K}, DType::float64);
  Expr s = pb.field("s", {I, K}, DType::float64), d = pb.field("d", {I, K}, DType::float64);
  Expr p = pb.field("p", {I, K}, DType::boolean);
  const Expr t = sum_and_rest(a, b);
  EXPECT_EQ(t.type().to_string(), "(float64[I, K], (float64[I, K], bool[I, K]))");
  EXPECT_EQ(t[1][1].type().to_string(), "bool[I, K]");
  // Passed on to another operator that swaps the inner pair and scales the sum.
  auto rearrange = [](const Expr& x) { return make_tuple({x[0] * 2, make_tuple({x[1][0], x[1][1]})}); };
  pb.call("c", rearrange(t), {s, make_tuple({d, p})}, full());
  Field fa = ik(DType::float64, 6), fb = ik(DType::float64, 7), fs = ik(), fd = ik(), fp = ik(DType::boolean);
  run_program(pb.build(), Arguments().field("a", fa).field("b", fb).field("s", fs).field("d", fd).field("p", fp));
  EXPECT_TRUE(matches(fs, [&](const Index& x) { return (v(fa, x) + v(fb, x)) * 2; }));
  EXPECT_TRUE(matches(fd, [&](const Index& x) { return v(fa, x) - v(fb, x); }));
  EXPECT_TRUE(matches(fp, [&](const Index& x) { return v(fa, x) * v(fb, x) > 0 ? 1.0 : 0.0; }, {}, 0, 1.0));
}

TEST(NestedTuples, WhereAndConcatWhereOverNestedTuplesAndATupleScan) {
  ProgramBuilder pb("nested_where");
  Expr a = pb.field("a", {I, K}, DType::float64), b = pb.field("b", {I, K}, DType::float64);
  Expr o1 = pb.field("o1", {I, K}, DType::float64), o2 = pb.field("o2", {I, K}, DType::float64),
       o3 = pb.field("o3", {I, K}, DType::float64);
  // A tuple scan (running sum, running max) nested inside a tuple.
  const Expr sm = scan("summax", ScanDirection::forward, {Scalar(0.0), Scalar(-1e300)},
                       [](const Expr& c, const std::vector<Expr>& in) {
                         return make_tuple({c[0] + in[0], maximum(c[1], in[0])});
                       },
                       {a});
  const Expr x = make_tuple({b, sm}), y = make_tuple({-b, make_tuple({a, b})});
  const Expr chosen = where(a > 0, x, y);
  EXPECT_EQ(chosen.type().to_string(), "(float64[I, K], (float64[I, K], float64[I, K]))");
  pb.call("c", concat_where(I < 2, y, chosen), {o1, make_tuple({o2, o3})}, full());
  Field fa = ik(DType::float64, 8), fb = ik(DType::float64, 9), f1 = ik(), f2 = ik(), f3 = ik();
  run_program(pb.build(), Arguments().field("a", fa).field("b", fb).field("o1", f1).field("o2", f2).field("o3", f3));
  auto sum = [&](const Index& p) {
    double acc = 0;
    for (std::int64_t k = 0; k <= p[1]; ++k) acc += v(fa, {p[0], k});
    return acc;
  };
  auto mx = [&](const Index& p) {
    double acc = -1e300;
    for (std::int64_t k = 0; k <= p[1]; ++k) acc = std::max(acc, v(fa, {p[0], k}));
    return acc;
  };
  auto pick = [&](const Index& p) { return p[0] >= 2 && v(fa, p) > 0; };  // x chosen
  EXPECT_TRUE(matches(f1, [&](const Index& p) { return pick(p) ? v(fb, p) : -v(fb, p); }));
  EXPECT_TRUE(matches(f2, [&](const Index& p) { return pick(p) ? sum(p) : v(fa, p); }));
  EXPECT_TRUE(matches(f3, [&](const Index& p) { return pick(p) ? mx(p) : v(fb, p); }));
}

TEST(NestedTuples, StructureMismatchesAreErrors) {
  ProgramBuilder pb("nested_bad");
  Expr a = pb.field("a", {I, K}, DType::float64), b = pb.field("b", {I, K}, DType::float64);
  Expr o1 = pb.field("o1", {I, K}, DType::float64), o2 = pb.field("o2", {I, K}, DType::float64);
  Expr o3 = pb.field("o3", {I, K}, DType::float64);
  const Expr t = make_tuple({a, make_tuple({a, b})});
  EXPECT_ERROR(ProgramError, pb.call("c", t, {o1, o2, o3}, full()), "call 'c'", "tuple structure",
               "(float64[I, K], (float64[I, K], float64[I, K]))", "(float64[I, K], float64[I, K], float64[I, K])");
  EXPECT_ERROR(ProgramError, pb.call("c", make_tuple({a, b, a}), {o1, make_tuple({o2, o3})}, full()),
               "tuple structure");
  EXPECT_ERROR(DTypeError, where(a > 0, t, make_tuple({a, b})), "where", "do not match");
  EXPECT_ERROR(DTypeError, t + a, "expected a field", "tuple");
  EXPECT_ERROR(DTypeError, t[1][2], "tuple element [2]", "[0, 2)");
  // Nothing was added by the failed calls.
  pb.call("ok", t, {o1, make_tuple({o2, o3})}, full());
  EXPECT_EQ(pb.build().stmts.size(), 1u);
}

// --- tuple-typed program parameters ---------------------------------------------------------------------------

TEST(TupleParameters, ReadAndWrittenAsTuples) {
  ProgramBuilder pb("tuple_params");
  Expr uv = pb.tuple_field("uv", {{{I, K}, DType::float64}, {{I, K}, DType::float64}});
  Expr out = pb.tuple_field("out", {{{I, K}, DType::float64}, {{K, I}, DType::float64}});
  Expr speed = pb.field("speed", {I, K}, DType::float64);
  EXPECT_EQ(uv.type().to_string(), "(float64[I, K], float64[I, K])");
  // Rotate by 90 degrees into the tuple output, and the speed into a plain field.
  pb.call("rotate", make_tuple({-uv[1], uv[0]}), {out}, full());
  pb.call("speed", sqrt(uv[0] * uv[0] + uv[1] * uv[1]), {speed}, full());
  const ir::Program prog = pb.build();
  ASSERT_NE(prog.find("uv.0"), nullptr);
  ASSERT_NE(prog.find("out.1"), nullptr);
  Field u = ik(DType::float64, 10), w = ik(DType::float64, 11), r0 = ik(), r1 = ik(), sp = ik();
  run_program(prog, Arguments().tuple("uv", {&u, &w}).tuple("out", {&r0, &r1}).field("speed", sp));
  EXPECT_TRUE(matches(r0, [&](const Index& x) { return -v(w, x); }));
  EXPECT_TRUE(matches(r1, [&](const Index& x) { return v(u, x); }));
  EXPECT_TRUE(matches(sp, [&](const Index& x) { return std::sqrt(v(u, x) * v(u, x) + v(w, x) * v(w, x)); }));
}

// A one-element tuple is its element (found by fuzz_program_builder: a call whose value was
// the one-field tuple parameter reached code generation as a tuple and failed with an untyped
// std::out_of_range). As a value, as an output, or both.
TEST(TupleParameters, OneElementTuplesAreTheirElement) {
  ProgramBuilder pb("one_tuples");
  Expr one = pb.tuple_field("one", {{{I, K}, DType::float64}});
  Expr a = pb.field("a", {I, K}, DType::float64);
  Expr o = pb.field("o", {I, K}, DType::float64);
  Expr out = pb.tuple_field("out", {{{I, K}, DType::float64}});
  pb.call("from_tuple", one, {o}, full());
  pb.call("to_tuple", a * 2.0, {out}, full());
  pb.call("tuple_to_tuple", make_tuple({make_tuple({o + a})}), {out}, full());
  const ir::Program prog = pb.build();
  for (const auto& st : prog.stmts) EXPECT_FALSE(st.expr->type.is_tuple()) << st.op;
  Field u = ik(DType::float64, 21), fa = ik(DType::float64, 22), fo = ik(), r = ik();
  run_program(prog, Arguments().tuple("one", {&u}).field("a", fa).field("o", fo).tuple("out", {&r}));
  EXPECT_TRUE(matches(fo, [&](const Index& x) { return v(u, x); }));
  EXPECT_TRUE(matches(r, [&](const Index& x) { return v(u, x) + v(fa, x); }));
  // A one-element tuple does not stand for several values.
  ProgramBuilder bad("one_tuples_bad");
  Expr two = bad.tuple_field("two", {{{I, K}, DType::float64}, {{I, K}, DType::float64}});
  Expr single = bad.tuple_field("single", {{{I, K}, DType::float64}});
  EXPECT_ERROR(ProgramError, bad.call("c", two, {single}, full()), "call 'c'", "tuple structure");
}

TEST(TupleParameters, MistakesAreNamed) {
  ProgramBuilder pb("tuple_params_bad");
  Expr uv = pb.tuple_field("uv", {{{I, K}, DType::float64}, {{I, K}, DType::float32}});
  Expr o = pb.field("o", {I, K}, DType::float64);
  EXPECT_ERROR(ProgramError, pb.tuple_field("uv", {{{I}, DType::float64}}), "parameter 'uv' declared twice");
  EXPECT_ERROR(ProgramError, pb.tuple_field("e", {}), "tuple parameter 'e'", "at least one element");
  EXPECT_ERROR(DimensionError, pb.tuple_field("d", {{{I, K}, DType::float64}, {{I, I}, DType::float64}}),
               "field 'd.1'", "twice");
  pb.call("c", astype(uv[1], DType::float64) + uv[0], {o}, full());
  const ir::Program prog = pb.build();
  EXPECT_EQ(prog.find("d.0"), nullptr) << "a rejected tuple parameter leaves no element behind";
  Field u = ik(DType::float64, 12), w = ik(DType::float32, 13), fo = ik();
  EXPECT_ERROR(ArgumentError, run_program(prog, Arguments().tuple("uv", {&u}).field("o", fo)), "uv.1");
  EXPECT_ERROR(ArgumentError, run_program(prog, Arguments().tuple("uv", {&w, &u}).field("o", fo)), "uv.0", "float64",
               "float32");
  EXPECT_ERROR(ArgumentError, Arguments().tuple("uv", {&u, nullptr}), "tuple argument 'uv'", "element 1", "null");
  run_program(prog, Arguments().tuple("uv", {&u, &w}).field("o", fo));
  EXPECT_TRUE(matches(fo, [&](const Index& x) { return static_cast<double>(w.at<float>({x[0], x[1]})) + v(u, x); }));
}

// --- domain bounds that are not affine ------------------------------------------------------------------------

TEST(NonAffineBounds, HalfTheGridAndOtherIntegerSteps) {
  ProgramBuilder pb("half");
  Expr a = pb.field("a", {I, K}, DType::float64), o = pb.field("o", {I, K}, DType::float64);
  Expr o2 = pb.field("o2", {I, K}, DType::float64);
  Expr n = pb.scalar("n", DType::int32), m = pb.scalar("m", DType::int64);
  // I in [n / 2, n * m / 3): non-affine in n and m; K up to minimum(m, 4) and from m % 2.
  pb.call("lower", a * 2, {o}, {{I, n / 2, n * astype(m, DType::int32) / 3}, {K, astype(m % 2, DType::int32), minimum(astype(m, DType::int32), 4)}});
  // concat_where with a non-affine bound: the upper half of the grid from another value.
  pb.call("halves", concat_where(I >= floor_divide(n + 1, 2), a, -a), {o2}, {{I, 0, n}, {K, 0, NK}});
  const ir::Program prog = pb.build();
  for (const auto& [nv, mv] : {std::pair{6, std::int64_t{3}}, std::pair{5, std::int64_t{2}}}) {
    Field fa = ik(DType::float64, 14), fo = ik(), fo2 = ik();
    run_program(prog, Arguments().field("a", fa).field("o", fo).field("o2", fo2).scalar("n", nv).scalar("m", mv));
    const int ilo = nv / 2, ihi = static_cast<int>(nv * mv / 3), klo = static_cast<int>(mv % 2),
              khi = static_cast<int>(std::min<std::int64_t>(mv, 4));
    EXPECT_TRUE(matches(fo, [&](const Index& x) { return v(fa, x) * 2; },
                        [&](const Index& x) { return x[0] >= ilo && x[0] < ihi && x[1] >= klo && x[1] < khi; }))
        << "n=" << nv << " m=" << mv;
    const int half = (nv + 1) / 2;
    EXPECT_TRUE(matches(fo2, [&](const Index& x) { return x[0] >= half ? v(fa, x) : -v(fa, x); },
                        [&](const Index& x) { return x[0] < nv; }))
        << "n=" << nv;
  }
}

TEST(NonAffineBounds, PrintedAndCheckedAtBuildTime) {
  ProgramBuilder pb("bounds");
  Expr a = pb.field("a", {I}, DType::float64), o = pb.field("o", {I}, DType::float64);
  Expr n = pb.scalar("n", DType::int32), x = pb.scalar("x", DType::float64);
  pb.call("c", a, {o}, {{I, n / 2 - 1, 3 * (n % 4) + n * n}});
  const ir::Program prog = pb.build();
  EXPECT_EQ(ir::to_string(prog.stmts[0].domain), "{I: [(n / 2) - 1, 3*(n % 4) + (n * n))}");
  EXPECT_EQ(prog.stmts[0].domain[0].hi.evaluate({{"n", 7}}), 3 * 3 + 49);
  EXPECT_EQ(prog.stmts[0].domain[0].lo.evaluate({{"n", -7}}), -3 - 1);  // / truncates toward zero
  // Constant operands fold with the same semantics; a constant factor keeps a bound affine.
  using ir::SymOpKind;
  EXPECT_EQ(ir::sym_operation(SymOpKind::floor_divide, -7, 2), ir::SymExpr(-4));
  EXPECT_EQ(ir::sym_operation(SymOpKind::mod, -7, 2), ir::SymExpr(1));
  EXPECT_EQ(ir::sym_operation(SymOpKind::div, 5, 0), ir::SymExpr(0));
  EXPECT_EQ(ir::sym_operation(SymOpKind::mul, 3, ir::SymExpr::symbol("n")).to_string(), "3*n");
  EXPECT_EQ(ir::sym_operation(SymOpKind::max, ir::SymExpr::symbol("n"), 4).to_string(), "max(n, 4)");
  EXPECT_ERROR(ProgramError, pb.call("c2", a, {o}, {{I, 0, astype(x, DType::int32) / 2}}), "domain of I",
               "integer expression of int scalar parameters", "astype");
  EXPECT_ERROR(ProgramError, pb.call("c3", a, {o}, {{I, 0, n / 2 + index(I)}}), "domain of I", "index");
  EXPECT_ERROR(DTypeError, pb.call("c4", a, {o}, {{I, 0, n / 2.0}}), "literal 2", "int32");
}

// --- dynamic offsets along horizontal dimensions ------------------------------------------------------------

TEST(DynamicHorizontalOffsets, GatherAlongIFromAnIntField) {
  ProgramBuilder pb("gather_i");
  Expr a = pb.field("a", {I, K}, DType::float64), off = pb.field("off", {I, K}, DType::int32);
  Expr col = pb.field("col", {I}, DType::float32);
  Expr o = pb.field("o", {I, K}, DType::float64), o2 = pb.field("o2", {I, K}, DType::float32);
  pb.call("gather", a(I + off) - a, {o}, full());
  pb.call("gather_col", col(I + off), {o2}, full());  // the offset's dims join the result
  Field fa = ik(DType::float64, 15), foff = ik(DType::int32), fo = ik(), fo2 = ik(DType::float32);
  Field fc({I}, DType::float32, {NX});
  fill_pattern(fc, 16);
  for (int i = 0; i < NX; ++i)
    for (int k = 0; k < NK; ++k) foff.at<std::int32_t>({i, k}) = (NX - 1 - i) - i * k % (i + 1);  // stays in [0, NX)
  run_program(pb.build(), Arguments().field("a", fa).field("off", foff).field("col", fc).field("o", fo).field("o2", fo2));
  auto target = [&](const Index& x) { return x[0] + foff.at<std::int32_t>({x[0], x[1]}); };
  EXPECT_TRUE(matches(fo, [&](const Index& x) { return v(fa, {target(x), x[1]}) - v(fa, x); }));
  EXPECT_TRUE(matches(fo2, [&](const Index& x) { return static_cast<double>(fc.at<float>({target(x)})); }, {}, 0));
}

TEST(DynamicHorizontalOffsets, ReadingOutsideTheFieldIsADomainErrorAndWritesNothing) {
  ProgramBuilder pb("gather_out");
  Expr a = pb.field("a", {I, K}, DType::float64), off = pb.field("off", {I, K}, DType::int64);
  Expr o = pb.field("o", {I, K}, DType::float64);
  pb.call("gather", a(I + off), {o}, full());
  Field fa = ik(DType::float64, 17), foff = ik(DType::int64), fo = ik();
  foff.fill(0);
  foff.at<std::int64_t>({NX - 1, 2}) = 1;  // reads I = NX
  EXPECT_ERROR(DomainError, run_program(pb.build(), Arguments().field("a", fa).field("off", foff).field("o", fo)),
               "program 'gather_out'", "field 'a'", "I=6", "[0, 6)");
  EXPECT_TRUE(matches(fo, [](const Index&) { return 0.0; }, [](const Index&) { return false; }));
}

// An offset so large that index + offset leaves int64 wraps around (as the language's integers
// do) and is refused like any other read outside the field, never undefined behaviour.
TEST(DynamicHorizontalOffsets, OffsetsAtTheInt64LimitsAreADomainError) {
  ProgramBuilder pb("gather_huge");
  Expr a = pb.field("a", {I, K}, DType::float64), off = pb.field("off", {I, K}, DType::int64);
  Expr o = pb.field("o", {I, K}, DType::float64);
  pb.call("gather", a(I + off), {o}, full());
  const ir::Program program = pb.build();
  for (const std::int64_t huge : {std::numeric_limits<std::int64_t>::max(), std::numeric_limits<std::int64_t>::min()}) {
    Field fa = ik(DType::float64, 17), foff = ik(DType::int64), fo = ik();
    foff.fill(0);
    foff.at<std::int64_t>({NX - 1, 1}) = huge;
    EXPECT_ERROR(DomainError, run_program(program, Arguments().field("a", fa).field("off", foff).field("o", fo)),
                 "program 'gather_huge'", "field 'a'", "[0, 6)");
    EXPECT_TRUE(matches(fo, [](const Index&) { return 0.0; }, [](const Index&) { return false; }));
  }
}

// --- if_ on runtime bool scalars -------------------------------------------------------------------------------

TEST(IfElse, ChoosesABranchPerCallFromABoolScalar) {
  ProgramBuilder pb("if_else");
  Expr a = pb.field("a", {I, K}, DType::float64), b = pb.field("b", {I, K}, DType::float64);
  Expr upwind = pb.scalar("upwind", DType::boolean), limit = pb.scalar("limit", DType::int32);
  Expr o1 = pb.field("o1", {I, K}, DType::float64), o2 = pb.field("o2", {I, K}, DType::float64);
  // Nested, on a scalar expression, with tuples and a weak literal branch.
  const Expr t = if_(upwind, make_tuple({a - a(I - 1), b}), make_tuple({a(I + 1) - a, if_(limit > 2, 0.0, b * 2)}));
  pb.call("c", t, {o1, o2}, {{I, 1, NX - 1}, {K, 0, NK}});
  const ir::Program prog = pb.build();
  for (bool up : {true, false})
    for (int lim : {1, 3}) {
      Field fa = ik(DType::float64, 18), fb = ik(DType::float64, 19), f1 = ik(), f2 = ik();
      run_program(prog, Arguments().field("a", fa).field("b", fb).scalar("upwind", up).scalar("limit", lim)
                            .field("o1", f1).field("o2", f2));
      auto inside = [](const Index& x) { return x[0] >= 1 && x[0] < NX - 1; };
      EXPECT_TRUE(matches(f1, [&](const Index& x) {
        return up ? v(fa, x) - v(fa, {x[0] - 1, x[1]}) : v(fa, {x[0] + 1, x[1]}) - v(fa, x);
      }, inside)) << up << lim;
      EXPECT_TRUE(matches(f2, [&](const Index& x) { return up ? v(fb, x) : lim > 2 ? 0.0 : 2 * v(fb, x); }, inside))
          << up << lim;
    }
}

TEST(IfElse, NeedsABoolScalarCondition) {
  ProgramBuilder pb("if_bad");
  Expr a = pb.field("a", {I, K}, DType::float64), flag = pb.scalar("flag", DType::boolean);
  Expr n = pb.scalar("n", DType::int32);
  EXPECT_ERROR(DimensionError, if_(a > 0, a, -a), "if_", "scalar condition", "[I, K]", "where(cond, a, b)");
  EXPECT_ERROR(DTypeError, if_(n, a, -a), "if_", "bool condition", "int32");
  EXPECT_ERROR(DTypeError, if_(flag, a, make_tuple({a, a})), "where", "do not match");
  EXPECT_ERROR(DTypeError, if_(flag, a, n), "float64", "int32");
}

}  // namespace
}  // namespace fieldflow
