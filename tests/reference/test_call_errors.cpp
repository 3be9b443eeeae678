// Call-time errors of the reference executor: every bad argument, table, domain or read is
// reported with its error kind and a message naming the program, the argument, what was expected
// and what was given; and in every case the outputs are left exactly as they were.
#include <gtest/gtest.h>

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

// out[I, K] = a * s over [0, nx) x [0, 3), and out2 = a(I + 1) over [0, nx - 1) x [0, 3).
class CallErrors : public ::testing::Test {
 protected:
  CallErrors() {
    ProgramBuilder pb("prog");
    Expr a = pb.field("a", {I, K}, DType::float64);
    Expr s = pb.scalar("s", DType::float64);
    Expr nx = pb.scalar("nx", DType::int32);
    Expr out = pb.field("out", {I, K}, DType::float64), out2 = pb.field("out2", {I, K}, DType::float64);
    pb.call("scale", a * s, {out}, {{I, 0, nx}, {K, 0, 3}});
    pb.call("shift", a(I + 1), {out2}, {{I, 0, nx - 1}, {K, 0, 3}});
    program = pb.build();
    fill_pattern(a_, 1);
    out_.fill(kSentinel);
    out2_.fill(kSentinel);
    before_ = snapshot(out_);
    before2_ = snapshot(out2_);
  }
  Arguments good() { return Arguments().field("a", a_).scalar("s", 2.0).scalar("nx", 6).field("out", out_).field("out2", out2_); }
  bool untouched() const { return same_values(snapshot(out_), before_) && same_values(snapshot(out2_), before2_); }

  ir::Program program;
  Field a_{{I, K}, DType::float64, {6, 3}};
  Field out_{{I, K}, DType::float64, {6, 3}};
  Field out2_{{I, K}, DType::float64, {6, 3}};
  std::vector<double> before_, before2_;
};

TEST_F(CallErrors, GoodArgumentsRun) {
  run_program(program, good());
  EXPECT_TRUE(matches(out_, [&](const Index& x) { return a_.at<double>({x[0], x[1]}) * 2.0; }));
  EXPECT_TRUE(matches(out2_, [&](const Index& x) { return a_.at<double>({x[0] + 1, x[1]}); },
                      [](const Index& x) { return x[0] < 5; }));
}

// Found by fuzz_call_binding: the reference accepted an output written through stride 0, which
// the compiled runtime refuses (its value would depend on the order of the writes). Both refuse it.
TEST_F(CallErrors, OutputWhoseIndicesShareElementsIsRefused) {
  std::vector<double> memory(6, kSentinel);
  Field repeated = Field::view(memory.data(), {I, K}, DType::float64, {6, 3}, {1, 0});
  EXPECT_ERROR(ArgumentError,
               run_reference(program, Arguments().field("a", a_).scalar("s", 2.0).scalar("nx", 6).field("out", repeated)
                                          .field("out2", out2_)),
               "program 'prog'", "output 'out'", "strides [1, 0]", "distinct elements");
  for (double v : memory) EXPECT_EQ(v, kSentinel);
  EXPECT_TRUE(untouched());
}

// Found by fuzz_c_api: the reference accepted an output over another argument's memory, which
// the compiled runtime refuses (the values would depend on the order points are visited in, and
// generated code takes outputs as restrict pointers). Both refuse it, and nothing is written.
TEST_F(CallErrors, OutputOverAnotherArgumentsMemoryIsRefused) {
  Field over_a = Field::view(a_.data(), {I, K}, DType::float64, {6, 3}, a_.strides());
  const auto a_before = snapshot(a_);
  const Arguments args = Arguments().field("a", a_).scalar("s", 2.0).scalar("nx", 6).field("out", over_a).field("out2", out2_);
  EXPECT_ERROR(ArgumentError, run_reference(program, args), "program 'prog'", "output 'out' and argument 'a' share memory");
  // Compiled directly: run_program's reference runs on copies, one per field, which share nothing.
  EXPECT_ERROR(ArgumentError, compile(program, CompileOptions{})(args), "program 'prog'",
               "output 'out' and argument 'a' share memory");
  EXPECT_TRUE(same_values(snapshot(a_), a_before));
  EXPECT_TRUE(untouched());
}

TEST_F(CallErrors, MissingArgument) {
  EXPECT_ERROR(ArgumentError,
               run_program(program, Arguments().field("a", a_).scalar("nx", 6).field("out", out_).field("out2", out2_)),
               "program 'prog'", "missing argument 's'", "float64");
  EXPECT_ERROR(ArgumentError, run_program(program, Arguments().field("a", a_).scalar("s", 2.0).scalar("nx", 6).field("out", out_)),
               "program 'prog'", "missing argument 'out2'", "float64[I, K]");
  EXPECT_TRUE(untouched());
}

TEST_F(CallErrors, ExtraArgument) {
  Field extra({I}, DType::float64, {3});
  EXPECT_ERROR(ArgumentError, run_program(program, good().field("b", extra)), "program 'prog'",
               "unexpected argument 'b'", "a, s, nx, out, out2");
  EXPECT_TRUE(untouched());
}

TEST_F(CallErrors, DuplicatedArgument) {
  EXPECT_ERROR(ArgumentError, good().scalar("s", 3.0), "argument 's' given twice");
  EXPECT_ERROR(ArgumentError, good().field("out", out2_), "argument 'out' given twice");
  EXPECT_TRUE(untouched());
}

TEST_F(CallErrors, ScalarChangedInPlace) {
  Arguments args = good();
  std::size_t s_entry = 0;
  while (args.entries()[s_entry].name != "s") ++s_entry;
  args.set_scalar(s_entry, Scalar(5.0));
  EXPECT_EQ(args.find("s")->scalar.as_double(), 5.0);
  EXPECT_ERROR(ArgumentError, args.set_scalar(0, Scalar(1.0)), "entry 0 is not a scalar");  // "a", a field
  EXPECT_ERROR(ArgumentError, args.set_scalar(args.entries().size(), Scalar(1.0)), "is not a scalar");
}

TEST_F(CallErrors, ArgumentOfTheWrongKind) {
  EXPECT_ERROR(ArgumentError,
               run_program(program, Arguments().field("a", a_).field("s", out2_).scalar("nx", 6).field("out", out_).field("out2", out2_)),
               "program 'prog'", "argument 's' expects a scalar", "given a field");
  const Mesh m = make_torus_mesh(3, 3);
  EXPECT_ERROR(ArgumentError,
               run_program(program, Arguments().connectivity("a", m.table("E2V")).scalar("s", 2.0).scalar("nx", 6).field("out", out_).field("out2", out2_)),
               "argument 'a' expects a field", "given a connectivity table");
  EXPECT_TRUE(untouched());
}

TEST_F(CallErrors, FieldOfTheWrongDtype) {
  Field a32({I, K}, DType::float32, {6, 3});
  EXPECT_ERROR(ArgumentError,
               run_program(program, Arguments().field("a", a32).scalar("s", 2.0).scalar("nx", 6).field("out", out_).field("out2", out2_)),
               "program 'prog'", "field 'a'", "expects dtype float64", "given float32");
  EXPECT_TRUE(untouched());
}

TEST_F(CallErrors, FieldOfTheWrongDims) {
  Field aij({I, J}, DType::float64, {6, 3});
  EXPECT_ERROR(ArgumentError,
               run_program(program, Arguments().field("a", aij).scalar("s", 2.0).scalar("nx", 6).field("out", out_).field("out2", out2_)),
               "program 'prog'", "field 'a'", "expects dims [I, K]", "given [I, J]");
  Field ai({I}, DType::float64, {6});
  EXPECT_ERROR(ArgumentError,
               run_program(program, Arguments().field("a", ai).scalar("s", 2.0).scalar("nx", 6).field("out", out_).field("out2", out2_)),
               "field 'a'", "given [I]");
  Field aijk({I, J, K}, DType::float64, {6, 1, 3});
  EXPECT_ERROR(ArgumentError,
               run_program(program, Arguments().field("a", aijk).scalar("s", 2.0).scalar("nx", 6).field("out", out_).field("out2", out2_)),
               "field 'a'", "given [I, J, K]");
  EXPECT_TRUE(untouched());
}

TEST_F(CallErrors, DimensionOfTheSameNameButAnotherKind) {
  Field ak({I, horizontal_dim("K")}, DType::float64, {6, 3});
  EXPECT_ERROR(ArgumentError,
               run_program(program, Arguments().field("a", ak).scalar("s", 2.0).scalar("nx", 6).field("out", out_).field("out2", out2_)),
               "field 'a'", "expects dims");
  EXPECT_TRUE(untouched());
}

TEST_F(CallErrors, ScalarOfTheWrongDtype) {
  auto with_s = [&](Scalar s) {
    return Arguments().field("a", a_).scalar("s", s).scalar("nx", 6).field("out", out_).field("out2", out2_);
  };
  EXPECT_ERROR(ArgumentError, run_program(program, with_s(2.0f)), "program 'prog'", "scalar 's'", "expects float64",
               "given float32");
  EXPECT_ERROR(ArgumentError, run_program(program, with_s(2)), "scalar 's'", "expects float64", "given int32");
  EXPECT_ERROR(ArgumentError, run_program(program, with_s(true)), "scalar 's'", "given bool");
  EXPECT_ERROR(ArgumentError,
               run_program(program, Arguments().field("a", a_).scalar("s", 2.0).scalar("nx", 6.0).field("out", out_).field("out2", out2_)),
               "scalar 'nx'", "expects int32", "given float64");
  EXPECT_TRUE(untouched());
}

TEST_F(CallErrors, Int64ScalarThatDoesNotFitInt32) {
  EXPECT_ERROR(ArgumentError,
               run_program(program, Arguments().field("a", a_).scalar("s", 2.0).scalar("nx", std::int64_t{1} << 40).field("out", out_).field("out2", out2_)),
               "program 'prog'", "scalar 'nx'", "expects int32", "1099511627776", "does not fit");
  EXPECT_TRUE(untouched());
}

TEST_F(CallErrors, DomainOutsideAnOutput) {
  EXPECT_ERROR(DomainError,
               run_program(program, Arguments().field("a", a_).scalar("s", 2.0).scalar("nx", 7).field("out", out_).field("out2", out2_)),
               "program 'prog'", "call 'scale'", "domain along I is [0, 7)", "output 'out'", "[0, 6)");
  EXPECT_TRUE(untouched());
}

TEST_F(CallErrors, NegativeDomainRange) {
  EXPECT_ERROR(DomainError,
               run_program(program, Arguments().field("a", a_).scalar("s", 2.0).scalar("nx", -1).field("out", out_).field("out2", out2_)),
               "program 'prog'", "call 'scale'", "[0, -1)", "hi >= lo");
  EXPECT_TRUE(untouched());
}

TEST_F(CallErrors, ReadOutsideAnInputsExtent) {
  // The outputs cover [0, 6) but this `a` covers only [-1, 5): call 'scale' reads a at I = 5.
  Field shortA({I, K}, DType::float64, {6, 3}, {-1, 0});
  fill_pattern(shortA, 2);
  EXPECT_ERROR(DomainError,
               run_program(program, Arguments().field("a", shortA).scalar("s", 2.0).scalar("nx", 6).field("out", out_).field("out2", out2_)),
               "program 'prog'", "call 'scale'", "field 'a'", "I=5", "[-1, 5)");
  EXPECT_TRUE(untouched());
}

TEST_F(CallErrors, LaterCallFailingCommitsNothing) {
  // nx = 6 with a covering [0, 6): 'scale' is fine; 'shift' then reads a(I + 1) at I = 5... only
  // if its domain reaches I = 5, so use a second program whose shift domain does.
  ProgramBuilder pb("two_calls");
  Expr a = pb.field("a", {I, K}, DType::float64);
  Expr out = pb.field("out", {I, K}, DType::float64), out2 = pb.field("out2", {I, K}, DType::float64);
  pb.call("scale", a * 2, {out}, {{I, 0, 6}, {K, 0, 3}});
  pb.call("shift", a(I + 1), {out2}, {{I, 0, 6}, {K, 0, 3}});
  EXPECT_ERROR(DomainError, run_program(pb.build(), Arguments().field("a", a_).field("out", out_).field("out2", out2_)),
               "program 'two_calls'", "call 'shift'", "field 'a'", "I=6", "[0, 6)");
  EXPECT_TRUE(untouched());  // 'scale' succeeded on its own, but nothing is committed
}

TEST_F(CallErrors, ReadOutsideAlongTheVertical) {
  ProgramBuilder pb("vread");
  Expr a = pb.field("a", {K}, DType::float64);
  Expr out = pb.field("out", {K}, DType::float64);
  pb.call("up", a(K + 1), {out}, {{K, 0, 3}});
  Field fa({K}, DType::float64, {3}), fo({K}, DType::float64, {3});
  fo.fill(kSentinel);
  const auto b = snapshot(fo);
  EXPECT_ERROR(DomainError, run_program(pb.build(), Arguments().field("a", fa).field("out", fo)), "program 'vread'",
               "call 'up'", "reads field 'a' at K=3", "outside its extent [0, 3)");
  EXPECT_TRUE(same_values(snapshot(fo), b));
}

TEST_F(CallErrors, DynamicOffsetOutsideTheExtent) {
  ProgramBuilder pb("dyn_read");
  Expr a = pb.field("a", {K}, DType::float64);
  Expr off = pb.field("off", {K}, DType::int32);
  Expr out = pb.field("out", {K}, DType::float64);
  pb.call("gather", a(K + off), {out}, {{K, 0, 4}});
  Field fa({K}, DType::float64, {4}), foff({K}, DType::int32, {4}), fo({K}, DType::float64, {4});
  fo.fill(kSentinel);
  foff.at<std::int32_t>({2}) = -3;  // level 2 reads level -1
  const auto b = snapshot(fo);
  EXPECT_ERROR(DomainError, run_program(pb.build(), Arguments().field("a", fa).field("off", foff).field("out", fo)),
               "program 'dyn_read'", "field 'a'", "K=-1", "[0, 4)");
  EXPECT_TRUE(same_values(snapshot(fo), b));
}

TEST_F(CallErrors, InOutFieldIsRestoredWhenALaterCallFails) {
  ProgramBuilder pb("inout_fail");
  Expr a = pb.field("a", {I}, DType::float64);
  Expr b = pb.field("b", {I}, DType::float64);
  pb.call("double", a * 2, {a}, {{I, 0, 4}});
  pb.call("read_far", a(I + 10), {b}, {{I, 0, 4}});
  Field fa({I}, DType::float64, {4}), fb({I}, DType::float64, {4});
  fill_pattern(fa, 3);
  fb.fill(kSentinel);
  const auto ba = snapshot(fa), bb = snapshot(fb);
  EXPECT_ERROR(DomainError, run_program(pb.build(), Arguments().field("a", fa).field("b", fb)), "call 'read_far'", "I=10");
  EXPECT_TRUE(same_values(snapshot(fa), ba));
  EXPECT_TRUE(same_values(snapshot(fb), bb));
}

// --- connectivity tables --------------------------------------------------------------------------------------

class TableErrors : public ::testing::Test {
 protected:
  TableErrors() {
    ProgramBuilder pb("tables");
    Expr fv = pb.field("fv", {Vertex}, DType::float64);
    Expr out = pb.field("out", {Edge}, DType::float64);
    pb.call("edge_sum", neighbor_sum(fv(E2V), E2V), {out}, {{Edge, 0, static_cast<int>(mesh.n_edges)}});
    program = pb.build();
    fill_pattern(fv_, 4);
    out_.fill(kSentinel);
    before_ = snapshot(out_);
  }
  void run(const NeighborTable& t) {
    run_program(program, Arguments().field("fv", fv_).field("out", out_).connectivity("E2V", t));
  }
  bool untouched() const { return same_values(snapshot(out_), before_); }

  Mesh mesh = make_torus_mesh(3, 4);
  ir::Program program;
  Field fv_{{Vertex}, DType::float64, {mesh.n_vertices}};
  Field out_{{Edge}, DType::float64, {mesh.n_edges}};
  std::vector<double> before_;
};

TEST_F(TableErrors, GoodTableRuns) {
  run(mesh.table("E2V"));
  const auto& t = mesh.table("E2V");
  EXPECT_TRUE(matches(out_, [&](const Index& x) { return fv_.at<double>({t(x[0], 0)}) + fv_.at<double>({t(x[0], 1)}); }));
}

TEST_F(TableErrors, MissingTable) {
  EXPECT_ERROR(ArgumentError, run_program(program, Arguments().field("fv", fv_).field("out", out_)), "program 'tables'",
               "missing argument 'E2V'", "connectivity table");
  EXPECT_TRUE(untouched());
}

TEST_F(TableErrors, WrongMaxNeighbors) {
  EXPECT_ERROR(ConnectivityError, run(mesh.table("E2C2V")), "program 'tables'", "connectivity 'E2V'",
               "expects 2 neighbours per Edge", "'E2C2V' with 4");
  EXPECT_TRUE(untouched());
}

TEST_F(TableErrors, WrongLocations) {
  EXPECT_ERROR(ConnectivityError, run(mesh.table("E2C")), "connectivity 'E2V'", "maps Edge to Vertex",
               "'E2C' from Edge to Cell");
  EXPECT_TRUE(untouched());
}

TEST_F(TableErrors, WrongDataSize) {
  NeighborTable t = mesh.table("E2V");
  t.data.pop_back();
  EXPECT_ERROR(ConnectivityError, run(t), "connectivity 'E2V'", "should hold", std::to_string(mesh.n_edges) + " x 2",
               "given " + std::to_string(mesh.n_edges * 2 - 1));
  EXPECT_TRUE(untouched());
}

TEST_F(TableErrors, IndexOutOfRange) {
  NeighborTable t = mesh.table("E2V");
  t.data[7] = static_cast<std::int32_t>(mesh.n_vertices);
  EXPECT_ERROR(ConnectivityError, run(t), "program 'tables'", "connectivity 'E2V'", "entry (3, 1)",
               "is " + std::to_string(mesh.n_vertices), "[0, " + std::to_string(mesh.n_vertices) + ")");
  EXPECT_TRUE(untouched());
}

TEST_F(TableErrors, NegativeIndexOtherThanTheSkipValue) {
  NeighborTable t = mesh.table("E2V");
  t.data[4] = -2;
  EXPECT_ERROR(ConnectivityError, run(t), "entry (2, 0) is -2", "expected -1 (skipped)");
  EXPECT_TRUE(untouched());
}

TEST_F(TableErrors, TableShorterThanTheDomain) {
  NeighborTable t = mesh.table("E2V");
  t.n_source -= 2;
  t.data.resize(t.data.size() - 4);
  EXPECT_ERROR(DomainError, run(t), "program 'tables'", "call 'edge_sum'", "connectivity 'E2V'",
               "Edge=" + std::to_string(mesh.n_edges - 2), "outside its table");
  EXPECT_TRUE(untouched());
}

// Found by fuzz_call_binding: with an empty vertical range a call reads nothing, so a table
// shorter than its Edge range is no error. The reference accepted it; compiled code checked the
// table along Edge alone and refused the call.
TEST_F(TableErrors, EmptyDomainReadsNoTable) {
  ProgramBuilder pb("empty_levels");
  Expr fvk = pb.field("fvk", {Vertex, K}, DType::float64);
  Expr outk = pb.field("outk", {Edge, K}, DType::float64);
  Expr nk = pb.scalar("nk", DType::int32);
  pb.call("edge_sum", neighbor_sum(fvk(E2V), E2V), {outk}, {{Edge, 0, static_cast<int>(mesh.n_edges)}, {K, 0, nk}});
  const ir::Program p = pb.build();
  NeighborTable shorter = mesh.table("E2V");
  shorter.n_source -= 2;
  shorter.data.resize(shorter.data.size() - 4);
  Field fvk_({Vertex, K}, DType::float64, {mesh.n_vertices, 2}), outk_({Edge, K}, DType::float64, {mesh.n_edges, 2});
  fill_pattern(fvk_, 5);
  outk_.fill(kSentinel);
  const auto before = snapshot(outk_);
  const auto args = [&](int levels) {
    return Arguments().field("fvk", fvk_).field("outk", outk_).connectivity("E2V", shorter).scalar("nk", levels);
  };
  run_program(p, args(0));
  EXPECT_TRUE(same_values(snapshot(outk_), before));
  EXPECT_ERROR(DomainError, run_program(p, args(2)), "call 'edge_sum'", "connectivity 'E2V'", "outside its table");
  EXPECT_TRUE(same_values(snapshot(outk_), before));
}

// Found by fuzz_call_binding: a fixed-index shift reached through another table (E2V[0] of the
// edges V2E names) reads only the rows that table reaches. An E2V with extra rows of -1 that no
// vertex names is fine; compiled code checked every row of E2V and refused it.
TEST_F(TableErrors, FixedShiftThroughATableChecksOnlyTheRowsItReaches) {
  const Connectivity V2E = make_connectivity("V2E", Vertex, Edge, 6);
  ProgramBuilder pb("edge_ends");
  Expr fv = pb.field("fv", {Vertex}, DType::float64);
  Expr outv = pb.field("outv", {Vertex}, DType::float64);
  const Expr first_end = named("first_end", fv(E2V[0]));
  pb.call("sum_first_ends", neighbor_sum(first_end(V2E), V2E), {outv}, {{Vertex, 0, static_cast<int>(mesh.n_vertices)}});
  const ir::Program p = pb.build();
  const NeighborTable& e2v = mesh.table("E2V");
  std::vector<std::int32_t> longer(e2v.data.begin(), e2v.data.end());
  longer.insert(longer.end(), 4, -1);  // two more edges, both ends missing
  const NeighborTable e2v_longer = NeighborTable::view("E2V", "Edge", "Vertex", e2v.n_source + 2, e2v.n_target, 2,
                                                       longer.data(), 2, 1);
  const NeighborTable& v2e = mesh.table("V2E");
  std::vector<std::int32_t> v2e_entries(v2e.data.begin(), v2e.data.end());
  const auto v2e_view = [&] {
    return NeighborTable::view("V2E", "Vertex", "Edge", v2e.n_source, v2e.n_target + 2, 6, v2e_entries.data(), 6, 1);
  };
  Field got({Vertex}, DType::float64, {mesh.n_vertices});
  got.fill(kSentinel);
  run_program(p, Arguments().field("fv", fv_).field("outv", got).connectivity("E2V", e2v_longer)
                     .connectivity("V2E", v2e_view()));
  EXPECT_TRUE(matches(got, [&](const Index& x) {
    double sum = 0;
    for (int n = 0; n < 6; ++n) sum += fv_.at<double>({e2v(v2e(x[0], n), 0)});
    return sum;
  }));
  // Naming one of the extra edges reaches its -1: refused by both.
  v2e_entries[0] = static_cast<std::int32_t>(e2v.n_source);
  const auto before = snapshot(got);
  EXPECT_ERROR(DomainError, run_program(p, Arguments().field("fv", fv_).field("outv", got)
                                               .connectivity("E2V", e2v_longer).connectivity("V2E", v2e_view())),
               "missing neighbour");
  EXPECT_TRUE(same_values(snapshot(got), before));
}

// Found by fuzz_call_binding: the reference accepted tables that disagree on a location's size,
// which compiled code refused; both now refuse them in the shared binding.
TEST_F(TableErrors, TablesDisagreeingOnALocationSize) {
  const Connectivity E2Vb = make_connectivity("E2Vb", Edge, Vertex, 2);
  ProgramBuilder pb("two_tables");
  Expr fv = pb.field("fv", {Vertex}, DType::float64);
  Expr out = pb.field("out", {Edge}, DType::float64);
  pb.call("edge_sums", neighbor_sum(fv(E2V), E2V) + neighbor_sum(fv(E2Vb), E2Vb), {out},
          {{Edge, 0, static_cast<int>(mesh.n_edges)}});
  const ir::Program two = pb.build();
  const Mesh other = make_torus_mesh(4, 4);
  EXPECT_ERROR(ConnectivityError,
               run_program(two, Arguments().field("fv", fv_).field("out", out_).connectivity("E2V", mesh.table("E2V"))
                                    .connectivity("E2Vb", other.table("E2V"))),
               "program 'two_tables'", "connectivity 'E2Vb' says Edge has " + std::to_string(other.n_edges),
               "connectivity 'E2V' says " + std::to_string(mesh.n_edges));
  EXPECT_TRUE(untouched());
}

TEST_F(TableErrors, NeighbourIndexBeyondTheFieldExtent) {
  // A valid table (indices < n_target) but a vertex field smaller than the mesh.
  Field small({Vertex}, DType::float64, {mesh.n_vertices - 1});
  EXPECT_ERROR(DomainError,
               run_program(program, Arguments().field("fv", small).field("out", out_).connectivity("E2V", mesh.table("E2V"))),
               "program 'tables'", "field 'fv'", "Vertex=" + std::to_string(mesh.n_vertices - 1));
  EXPECT_TRUE(untouched());
}

// Found by the differential fuzzer (seed 7205210): a field read at a neighbour only in a branch
// of a concat_where on the neighbour's own index needs only the indices that branch admits, as
// the reference reads it. Covering just those, the call runs (and equals the reference); missing
// one of them, every backend refuses it; and a condition that admits everything but one index
// (!=) needs the rest.
TEST_F(TableErrors, AFieldReadOnlyWhereAConditionOnTheNeighbourHoldsNeedsOnlyThatPart) {
  const std::int64_t nv = mesh.n_vertices;
  const auto guarded = [&](const char* name, auto condition, bool field_in_true_branch) {
    ProgramBuilder pb(name);
    Expr fv = pb.field("fv", {Vertex}, DType::float64);
    Expr out = pb.field("out", {Edge}, DType::float64);
    Expr n = pb.scalar("nv", DType::int32);
    const Expr one = broadcast(Expr(1.0), {Vertex});
    const IndexCondition c = condition(n);
    const Expr value = field_in_true_branch ? concat_where(c, fv * 2.0, one) : concat_where(c, one, fv * 2.0);
    pb.call("edge_sum", neighbor_sum(value(E2V), E2V), {out}, {{Edge, 0, static_cast<int>(mesh.n_edges)}});
    return pb.build();
  };
  const auto call = [&](const ir::Program& p, Field& fv) {
    run_program(p, Arguments().field("fv", fv).field("out", out_).scalar("nv", static_cast<std::int32_t>(nv))
                       .connectivity("E2V", mesh.table("E2V")));
  };
  const auto& t = mesh.table("E2V");
  {  // read only at vertex nv - 2
    const ir::Program p = guarded("at_one", [](const Expr& n) { return Vertex == n - 2; }, true);
    Field just({Vertex}, DType::float64, {1}, {nv - 2});
    fill_pattern(just, 5);
    call(p, just);
    EXPECT_TRUE(matches(out_, [&](const Index& x) {
      double sum = 0;
      for (int k = 0; k < 2; ++k) sum += t(x[0], k) == nv - 2 ? 2.0 * just.at<double>({nv - 2}) : 1.0;
      return sum;
    }));
    Field without({Vertex}, DType::float64, {nv - 2});
    out_.fill(kSentinel);
    EXPECT_ERROR(DomainError, call(p, without), "program 'at_one'", "field 'fv'", "Vertex=" + std::to_string(nv - 2));
    EXPECT_TRUE(untouched());
  }
  {  // read where Vertex >= 3 (the false branch of Vertex < 3)
    const ir::Program p = guarded("from_three", [](const Expr&) { return Vertex < 3; }, false);
    Field upper({Vertex}, DType::float64, {nv - 3}, {3});
    fill_pattern(upper, 6);
    call(p, upper);
    Field lower({Vertex}, DType::float64, {nv - 1});
    out_.fill(kSentinel);
    EXPECT_ERROR(DomainError, call(p, lower), "program 'from_three'", "field 'fv'", "Vertex=" + std::to_string(nv - 1));
    EXPECT_TRUE(untouched());
  }
  {  // read everywhere but vertex 0: a field without vertex nv - 1 is short
    const ir::Program p = guarded("all_but_zero", [](const Expr&) { return Vertex != 0; }, true);
    Field rest({Vertex}, DType::float64, {nv - 1}, {1});
    fill_pattern(rest, 7);
    call(p, rest);
    Field shorter({Vertex}, DType::float64, {nv - 2}, {1});
    out_.fill(kSentinel);
    EXPECT_ERROR(DomainError, call(p, shorter), "program 'all_but_zero'", "field 'fv'", "Vertex=" + std::to_string(nv - 1));
    EXPECT_TRUE(untouched());
  }
}

TEST_F(TableErrors, TableGivenForAFieldParameter) {
  EXPECT_ERROR(ArgumentError,
               run_program(program, Arguments().connectivity("fv", mesh.table("E2V")).field("out", out_).connectivity("E2V", mesh.table("E2V"))),
               "argument 'fv' expects a field", "given a connectivity table");
  EXPECT_TRUE(untouched());
}

}  // namespace
}  // namespace fieldflow
