// Language constructs GT4Py "next" users write daily (issue 8): selecting one neighbour slot of a
// sparse field, implicit dimension promotion, concat_where on compound conditions, static scalar
// parameters, programs over many dimensions, sparse fields shifted before they are reduced, and
// calls that fail without changing any argument. Run on both backends (see run_program.h);
// expected values come from plain loops over the mesh tables.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>

#include "fieldflow/compile.h"
#include "fieldflow/dsl.h"
#include "fieldflow/errors.h"
#include "fieldflow/mesh.h"
#include "fieldflow/reference.h"
#include "reference/lang_test_util.h"
#include "reference/run_program.h"

namespace fieldflow {
namespace {

using namespace langtest;

const Connectivity E2V = make_connectivity("E2V", Edge, Vertex, 2);
const Connectivity E2C = make_connectivity("E2C", Edge, Cell, 2);
const Connectivity E2C2V = make_connectivity("E2C2V", Edge, Vertex, 4);
const Connectivity C2V = make_connectivity("C2V", Cell, Vertex, 3);
const Connectivity C2E = make_connectivity("C2E", Cell, Edge, 3);
const Connectivity C2E2C = make_connectivity("C2E2C", Cell, Cell, 3);
const Connectivity V2E = make_connectivity("V2E", Vertex, Edge, 6);
const Connectivity V2C = make_connectivity("V2C", Vertex, Cell, 6);

// The backend of this binary's tests that compile for themselves (run_program.h).
const Backend kBackend = suite_backend();

std::int64_t nv(const Mesh& m) { return m.n_vertices; }
std::int64_t ne(const Mesh& m) { return m.n_edges; }
std::int64_t nc(const Mesh& m) { return m.n_cells; }

double at(const Field& f, const Index& i) { return f.get_as_double(f.offset_of(i)); }

Field filled(std::vector<Dimension> dims, std::vector<std::int64_t> shape, int seed, DType t = DType::float64) {
  Field f(std::move(dims), t, std::move(shape));
  if (seed >= 0) fill_pattern(f, seed);
  else f.fill(kSentinel);
  return f;
}

class Gaps : public ::testing::Test {
 protected:
  Mesh bounded = make_bounded_mesh(4, 3);
  static constexpr std::int64_t nk = 3;
};

// --- 1. one slot of a sparse field ------------------------------------------------------------------

TEST_F(Gaps, SlotOfASparseFieldIsAFieldWithoutTheLocalDimension) {
  ProgramBuilder pb("slot_sparse");
  Expr w = pb.field("w", {Edge, E2C2V.local, K}, DType::float64);
  Expr out = pb.field("out", {Edge, K}, DType::float64);
  const Expr picked = w(slot(E2C2V, 2));
  EXPECT_EQ(picked.type().to_string(), "float64[Edge, K]");
  pb.call("pick", 2.0 * picked - w(slot(E2C2V, 0)), {out}, {{Edge, 0, ne(bounded)}, {K, 0, nk}});
  // Slot 3 is -1 on boundary edges: a stored sparse value is still read, as GT4Py does.
  Field fw = filled({Edge, E2C2V.local, K}, {ne(bounded), 4, nk}, 1), o = filled({Edge, K}, {ne(bounded), nk}, -1);
  run_program(pb.build(), Arguments().field("w", fw).field("out", o));
  EXPECT_TRUE(matches(o, [&](const Index& x) { return 2.0 * at(fw, {x[0], 2, x[1]}) - at(fw, {x[0], 0, x[1]}); }));
}

TEST_F(Gaps, SlotOfALocalFieldIsTheFixedNeighbourShift) {
  ProgramBuilder pb("slot_local");
  Expr fv = pb.field("fv", {Vertex, K}, DType::float64);
  Expr w = pb.field("w", {Edge, E2V.local}, DType::float64);
  Expr a = pb.field("a", {Edge, K}, DType::float64), b = pb.field("b", {Edge, K}, DType::float64);
  // (w * fv(E2V)) selected at slot 1: the weight's slot 1 times the edge's second vertex.
  pb.call("pick", make_tuple({fv(E2V)(slot(E2V, 1)), (w * fv(E2V))(slot(E2V, 1))}), {a, b},
          {{Edge, 0, ne(bounded)}, {K, 0, nk}});
  Field f = filled({Vertex, K}, {nv(bounded), nk}, 2), fw = filled({Edge, E2V.local}, {ne(bounded), 2}, 3);
  Field oa = filled({Edge, K}, {ne(bounded), nk}, -1), ob = filled({Edge, K}, {ne(bounded), nk}, -1);
  const auto& t = bounded.table("E2V");
  run_program(pb.build(), Arguments().field("fv", f).field("w", fw).field("a", oa).field("b", ob).connectivity("E2V", t));
  EXPECT_TRUE(matches(oa, [&](const Index& x) { return at(f, {t(x[0], 1), x[1]}); }));
  EXPECT_TRUE(matches(ob, [&](const Index& x) { return at(fw, {x[0], 1}) * at(f, {t(x[0], 1), x[1]}); }));
}

TEST_F(Gaps, SlotOfALocalFieldThroughAMissingNeighbourIsADomainError) {
  ProgramBuilder pb("slot_missing");
  Expr fv = pb.field("fv", {Vertex}, DType::float64);
  Expr out = pb.field("out", {Edge}, DType::float64);
  pb.call("pick", fv(E2C2V)(slot(E2C2V, 3)), {out}, {{Edge, 0, ne(bounded)}});
  Field f = filled({Vertex}, {nv(bounded)}, 4), o = filled({Edge}, {ne(bounded)}, -1);
  const auto before = snapshot(o);
  EXPECT_ERROR(DomainError,
               run_program(pb.build(), Arguments().field("fv", f).field("out", o).connectivity("E2C2V", bounded.table("E2C2V"))),
               "missing neighbour", "E2C2V");
  EXPECT_TRUE(same_values(snapshot(o), before));
}

TEST_F(Gaps, SlotErrorsNameTheLocalDimensionAndTheRange) {
  ProgramBuilder pb("slot_errors");
  Expr w = pb.field("w", {Edge, E2C2V.local}, DType::float64);
  Expr fe = pb.field("fe", {Edge}, DType::float64);
  EXPECT_ERROR(DimensionError, fe(slot(E2C2V, 0)), "slot(E2C2V, 0)", "[Edge]", "E2C2VDim");
  EXPECT_ERROR(DimensionError, w(slot(E2C2V, 4)), "slot(E2C2V, 4)", "[0, 4)", "given 4");
  EXPECT_ERROR(DimensionError, w(slot(E2C2V, -1)), "[0, 4)", "given -1");
  EXPECT_ERROR(DTypeError, make_tuple({w, w})(slot(E2C2V, 0)), "expected a field", "tuple");
}

// --- 2. implicit dimension promotion ---------------------------------------------------------------

TEST_F(Gaps, EdgeFieldTimesKFieldIsOverEdgeAndK) {
  ProgramBuilder pb("promote");
  Expr fe = pb.field("fe", {Edge}, DType::float64);
  Expr fk = pb.field("fk", {K}, DType::float64);
  Expr a = pb.field("a", {Edge, K}, DType::float64), b = pb.field("b", {Edge, K}, DType::float64);
  Expr c = pb.field("c", {Edge, K}, DType::boolean);
  const Expr product = fe * fk;
  EXPECT_EQ(product.type().to_string(), "float64[Edge, K]");
  // where, comparisons and tuples promote the same way, with no broadcast written.
  pb.call("promote", make_tuple({product, where(fe < fk, fe, fk), fk > fe}), {a, b, c},
          {{Edge, 0, ne(bounded)}, {K, 0, nk}});
  Field ffe = filled({Edge}, {ne(bounded)}, 5), ffk = filled({K}, {nk}, 6);
  Field oa = filled({Edge, K}, {ne(bounded), nk}, -1), ob = filled({Edge, K}, {ne(bounded), nk}, -1);
  Field oc({Edge, K}, DType::boolean, {ne(bounded), nk});
  run_program(pb.build(), Arguments().field("fe", ffe).field("fk", ffk).field("a", oa).field("b", ob).field("c", oc));
  auto e = [&](const Index& x) { return at(ffe, {x[0]}); };
  auto k = [&](const Index& x) { return at(ffk, {x[1]}); };
  EXPECT_TRUE(matches(oa, [&](const Index& x) { return e(x) * k(x); }));
  EXPECT_TRUE(matches(ob, [&](const Index& x) { return e(x) < k(x) ? e(x) : k(x); }));
  EXPECT_TRUE(matches(oc, [&](const Index& x) { return k(x) > e(x) ? 1.0 : 0.0; }));
}

TEST_F(Gaps, WhereOnTuplesPromotesEachElement) {
  ProgramBuilder pb("promote_tuple");
  Expr fe = pb.field("fe", {Edge}, DType::float64);
  Expr fk = pb.field("fk", {K}, DType::float64);
  Expr a = pb.field("a", {Edge, K}, DType::float64), b = pb.field("b", {Edge, K}, DType::float64);
  // Condition over [Edge, K], elements over [Edge] and [K]: each element is over [Edge, K].
  const Expr swapped = where(fe < fk, make_tuple({fe, fk}), make_tuple({fk, fe}));
  EXPECT_EQ(swapped.type().to_string(), "(float64[Edge, K], float64[Edge, K])");
  pb.call("swap", swapped, {a, b}, {{Edge, 0, ne(bounded)}, {K, 0, nk}});
  Field ffe = filled({Edge}, {ne(bounded)}, 24), ffk = filled({K}, {nk}, 25);
  Field oa = filled({Edge, K}, {ne(bounded), nk}, -1), ob = filled({Edge, K}, {ne(bounded), nk}, -1);
  run_program(pb.build(), Arguments().field("fe", ffe).field("fk", ffk).field("a", oa).field("b", ob));
  auto e = [&](const Index& x) { return at(ffe, {x[0]}); };
  auto k = [&](const Index& x) { return at(ffk, {x[1]}); };
  EXPECT_TRUE(matches(oa, [&](const Index& x) { return e(x) < k(x) ? e(x) : k(x); }));
  EXPECT_TRUE(matches(ob, [&](const Index& x) { return e(x) < k(x) ? k(x) : e(x); }));
}

TEST_F(Gaps, CartesianPlaneAndColumnPromoteToTheVolume) {
  ProgramBuilder pb("promote_ijk");
  Expr ij = pb.field("ij", {I, J}, DType::float32);
  Expr col = pb.field("col", {K}, DType::float32);
  Expr out = pb.field("out", {I, J, K}, DType::float32);
  pb.call("promote", where(col > 0, ij + col, ij * col), {out}, {{I, 0, 4}, {J, 0, 3}, {K, 0, 5}});
  Field fij = filled({I, J}, {4, 3}, 7, DType::float32), fcol = filled({K}, {5}, 8, DType::float32);
  Field o = filled({I, J, K}, {4, 3, 5}, -1, DType::float32);
  run_program(pb.build(), Arguments().field("ij", fij).field("col", fcol).field("out", o));
  EXPECT_TRUE(matches(o, [&](const Index& x) {
    const float p = fij.at<float>({x[0], x[1]}), c = fcol.at<float>({x[2]});
    return static_cast<double>(c > 0 ? static_cast<float>(p + c) : static_cast<float>(p * c));
  }, {}, 0));
}

TEST_F(Gaps, DifferentLocationsStillNeedAnExplicitAnswer) {
  ProgramBuilder pb("promote_errors");
  Expr fe = pb.field("fe", {Edge, K}, DType::float64);
  Expr fc = pb.field("fc", {Cell}, DType::float64);
  Expr mask = pb.field("mask", {Cell}, DType::boolean);
  EXPECT_ERROR(DimensionError, fe + fc, "dimension mismatch", "[Edge, K]", "[Cell]", "horizontal");
  EXPECT_ERROR(DimensionError, where(mask, fe, 0.0), "where", "[Cell]", "[Edge, K]");
  EXPECT_ERROR(DimensionError, fe < fc, "[Edge]", "[Cell]");
}

// --- 3. concat_where on compound conditions ---------------------------------------------------------

// The branch reading K-1 and K+1 is taken only inside [max(1, nlev-6), min(nlev-1, 7)): the input
// needs no level outside [0, nlev), on both backends (extent inference sees each comparison).
void check_clamped_band(std::int64_t nlev) {
  ProgramBuilder pb("band");
  Expr f = pb.field("f", {Cell, K}, DType::float64);
  Expr out = pb.field("out", {Cell, K}, DType::float64);
  Expr n = pb.scalar("nlev", DType::int32);
  const IndexCondition band = (maximum(1, n - 6) <= K) & (K < minimum(n - 1, 7));
  pb.call("band", concat_where(band, f(K - 1) + f(K + 1), f), {out}, {{Cell, 0, 5}, {K, 0, n}});
  Field ff = filled({Cell, K}, {5, nlev}, 9), o = filled({Cell, K}, {5, nlev}, -1);
  run_program(pb.build(), Arguments().field("f", ff).field("out", o).scalar("nlev", static_cast<std::int32_t>(nlev)));
  const std::int64_t lo = std::max<std::int64_t>(1, nlev - 6), hi = std::min<std::int64_t>(nlev - 1, 7);
  EXPECT_TRUE(matches(o, [&](const Index& x) {
    return x[1] >= lo && x[1] < hi ? at(ff, {x[0], x[1] - 1}) + at(ff, {x[0], x[1] + 1}) : at(ff, x);
  })) << "nlev " << nlev;
}
TEST_F(Gaps, ConcatWhereOnABandWithMinimumAndMaximumBounds) {
  check_clamped_band(10);  // [4, 7)
  check_clamped_band(5);   // [1, 4)
  check_clamped_band(2);   // [1, 1): empty band
}

TEST_F(Gaps, ConcatWhereWithOrNotAndTwoDimensions) {
  ProgramBuilder pb("or_not");
  Expr f = pb.field("f", {I, K}, DType::float64);
  Expr out = pb.field("out", {I, K}, DType::float64), edge = pb.field("edge", {I, K}, DType::float64);
  Expr n = pb.scalar("n", DType::int32);
  // Boundary levels get 0, the interior averages its neighbours (reads stay inside [0, n)).
  pb.call("interior", concat_where((K == 0) | ~(K < n - 1), 0.0, 0.5 * (f(K - 1) + f(K + 1))), {out},
          {{I, 0, 4}, {K, 0, n}});
  // Two dimensions in one condition, and K == maximum(..) (K equal to the larger bound).
  pb.call("corner", concat_where(((I < 2) & (K >= 3)) | (K == maximum(1, n - 5)), f * 10.0, f), {edge},
          {{I, 0, 4}, {K, 0, n}});
  const std::int64_t levels = 7;
  Field ff = filled({I, K}, {4, levels}, 10), o = filled({I, K}, {4, levels}, -1), oe = filled({I, K}, {4, levels}, -1);
  run_program(pb.build(), Arguments().field("f", ff).field("out", o).field("edge", oe).scalar("n", 7));
  EXPECT_TRUE(matches(o, [&](const Index& x) {
    return x[1] == 0 || x[1] >= levels - 1 ? 0.0 : 0.5 * (at(ff, {x[0], x[1] - 1}) + at(ff, {x[0], x[1] + 1}));
  }));
  EXPECT_TRUE(matches(oe, [&](const Index& x) {
    const bool in = (x[0] < 2 && x[1] >= 3) || x[1] == std::max<std::int64_t>(1, levels - 5);
    return in ? at(ff, x) * 10.0 : at(ff, x);
  }));
}

TEST_F(Gaps, CompoundConditionsKeepReadsOfTheTakenBranchOnly) {
  // A read two levels down in the branch taken only where K >= 2 AND K < n: a field of exactly n
  // levels is enough; a condition dropped by extent inference would demand levels below 0.
  ProgramBuilder pb("taken_only");
  Expr f = pb.field("f", {K}, DType::float64);
  Expr out = pb.field("out", {K}, DType::float64);
  Expr n = pb.scalar("n", DType::int32);
  pb.call("down", concat_where(~((K < 2) | (K >= n)), f(K - 2), -1.0), {out}, {{K, 0, n}});
  Field ff = filled({K}, {6}, 11), o = filled({K}, {6}, -1);
  run_program(pb.build(), Arguments().field("f", ff).field("out", o).scalar("n", 6));
  EXPECT_TRUE(matches(o, [&](const Index& x) { return x[0] >= 2 ? at(ff, {x[0] - 2}) : -1.0; }));
}

TEST_F(Gaps, CompoundConditionErrorsNameTheBound) {
  ProgramBuilder pb("cond_errors");
  Expr f = pb.field("f", {K}, DType::float64);
  Expr n = pb.scalar("n", DType::int32);
  Expr x = pb.scalar("x", DType::float64);
  Expr levels = pb.field("levels", {K}, DType::int32);
  // n * n is a valid (non-affine) bound; a field in a bound is not.
  EXPECT_ERROR(ProgramError, concat_where((K > 0) & (K < n * index(K)), f, 0.0), "bound", "integer expression",
               "index(K)");
  EXPECT_ERROR(ProgramError, concat_where(K < maximum(n, levels), f, 0.0), "bound", "integer expression", "levels");
  EXPECT_ERROR(DTypeError, concat_where(K < maximum(n, x), f, 0.0), "maximum", "int32", "float64");
  EXPECT_ERROR(DimensionError, concat_where((K > 0) | (E2V.local == 1), f, 0.0), "local");
}

// --- 4. static scalar parameters --------------------------------------------------------------------

struct StaticProgram {
  ir::Program program;
  StaticProgram() {
    ProgramBuilder pb("static_flag");
    Expr f = pb.field("f", {Cell, K}, DType::float64);
    Expr unused_branch = pb.field("unused_branch", {Cell, K}, DType::float64);
    Expr out = pb.field("out", {Cell, K}, DType::float64);
    Expr flag = pb.scalar("flag", DType::boolean);
    Expr nk = pb.scalar("nk", DType::int32);
    pb.call("pick", where(flag & (nk > 2), f * 2.0, unused_branch(K + 1)), {out}, {{Cell, 0, 4}, {K, 0, nk}});
    program = pb.build();
  }
};

TEST_F(Gaps, StaticScalarsFoldDeadBranchesAndCheckTheCallsValue) {
  const ir::Program p = StaticProgram().program;
  CompileOptions options;
  options.backend = kBackend;
  options.static_scalars = {{"flag", Scalar(true)}, {"nk", Scalar(std::int32_t{4})}};
  CompiledProgram program = compile(p, options);
  Field ff = filled({Cell, K}, {4, 4}, 12), o = filled({Cell, K}, {4, 4}, -1);
  // The dead branch's input is one level short of what it would read: not an error, it is gone.
  Field dead = filled({Cell, K}, {4, 4}, 13);
  program(Arguments().field("f", ff).field("unused_branch", dead).field("out", o).scalar("flag", true).scalar("nk", 4));
  EXPECT_TRUE(matches(o, [&](const Index& x) { return at(ff, x) * 2.0; }));
  if (kBackend == Backend::cpu) {
    EXPECT_EQ(program.schedule_text().find("unused_branch("), std::string::npos) << program.schedule_text();
    EXPECT_EQ(program.generated_source().find("nk"), std::string::npos) << "nk is a literal in the generated code";
  }
  const auto before = snapshot(o);
  EXPECT_ERROR(ArgumentError,
               program(Arguments().field("f", ff).field("unused_branch", dead).field("out", o).scalar("flag", false).scalar("nk", 4)),
               "static_flag", "'flag'", "static", "true", "false");
  EXPECT_ERROR(ArgumentError,
               program(Arguments().field("f", ff).field("unused_branch", dead).field("out", o).scalar("flag", true).scalar("nk", 3)),
               "'nk'", "static", "4", "3");
  EXPECT_TRUE(same_values(snapshot(o), before));
}

TEST_F(Gaps, EachStaticValueIsItsOwnModule) {
  const ir::Program p = StaticProgram().program;
  CompileOptions on, off;
  on.backend = off.backend = kBackend;
  on.static_scalars = {{"flag", Scalar(true)}};
  off.static_scalars = {{"flag", Scalar(false)}};
  CompiledProgram a = compile(p, on), b = compile(p, off);
  if (kBackend == Backend::cpu) {
    EXPECT_NE(a.generated_source(), b.generated_source());
  }
  Field ff = filled({Cell, K}, {4, 5}, 14), ub = filled({Cell, K}, {4, 6}, 15);
  Field oa = filled({Cell, K}, {4, 5}, -1), ob = filled({Cell, K}, {4, 5}, -1);
  a(Arguments().field("f", ff).field("unused_branch", ub).field("out", oa).scalar("flag", true).scalar("nk", 5));
  b(Arguments().field("f", ff).field("unused_branch", ub).field("out", ob).scalar("flag", false).scalar("nk", 5));
  EXPECT_TRUE(matches(oa, [&](const Index& x) { return at(ff, x) * 2.0; }));
  EXPECT_TRUE(matches(ob, [&](const Index& x) { return at(ub, {x[0], x[1] + 1}); }));
  // The same results as the reference executor with the same values passed as ordinary scalars.
  Field r = filled({Cell, K}, {4, 5}, -1);
  run_reference(p, Arguments().field("f", ff).field("unused_branch", ub).field("out", r).scalar("flag", false).scalar("nk", 5));
  EXPECT_TRUE(same_values(snapshot(r), snapshot(ob)));
}

// Logic of static bools folds as the language defines it. The fold took every logical operator
// other than & for |, so `true ^ flag` with flag = true kept the where's first branch (fuzzer seed
// 24100158, docs/reliability.md class 28).
TEST_F(Gaps, StaticBoolsFoldWithTheLanguagesLogic) {
  const std::vector<std::string> names = {"o_and", "o_or", "o_xor", "o_not", "o_eq"};
  ProgramBuilder pb("static_logic");
  Expr f = pb.field("f", {Cell, K}, DType::float64);
  Expr p = pb.scalar("p", DType::boolean), q = pb.scalar("q", DType::boolean);
  const std::vector<Expr> conditions = {p & q, p | q, p ^ q, ~p, p == q};
  for (std::size_t i = 0; i < names.size(); ++i)
    pb.call("s_" + names[i], where(conditions[i], f, -f), {pb.field(names[i], {Cell, K}, DType::float64)},
            {{Cell, 0, 4}, {K, 0, 3}});
  const ir::Program program = pb.build();
  for (const bool pv : {false, true})
    for (const bool qv : {false, true}) {
      CompileOptions options;
      options.backend = kBackend;
      options.static_scalars = {{"p", Scalar(pv)}, {"q", Scalar(qv)}};
      CompiledProgram compiled = compile(program, options);
      Field ff = filled({Cell, K}, {4, 3}, 21);
      std::vector<Field> o;
      for (std::size_t i = 0; i < names.size(); ++i) o.push_back(filled({Cell, K}, {4, 3}, -1));
      Arguments args;
      args.field("f", ff).scalar("p", pv).scalar("q", qv);
      for (std::size_t i = 0; i < names.size(); ++i) args.field(names[i], o[i]);
      compiled(args);
      const bool expected[] = {pv && qv, pv || qv, pv != qv, !pv, pv == qv};
      for (std::size_t i = 0; i < names.size(); ++i)
        EXPECT_TRUE(matches(o[i], [&](const Index& x) { return expected[i] ? at(ff, x) : -at(ff, x); }))
            << names[i] << " with p = " << pv << ", q = " << qv;
    }
}

TEST_F(Gaps, StaticScalarOptionErrors) {
  const ir::Program p = StaticProgram().program;
  CompileOptions options;
  options.backend = kBackend;
  options.static_scalars = {{"f", Scalar(1.0)}};
  EXPECT_ERROR(OptionError, compile(p, options), "static_flag", "'f'", "not a scalar parameter");
  options.static_scalars = {{"missing", Scalar(true)}};
  EXPECT_ERROR(OptionError, compile(p, options), "'missing'", "not a scalar parameter");
  options.static_scalars = {{"flag", Scalar(1.5)}};
  EXPECT_ERROR(OptionError, compile(p, options), "'flag'", "bool", "float64");
}

// --- 5. programs over many dimensions ---------------------------------------------------------------

// Vertex, Edge, Cell, K and eight local dimensions: twelve in one program.
TEST_F(Gaps, ProgramOverTwelveDimensions) {
  ProgramBuilder pb("twelve_dims");
  Expr fv = pb.field("fv", {Vertex, K}, DType::float64);
  Expr fe = pb.field("fe", {Edge, K}, DType::float64);
  Expr fc = pb.field("fc", {Cell, K}, DType::float64);
  Expr ov = pb.field("ov", {Vertex, K}, DType::float64);
  Expr oe = pb.field("oe", {Edge, K}, DType::float64);
  Expr oc = pb.field("oc", {Cell, K}, DType::float64);
  pb.call("at_vertices", neighbor_sum(fe(V2E), V2E) + 2.0 * neighbor_sum(fc(V2C), V2C), {ov},
          {{Vertex, 0, nv(bounded)}, {K, 0, nk}});
  pb.call("at_cells", neighbor_sum(fv(C2V), C2V) + 2.0 * neighbor_sum(fe(C2E), C2E) + 3.0 * neighbor_sum(fc(C2E2C), C2E2C),
          {oc}, {{Cell, 0, nc(bounded)}, {K, 0, nk}});
  pb.call("at_edges", neighbor_sum(fv(E2V), E2V) + 2.0 * neighbor_sum(fc(E2C), E2C) + 3.0 * neighbor_sum(fv(E2C2V), E2C2V),
          {oe}, {{Edge, 0, ne(bounded)}, {K, 0, nk}});
  Field v = filled({Vertex, K}, {nv(bounded), nk}, 16), e = filled({Edge, K}, {ne(bounded), nk}, 17),
        c = filled({Cell, K}, {nc(bounded), nk}, 18);
  Field rv = filled({Vertex, K}, {nv(bounded), nk}, -1), re = filled({Edge, K}, {ne(bounded), nk}, -1),
        rc = filled({Cell, K}, {nc(bounded), nk}, -1);
  Arguments args;
  args.field("fv", v).field("fe", e).field("fc", c).field("ov", rv).field("oe", re).field("oc", rc);
  for (const char* t : {"V2E", "V2C", "C2V", "C2E", "C2E2C", "E2V", "E2C", "E2C2V"}) args.connectivity(t, bounded.table(t));
  run_program(pb.build(), args);
  // sum over the present neighbours of `table` of field `f` at level k
  auto sum = [&](const char* table, const Field& f, std::int64_t i, std::int64_t k) {
    const NeighborTable& t = bounded.table(table);
    double s = 0;
    for (int n = 0; n < t.max_neighbors; ++n)
      if (t(i, n) >= 0) s = s + at(f, {t(i, n), k});
    return s;
  };
  EXPECT_TRUE(matches(rv, [&](const Index& x) { return sum("V2E", e, x[0], x[1]) + 2.0 * sum("V2C", c, x[0], x[1]); }));
  EXPECT_TRUE(matches(rc, [&](const Index& x) {
    return sum("C2V", v, x[0], x[1]) + 2.0 * sum("C2E", e, x[0], x[1]) + 3.0 * sum("C2E2C", c, x[0], x[1]);
  }));
  EXPECT_TRUE(matches(re, [&](const Index& x) {
    return sum("E2V", v, x[0], x[1]) + 2.0 * sum("E2C", c, x[0], x[1]) + 3.0 * sum("E2C2V", v, x[0], x[1]);
  }));
}

// One field over nine dimensions: the reference runs it; compiled code refuses it with a typed
// error (its buffers have at most FF_MAX_DIMS = 8 dims), never an overflow.
TEST(GapsLimits, AFieldOverNineDimensionsRunsInTheReferenceAndIsRefusedByCompiledCode) {
  std::vector<Dimension> dims;
  for (int d = 0; d < 8; ++d) dims.push_back(horizontal_dim("H" + std::to_string(d)));
  dims.push_back(K);
  ProgramBuilder pb("nine_dims");
  Expr f = pb.field("f", dims, DType::float64), out = pb.field("out", dims, DType::float64);
  std::vector<ProgramBuilder::Bound> domain;
  for (const auto& d : dims) domain.push_back({d, 0, 2});
  pb.call("twice", 2.0 * f, {out}, domain);
  const ir::Program p = pb.build();
  const std::vector<std::int64_t> shape(9, 2);
  Field ff = filled(dims, shape, 23), o = filled(dims, shape, -1);
  run_reference(p, Arguments().field("f", ff).field("out", o));
  EXPECT_TRUE(matches(o, [&](const Index& x) { return 2.0 * at(ff, x); }));
  EXPECT_ERROR(DimensionError, compile(p), "nine_dims", "field 'f'", "9 dimensions", "at most 8");
}

// Five loop dimensions over boxes that do not start at 0: a CUDA kernel flattens the dimensions
// beyond its x and y (three here) along z and splits them by division, the CPU nests five loops.
// Every point of the box is written once, with the value of its own point; the rest stays.
TEST(GapsLimits, AProgramOverFiveDimensionsWritesEachPointOfItsBox) {
  const Dimension A = horizontal_dim("A"), B = horizontal_dim("B"), C = horizontal_dim("C"), D = horizontal_dim("D");
  const std::vector<Dimension> dims{A, B, C, D, K};
  const std::vector<std::int64_t> shape{3, 5, 4, 2, 3};
  ProgramBuilder pb("five_dims");
  Expr f = pb.field("f", dims, DType::float64), out = pb.field("out", dims, DType::float64);
  pb.call("shifted", f(B + 1) * 2.0 - f(C - 1), {out}, {{A, 0, 3}, {B, 1, 4}, {C, 1, 4}, {D, 0, 2}, {K, 1, 3}});
  Field ff = filled(dims, shape, 29), o = filled(dims, shape, -1);
  run_program(pb.build(), Arguments().field("f", ff).field("out", o));
  EXPECT_TRUE(matches(
      o, [&](const Index& x) { return at(ff, {x[0], x[1] + 1, x[2], x[3], x[4]}) * 2.0 - at(ff, {x[0], x[1], x[2] - 1, x[3], x[4]}); },
      [](const Index& x) { return x[1] >= 1 && x[1] < 4 && x[2] >= 1 && x[3] < 2 && x[4] >= 1; }, 0));
}

// --- 6. sparse fields shifted to another location, then reduced ------------------------------------

TEST_F(Gaps, SparseFieldShiftedThenReducedSkipsTheRowsMissingNeighbours) {
  ProgramBuilder pb("sparse_shifted");
  Expr sc = pb.field("sc", {Cell, C2E2C.local, K}, DType::float64);
  Expr sv = pb.field("sv", {Vertex, V2E.local}, DType::float64);
  Expr a = pb.field("a", {Edge, K}, DType::float64), b = pb.field("b", {Edge}, DType::float64);
  Expr m = pb.field("m", {Edge}, DType::float64);
  // The cell left of each edge (E2C[0], never missing) and the edge's end vertex (E2V[1]).
  pb.call("levels", neighbor_sum(2.0 * sc(E2C[0]), C2E2C), {a}, {{Edge, 0, ne(bounded)}, {K, 0, nk}});
  pb.call("plane", make_tuple({neighbor_sum(sv(E2V[1]), V2E), max_over(sv(E2V[1]), V2E)}), {b, m},
          {{Edge, 0, ne(bounded)}});
  // A sentinel in every skipped slot: one that leaks into a sum shows.
  const auto& c2e2c = bounded.table("C2E2C");
  const auto& v2e = bounded.table("V2E");
  const auto& e2c = bounded.table("E2C");
  const auto& e2v = bounded.table("E2V");
  Field fsc = filled({Cell, C2E2C.local, K}, {nc(bounded), 3, nk}, 19), fsv = filled({Vertex, V2E.local}, {nv(bounded), 6}, 20);
  for_each_index(fsc, [&](const Index& x) { if (c2e2c(x[0], static_cast<int>(x[1])) < 0) fsc.set_from_double(fsc.offset_of(x), 1e6); });
  for_each_index(fsv, [&](const Index& x) { if (v2e(x[0], static_cast<int>(x[1])) < 0) fsv.set_from_double(fsv.offset_of(x), 1e6); });
  Field oa = filled({Edge, K}, {ne(bounded), nk}, -1), ob = filled({Edge}, {ne(bounded)}, -1), om = filled({Edge}, {ne(bounded)}, -1);
  run_program(pb.build(), Arguments().field("sc", fsc).field("sv", fsv).field("a", oa).field("b", ob).field("m", om)
                              .connectivity("E2C", e2c).connectivity("E2V", e2v).connectivity("C2E2C", c2e2c)
                              .connectivity("V2E", v2e));
  EXPECT_TRUE(matches(oa, [&](const Index& x) {
    const std::int64_t cell = e2c(x[0], 0);
    double s = 0;
    for (int n = 0; n < 3; ++n)
      if (c2e2c(cell, n) >= 0) s = s + 2.0 * at(fsc, {cell, n, x[1]});
    return s;
  }));
  EXPECT_TRUE(matches(ob, [&](const Index& x) {
    const std::int64_t vertex = e2v(x[0], 1);
    double s = 0;
    for (int n = 0; n < 6; ++n)
      if (v2e(vertex, n) >= 0) s = s + at(fsv, {vertex, n});
    return s;
  }));
  EXPECT_TRUE(matches(om, [&](const Index& x) {
    const std::int64_t vertex = e2v(x[0], 1);
    double mx = std::numeric_limits<double>::lowest();
    for (int n = 0; n < 6; ++n)
      if (v2e(vertex, n) >= 0) mx = std::max(mx, at(fsv, {vertex, n}));
    return mx;
  }));
}

// --- 7. a failed call changes no argument ------------------------------------------------------------

TEST_F(Gaps, DynamicOffsetOutsideTheExtentInALaterStatementLeavesEveryArgumentUnchanged) {
  ProgramBuilder pb("atomic");
  Expr f = pb.field("f", {Cell, K}, DType::float64);
  Expr off = pb.field("off", {Cell, K}, DType::int32);
  Expr first = pb.field("first", {Cell, K}, DType::float64), second = pb.field("second", {Cell, K}, DType::float64);
  Expr inout = pb.field("inout", {Cell, K}, DType::float64);
  pb.call("first", f + 1.0, {first}, {{Cell, 0, 4}, {K, 0, 5}});
  pb.call("bump", inout * 2.0, {inout}, {{Cell, 0, 4}, {K, 0, 5}});
  pb.call("second", f(K + off) + inout, {second}, {{Cell, 0, 4}, {K, 0, 5}});
  const ir::Program p = pb.build();
  Field ff = filled({Cell, K}, {4, 5}, 21), o1 = filled({Cell, K}, {4, 5}, -1), o2 = filled({Cell, K}, {4, 5}, -1);
  Field io = filled({Cell, K}, {4, 5}, 22);
  Field fo({Cell, K}, DType::int32, {4, 5});
  fo.fill(0);
  fo.set_from_double(fo.offset_of({2, 3}), 1);   // inside
  fo.set_from_double(fo.offset_of({3, 4}), 1);   // level 5: outside f's [0, 5)
  Arguments args = Arguments().field("f", ff).field("off", fo).field("first", o1).field("second", o2).field("inout", io);
  const auto s1 = snapshot(o1), s2 = snapshot(o2), sio = snapshot(io), sf = snapshot(ff);
  EXPECT_ERROR(DomainError, run_program(p, args), "atomic", "'f'", "K=5");
  EXPECT_TRUE(same_values(snapshot(o1), s1));
  EXPECT_TRUE(same_values(snapshot(o2), s2));
  EXPECT_TRUE(same_values(snapshot(io), sio));
  EXPECT_TRUE(same_values(snapshot(ff), sf));
  // A valid call afterwards: nothing of the failed one is left behind.
  fo.set_from_double(fo.offset_of({3, 4}), -4);
  run_program(p, args);
  EXPECT_TRUE(matches(o1, [&](const Index& x) { return at(ff, x) + 1.0; }));
  EXPECT_TRUE(matches(io, [&](const Index& x) { return pattern(x, 22) * 2.0; }));
  EXPECT_TRUE(matches(o2, [&](const Index& x) {
    return at(ff, {x[0], x[1] + static_cast<std::int64_t>(at(fo, x))}) + pattern(x, 22) * 2.0;
  }));
}

}  // namespace
}  // namespace fieldflow
