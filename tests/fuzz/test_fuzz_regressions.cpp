// Minimal programs the fuzzer found (docs/reliability.md, "Findings"), each compared with the
// reference executor. A defect not fixed yet gets a test named DISABLED_...; run those with
// --gtest_also_run_disabled_tests (none today).
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "driver/cuda_build.h"
#include "fieldflow/compile.h"
#include "fieldflow/dsl.h"
#include "fieldflow/errors.h"
#include "fieldflow/mesh.h"
#include "fieldflow/reference.h"
#include "support/backend_harness.h"

namespace fieldflow {
namespace {

using testing_support::same_bits;

const Dimension I = horizontal_dim("I"), K = vertical_dim("K");

// Fuzzer seed 14 (shrunk): a tuple carry whose body permutes its components. The new carry must
// be computed from the whole previous one; updating the components one after the other makes the
// second read the first's new value. Reference: (0, 1) -> (1, 0) at the first level.
TEST(FuzzRegressions, TupleCarryPermutationReadsThePreviousCarry) {
  ProgramBuilder pb("swap_carry");
  auto a = pb.field("a", {I, K}, DType::float64);
  auto o0 = pb.field("o0", {I, K}, DType::float64), o1 = pb.field("o1", {I, K}, DType::float64);
  auto nk = pb.scalar("nk", DType::int32);
  auto s = scan("swap", ScanDirection::forward, {Scalar(0.0), Scalar(1.0)},
                [](const Expr& c, const std::vector<Expr>& in) { return make_tuple({c[1] + 0.0 * in[0], c[0]}); }, {a});
  pb.call("swap", s, {o0, o1}, {{I, 0, 3}, {K, 0, nk}});
  const ir::Program p = pb.build();
  for (Layout layout : {Layout::vertical_fastest, Layout::horizontal_fastest}) {
    Field fa({I, K}, DType::float64, {3, 4}, {}, layout);
    Field r0({I, K}, DType::float64, {3, 4}, {}, layout), r1 = r0.clone(), c0 = r0.clone(), c1 = r0.clone();
    run_reference(p, Arguments().field("a", fa).field("o0", r0).field("o1", r1).scalar("nk", 4));
    compile(p, testing_support::cpu_options(layout))(Arguments().field("a", fa).field("o0", c0).field("o1", c1).scalar("nk", 4));
    EXPECT_EQ(r0.at<double>({0, 0}), 1.0);  // the reference's reading of the language
    EXPECT_TRUE(same_bits(r0, c0, "o0"));
    EXPECT_TRUE(same_bits(r1, c1, "o1"));
  }
}

// Fuzzer seed 1 (shrunk): astype(astype(x, int32), float64) of x in (-1, 0) is +0.0 (the int 0
// converted back). The JIT flags include -fno-trapping-math, with which GCC folds the two
// conversions into one truncation (vroundsd) that keeps the sign: -0.0.
TEST(FuzzRegressions, FloatToIntToFloatOfSmallNegativeIsPositiveZero) {
  ProgramBuilder pb("int_round_trip");
  auto a = pb.field("a", {I, K}, DType::float64), o = pb.field("o", {I, K}, DType::float64);
  pb.call("s", astype(astype(a, DType::int32), DType::float64), {o}, {{I, 0, 4}, {K, 0, 1}});
  const ir::Program p = pb.build();
  Field fa({I, K}, DType::float64, {4, 1}), r({I, K}, DType::float64, {4, 1}), c = r.clone();
  for (int i = 0; i < 4; ++i) fa.at<double>({i, 0}) = -0.25 * (i + 1);  // -0.25 .. -1.0
  run_reference(p, Arguments().field("a", fa).field("o", r));
  compile(p, testing_support::cpu_options())(Arguments().field("a", fa).field("o", c));
  EXPECT_FALSE(std::signbit(r.at<double>({0, 0})));
  EXPECT_TRUE(same_bits(r, c, "o"));
}

// Fuzzer seed 900595 (shrunk): the same with an integer operation between the two conversions,
// astype(abs(astype(x, int32)), float64), in a vectorised loop (horizontal layout, many points).
TEST(FuzzRegressions, IntegerComputedFromAFloatConvertsBackToPositiveZero) {
  const Dimension J = horizontal_dim("J");
  ProgramBuilder pb("int_round_trip_abs");
  auto a = pb.field("a", {K}, DType::float64), o = pb.field("o", {I, J, K}, DType::float64);
  pb.call("s", astype(abs(astype(a, DType::int32)), DType::float64) / broadcast(1.0, {J}), {o},
          {{I, 0, 5}, {J, 0, 7}, {K, 0, 9}});
  const ir::Program p = pb.build();
  for (Layout layout : {Layout::vertical_fastest, Layout::horizontal_fastest}) {
    Field fa({K}, DType::float64, {9}, {}, layout);
    for (int k = 0; k < 9; ++k) fa.at<double>({k}) = -0.125 * k;  // -0 .. -1: abs(int) is 0 or 1
    Field r({I, J, K}, DType::float64, {5, 7, 9}, {}, layout), c = r.clone();
    run_reference(p, Arguments().field("a", fa).field("o", r));
    compile(p, testing_support::cpu_options(layout))(Arguments().field("a", fa).field("o", c));
    EXPECT_FALSE(std::signbit(r.at<double>({0, 0, 3})));
    EXPECT_TRUE(same_bits(r, c, "o")) << to_string(layout);
  }
}

// Fuzzer seed 25 of the generator with dynamic offsets (shrunk): a value read at a dynamic offset
// was stored as a transient over the reading statement's own range, so a read past that range
// (inside the field: the reference accepts) was refused as "a dynamic offset read outside a
// field's extent". Such a value is computed where it is read, whether a label asks to store it
// (materialize) or the cost model would (a value read at two points).
TEST(FuzzRegressions, ValuesReadAtDynamicOffsetsAreReadWhereverTheirInputsReach) {
  const Dimension J = horizontal_dim("J");
  for (bool label : {false, true}) {
    ProgramBuilder pb(label ? "dyn_materialized" : "dyn_shared");
    auto a = pb.field("a", {I, J, K}, DType::float64), o = pb.field("o", {I, J, K}, DType::float64);
    auto off = pb.field("off", {I, J, K}, DType::int32);
    // Worth storing when read at two points (over passes::recompute_threshold operations).
    Expr v = a;
    for (int n = 0; n < 24; ++n) v = sin(v) * 0.5 + a;
    if (label) v = materialize("t0", a);
    pb.call("s", label ? v(J + off) : v(J + off) + v, {o}, {{I, 0, 3}, {J, 1, 2}, {K, 0, 2}});
    const ir::Program p = pb.build();
    for (Layout layout : {Layout::vertical_fastest, Layout::horizontal_fastest}) {
      SCOPED_TRACE(fmt::format("{}, {}", p.name, to_string(layout)));
      // Fields over J in [-2, 5): the statement covers J = 1 only and reads J = -1 .. 4.
      Field fa({I, J, K}, DType::float64, {3, 7, 2}, {0, -2, 0}, layout);
      Field foff({I, J, K}, DType::int32, {3, 7, 2}, {0, -2, 0}, layout);
      for (std::int64_t n = 0; n < fa.size(); ++n) fa.set_from_double(n, 0.1 + 0.37 * static_cast<double>(n % 11));
      for (std::int64_t n = 0; n < foff.size(); ++n) foff.set_from_double(n, static_cast<double>(n % 6) - 2);
      Field r({I, J, K}, DType::float64, {3, 7, 2}, {0, -2, 0}, layout), c = r.clone();
      auto args = [&](Field& out) { return Arguments().field("a", fa).field("off", foff).field("o", out); };
      run_reference(p, args(r));
      compile(p, testing_support::cpu_options(layout))(args(c));
      EXPECT_TRUE(same_bits(r, c, "o"));
      Field e = r.clone();
      driver::compile_cuda_emulated(p, testing_support::cpu_options(layout))(args(e));
      EXPECT_TRUE(same_bits(r, e, "o (emulated CUDA)"));
    }
  }
}

// Found while adding dynamic offsets to the generator: a scan read at a dynamic horizontal
// offset was computed over the reading statement's columns only, so a read of another column
// (which the reference computes) failed at call time. The DSL refuses it when the program is
// built; along K a scan's value is read at dynamic offsets as before.
TEST(FuzzRegressions, ScansAreReadAtDynamicOffsetsAlongKOnly) {
  const Dimension J = horizontal_dim("J");
  ProgramBuilder pb("dyn_scan");
  auto a = pb.field("a", {I, J, K}, DType::float64), o = pb.field("o", {I, J, K}, DType::float64);
  auto off = pb.field("off", {I, J, K}, DType::int32);
  auto s = scan("acc", ScanDirection::forward, {Scalar(0.0)},
                [](const Expr& c, const std::vector<Expr>& in) { return c * 0.5 + in[0]; }, {a});
  try {
    (s + 1.0)(J + off);
    FAIL() << "expected DimensionError";
  } catch (const DimensionError& e) {
    EXPECT_NE(std::string(e.what()).find("the operand contains the scan 'acc'"), std::string::npos) << e.what();
  }
  // Along K: k + off clamped into [0, 3).
  const Expr k = astype(index(K), DType::int32);
  pb.call("s", s(K + minimum(maximum(off, -k), 2 - k)), {o}, {{I, 0, 3}, {J, 1, 2}, {K, 0, 3}});
  const ir::Program p = pb.build();
  for (Layout layout : {Layout::vertical_fastest, Layout::horizontal_fastest}) {
    Field fa({I, J, K}, DType::float64, {3, 4, 3}, {}, layout), foff({I, J, K}, DType::int32, {3, 4, 3}, {}, layout);
    for (std::int64_t n = 0; n < fa.size(); ++n) fa.set_from_double(n, 0.1 + 0.37 * static_cast<double>(n % 11));
    for (std::int64_t n = 0; n < foff.size(); ++n) foff.set_from_double(n, static_cast<double>(n % 5) - 2);
    Field r({I, J, K}, DType::float64, {3, 4, 3}, {}, layout), c = r.clone(), e = r.clone();
    auto args = [&](Field& out) { return Arguments().field("a", fa).field("off", foff).field("o", out); };
    run_reference(p, args(r));
    compile(p, testing_support::cpu_options(layout))(args(c));
    EXPECT_TRUE(same_bits(r, c, "o")) << to_string(layout);
    driver::compile_cuda_emulated(p, testing_support::cpu_options(layout))(args(e));
    EXPECT_TRUE(same_bits(r, e, "o (emulated CUDA)")) << to_string(layout);
  }
}

// Fuzzer seed 20200256 (shrunk): two reductions over the same neighbours in one expression, the
// first branch-free (min_over of a constant: every slot read, a missing neighbour's -1 replaced by
// slot 0 in the shared table-entry variable) and the second with a dynamic offset (a branch per
// slot that skips -1). The second reused the first's variable, saw 0 instead of -1 and took a
// missing neighbour into its max_over. The entry variable is never changed now: branch-free code
// reads through its own copy.
TEST(FuzzRegressions, AReductionAfterABranchFreeOneSkipsTheSameMissingNeighbours) {
  const Dimension Vertex = horizontal_dim("Vertex"), Edge = horizontal_dim("Edge");
  const Connectivity V2E = make_connectivity("V2E", Vertex, Edge, 6);
  const Mesh mesh = make_bounded_mesh(3, 3);  // V2E holds -1 at the boundary
  ProgramBuilder pb("branch_free_then_dynamic");
  auto f = pb.field("f", {Edge, K}, DType::float64), o = pb.field("o", {Vertex, K}, DType::float64);
  auto nv = pb.scalar("nv", DType::int32);
  const Expr zero = Expr::literal(Scalar(std::int32_t{-1})) + broadcast(Expr::literal(Scalar(std::int32_t{1})), {Edge, K});
  const Expr ones = broadcast(Expr::literal(Scalar(1.0)), {Vertex, V2E.local, K});
  pb.call("s", fmod(max_over(f(K + zero)(V2E), V2E), min_over(ones, V2E)), {o}, {{Vertex, 0, nv}, {K, 0, 2}});
  const ir::Program p = pb.build();
  for (Layout layout : {Layout::vertical_fastest, Layout::horizontal_fastest}) {
    // Edge 0 (read in place of every missing neighbour) holds the largest values.
    Field ff({Edge, K}, DType::float64, {mesh.n_edges, 2}, {}, layout);
    for (std::int64_t n = 0; n < ff.size(); ++n) ff.set_from_double(n, 0.25 + 0.5 * std::sin(0.7 * static_cast<double>(n)));
    ff.at<double>({0, 0}) = ff.at<double>({0, 1}) = 0.9375;
    Field r({Vertex, K}, DType::float64, {mesh.n_vertices, 2}, {}, layout), c = r.clone(), e = r.clone();
    auto args = [&](Field& out) {
      return Arguments().field("f", ff).field("o", out).scalar("nv", mesh.n_vertices).connectivity("V2E", mesh.table("V2E"));
    };
    run_reference(p, args(r));
    compile(p, testing_support::cpu_options(layout))(args(c));
    EXPECT_TRUE(same_bits(r, c, "o")) << to_string(layout);
    driver::compile_cuda_emulated(p, testing_support::cpu_options(layout))(args(e));
    EXPECT_TRUE(same_bits(r, e, "o (emulated CUDA)")) << to_string(layout);
  }
}

// Fuzzer seed 20400084 (shrunk): two statements write o0, the second as the first component of
// a tuple whose other component reads at a dynamic K offset. The two were fused into one kernel,
// which (having a dynamic offset) writes every output through a double buffer and a copy kernel;
// the copies were inserted in reverse output order, so the first statement's copy ran last and
// left its value (1) where the reference has the second's (3: a sum over three neighbours).
TEST(FuzzRegressions, ALaterStatementsWriteWinsThroughDoubleBuffers) {
  const Dimension Cell = horizontal_dim("Cell"), Edge = horizontal_dim("Edge");
  const Connectivity C2E = make_connectivity("C2E", Cell, Edge, 3);
  const Mesh mesh = make_bounded_mesh(2, 2);
  ProgramBuilder pb("tuple_after_write");
  auto fc = pb.field("fc", {Cell, K}, DType::float64);
  auto o0 = pb.field("o0", {Cell, K}, DType::float64), o1 = pb.field("o1", {Cell, K}, DType::float64);
  auto nc = pb.scalar("nc", DType::int32);
  pb.call("s0", broadcast(Expr::literal(Scalar(1.0)), {Cell, K}), {o0}, {{Cell, 0, nc}, {K, 0, 1}});
  const Expr ones = broadcast(Expr::literal(Scalar(1.0)), {Cell, C2E.local, K});
  pb.call("s1", make_tuple({neighbor_sum(ones, C2E), fc(K + astype(index(K), DType::int32))}), {o0, o1},
          {{Cell, 0, nc}, {K, 0, 1}});
  const ir::Program p = pb.build();
  for (Layout layout : {Layout::vertical_fastest, Layout::horizontal_fastest}) {
    Field ff({Cell, K}, DType::float64, {mesh.n_cells, 1}, {}, layout);
    ff.fill(0.5);
    Field r0({Cell, K}, DType::float64, {mesh.n_cells, 1}, {}, layout), r1 = r0.clone(), c0 = r0.clone(), c1 = r0.clone();
    auto args = [&](Field& a, Field& b) {
      return Arguments().field("fc", ff).field("o0", a).field("o1", b).scalar("nc", mesh.n_cells).connectivity("C2E", mesh.table("C2E"));
    };
    run_reference(p, args(r0, r1));
    compile(p, testing_support::cpu_options(layout))(args(c0, c1));
    EXPECT_EQ(r0.at<double>({0, 0}), 3.0);
    EXPECT_TRUE(same_bits(r0, c0, "o0")) << to_string(layout);
    EXPECT_TRUE(same_bits(r1, c1, "o1")) << to_string(layout);
  }
}

// Fuzzer seed 16 (shrunk): min_over must fold neighbours in slot order as `v < acc ? v : acc`
// (the reference, and what max_over does mirrored). The CPU backend emits ff_min(x, acc), which
// keeps the new value on ties: +0 vs -0 come out with the other sign, and a NaN neighbour after a
// number propagates where the reference ignores it.
TEST(FuzzRegressions, MinOverTiesAndNaNsFollowSlotOrder) {
  const Dimension Vertex = horizontal_dim("Vertex"), Edge = horizontal_dim("Edge");
  const Connectivity E2V = make_connectivity("E2V", Edge, Vertex, 2);
  const Mesh mesh = make_torus_mesh(3, 3);
  ProgramBuilder pb("min_over_ties");
  auto f = pb.field("f", {Vertex, K}, DType::float64), o = pb.field("o", {Edge, K}, DType::float64);
  auto ne = pb.scalar("ne", DType::int32);
  pb.call("s", min_over(f(E2V), E2V), {o}, {{Edge, 0, ne}, {K, 0, 2}});
  const ir::Program p = pb.build();
  Field ff({Vertex, K}, DType::float64, {mesh.n_vertices, 2});
  for (std::int64_t v = 0; v < mesh.n_vertices; ++v) {
    ff.at<double>({v, 0}) = v % 2 ? -0.0 : 0.0;                            // ties of signed zeros
    ff.at<double>({v, 1}) = v % 3 ? 1.0 : std::numeric_limits<double>::quiet_NaN();  // NaNs
  }
  Field r({Edge, K}, DType::float64, {mesh.n_edges, 2}), c = r.clone();
  auto args = [&](Field& out) {
    return Arguments().field("f", ff).field("o", out).scalar("ne", mesh.n_edges).connectivity("E2V", mesh.table("E2V"));
  };
  run_reference(p, args(r));
  compile(p, testing_support::cpu_options())(args(c));
  EXPECT_TRUE(same_bits(r, c, "o"));
}

// Fuzzer seeds 100 and 54 (shrunk): power(x, 0.5) and power(x, 2) must be std::pow like the
// reference. With the JIT's flags (-O3 -fno-math-errno -fno-trapping-math) GCC emits sqrt
// (vsqrtpd) and x * x instead, which differ from glibc's pow by one ulp for some x.
TEST(FuzzRegressions, PowerWithConstantExponentIsPow) {
  const Dimension J = horizontal_dim("J");
  for (double exponent : {0.5, 2.0}) {
    ProgramBuilder pb("power_const");
    auto a = pb.field("a", {I, J, K}, DType::float64), o = pb.field("o", {I, J, K}, DType::float64);
    pb.call("s", power(a, exponent), {o}, {{I, 0, 16}, {J, 0, 16}, {K, 0, 16}});
    const ir::Program p = pb.build();
    Field fa({I, J, K}, DType::float64, {16, 16, 16}), r({I, J, K}, DType::float64, {16, 16, 16}), c = r.clone();
    for (std::int64_t i = 0; i < fa.size(); ++i) fa.set_from_double(i, std::sin(0.37 * static_cast<double>(i)) * 3);
    run_reference(p, Arguments().field("a", fa).field("o", r));
    compile(p, testing_support::cpu_options())(Arguments().field("a", fa).field("o", c));
    EXPECT_TRUE(same_bits(r, c, "o")) << "exponent " << exponent;
  }
}

// Fuzzer seed 970339 (shrunk): sin(arctan(x)). GCC rewrites the composition into
// x / sqrt(x * x + 1) even without -ffast-math, which is an ulp off libm's sin(atan(x)) for some x.
// Fuzzer seed 970550 (shrunk): tanh of a float32 constant. GCC folds it exactly (MPFR) where
// glibc's tanhf, which the reference calls, is an ulp off: tanh(0.625f).
TEST(FuzzRegressions, LibmCallsAreNeitherFoldedNorRewritten) {
  const Dimension J = horizontal_dim("J");
  ProgramBuilder pb("libm_calls");
  auto a = pb.field("a", {I, J, K}, DType::float64);
  auto o = pb.field("o", {I, J, K}, DType::float64), t = pb.field("t", {I, J, K}, DType::float64);
  pb.call("s", make_tuple({sin(arctan(a)), a * 0.0 + astype(tanh(Expr::literal(Scalar(1.25f)) * Expr::literal(Scalar(0.5f))), DType::float64)}),
          {o, t}, {{I, 0, 9}, {J, 0, 9}, {K, 0, 9}});
  const ir::Program p = pb.build();
  for (Layout layout : {Layout::vertical_fastest, Layout::horizontal_fastest}) {
    Field fa({I, J, K}, DType::float64, {9, 9, 9}, {}, layout);
    for (std::int64_t i = 0; i < fa.size(); ++i) fa.set_from_double(i, 10.0 + 0.37 * static_cast<double>(i));
    Field r({I, J, K}, DType::float64, {9, 9, 9}, {}, layout), c = r.clone(), rt = r.clone(), ct = r.clone();
    run_reference(p, Arguments().field("a", fa).field("o", r).field("t", rt));
    compile(p, testing_support::cpu_options(layout))(Arguments().field("a", fa).field("o", c).field("t", ct));
    volatile float x = 0.625f;  // keeps this test's own compiler from folding tanh too
    EXPECT_EQ(rt.at<double>({0, 0, 0}), static_cast<double>(std::tanh(static_cast<float>(x))));  // libm
    EXPECT_TRUE(same_bits(r, c, "o")) << to_string(layout);
    EXPECT_TRUE(same_bits(rt, ct, "t")) << to_string(layout);
  }
}

// Fuzzer seed 500462 (shrunk): a reduction over V2E inside the operand of another reduction over
// V2E (the inner result, over [Vertex, K], is promoted back to the local field the outer one
// reduces). The inner slot shadows the outer one; the compiler stopped with an internal error.
TEST(FuzzRegressions, ReductionNestedInAReductionOverTheSameConnectivity) {
  const Dimension Vertex = horizontal_dim("Vertex"), Edge = horizontal_dim("Edge");
  const Connectivity V2E = make_connectivity("V2E", Vertex, Edge, 6);
  for (const Mesh& mesh : {make_torus_mesh(3, 3), make_bounded_mesh(4, 3)}) {
    ProgramBuilder pb("nested_same_connectivity");
    auto fe = pb.field("fe", {Edge, K}, DType::float64), o = pb.field("o", {Vertex, K}, DType::float64);
    auto nv = pb.scalar("nv", DType::int32);
    const Expr inner = neighbor_sum(fe(V2E), V2E);  // over [Vertex, K]
    pb.call("s", min_over(fe(V2E) * inner + fe(V2E), V2E), {o}, {{Vertex, 0, nv}, {K, 0, 2}});
    const ir::Program p = pb.build();
    Field f({Edge, K}, DType::float64, {mesh.n_edges, 2});
    for (std::int64_t i = 0; i < f.size(); ++i) f.set_from_double(i, std::sin(0.7 * static_cast<double>(i)));
    Field r({Vertex, K}, DType::float64, {mesh.n_vertices, 2}), c = r.clone();
    auto args = [&](Field& out) {
      return Arguments().field("fe", f).field("o", out).scalar("nv", mesh.n_vertices).connectivity("V2E", mesh.table("V2E"));
    };
    run_reference(p, args(r));
    // Independent values: the sum over present neighbours, then the minimum of e * sum + e.
    const auto& v2e = mesh.table("V2E");
    for (std::int64_t v = 0; v < mesh.n_vertices; ++v)
      for (int k = 0; k < 2; ++k) {
        double sum = 0, lowest = std::numeric_limits<double>::max();
        for (int n = 0; n < 6; ++n)
          if (v2e(v, n) >= 0) sum += f.at<double>({v2e(v, n), k});
        for (int n = 0; n < 6; ++n)
          if (v2e(v, n) >= 0) {
            const double e = f.at<double>({v2e(v, n), k});
            lowest = std::min(lowest, e * sum + e);
          }
        EXPECT_EQ(r.at<double>({v, k}), lowest) << mesh.name << " vertex " << v;
      }
    compile(p, testing_support::cpu_options())(args(c));
    EXPECT_TRUE(same_bits(r, c, "o")) << mesh.name;
  }
}

// Fuzzer seed 49 (shrunk; the first run with surface statements, but any shape of domain shows
// it): three statements over one domain write one field in turn, the first and the last reading
// it. Fusion made one kernel of them and substituted s2's value into s1's, so s3 stored
// o * i * i instead of s2's i. Compiled code must give the program order's result.
TEST(FuzzRegressions, ThreeFusedStatementsWritingOneFieldKeepProgramOrder) {
  const Dimension Vertex = horizontal_dim("Vertex");
  ProgramBuilder pb("surface_in_order");
  auto o = pb.field("o", {Vertex}, DType::float64);
  auto n = pb.scalar("n", DType::int32);
  const Expr i = astype(index(Vertex), DType::float64);
  pb.call("s1", o * i, {o}, {{Vertex, 3, n}});
  pb.call("s2", i, {o}, {{Vertex, 3, n}});
  pb.call("s3", o, {o}, {{Vertex, 3, n}});
  const ir::Program p = pb.build();
  for (TransientMemoryMode mode : {TransientMemoryMode::scoped, TransientMemoryMode::persistent,
                                   TransientMemoryMode::pool, TransientMemoryMode::external})
    for (Layout layout : {Layout::vertical_fastest, Layout::horizontal_fastest}) {
      Field r({Vertex}, DType::float64, {9}, {}, layout), c = r.clone();
      for (std::int64_t v = 0; v < 9; ++v) r.at<double>({v}) = c.at<double>({v}) = 0.5 + static_cast<double>(v);
      run_reference(p, Arguments().field("o", r).scalar("n", 9));
      for (std::int64_t v = 0; v < 9; ++v)
        EXPECT_EQ(r.at<double>({v}), v < 3 ? 0.5 + static_cast<double>(v) : static_cast<double>(v)) << v;
      CompileOptions options = testing_support::cpu_options(layout);
      std::vector<double> workspace(4096);  // more than enough for the transients of these sizes
      options.memory.mode = mode;
      if (mode == TransientMemoryMode::external)
        options.memory.external_workspace[Device::cpu] = {workspace.data(), workspace.size() * sizeof(double), Device::cpu, {}};
      compile(p, options)(Arguments().field("o", c).scalar("n", 9));
      EXPECT_TRUE(same_bits(r, c, "o")) << to_string(mode) << " " << to_string(layout);
    }
}

// Fuzzer seed 66 (shrunk): one stored slot of a sparse field, w(slot(V2E, 2)), reads only that
// slot. A field covering slots [0, 5) of six is enough, as for the reference; compiled code
// required all six. A reduction over the field still needs every slot, on both.
TEST(FuzzRegressions, AFixedSlotOfASparseFieldNeedsOnlyThatSlot) {
  const Dimension Vertex = horizontal_dim("Vertex");
  const Connectivity V2E = make_connectivity("V2E", Vertex, horizontal_dim("Edge"), 6);
  const Mesh mesh = make_torus_mesh(3, 4);
  for (bool reduce : {false, true}) {
    ProgramBuilder pb("sparse_slot");
    auto w = pb.field("w", {Vertex, V2E.local, K}, DType::float64), o = pb.field("o", {Vertex, K}, DType::float64);
    auto n = pb.scalar("n", DType::int32);
    pb.call("s", reduce ? neighbor_sum(w, V2E) : w(slot(V2E, 2)), {o}, {{Vertex, 1, n}, {K, 0, 2}});
    const ir::Program p = pb.build();
    for (std::int64_t slots : {6, 5, 3, 2}) {
      Field fw({Vertex, V2E.local, K}, DType::float64, {mesh.n_vertices, slots, 2});
      for (std::int64_t i = 0; i < fw.size(); ++i) fw.set_from_double(i, 0.25 * static_cast<double>(i));
      Field r({Vertex, K}, DType::float64, {mesh.n_vertices, 2}), c = r.clone();
      auto args = [&](Field& out) {
        Arguments a;
        a.field("w", fw).field("o", out).scalar("n", mesh.n_vertices);
        if (reduce) a.connectivity("V2E", mesh.table("V2E"));
        return a;
      };
      const std::string want = reduce && slots < 6 ? "DomainError" : slots < 3 ? "DomainError" : "accepted";
      std::string reference = "accepted", compiled = "accepted";
      try { run_reference(p, args(r)); } catch (const DomainError&) { reference = "DomainError"; }
      try { compile(p, testing_support::cpu_options())(args(c)); } catch (const DomainError&) { compiled = "DomainError"; }
      EXPECT_EQ(reference, want) << "reduce " << reduce << ", " << slots << " slots";
      EXPECT_EQ(compiled, want) << "reduce " << reduce << ", " << slots << " slots";
      if (want == "accepted") {
        if (!reduce) {
          for (std::int64_t v = 1; v < mesh.n_vertices; ++v) {  // independent: the stored slot 2
            EXPECT_EQ(r.at<double>({v, 1}), fw.at<double>({v, 2, 1}));
          }
        }
        EXPECT_TRUE(same_bits(r, c, "o")) << "reduce " << reduce << ", " << slots << " slots";
      }
    }
  }
}

// Fuzzer seed 20900015 (shrunk): x(K + (nk - 1 - index(K))) reads only the top level. A field
// that covers just that level is enough for the reference, which checks each read; compiled code
// also required the statement's whole K range on the host, although every read at a dynamic
// offset is checked inside the kernel against the field's own extent. A field without the top
// level is still refused, by both.
TEST(FuzzRegressions, AFieldReadAtADynamicOffsetNeedsToCoverOnlyWhatIsRead) {
  ProgramBuilder pb("top_level");
  auto x = pb.field("x", {I, K}, DType::float64), o = pb.field("o", {I, K}, DType::float64);
  auto nk = pb.scalar("nk", DType::int32);
  pb.call("s", x(K + (nk - 1 - index(K))) * 2.0, {o}, {{I, 0, 3}, {K, 0, nk}});
  const ir::Program p = pb.build();
  struct Levels { std::int64_t first, count; const char* want; };
  for (const Levels& levels : {Levels{3, 1, "accepted"}, Levels{0, 4, "accepted"}, Levels{0, 3, "DomainError"}})
    for (Layout layout : {Layout::vertical_fastest, Layout::horizontal_fastest}) {
      Field fx({I, K}, DType::float64, {3, levels.count}, {0, levels.first}, layout);
      for (std::int64_t i = 0; i < fx.size(); ++i) fx.set_from_double(i, 1.5 + static_cast<double>(i));
      Field r({I, K}, DType::float64, {3, 4}, {}, layout), c = r.clone();
      auto args = [&](Field& out) { return Arguments().field("x", fx).field("o", out).scalar("nk", 4); };
      std::string reference = "accepted", compiled = "accepted";
      try { run_reference(p, args(r)); } catch (const DomainError&) { reference = "DomainError"; }
      try { compile(p, testing_support::cpu_options(layout))(args(c)); } catch (const DomainError&) { compiled = "DomainError"; }
      const std::string where = fmt::format("levels [{}, {}), {}", levels.first, levels.first + levels.count, to_string(layout));
      EXPECT_EQ(reference, levels.want) << where;
      EXPECT_EQ(compiled, levels.want) << where;
      if (reference == "accepted") {
        for (std::int64_t k = 0; k < 4; ++k) EXPECT_EQ(r.at<double>({1, k}), 2.0 * fx.at<double>({1, 3})) << where;  // independent
        EXPECT_TRUE(same_bits(r, c, "o")) << where;
      }
    }
}

// Fuzzer seed 23300223 (shrunk): max_over(neighbor_sum(w, C2E2CO)(C2E2CO), C2E2CO), a sparse
// field reduced inside a reduction over the same neighbours. The inner reduction's skipped slots
// of w were also charged to the outer one, which then dropped every neighbour that has a missing
// neighbour itself: on a bounded mesh each cell got max_over's identity (lowest). Every mode,
// layout and thread count alike; the torus mesh, without missing neighbours, was right.
TEST(FuzzRegressions, AReducedValueReadAgainThroughTheSameConnectivity) {
  const Dimension Cell = horizontal_dim("Cell");
  const Connectivity C2E2CO = make_connectivity("C2E2CO", Cell, Cell, 4);
  for (const Mesh& mesh : {make_bounded_mesh(2, 2), make_bounded_mesh(2, 4), make_torus_mesh(3, 3)}) {
    ProgramBuilder pb("reduced_then_shifted");
    auto w = pb.field("w", {Cell, C2E2CO.local}, DType::float64), o = pb.field("o", {Cell, K}, DType::float64);
    auto nc = pb.scalar("nc", DType::int32), nk = pb.scalar("nk", DType::int32);
    pb.call("s", max_over(neighbor_sum(w, C2E2CO)(C2E2CO), C2E2CO), {o}, {{K, 0, nk}, {Cell, 0, nc}});
    const ir::Program p = pb.build();
    const auto& table = mesh.table("C2E2CO");
    for (int levels : {1, 7}) {
      for (Layout layout : {Layout::vertical_fastest, Layout::horizontal_fastest}) {
        Field fw({Cell, C2E2CO.local}, DType::float64, {mesh.n_cells, 4}, {}, layout);
        for (std::int64_t c = 0; c < mesh.n_cells; ++c)
          for (int n = 0; n < 4; ++n) fw.at<double>({c, n}) = std::sin(0.9 * static_cast<double>(4 * c + n));
        Field r({Cell, K}, DType::float64, {mesh.n_cells, levels}, {}, layout);
        auto args = [&](Field& out) {
          return Arguments().field("w", fw).field("o", out).scalar("nc", mesh.n_cells).scalar("nk", levels)
              .connectivity("C2E2CO", table);
        };
        run_reference(p, args(r));
        for (std::int64_t c = 0; c < mesh.n_cells; ++c) {  // independent: plain loops
          auto sum = [&](std::int64_t x) {
            double s = 0;
            for (int n = 0; n < 4; ++n)
              if (table(x, n) >= 0) s += fw.at<double>({x, n});
            return s;
          };
          double best = std::numeric_limits<double>::lowest();
          for (int n = 0; n < 4; ++n)
            if (table(c, n) >= 0) best = std::max(best, sum(table(c, n)));
          for (int k = 0; k < levels; ++k) ASSERT_EQ(r.at<double>({c, k}), best) << mesh.name << " cell " << c;
        }
        // One kernel without transients: the memory mode cannot matter, the parallel path can.
        for (int threads : {1, 3}) {
          CompileOptions options = testing_support::cpu_options(layout);
          options.num_threads = threads;
          options.parallel_threshold = 0;
          Field c = r.clone();
          compile(p, options)(args(c));
          EXPECT_TRUE(same_bits(r, c, "o")) << mesh.name << " nk " << levels << " " << to_string(layout) << " threads " << threads;
        }
        Field e = r.clone();
        driver::compile_cuda_emulated(p, testing_support::cpu_options(layout))(args(e));
        EXPECT_TRUE(same_bits(r, e, "o (emulated CUDA)")) << mesh.name << " nk " << levels << " " << to_string(layout);
      }
    }
  }
}

// Fuzzer seed 23400215 (a crash, not shrunk: the process died): a value read at a dynamic offset
// along K, in a horizontal-fastest kernel whose inner loop runs along I. The offset and the load
// through it do not change along I, and the loop-invariant split moved both above the offset's
// bounds check (which clamps the offset on the line of its `if`): an offset of 2^31 read past the
// field and crashed. The call must be the reference's DomainError, every output unchanged; CPU and
// CUDA alike (both hoist with the same split).
TEST(FuzzRegressions, AnOffsetOutsideTheFieldIsCheckedBeforeItIsRead) {
  ProgramBuilder pb("dynamic_offset_along_k");
  auto col = pb.field("col", {K}, DType::float64), a = pb.field("a", {I, K}, DType::float64);
  auto off = pb.field("off", {K}, DType::int32), o = pb.field("o", {I, K}, DType::float64);
  auto ni = pb.scalar("ni", DType::int32), nk = pb.scalar("nk", DType::int32);
  pb.call("s", col(K + off) + a, {o}, {{I, 0, ni}, {K, 0, nk}});
  const ir::Program p = pb.build();
  const int n_i = 37, n_k = 5;  // over a vector width and a remainder along I
  for (Layout layout : {Layout::vertical_fastest, Layout::horizontal_fastest}) {
    SCOPED_TRACE(to_string(layout));
    Field fcol({K}, DType::float64, {n_k}, {}, layout), foff({K}, DType::int32, {n_k}, {}, layout);
    Field fa({I, K}, DType::float64, {n_i, n_k}, {}, layout);
    for (int k = 0; k < n_k; ++k) fcol.at<double>({k}) = 0.5 + k;
    for (std::int64_t n = 0; n < fa.size(); ++n) fa.set_from_double(n, 0.25 * static_cast<double>(n));
    Field r({I, K}, DType::float64, {n_i, n_k}, {}, layout);
    auto args = [&](Field& out) {
      return Arguments().field("col", fcol).field("a", fa).field("off", foff).field("o", out).scalar("ni", n_i).scalar("nk", n_k);
    };
    const auto run_all = [&](Field& out) {  // reference, CPU with 1 and 3 threads, emulated CUDA
      std::vector<std::string> outcomes;
      std::vector<Field> results;
      for (int path = 0; path < 4; ++path) {
        Field x = out.clone();
        try {
          if (path == 0) {
            run_reference(p, args(x));
          } else if (path < 3) {
            CompileOptions options = testing_support::cpu_options(layout);
            options.num_threads = path == 1 ? 1 : 3;
            options.parallel_threshold = 0;
            compile(p, options)(args(x));
          } else {
            driver::compile_cuda_emulated(p, testing_support::cpu_options(layout))(args(x));
          }
          outcomes.push_back("accepted");
        } catch (const DomainError&) {
          outcomes.push_back("DomainError");
        }
        results.push_back(std::move(x));
      }
      return std::make_pair(std::move(outcomes), std::move(results));
    };
    // In range: off = -k reads col at level 0 (independent: col[0] + a).
    for (int k = 0; k < n_k; ++k) foff.at<std::int32_t>({k}) = -k;
    auto [good, good_results] = run_all(r);
    EXPECT_EQ(good, std::vector<std::string>(4, "accepted"));
    for (int i = 0; i < n_i; ++i)
      for (int k = 0; k < n_k; ++k) EXPECT_EQ(good_results[0].at<double>({i, k}), 0.5 + fa.at<double>({i, k}));
    for (std::size_t n = 1; n < good_results.size(); ++n) EXPECT_TRUE(same_bits(good_results[0], good_results[n], "o"));
    // Far outside: each level's offset lands 2^31 - 3 levels up.
    for (int k = 0; k < n_k; ++k) foff.at<std::int32_t>({k}) = 2147483645 - k;
    for (std::int64_t n = 0; n < r.size(); ++n) r.set_from_double(n, -1.0 - static_cast<double>(n));
    auto [bad, bad_results] = run_all(r);
    EXPECT_EQ(bad, std::vector<std::string>(4, "DomainError"));
    for (const Field& x : bad_results) EXPECT_TRUE(same_bits(r, x, "o (unchanged)"));
  }
}

// Fuzzer seed 80 under UBSan (the ASan build of the CTest seeds; a bool loaded with value 165, a
// guard byte): a field read at a dynamic offset along K whose extent along K is empty (the
// harness cuts a mesh field by up to three points, here both of nk = 2 levels). Every such read
// fails its in-kernel check, whose fallback, the box's first level, is no element either: the
// load read before the field's memory. The reference refuses the call; so must every backend,
// reading nothing. The field's data is an unreadable page: any read faults.
TEST(FuzzRegressions, AFieldWithoutLevelsIsNeverReadAtADynamicOffset) {
  ProgramBuilder pb("dynamic_offset_into_nothing");
  auto col = pb.field("col", {K}, DType::float64), a = pb.field("a", {I, K}, DType::float64);
  auto off = pb.field("off", {K}, DType::int32), o = pb.field("o", {I, K}, DType::float64);
  auto ni = pb.scalar("ni", DType::int32), nk = pb.scalar("nk", DType::int32);
  pb.call("s", col(K + off) + a, {o}, {{I, 0, ni}, {K, 0, nk}});
  const ir::Program p = pb.build();
  const int n_i = 19, n_k = 2;
  const long page = sysconf(_SC_PAGESIZE);
  void* unreadable = mmap(nullptr, static_cast<std::size_t>(page), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(unreadable, MAP_FAILED);
  for (Layout layout : {Layout::vertical_fastest, Layout::horizontal_fastest}) {
    SCOPED_TRACE(to_string(layout));
    Field fcol = Field::view(unreadable, {K}, DType::float64, {0}, {1}, {2});  // levels [2, 2): none
    Field foff({K}, DType::int32, {n_k}, {}, layout), fa({I, K}, DType::float64, {n_i, n_k}, {}, layout);
    for (std::int64_t n = 0; n < fa.size(); ++n) fa.set_from_double(n, 0.25 * static_cast<double>(n));
    Field r({I, K}, DType::float64, {n_i, n_k}, {}, layout);
    for (std::int64_t n = 0; n < r.size(); ++n) r.set_from_double(n, -1.0 - static_cast<double>(n));
    for (int path = 0; path < 4; ++path) {  // reference, CPU with 1 and 3 threads, emulated CUDA
      SCOPED_TRACE(path);
      Field x = r.clone();
      const Arguments args =
          Arguments().field("col", fcol).field("a", fa).field("off", foff).field("o", x).scalar("ni", n_i).scalar("nk", n_k);
      const auto call = [&] {
        if (path == 0) {
          run_reference(p, args);
        } else if (path < 3) {
          CompileOptions options = testing_support::cpu_options(layout);
          options.num_threads = path == 1 ? 1 : 3;
          options.parallel_threshold = 0;
          compile(p, options)(args);
        } else {
          driver::compile_cuda_emulated(p, testing_support::cpu_options(layout))(args);
        }
      };
      EXPECT_THROW(call(), DomainError);
      EXPECT_TRUE(same_bits(r, x, "o (unchanged)"));
    }
  }
  munmap(unreadable, static_cast<std::size_t>(page));
}

// Fuzzer seed 186 (shrunk, class 26): one element of a choice between two tuples, where the
// element not read holds a scan. The selection kept the whole tuple `where` with an index on
// it; the lowering finds a kernel's scans by walking what is read, so the unread scan was never
// split off into its own kernel and compile() failed with an InternalError ("a scan that is not
// its root"). A tuple `where` now selects element by element, as concat_where always did, and
// the element nobody reads is dropped whole.
TEST(FuzzRegressions, AnUnreadElementOfATupleChoiceHoldingAScan) {
  ProgramBuilder pb("tuple_choice_scan");
  auto a = pb.field("a", {I, K}, DType::float64), g = pb.field("g", {I, K}, DType::float32);
  auto col = pb.field("col", {K}, DType::float64), o = pb.field("o", {I, K}, DType::float64);
  auto nk = pb.scalar("nk", DType::int32);
  const Expr sweep = scan("sweep", ScanDirection::backward, {Scalar(0.0f)},
                          [](const Expr& c, const std::vector<Expr>& in) { return c * 0.5 + in[0]; }, {g});
  const Expr choice = where(a > 0.0, make_tuple({a, broadcast(1.0, {K})}), make_tuple({col, astype(sweep, DType::float64)}));
  pb.call("first", choice[0], {o}, {{I, 0, 5}, {K, 0, nk}});
  pb.call("second", choice[1] * 2.0, {a}, {{I, 1, 4}, {K, 0, nk}});  // the scan, read in another call
  const ir::Program p = pb.build();
  for (Layout layout : {Layout::vertical_fastest, Layout::horizontal_fastest}) {
    Field fa({I, K}, DType::float64, {5, 6}, {}, layout), fg({I, K}, DType::float32, {5, 6}, {}, layout);
    Field fcol({K}, DType::float64, {6}, {}, layout), fo({I, K}, DType::float64, {5, 6}, {}, layout);
    for (int i = 0; i < 5; ++i)
      for (int k = 0; k < 6; ++k) {
        fa.at<double>({i, k}) = (i + k) % 3 - 1.0;  // both signs and zero
        fg.at<float>({i, k}) = 0.25f * static_cast<float>(i - k);
        fo.at<double>({i, k}) = -7.0;
      }
    for (int k = 0; k < 6; ++k) fcol.at<double>({k}) = 10.0 + k;
    auto args = [&](Field& xa, Field& xo) {
      return Arguments().field("a", xa).field("g", fg).field("col", fcol).field("o", xo).scalar("nk", 6);
    };
    Field ra = fa.clone(), ro = fo.clone();
    run_reference(p, args(ra, ro));
    // The first call by hand: a where a > 0, else col (the scan is not read there).
    for (int i = 0; i < 5; ++i)
      for (int k = 0; k < 6; ++k)
        EXPECT_EQ(ro.at<double>({i, k}), fa.at<double>({i, k}) > 0 ? fa.at<double>({i, k}) : 10.0 + k);
    for (int threads : {1, 3}) {
      CompileOptions options = testing_support::cpu_options(layout);
      options.num_threads = threads;
      options.parallel_threshold = 0;
      Field ca = fa.clone(), co = fo.clone();
      compile(p, options)(args(ca, co));
      EXPECT_TRUE(same_bits(ro, co, "o"));
      EXPECT_TRUE(same_bits(ra, ca, "a"));
    }
    Field ea = fa.clone(), eo = fo.clone();
    driver::compile_cuda_emulated(p, testing_support::cpu_options(layout))(args(ea, eo));
    EXPECT_TRUE(same_bits(ro, eo, "o (CUDA kernels, emulated)"));
    EXPECT_TRUE(same_bits(ra, ea, "a (CUDA kernels, emulated)"));
  }
}

// Fuzzer seeds 24300112 and 24400132 (shrunk), class 29, a harness defect: where(!flag,
// fc(V2C[5]), 1) with flag a static scalar (true). Without static scalars a fixed-index shift
// through a missing neighbour is refused whichever branch is taken (where reads both); with flag
// static the branch is folded away and its requirements with it (docs/language.md, static
// scalars), so the specialised program accepts the call, as the reference backend given the same
// static scalars does. The harness compared the folded instance with the plain reference.
TEST(FuzzRegressions, AFoldedBranchTakesItsNeighbourChecksWithIt) {
  const Dimension Vertex = horizontal_dim("Vertex"), Cell = horizontal_dim("Cell");
  const Connectivity V2C = make_connectivity("V2C", Vertex, Cell, 6);
  const Mesh mesh = make_bounded_mesh(2, 3);  // V2C[5] of vertex 3 is -1
  ASSERT_EQ(mesh.table("V2C").data.at(3 * 6 + 5), -1);
  ProgramBuilder pb("folded_branch");
  auto fc = pb.field("fc", {Cell, K}, DType::float64), o = pb.field("o", {Vertex, K}, DType::float64);
  auto nv = pb.scalar("nv", DType::int32);
  auto flag = pb.scalar("flag", DType::boolean);
  pb.call("s", where(!flag, fc(V2C[5]), broadcast(1.0, {Vertex, K})), {o}, {{K, 0, 2}, {Vertex, 0, nv}});
  const ir::Program p = pb.build();
  Field ff({Cell, K}, DType::float64, {mesh.n_cells, 2});
  ff.fill(0.5);
  auto call = [&](CompiledProgram c, Field& out) {
    c(Arguments().field("fc", ff).field("o", out).scalar("nv", static_cast<std::int32_t>(mesh.n_vertices))
          .scalar("flag", true).connectivity("V2C", mesh.table("V2C")));
  };
  auto fresh = [&] {
    Field out({Vertex, K}, DType::float64, {mesh.n_vertices, 2});
    out.fill(-7.0);
    return out;
  };
  // Without static scalars: refused, the output untouched.
  Field refused = fresh();
  EXPECT_THROW(run_reference(p, Arguments().field("fc", ff).field("o", refused)
                                    .scalar("nv", static_cast<std::int32_t>(mesh.n_vertices)).scalar("flag", true)
                                    .connectivity("V2C", mesh.table("V2C"))),
               DomainError);
  EXPECT_THROW(call(compile(p, testing_support::cpu_options()), refused), DomainError);
  for (int v = 0; v < mesh.n_vertices; ++v)
    for (int k = 0; k < 2; ++k) EXPECT_EQ(refused.at<double>({v, k}), -7.0);
  // Specialised for flag = true: o = 1 at every vertex, in the reference backend and compiled.
  CompileOptions ro;
  ro.backend = Backend::reference;
  ro.static_scalars = {{"flag", Scalar(true)}};
  Field expected = fresh();
  call(compile(p, ro), expected);
  for (int v = 0; v < mesh.n_vertices; ++v)
    for (int k = 0; k < 2; ++k) EXPECT_EQ(expected.at<double>({v, k}), 1.0) << "vertex " << v << ", k " << k;
  for (int threads : {1, 3}) {
    CompileOptions folded = testing_support::cpu_options();
    folded.static_scalars = ro.static_scalars;
    folded.num_threads = threads;
    folded.parallel_threshold = 0;
    Field got = fresh();
    call(compile(p, folded), got);
    EXPECT_TRUE(same_bits(expected, got, fmt::format("o, {} thread(s)", threads)));
  }
  CompileOptions emulated = testing_support::cpu_options();
  emulated.static_scalars = ro.static_scalars;
  Field got = fresh();
  call(driver::compile_cuda_emulated(p, emulated), got);
  EXPECT_TRUE(same_bits(expected, got, "o (CUDA kernels, emulated)"));
}

// The other requirement a dead branch takes with it: the extent of a field only it reads. b is
// read at I + 1 by the branch flag folds away, so b may be as short as the domain.
TEST(FuzzRegressions, AFoldedBranchTakesItsFieldExtentsWithIt) {
  ProgramBuilder pb("folded_extent");
  auto a = pb.field("a", {I, K}, DType::float64), b = pb.field("b", {I, K}, DType::float64);
  auto o = pb.field("o", {I, K}, DType::float64);
  auto flag = pb.scalar("flag", DType::boolean);
  pb.call("s", where(flag, a * 2.0, b(I + 1)), {o}, {{I, 0, 5}, {K, 0, 3}});
  const ir::Program p = pb.build();
  Field fa({I, K}, DType::float64, {5, 3}), fb({I, K}, DType::float64, {5, 3});  // b one point short for I + 1
  for (int i = 0; i < 5; ++i)
    for (int k = 0; k < 3; ++k) fa.at<double>({i, k}) = i + 0.25 * k;
  fb.fill(3.0);
  auto args = [&](Field& out) { return Arguments().field("a", fa).field("b", fb).field("o", out).scalar("flag", true); };
  Field refused({I, K}, DType::float64, {5, 3});
  EXPECT_THROW(run_reference(p, args(refused)), DomainError);
  EXPECT_THROW(compile(p, testing_support::cpu_options())(args(refused)), DomainError);
  for (Backend backend : {Backend::reference, Backend::cpu}) {
    CompileOptions folded = backend == Backend::cpu ? testing_support::cpu_options() : CompileOptions{};
    folded.backend = backend;
    folded.static_scalars = {{"flag", Scalar(true)}};
    Field out({I, K}, DType::float64, {5, 3});
    compile(p, folded)(args(out));
    for (int i = 0; i < 5; ++i)
      for (int k = 0; k < 3; ++k) EXPECT_EQ(out.at<double>({i, k}), 2.0 * (i + 0.25 * k)) << to_string(backend);
  }
}

}  // namespace
}  // namespace fieldflow
