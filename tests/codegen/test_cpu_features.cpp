// Language features through the compiled CPU backend, each checked against the reference
// executor bit for bit, plus the call-time errors the compiled path must raise like the reference.
#include <gtest/gtest.h>
#include <fmt/format.h>

#include <cmath>
#include <functional>
#include <cstring>
#include <limits>

#include "codegen/cpu/generate_cpu.h"
#include "fieldflow/dsl.h"
#include "fieldflow/errors.h"
#include "fieldflow/mesh.h"
#include "passes/pipeline.h"
#include "support/backend_harness.h"

namespace fieldflow {
namespace {

using testing_support::same_bits;

const Dimension I = horizontal_dim("I"), J = horizontal_dim("J"), K = vertical_dim("K");
const Dimension Vertex = horizontal_dim("Vertex"), Edge = horizontal_dim("Edge");
const Connectivity E2V = make_connectivity("E2V", Edge, Vertex, 2);
const Connectivity V2E = make_connectivity("V2E", Vertex, Edge, 6);
const Connectivity E2C = make_connectivity("E2C", Edge, horizontal_dim("Cell"), 2);

Field filled(std::vector<Dimension> dims, DType t, std::vector<std::int64_t> shape, std::vector<std::int64_t> origin = {},
             double scale = 0.37, Layout layout = Layout::vertical_fastest) {
  Field f(std::move(dims), t, std::move(shape), std::move(origin), layout);
  for (std::int64_t i = 0; i < f.size(); ++i) f.set_from_double(i, std::sin(scale * static_cast<double>(i) + 0.3) * 3);
  return f;
}

// The same values in another memory layout.
Field with_layout(const Field& f, Layout layout) {
  Field g(f.dims(), f.dtype(), f.shape(), f.origin(), layout);
  std::vector<std::int64_t> idx(f.dims().size(), 0);
  for (std::int64_t n = 0; n < f.size(); ++n) {
    std::int64_t rest = n, src = 0, dst = 0;
    for (std::size_t a = 0; a < idx.size(); ++a) {
      idx[a] = rest % f.shape()[a];
      rest /= f.shape()[a];
      src += idx[a] * f.strides()[a];
      dst += idx[a] * g.strides()[a];
    }
    std::memcpy(static_cast<char*>(g.data()) + dst * size_of(f.dtype()),
                static_cast<const char*>(f.data()) + src * size_of(f.dtype()), size_of(f.dtype()));
  }
  return g;
}

// Runs p on copies of `fields` with the reference and compiled backends and compares every field.
void expect_backends_agree(const ir::Program& p, std::map<std::string, Field>& fields,
                           const std::map<std::string, Scalar>& scalars = {},
                           const std::map<std::string, const NeighborTable*>& tables = {},
                           Layout layout = Layout::vertical_fastest, int threads = 0) {
  std::map<std::string, Field> ref_fields, cpu_fields;
  for (auto& [n, f] : fields) {
    ref_fields.emplace(n, with_layout(f, layout));
    cpu_fields.emplace(n, with_layout(f, layout));
  }
  auto args_of = [&](std::map<std::string, Field>& fs) {
    Arguments a;
    for (auto& [n, f] : fs) a.field(n, f);
    for (auto& [n, s] : scalars) a.scalar(n, s);
    for (auto& [n, t] : tables) a.connectivity(n, *t);
    return a;
  };
  run_reference(p, args_of(ref_fields));
  CompileOptions options = testing_support::cpu_options(layout);
  if (threads > 0) {
    options.num_threads = threads;
    options.parallel_threshold = 0;
  }
  // Each loop form (LoopForm) where the module has two: the same module, a call field apart.
  for (const LoopForm form : {LoopForm::scalar, LoopForm::vector}) {
    options.loop_form = form;
    std::map<std::string, Field> given;
    for (auto& [n, f] : cpu_fields) given.emplace(n, f.clone());
    CompiledProgram compiled = compile(p, options);
    compiled(args_of(given));
    for (auto& [n, f] : ref_fields)
      EXPECT_TRUE(same_bits(f, given.at(n), p.name + "." + n)) << to_string(form) << " loop form";
    if (!codegen::has_loop_forms(compiled.generated_source())) break;
  }
}

TEST(CpuFeatures, ForwardAndBackwardScansWithTupleCarry) {
  ProgramBuilder pb("scans");
  auto a = pb.field("a", {I, K}, DType::float64);
  auto out = pb.field("out", {I, K}, DType::float64);
  auto nk = pb.scalar("nk", DType::int32);
  auto fwd = scan("fwd", ScanDirection::forward, {Scalar(0.0), Scalar(1.0)},
                  [](const Expr& c, const std::vector<Expr>& in) { return make_tuple({c[0] + in[0], c[1] * 0.5 + in[0]}); },
                  {a});
  auto bwd = scan("bwd", ScanDirection::backward, {Scalar(0.0)},
                  [](const Expr& c, const std::vector<Expr>& in) { return c * 0.9 + in[0] - in[1]; }, {fwd[0], fwd[1]});
  pb.call("solve", bwd, {out}, {{I, 0, 5}, {K, 1, nk}});
  std::map<std::string, Field> f;
  f.emplace("a", filled({I, K}, DType::float64, {5, 9}));
  f.emplace("out", filled({I, K}, DType::float64, {5, 9}, {}, 0.11));
  expect_backends_agree(pb.build(), f, {{"nk", Scalar(8)}});
  expect_backends_agree(pb.build(), f, {{"nk", Scalar(8)}}, {}, Layout::horizontal_fastest);
}

TEST(CpuFeatures, InOutShiftedReadGetsDoubleBuffer) {
  // w = w + w(K+1): every point must see the old w, never a value written by the same call.
  ProgramBuilder pb("inout");
  auto w = pb.field("w", {I, K}, DType::float64);
  auto nk = pb.scalar("nk", DType::int32);
  pb.call("smooth", w + w(K + 1) + w(I - 1), {w}, {{I, 1, 6}, {K, 0, nk - 1}});
  std::map<std::string, Field> f;
  f.emplace("w", filled({I, K}, DType::float64, {6, 7}));
  expect_backends_agree(pb.build(), f, {{"nk", Scalar(7)}});
}

TEST(CpuFeatures, ConcatWhereDynamicOffsetsFloat32AndIntegerMath) {
  ProgramBuilder pb("mixed");
  auto x = pb.field("x", {I, K}, DType::float32);
  auto off = pb.field("off", {I, K}, DType::int32);
  auto n = pb.field("n", {I, K}, DType::int32);
  auto out = pb.field("out", {I, K}, DType::float32);
  auto iout = pb.field("iout", {I, K}, DType::int32);
  auto nk = pb.scalar("nk", DType::int32);
  auto top = concat_where(K == 0, x, x(K - 1));
  auto v = concat_where(K >= nk - 1, top, 0.5f * (x(K + 1) + top)) + sqrt(abs(x)) + exp(x * 0.1) + power(abs(x), x * 0.0 + 1.5);
  pb.call("mixed", make_tuple({v + x(K + off), n / (n - 2) + abs(n) * 3}), {out, iout}, {{I, 0, 4}, {K, 0, nk}});
  std::map<std::string, Field> f;
  f.emplace("x", filled({I, K}, DType::float32, {4, 6}));
  Field o({I, K}, DType::int32, {4, 6});
  for (std::int64_t i = 0; i < o.size(); ++i) o.set_from_double(i, (i * 7) % 3 - (i % 6 == 5 ? 1 : 0));
  // Offsets keep k + off inside [0, 6).
  for (std::int64_t i = 0; i < o.size(); ++i) {
    const std::int64_t k = i % 6;
    o.set_from_double(i, k + (i % 3) - 1 >= 0 && k + (i % 3) - 1 < 6 ? (i % 3) - 1 : 0);
  }
  f.emplace("off", std::move(o));
  Field nn({I, K}, DType::int32, {4, 6});
  for (std::int64_t i = 0; i < nn.size(); ++i) nn.set_from_double(i, static_cast<double>(i % 5));
  f.emplace("n", std::move(nn));
  f.emplace("out", filled({I, K}, DType::float32, {4, 6}));
  f.emplace("iout", Field({I, K}, DType::int32, {4, 6}));
  expect_backends_agree(pb.build(), f, {{"nk", Scalar(6)}});
}

TEST(CpuFeatures, NeighbourReductionsChainedShiftsAndSkipValues) {
  const Mesh mesh = make_bounded_mesh(5, 4);
  ProgramBuilder pb("mesh");
  auto u = pb.field("u", {Vertex, K}, DType::float64);
  auto w = pb.field("w", {Edge, E2V.local}, DType::float64);
  auto out_e = pb.field("out_e", {Edge, K}, DType::float64);
  auto out_v = pb.field("out_v", {Vertex, K}, DType::float64);
  auto ne = pb.scalar("ne", DType::int32), nv = pb.scalar("nv", DType::int32);
  pb.call("edge", neighbor_sum(u(E2V) * w, E2V) + max_over(u(E2V), E2V), {out_e}, {{Edge, 0, ne}, {K, 0, 3}});
  // Chained: vertex -> its edges -> their first vertex; missing V2E entries (-1) are skipped.
  pb.call("vertex", neighbor_sum(u(E2V[0])(V2E), V2E) + min_over(out_e(V2E), V2E), {out_v}, {{Vertex, 0, nv}, {K, 0, 3}});
  std::map<std::string, Field> f;
  f.emplace("u", filled({Vertex, K}, DType::float64, {mesh.n_vertices, 3}));
  f.emplace("w", filled({Edge, E2V.local}, DType::float64, {mesh.n_edges, 2}, {}, 0.7));
  f.emplace("out_e", filled({Edge, K}, DType::float64, {mesh.n_edges, 3}));
  f.emplace("out_v", filled({Vertex, K}, DType::float64, {mesh.n_vertices, 3}));
  const std::map<std::string, Scalar> s{{"ne", Scalar(static_cast<std::int32_t>(mesh.n_edges))},
                                        {"nv", Scalar(static_cast<std::int32_t>(mesh.n_vertices))}};
  const std::map<std::string, const NeighborTable*> t{{"E2V", &mesh.table("E2V")}, {"V2E", &mesh.table("V2E")}};
  expect_backends_agree(pb.build(), f, s, t);
  expect_backends_agree(pb.build(), f, s, t, Layout::horizontal_fastest);
}

// An edge value times the edge's orientation, summed around a vertex (the diffusion / nabla
// shape): on rows whose orientations are all +-1 the compiled kernel takes a copy of the level
// loop with (flux * w) * sign reassociated to flux * (w * sign); on the other rows it must keep
// the program's order. Both kinds of rows, overflowing and subnormal products included, equal the
// reference bit for bit, on 1 and 3 threads (the parallel path), with a level count that leaves a
// vector remainder.
// out = sum over V2E of ((u(E2V[1]) - u(E2V[0])) w) sign over vertices [0, nv) and nk levels: edge
// fluxes through chained tables, times an orientation-like factor per row slot.
ir::Program divergence_of_fluxes(const std::string& name, std::int64_t nk) {
  ProgramBuilder pb(name);
  auto u = pb.field("u", {Vertex, K}, DType::float64);
  auto w = pb.field("w", {Edge}, DType::float64);
  auto sign = pb.field("sign", {Vertex, V2E.local}, DType::float64);
  auto out = pb.field("out", {Vertex, K}, DType::float64);
  auto nv = pb.scalar("nv", DType::int32);
  const Expr flux = named("flux", (u(E2V[1]) - u(E2V[0])) * w);
  pb.call("div", neighbor_sum(flux(V2E) * sign, V2E), {out}, {{Vertex, 0, nv}, {K, 0, nk}});
  return pb.build();
}

TEST(CpuFeatures, OrientationProductsReassociateOnlyWhereTheFactorIsPlusMinusOne) {
  const Mesh mesh = make_torus_mesh(6, 5);  // every V2E neighbour present: the full-row copy
  const std::int64_t nk = 19;
  const ir::Program program = divergence_of_fluxes("orientation", nk);
  std::map<std::string, Field> f;
  f.emplace("u", filled({Vertex, K}, DType::float64, {mesh.n_vertices, nk}));
  Field& uf = f.at("u");
  uf.at<double>({0, 3}) = 1e300;  // (u - u') * w overflows: +-inf either way
  uf.at<double>({1, 4}) = 3e-310;  // subnormal differences
  uf.at<double>({2, 4}) = -2e-310;
  f.emplace("w", filled({Edge}, DType::float64, {mesh.n_edges}, {}, 0.7));
  f.at("w").at<double>({0}) = 1e10;
  Field sg({Vertex, V2E.local}, DType::float64, {mesh.n_vertices, 6});
  // Rows 0-19: the mesh's orientations (+-1). Rows 20-: one factor that is not +-1 per row.
  const std::vector<double> not_unit = {0.3, 0.0, -0.0, 2.0, 1.0000000000000002, -0.7};
  for (std::int64_t v = 0; v < mesh.n_vertices; ++v)
    for (int q = 0; q < 6; ++q)
      sg.at<double>({v, q}) = v >= 20 && q == v % 6 ? not_unit[v % not_unit.size()] : mesh.edge_orientation_v2e[v * 6 + q];
  // The data can tell the two orders apart where the factor is not +-1.
  bool orders_differ = false;
  const Field& wf = f.at("w");
  for (std::int64_t v = 20; v < mesh.n_vertices; ++v)
    for (std::int64_t k = 0; k < nk; ++k) {
      const int q = static_cast<int>(v % 6);
      const std::int32_t e = mesh.table("V2E")(v, q);
      const double t = uf.at<double>({mesh.table("E2V")(e, 1), k}) - uf.at<double>({mesh.table("E2V")(e, 0), k});
      const double a = wf.at<double>({e}), b = sg.at<double>({v, q});
      if ((t * a) * b != t * (a * b)) orders_differ = true;
    }
  ASSERT_TRUE(orders_differ) << "the test data cannot tell a wrong reassociation from a right one";
  f.emplace("sign", std::move(sg));
  f.emplace("out", filled({Vertex, K}, DType::float64, {mesh.n_vertices, nk}));
  const std::map<std::string, Scalar> s{{"nv", Scalar(static_cast<std::int32_t>(mesh.n_vertices))}};
  const std::map<std::string, const NeighborTable*> t{{"E2V", &mesh.table("E2V")}, {"V2E", &mesh.table("V2E")}};
  for (int threads : {1, 3}) {
    SCOPED_TRACE(threads);
    expect_backends_agree(program, f, s, t, Layout::vertical_fastest, threads);
  }
}

// Horizontal-fastest mesh kernels run their elements in blocks, the level-invariant part (table
// walks, masks, weights) once per element of a block, then the levels over the block
// (generate_cpu.cpp, element_blocks). A divergence of fluxes through V2E and E2V (chained tables,
// orientation products) on meshes of 280 vertices: several blocks and a remainder, spread over 1
// and 3 threads. On the torus every neighbour is present; the bounded mesh's blocks hold runs of
// elements with and without missing neighbours (its boundary rows). Vertices 200 on have one
// factor that is not +-1 per row, so the later blocks take the copy without the folded products
// and the earlier ones the copy with them. Vertical-fastest kernels keep their loops.
TEST(CpuFeatures, HorizontalFastestMeshKernelsRunInElementBlocks) {
  const std::int64_t levels = 3;
  const ir::Program program = divergence_of_fluxes("blocks", levels);
  passes::PipelineOptions hf;
  hf.layout = Layout::horizontal_fastest;
  const std::string blocked = codegen::generate_cpu_source(passes::lower(program, hf));
  EXPECT_NE(blocked.find("blk_run_kind_[run_] != 0"), std::string::npos) << blocked;
  // A block of one run (every block on the torus below) takes the copy over the whole block.
  EXPECT_NE(blocked.find("if (blk_runs_ == 1 && blk_run_kind_[0] != 0)"), std::string::npos) << blocked;
  EXPECT_NE(blocked.find("if (blk_units_)"), std::string::npos) << blocked;
  EXPECT_EQ(codegen::generate_cpu_source(passes::lower(program)).find("blk_"), std::string::npos);
  {  // level-invariant loads, but from no table: nothing worth a block's arrays
    ProgramBuilder pb("no_table");
    auto a = pb.field("a", {Vertex, K}, DType::float64);
    auto b = pb.field("b", {Vertex}, DType::float64);
    auto o = pb.field("o", {Vertex, K}, DType::float64);
    auto nv = pb.scalar("nv", DType::int32);
    pb.call("scale", a * b, {o}, {{Vertex, 0, nv}, {K, 0, levels}});
    EXPECT_EQ(codegen::generate_cpu_source(passes::lower(pb.build(), hf)).find("blk_"), std::string::npos);
  }
  for (const bool bounded : {false, true}) {
    const Mesh mesh = bounded ? make_bounded_mesh(20, 14) : make_torus_mesh(20, 14);
    SCOPED_TRACE(bounded ? "bounded mesh" : "torus");
    ASSERT_GT(mesh.n_vertices, 256);
    std::map<std::string, Field> f;
    f.emplace("u", filled({Vertex, K}, DType::float64, {mesh.n_vertices, levels}));
    f.emplace("w", filled({Edge}, DType::float64, {mesh.n_edges}, {}, 0.7));
    Field sg({Vertex, V2E.local}, DType::float64, {mesh.n_vertices, 6});
    const std::vector<double> not_unit = {0.3, 0.0, -0.0, 2.0, 1.0000000000000002, -0.7};
    for (std::int64_t v = 0; v < mesh.n_vertices; ++v)
      for (int q = 0; q < 6; ++q)
        sg.at<double>({v, q}) = v >= 200 && q == v % 6 ? not_unit[v % not_unit.size()]
                                                       : mesh.edge_orientation_v2e[v * 6 + q];
    f.emplace("sign", std::move(sg));
    f.emplace("out", filled({Vertex, K}, DType::float64, {mesh.n_vertices, levels}));
    const std::map<std::string, Scalar> s{{"nv", Scalar(static_cast<std::int32_t>(mesh.n_vertices))}};
    const std::map<std::string, const NeighborTable*> t{{"E2V", &mesh.table("E2V")}, {"V2E", &mesh.table("V2E")}};
    for (int threads : {1, 3}) {
      SCOPED_TRACE(threads);
      expect_backends_agree(program, f, s, t, Layout::horizontal_fastest, threads);
    }
  }
}

// Sums of a field at both ends of each edge around a vertex (fvm_nabla's edge average): where
// every edge of a row ends at one vertex, a copy of the level loop loads that column once and
// adds it first. The shared end is E2V[0] of some edges and E2V[1] of others (the sum commutes);
// rows with one edge rewired to an edge away from the vertex take another copy. Vertical-fastest
// on a small torus (rows 20 on rewired); horizontal-fastest, where the copy is chosen per run of
// elements in a block, on meshes of several blocks with rewired rows scattered among the others
// and, on the bounded mesh, rows with missing neighbours too. Infinities, signed zeros and
// subnormals in the data; 1 and 3 threads.
TEST(CpuFeatures, AColumnSharedByEveryEdgeOfARowIsLoadedOnce) {
  const std::int64_t nk = 19;
  ProgramBuilder pb("shared_column");
  auto u = pb.field("u", {Vertex, K}, DType::float64);
  auto w = pb.field("w", {Edge}, DType::float64);
  auto out = pb.field("out", {Vertex, K}, DType::float64);
  auto nv = pb.scalar("nv", DType::int32);
  const Expr average = named("average", 0.5 * (u(E2V[0]) + u(E2V[1])) * w);
  pb.call("around", neighbor_sum(average(V2E), V2E), {out}, {{Vertex, 0, nv}, {K, 0, nk}});
  const ir::Program program = pb.build();
  const auto check = [&](const Mesh& mesh, Layout layout, const std::function<bool(std::int64_t)>& rewired) {
    const NeighborTable& e2v = mesh.table("E2V");
    NeighborTable v2e = mesh.table("V2E");
    bool first_end = false, second_end = false;
    for (std::int64_t v = 0; v < mesh.n_vertices; ++v)
      for (int q = 0; q < 6; ++q)
        if (const std::int32_t e = v2e(v, q); e >= 0 && !rewired(v)) (e2v(e, 0) == v ? first_end : second_end) = true;
    ASSERT_TRUE(first_end && second_end) << "the shared column is the first end of some edges and the second of others";
    for (std::int64_t v = 0; v < mesh.n_vertices; ++v) {
      if (!rewired(v)) continue;
      std::int32_t& e = v2e.data[v * 6 + v % 6];
      do e = (std::max(e, 0) + 7) % static_cast<std::int32_t>(mesh.n_edges);
      while (e2v(e, 0) == v || e2v(e, 1) == v);
    }
    std::map<std::string, Field> f;
    f.emplace("u", filled({Vertex, K}, DType::float64, {mesh.n_vertices, nk}));
    Field& uf = f.at("u");
    uf.at<double>({0, 2}) = std::numeric_limits<double>::infinity();
    uf.at<double>({1, 2}) = -std::numeric_limits<double>::infinity();  // inf + -inf on their edge
    uf.at<double>({3, 5}) = -0.0;
    uf.at<double>({4, 5}) = 0.0;
    uf.at<double>({5, 6}) = 3e-310;
    uf.at<double>({6, 6}) = -2e-310;
    f.emplace("w", filled({Edge}, DType::float64, {mesh.n_edges}, {}, 0.7));
    f.emplace("out", filled({Vertex, K}, DType::float64, {mesh.n_vertices, nk}));
    const std::map<std::string, Scalar> s{{"nv", Scalar(static_cast<std::int32_t>(mesh.n_vertices))}};
    const std::map<std::string, const NeighborTable*> t{{"E2V", &e2v}, {"V2E", &v2e}};
    for (int threads : {1, 3}) {
      SCOPED_TRACE(threads);
      expect_backends_agree(program, f, s, t, layout, threads);
    }
    const std::string source = compile(program, testing_support::cpu_options(layout)).generated_source();
    EXPECT_NE(source.find("one column shared by every pair"), std::string::npos) << source;
  };
  {
    SCOPED_TRACE("vertical_fastest");
    check(make_torus_mesh(6, 5), Layout::vertical_fastest, [](std::int64_t v) { return v >= 20; });
  }
  for (const bool bounded : {false, true}) {
    SCOPED_TRACE(bounded ? "horizontal_fastest, bounded mesh" : "horizontal_fastest, torus");
    const Mesh mesh = bounded ? make_bounded_mesh(20, 14) : make_torus_mesh(20, 14);
    ASSERT_GT(mesh.n_vertices, 256);
    check(mesh, Layout::horizontal_fastest, [](std::int64_t v) { return v % 11 == 3 || (v >= 140 && v < 150); });
  }
}

// `program` (x -> out over {I, J, K} of `shape`) in both layouts on 3 threads: equal to the
// reference, and its generated code has a loop copy without boundary branches.
void expect_unswitched_and_agreeing(const ir::Program& program, const std::vector<std::int64_t>& shape,
                                    const std::map<std::string, Scalar>& scalars) {
  for (Layout layout : {Layout::horizontal_fastest, Layout::vertical_fastest}) {
    SCOPED_TRACE(to_string(layout));
    std::map<std::string, Field> f;
    f.emplace("x", filled({I, J, K}, DType::float64, shape));
    f.emplace("out", filled({I, J, K}, DType::float64, shape));
    expect_backends_agree(program, f, scalars, {}, layout, 3);
    const std::string source = compile(program, testing_support::cpu_options(layout)).generated_source();
    EXPECT_TRUE(source.find("no boundary branch taken") != std::string::npos ||
                source.find("no branch taken in this piece") != std::string::npos)
        << source;
  }
}

// Branches on the boundary of the outer dimension inside a vector loop (K == 0 across I in the
// horizontal-fastest layout, I == 0 across K in the vertical-fastest one) are unswitched: a copy
// of the loop without them runs away from the boundary. Both copies equal the reference, with a
// vector remainder (37 columns, 9 levels) and on 3 threads.
TEST(CpuFeatures, BoundaryBranchesInAVectorLoopAreUnswitched) {
  ProgramBuilder pb("boundary");
  auto x = pb.field("x", {I, J, K}, DType::float64);
  auto out = pb.field("out", {I, J, K}, DType::float64);
  auto nk = pb.scalar("nk", DType::int32);
  auto ni = pb.scalar("ni", DType::int32);
  auto below = concat_where(K == 0, x * 2.0, x(K - 1) + x);
  auto left = concat_where(I == 0, x * 0.5, x - x(I - 1) * 0.5);
  auto above = concat_where(K >= nk - 1, x, x(K + 1) * 3.0);
  pb.call("boundary", below + left * above, {out}, {{I, 0, ni}, {J, 0, 5}, {K, 0, nk}});
  expect_unswitched_and_agreeing(pb.build(), {37, 5, 9}, {{"nk", Scalar(9)}, {"ni", Scalar(37)}});
}

// The same inside a column group (a scan with computed inputs): the kernels of a block loop
// along K one column at a time (vertical-fastest, where `I == 0` does not change) or across the
// block's row one level at a time (horizontal-fastest, where `K == 0` does not), and each such
// loop gets its copy without the branch. Sizes above the block sizes (8 columns; rows of 256 are
// cut to the 37 columns), 3 threads.
TEST(CpuFeatures, BoundaryBranchesInAColumnGroupAreUnswitched) {
  ProgramBuilder pb("boundary_scan");
  auto x = pb.field("x", {I, J, K}, DType::float64);
  auto out = pb.field("out", {I, J, K}, DType::float64);
  auto nk = pb.scalar("nk", DType::int32);
  auto left = concat_where(I == 0, x * 0.5, x - x(I - 1) * 0.5);
  auto below = concat_where(K == 0, x * 2.0, x(K - 1) + x);
  auto sweep = scan("sweep", ScanDirection::forward, {Scalar(0.0)},
                    [](const Expr& c, const std::vector<Expr>& in) { return c * 0.5 + in[0] * in[1]; }, {left, below});
  pb.call("boundary_scan", sweep * 2.0 - x, {out}, {{I, 0, 37}, {J, 0, 11}, {K, 0, nk}});
  const ir::Program program = pb.build();
  for (Layout layout : {Layout::horizontal_fastest, Layout::vertical_fastest}) {
    const std::string schedule = compile(program, testing_support::cpu_options(layout)).schedule_text();
    EXPECT_NE(schedule.find("column group"), std::string::npos) << schedule;
  }
  expect_unswitched_and_agreeing(program, {37, 11, 19}, {{"nk", Scalar(19)}});
}

// Branches on the vector loop's own index (K against a bound along a column in the
// vertical-fastest layout, I across a row in the horizontal-fastest one) run the loop piece by
// piece, each piece in the copy without branches where none is taken. Every comparison; bounds
// before, at, inside and past the ends of the loop (m moves them); conditions read at shifted
// levels (`(x_K + 1) < m`); columns of 1, 2, 8 and 16 levels, a row of 37 (a vector remainder);
// 1 and 3 threads: equal to the reference bit for bit. In `boundaries` every condition is false
// on some levels, so both copies run; in `not_equal` the branch is taken everywhere but at m.
TEST(CpuFeatures, BranchesOnTheLoopIndexRunPiecewise) {
  ProgramBuilder boundaries("boundaries"), not_equal("not_equal");
  for (ProgramBuilder* pb : {&boundaries, &not_equal}) {
    auto x = pb->field("x", {I, J, K}, DType::float64);
    auto out = pb->field("out", {I, J, K}, DType::float64);
    auto nk = pb->scalar("nk", DType::int32);
    auto m = pb->scalar("m", DType::int32);
    if (pb == &not_equal) {
      pb->call("not_equal", concat_where(K != m, x * 1.5, x(K + 1) + 2.0), {out}, {{I, 0, 37}, {J, 0, 3}, {K, 0, nk - 1}});
      continue;
    }
    auto bottom = concat_where(K == 0, x * 2.0, x(K - 1) + x);
    auto below = concat_where(K < m, x * 0.5, x - 1.0);
    auto top = concat_where(K >= nk - 2, x, x(K + 1) * 3.0);
    auto low = concat_where(K <= m - 3, x, -x);
    auto high = concat_where(K > m + 2, x * 0.25, x);
    auto left = concat_where(I == 1, x * 0.5, x - x(I - 1) * 0.5);
    auto right = concat_where(I >= 36 - m, x, x(I + 1));
    pb->call("boundaries", bottom + below * top - low + high + below(K + 1) * bottom(K + 1) + left * right(K + 1), {out},
             {{I, 1, 37}, {J, 0, 3}, {K, 0, nk - 1}});
  }
  for (const ir::Program& program : {boundaries.build(), not_equal.build()})
    for (Layout layout : {Layout::vertical_fastest, Layout::horizontal_fastest}) {
      SCOPED_TRACE(program.name + " " + std::string(to_string(layout)));
      const std::string source = compile(program, testing_support::cpu_options(layout)).generated_source();
      // not_equal across a row (horizontal-fastest) branches on the level only: unswitched whole.
      const bool level_only = program.name == "not_equal" && layout == Layout::horizontal_fastest;
      EXPECT_NE(source.find(level_only ? "no boundary branch taken" : "piecewise: each branch on"), std::string::npos)
          << source;
      for (int nk_value : {2, 3, 9, 17})
        for (int m_value : {-3, 0, 1, 5, nk_value - 1, nk_value + 4})
          for (int threads : {1, 3}) {
            SCOPED_TRACE(fmt::format("nk {} m {} threads {}", nk_value, m_value, threads));
            std::map<std::string, Field> f;
            // `right` reads x(I + 1) wherever its bound (it moves with m) may not be met: one column more.
            f.emplace("x", filled({I, J, K}, DType::float64, {38, 3, nk_value}));
            f.emplace("out", filled({I, J, K}, DType::float64, {37, 3, nk_value}));
            expect_backends_agree(program, f, {{"nk", Scalar(nk_value)}, {"m", Scalar(m_value)}}, {}, layout, threads);
          }
    }
}

// Every access of a buffer read across rows shares one row local around a point (the coordinates
// away from the unit-stride dimension); the stencil offsets become multiples of strides added to
// the unit-stride index. Offsets of -2..2 along every dimension, a 2-d field (no unit-stride K in
// the vertical-fastest layout), a K-only field (no row at all), fields with origins, domains that
// start away from 0; 1 and 3 threads, both layouts, rows of 1, 5 and 19 levels: equal to the
// reference bit for bit.
TEST(CpuFeatures, StencilReadsAroundAPointShareOneRowLocal) {
  ProgramBuilder pb("wide_stencil");
  auto x = pb.field("x", {I, J, K}, DType::float64);
  auto surface = pb.field("surface", {I, J}, DType::float64);
  auto profile = pb.field("profile", {K}, DType::float64);
  auto out = pb.field("out", {I, J, K}, DType::float64);
  auto nk = pb.scalar("nk", DType::int32);
  auto value = ((x(I - 2) + x(I + 1) * 0.5) - x(J + 2) * x(J - 1)) + (x(K - 2) - x(K + 2) * 0.25) +
               x(I + 1)(J - 2)(K + 1) * surface(I - 1)(J + 1) + surface * profile(K - 1) + x;
  pb.call("wide_stencil", value, {out}, {{I, 2, 9}, {J, 2, 7}, {K, 2, nk}});
  const ir::Program program = pb.build();
  {
    const std::string source = compile(program, testing_support::cpu_options(Layout::vertical_fastest)).generated_source();
    // x (buffer 0) and surface (1, unit-stride along J): one row each, whose local the reads
    // use. profile (2) has no row, and out (3) is not read across rows: their addresses stay one
    // sum.
    const auto row_of = [&](const std::string& value) {
      const std::string decl = " = " + value + ";";
      const std::size_t at = source.find(decl);
      EXPECT_NE(at, std::string::npos) << value << "\n" << source;
      if (at == std::string::npos) return std::string("?");
      EXPECT_EQ(source.find(decl, at + 1), std::string::npos) << "declared twice: " << value;
      const std::size_t start = source.rfind(' ', at - 1) + 1;
      return source.substr(start, at - start);
    };
    const std::string x_row = row_of("o0 + x_I * s0_0 + x_J * s0_1"), surface_row = row_of("o1 + x_I * s1_0");
    EXPECT_NE(source.find("b0[" + x_row + " + ((x_K + 1) + s0_0 - 2 * s0_1)]"), std::string::npos) << source;
    EXPECT_NE(source.find("b0[" + x_row + " + (x_K - 2 * s0_0)]"), std::string::npos) << source;
    EXPECT_NE(source.find("b1[" + surface_row + " + ((x_J + 1) - s1_0)]"), std::string::npos) << source;
    EXPECT_NE(source.find("b2[o2 + (x_K - 1)]"), std::string::npos) << source;
    EXPECT_NE(source.find("b3[o3 + x_I * s3_0 + x_J * s3_1 + x_K] = "), std::string::npos) << source;
  }
  for (Layout layout : {Layout::vertical_fastest, Layout::horizontal_fastest})
    for (int nk_value : {3, 7, 21})
      for (int threads : {1, 3}) {
        SCOPED_TRACE(fmt::format("{} nk {} threads {}", to_string(layout), nk_value, threads));
        std::map<std::string, Field> f;
        f.emplace("x", filled({I, J, K}, DType::float64, {11, 10, nk_value + 2}, {-1, 0, 0}));
        f.emplace("surface", filled({I, J}, DType::float64, {9, 9}, {0, 0}, 0.21));
        f.emplace("profile", filled({K}, DType::float64, {nk_value}, {0}, 0.53));
        f.emplace("out", filled({I, J, K}, DType::float64, {10, 8, nk_value}, {1, 0, 0}));
        expect_backends_agree(program, f, {{"nk", Scalar(nk_value)}}, {}, layout, threads);
      }
}

TEST(CpuFeatures, MaterializedValueBecomesTransientWithSameResult) {
  ProgramBuilder pb("materialized");
  auto in = pb.field("in", {I, J}, DType::float64);
  auto out = pb.field("out", {I, J}, DType::float64);
  auto lap = materialize("lap", in(I + 1) + in(I - 1) - 2.0 * in);
  pb.call("use", lap(J + 1) - lap(J - 1) + lap, {out}, {{I, 1, 7}, {J, 1, 5}});
  const ir::Program p = pb.build();
  std::map<std::string, Field> f;
  f.emplace("in", filled({I, J}, DType::float64, {8, 6}));
  f.emplace("out", filled({I, J}, DType::float64, {8, 6}));
  expect_backends_agree(p, f);
  CompiledProgram prog = compile(p, testing_support::cpu_options());
  const MemoryPlan plan = prog.memory_plan({});
  ASSERT_EQ(plan.transients.size(), 1u);
  EXPECT_EQ(plan.transients[0].name, "lap");
  // The transient covers exactly what its consumer reads: I in [1,7), J in [0,6).
  EXPECT_EQ(plan.transients[0].bytes, 6u * 6u * 8u);
}

TEST(CpuErrors, SameErrorsAsReference) {
  ProgramBuilder pb("errs");
  auto in = pb.field("in", {I, K}, DType::float64);
  auto out = pb.field("out", {I, K}, DType::float64);
  pb.call("shift", in(I + 1), {out}, {{I, 0, 4}, {K, 0, 2}});
  const ir::Program p = pb.build();
  CompiledProgram prog = compile(p, testing_support::cpu_options());
  Field small = filled({I, K}, DType::float64, {4, 2});  // needs I up to 5
  Field o = filled({I, K}, DType::float64, {4, 2});
  const Field before = o.clone();
  Arguments a;
  a.field("in", small).field("out", o);
  EXPECT_THROW(run_reference(p, a), DomainError);
  EXPECT_THROW(prog(a), DomainError);
  EXPECT_TRUE(same_bits(before, o, "out untouched"));
  Field wrong = filled({I, K}, DType::float32, {5, 2});
  Arguments b;
  b.field("in", wrong).field("out", o);
  EXPECT_THROW(prog(b), ArgumentError);
  Arguments c;
  c.field("in", small);
  EXPECT_THROW(prog(c), ArgumentError);
  // A field laid out for the other layout is refused, naming the layout.
  Field h = filled({I, K}, DType::float64, {5, 2}, {}, 0.37, Layout::horizontal_fastest);
  Arguments d;
  d.field("in", h).field("out", o);
  try {
    prog(d);
    FAIL() << "expected LayoutError";
  } catch (const LayoutError& e) {
    EXPECT_NE(std::string(e.what()).find("vertical_fastest"), std::string::npos) << e.what();
  }
  // A good call after the rejected ones works.
  Field good = filled({I, K}, DType::float64, {5, 2});
  Arguments g;
  g.field("in", good).field("out", o);
  prog(g);
  EXPECT_EQ(o.at<double>({0, 1}), good.at<double>({1, 1}));
}

TEST(CpuErrors, FixedNeighbourShiftThroughSkipValueIsReported) {
  const Mesh mesh = make_bounded_mesh(4, 4);
  ProgramBuilder pb("skip");
  auto c = pb.field("c", {horizontal_dim("Cell")}, DType::float64);
  auto out = pb.field("out", {Edge}, DType::float64);
  pb.call("second_cell", c(E2C[1]), {out}, {{Edge, 0, static_cast<int>(mesh.n_edges)}});
  const ir::Program p = pb.build();
  Field cf = filled({horizontal_dim("Cell")}, DType::float64, {mesh.n_cells});
  Field of({Edge}, DType::float64, {mesh.n_edges});
  Arguments a;
  a.field("c", cf).field("out", of).connectivity("E2C", mesh.table("E2C"));
  EXPECT_THROW(run_reference(p, a), DomainError);
  EXPECT_THROW(compile(p, testing_support::cpu_options())(a), DomainError);
}

TEST(CpuErrors, OutputAliasingAnotherArgumentIsRefused) {
  ProgramBuilder pb("alias");
  auto in = pb.field("in", {I}, DType::float64);
  auto out = pb.field("out", {I}, DType::float64);
  pb.call("copy", in, {out}, {{I, 0, 4}});
  Field f = filled({I}, DType::float64, {4});
  Arguments a;
  a.field("in", f).field("out", f);
  EXPECT_THROW(compile(pb.build(), testing_support::cpu_options())(a), ArgumentError);
}

}  // namespace
}  // namespace fieldflow
