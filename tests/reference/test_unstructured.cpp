// Reference executor on unstructured meshes: neighbour shifts, local fields, reductions with
// skip values, chained shifts, sparse (local) field inputs and same-location connectivities.
// Expected values walk the mesh's neighbour tables with plain loops.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

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
const Connectivity V2E = make_connectivity("V2E", Vertex, Edge, 6);
const Connectivity V2E2V = make_connectivity("V2E2V", Vertex, Vertex, 6);
const Connectivity C2V = make_connectivity("C2V", Cell, Vertex, 3);
const Connectivity C2E2CO = make_connectivity("C2E2CO", Cell, Cell, 4);
const Connectivity E2C2V = make_connectivity("E2C2V", Edge, Vertex, 4);

int nv(const Mesh& m) { return static_cast<int>(m.n_vertices); }
int ne(const Mesh& m) { return static_cast<int>(m.n_edges); }
int nc(const Mesh& m) { return static_cast<int>(m.n_cells); }

Field on(const Dimension& d, std::int64_t n, int seed, DType t = DType::float64) {
  Field f({d}, t, {n});
  if (seed >= 0) fill_pattern(f, seed);
  else f.fill(kSentinel);
  return f;
}
double at1(const Field& f, std::int64_t i) { return f.get_as_double(f.offset_of({i})); }

class Meshes : public ::testing::Test {
 protected:
  Mesh torus = make_torus_mesh(4, 5);
  Mesh bounded = make_bounded_mesh(4, 3);
};

TEST_F(Meshes, FixedNeighbourShifts) {
  ProgramBuilder pb("edge_diff");
  Expr fv = pb.field("fv", {Vertex}, DType::float64);
  Expr out = pb.field("out", {Edge}, DType::float64);
  pb.call("diff", fv(E2V[1]) - 2 * fv(E2V[0]), {out}, {{Edge, 0, ne(torus)}});
  Field f = on(Vertex, nv(torus), 1), o = on(Edge, ne(torus), -1);
  run_program(pb.build(), Arguments().field("fv", f).field("out", o).connectivity("E2V", torus.table("E2V")));
  const auto& t = torus.table("E2V");
  EXPECT_TRUE(matches(o, [&](const Index& x) { return at1(f, t(x[0], 1)) - 2 * at1(f, t(x[0], 0)); }));
}

TEST_F(Meshes, NeighborSumOverVertexEdges) {
  ProgramBuilder pb("v_sum");
  Expr fe = pb.field("fe", {Edge}, DType::float64);
  Expr out = pb.field("out", {Vertex}, DType::float64);
  pb.call("sum", neighbor_sum(fe(V2E), V2E), {out}, {{Vertex, 0, nv(torus)}});
  Field f = on(Edge, ne(torus), 2), o = on(Vertex, nv(torus), -1);
  run_program(pb.build(), Arguments().field("fe", f).field("out", o).connectivity("V2E", torus.table("V2E")));
  const auto& t = torus.table("V2E");
  EXPECT_TRUE(matches(o, [&](const Index& x) {
    double s = 0;
    for (int n = 0; n < 6; ++n) s += at1(f, t(x[0], n));
    return s;
  }));
}

TEST_F(Meshes, MaxOverAndMinOver) {
  ProgramBuilder pb("v_minmax");
  Expr fe = pb.field("fe", {Edge}, DType::float32);
  Expr hi = pb.field("hi", {Vertex}, DType::float32), lo = pb.field("lo", {Vertex}, DType::float32);
  pb.call("mm", make_tuple({max_over(fe(V2E), V2E), min_over(fe(V2E) * 2, V2E)}), {hi, lo}, {{Vertex, 0, nv(torus)}});
  Field f = on(Edge, ne(torus), 3, DType::float32), h = on(Vertex, nv(torus), -1, DType::float32),
        l = on(Vertex, nv(torus), -1, DType::float32);
  run_program(pb.build(),
                Arguments().field("fe", f).field("hi", h).field("lo", l).connectivity("V2E", torus.table("V2E")));
  const auto& t = torus.table("V2E");
  EXPECT_TRUE(matches(h, [&](const Index& x) {
    float m = -std::numeric_limits<float>::infinity();
    for (int n = 0; n < 6; ++n) m = std::max(m, f.at<float>({t(x[0], n)}));
    return static_cast<double>(m);
  }));
  EXPECT_TRUE(matches(l, [&](const Index& x) {
    float m = std::numeric_limits<float>::infinity();
    for (int n = 0; n < 6; ++n) m = std::min(m, f.at<float>({t(x[0], n)}) * 2.0f);
    return static_cast<double>(m);
  }));
}

TEST_F(Meshes, IntegerReductions) {
  ProgramBuilder pb("int_red");
  Expr fv = pb.field("fv", {Vertex}, DType::int32);
  Expr s = pb.field("s", {Cell}, DType::int32), m = pb.field("m", {Cell}, DType::int32);
  pb.call("red", make_tuple({neighbor_sum(fv(C2V), C2V), max_over(fv(C2V) * -1, C2V)}), {s, m}, {{Cell, 0, nc(torus)}});
  Field f({Vertex}, DType::int32, {nv(torus)}), fs({Cell}, DType::int32, {nc(torus)}), fm({Cell}, DType::int32, {nc(torus)});
  for (int v = 0; v < nv(torus); ++v) f.at<std::int32_t>({v}) = (v * 37) % 11 - 5;
  run_program(pb.build(), Arguments().field("fv", f).field("s", fs).field("m", fm).connectivity("C2V", torus.table("C2V")));
  const auto& t = torus.table("C2V");
  for (int c = 0; c < nc(torus); ++c) {
    std::int32_t sum = 0, mx = std::numeric_limits<std::int32_t>::lowest();
    for (int n = 0; n < 3; ++n) {
      sum += f.at<std::int32_t>({t(c, n)});
      mx = std::max(mx, -f.at<std::int32_t>({t(c, n)}));
    }
    EXPECT_EQ(fs.at<std::int32_t>({c}), sum) << c;
    EXPECT_EQ(fm.at<std::int32_t>({c}), mx) << c;
  }
}

// A sum over neighbours wraps like +: values near the int32 limits, expected from uint32 sums.
TEST_F(Meshes, IntegerNeighbourSumsWrapAround) {
  ProgramBuilder pb("int_red_wrap");
  Expr fv = pb.field("fv", {Vertex}, DType::int32), s = pb.field("s", {Cell}, DType::int32);
  pb.call("red", neighbor_sum(fv(C2V), C2V) + neighbor_sum(fv(C2V) * 3, C2V), {s}, {{Cell, 0, nc(torus)}});
  Field f({Vertex}, DType::int32, {nv(torus)}), fs({Cell}, DType::int32, {nc(torus)});
  for (int v = 0; v < nv(torus); ++v)
    f.at<std::int32_t>({v}) = v % 2 ? std::numeric_limits<std::int32_t>::max() - v : std::numeric_limits<std::int32_t>::min() + 3 * v;
  run_program(pb.build(), Arguments().field("fv", f).field("s", fs).connectivity("C2V", torus.table("C2V")));
  const auto& t = torus.table("C2V");
  int wrapped = 0;
  for (int c = 0; c < nc(torus); ++c) {
    std::uint32_t sum = 0, sum3 = 0;
    std::int64_t exact = 0;
    for (int n = 0; n < 3; ++n) {
      const std::int32_t x = f.at<std::int32_t>({t(c, n)});
      sum += static_cast<std::uint32_t>(x);
      sum3 += static_cast<std::uint32_t>(x) * 3u;
      exact += x;
    }
    EXPECT_EQ(fs.at<std::int32_t>({c}), static_cast<std::int32_t>(sum + sum3)) << c;
    wrapped += exact != static_cast<std::int32_t>(sum);
  }
  EXPECT_GT(wrapped, 0);  // the sums themselves left the int32 range
}

TEST_F(Meshes, VerticalLevelsAndKShiftsThroughNeighbours) {
  constexpr int nk = 4;
  ProgramBuilder pb("edge_levels");
  Expr fvk = pb.field("fvk", {Vertex, K}, DType::float64);
  Expr out = pb.field("out", {Edge, K}, DType::float64);
  pb.call("c", neighbor_sum(fvk(E2V), E2V) + fvk(K + 1)(E2V[0]), {out}, {{Edge, 0, ne(torus)}, {K, 0, nk - 1}});
  Field f({Vertex, K}, DType::float64, {nv(torus), nk}), o({Edge, K}, DType::float64, {ne(torus), nk});
  fill_pattern(f, 4);
  o.fill(kSentinel);
  run_program(pb.build(), Arguments().field("fvk", f).field("out", o).connectivity("E2V", torus.table("E2V")));
  const auto& t = torus.table("E2V");
  EXPECT_TRUE(matches(
      o,
      [&](const Index& x) {
        const auto e = x[0], k = x[1];
        return (f.at<double>({t(e, 0), k}) + f.at<double>({t(e, 1), k})) + f.at<double>({t(e, 0), k + 1});
      },
      [](const Index& x) { return x[1] < nk - 1; }));
}

TEST_F(Meshes, ChainedShiftFixedThenLocal) {
  // For each vertex, over its edges: the value at each edge's origin vertex.
  ProgramBuilder pb("chain1");
  Expr fv = pb.field("fv", {Vertex}, DType::float64);
  Expr out = pb.field("out", {Vertex}, DType::float64);
  pb.call("c", neighbor_sum(fv(E2V[0])(V2E), V2E), {out}, {{Vertex, 0, nv(torus)}});
  Field f = on(Vertex, nv(torus), 5), o = on(Vertex, nv(torus), -1);
  run_program(pb.build(), Arguments()
                                .field("fv", f)
                                .field("out", o)
                                .connectivity("E2V", torus.table("E2V"))
                                .connectivity("V2E", torus.table("V2E")));
  const auto &e2v = torus.table("E2V"), &v2e = torus.table("V2E");
  EXPECT_TRUE(matches(o, [&](const Index& x) {
    double s = 0;
    for (int n = 0; n < 6; ++n) s += at1(f, e2v(v2e(x[0], n), 0));
    return s;
  }));
}

// The edges around an edge's origin vertex, summed; skip values come from V2E at that vertex.
void check_local_then_fixed(const Mesh& m) {
  ProgramBuilder pb("chain2");
  Expr fe = pb.field("fe", {Edge}, DType::float64);
  Expr s = pb.field("s", {Edge}, DType::float64), mx = pb.field("mx", {Edge}, DType::float64);
  pb.call("c", make_tuple({neighbor_sum(fe(V2E)(E2V[0]), V2E), max_over(fe(V2E)(E2V[1]), V2E)}), {s, mx},
          {{Edge, 0, ne(m)}});
  Field f = on(Edge, ne(m), 6), os = on(Edge, ne(m), -1), om = on(Edge, ne(m), -1);
  run_program(pb.build(), Arguments()
                                .field("fe", f)
                                .field("s", os)
                                .field("mx", om)
                                .connectivity("E2V", m.table("E2V"))
                                .connectivity("V2E", m.table("V2E")));
  const auto &e2v = m.table("E2V"), &v2e = m.table("V2E");
  EXPECT_TRUE(matches(os, [&](const Index& x) {
    double sum = 0;
    for (int n = 0; n < 6; ++n)
      if (v2e(e2v(x[0], 0), n) >= 0) sum += at1(f, v2e(e2v(x[0], 0), n));
    return sum;
  }));
  EXPECT_TRUE(matches(om, [&](const Index& x) {
    double best = std::numeric_limits<double>::lowest();
    for (int n = 0; n < 6; ++n)
      if (v2e(e2v(x[0], 1), n) >= 0) best = std::max(best, at1(f, v2e(e2v(x[0], 1), n)));
    return best;
  }));
}

TEST_F(Meshes, ChainedShiftLocalThenFixedOnTheTorus) { check_local_then_fixed(torus); }
TEST_F(Meshes, ChainedShiftLocalThenFixedSkipsMissingNeighbours) {
  ASSERT_TRUE(bounded.table("V2E").has_skip_values());
  check_local_then_fixed(bounded);
}

TEST_F(Meshes, SparseWeightsPerEdgeNeighbour) {
  ProgramBuilder pb("weights");
  Expr fv = pb.field("fv", {Vertex}, DType::float64);
  Expr w = pb.field("w", {Edge, E2V.local}, DType::float64);
  Expr out = pb.field("out", {Edge}, DType::float64);
  pb.call("interp", neighbor_sum(w * fv(E2V), E2V), {out}, {{Edge, 0, ne(torus)}});
  Field f = on(Vertex, nv(torus), 7), o = on(Edge, ne(torus), -1);
  Field fw({Edge, E2V.local}, DType::float64, {ne(torus), 2});
  fill_pattern(fw, 8);
  run_program(pb.build(),
                Arguments().field("fv", f).field("w", fw).field("out", o).connectivity("E2V", torus.table("E2V")));
  const auto& t = torus.table("E2V");
  EXPECT_TRUE(matches(o, [&](const Index& x) {
    return fw.at<double>({x[0], 0}) * at1(f, t(x[0], 0)) + fw.at<double>({x[0], 1}) * at1(f, t(x[0], 1));
  }));
}

TEST_F(Meshes, SparseFieldReducedAlone) {
  ProgramBuilder pb("sparse_alone");
  Expr w = pb.field("w", {Vertex, V2E.local}, DType::float64);
  Expr s = pb.field("s", {Vertex}, DType::float64), mn = pb.field("mn", {Vertex}, DType::float64);
  pb.call("red", make_tuple({neighbor_sum(w, V2E), min_over(w, V2E)}), {s, mn}, {{Vertex, 0, nv(bounded)}});
  Field fw({Vertex, V2E.local}, DType::float64, {nv(bounded), 6});
  fill_pattern(fw, 9);
  Field os = on(Vertex, nv(bounded), -1), om = on(Vertex, nv(bounded), -1);
  run_program(pb.build(),
                Arguments().field("w", fw).field("s", os).field("mn", om).connectivity("V2E", bounded.table("V2E")));
  const auto& t = bounded.table("V2E");
  EXPECT_TRUE(matches(os, [&](const Index& x) {
    double sum = 0;
    for (int n = 0; n < 6; ++n)
      if (t(x[0], n) >= 0) sum += fw.at<double>({x[0], n});
    return sum;
  }));
  EXPECT_TRUE(matches(om, [&](const Index& x) {
    double m = std::numeric_limits<double>::max();
    for (int n = 0; n < 6; ++n)
      if (t(x[0], n) >= 0) m = std::min(m, fw.at<double>({x[0], n}));
    return m;
  }));
}

TEST_F(Meshes, ReductionsSkipMissingNeighboursOnTheBoundedMesh) {
  ProgramBuilder pb("bounded_red");
  Expr fe = pb.field("fe", {Edge}, DType::float64);
  Expr s = pb.field("s", {Vertex}, DType::float64), hi = pb.field("hi", {Vertex}, DType::float64),
       lo = pb.field("lo", {Vertex}, DType::float64), cnt = pb.field("cnt", {Vertex}, DType::float64);
  pb.call("red",
          make_tuple({neighbor_sum(fe(V2E), V2E), max_over(fe(V2E), V2E), min_over(fe(V2E), V2E),
                      neighbor_sum(broadcast(1.0, {Vertex, V2E.local}), V2E)}),
          {s, hi, lo, cnt}, {{Vertex, 0, nv(bounded)}});
  Field f = on(Edge, ne(bounded), 10);
  Field os = on(Vertex, nv(bounded), -1), oh = on(Vertex, nv(bounded), -1), ol = on(Vertex, nv(bounded), -1),
        oc = on(Vertex, nv(bounded), -1);
  run_program(pb.build(), Arguments()
                                .field("fe", f)
                                .field("s", os)
                                .field("hi", oh)
                                .field("lo", ol)
                                .field("cnt", oc)
                                .connectivity("V2E", bounded.table("V2E")));
  const auto& t = bounded.table("V2E");
  int corner_count = 6;
  for (int v = 0; v < nv(bounded); ++v) {
    double sum = 0, mx = std::numeric_limits<double>::lowest(), mn = std::numeric_limits<double>::max();
    int count = 0;
    for (int n = 0; n < 6; ++n) {
      if (t(v, n) < 0) continue;
      const double x = at1(f, t(v, n));
      sum += x;
      mx = std::max(mx, x);
      mn = std::min(mn, x);
      ++count;
    }
    corner_count = std::min(corner_count, count);
    EXPECT_EQ(at1(os, v), sum) << v;
    EXPECT_EQ(at1(oh, v), mx) << v;
    EXPECT_EQ(at1(ol, v), mn) << v;
    EXPECT_EQ(at1(oc, v), count) << v;
  }
  EXPECT_LT(corner_count, 6);  // the mesh really has skipped neighbours
}

TEST_F(Meshes, ElementWithoutAnyNeighbourGetsTheReductionIdentity) {
  // A hand-made table (a view over this array): vertex 1 has no edge at all.
  const std::int32_t entries[] = {0, 1, -1, -1, -1, -1,  //
                                  -1, -1, -1, -1, -1, -1,  //
                                  -1, 3, 2, -1, -1, 1};
  const NeighborTable t = NeighborTable::view("V2E", "Vertex", "Edge", 3, 4, 6, entries, 6, 1);
  for (DType dt : {DType::float64, DType::int32}) {
    ProgramBuilder pb("identity");
    Expr fe = pb.field("fe", {Edge}, dt);
    Expr s = pb.field("s", {Vertex}, dt), hi = pb.field("hi", {Vertex}, dt), lo = pb.field("lo", {Vertex}, dt);
    pb.call("red", make_tuple({neighbor_sum(fe(V2E), V2E), max_over(fe(V2E), V2E), min_over(fe(V2E), V2E)}),
            {s, hi, lo}, {{Vertex, 0, 3}});
    Field f({Edge}, dt, {4}), os({Vertex}, dt, {3}), oh({Vertex}, dt, {3}), ol({Vertex}, dt, {3});
    const double vals[] = {5, -2, 7, 3};
    for (int e = 0; e < 4; ++e) f.set_from_double(e, vals[e]);
    run_program(pb.build(), Arguments().field("fe", f).field("s", os).field("hi", oh).field("lo", ol).connectivity("V2E", t));
    EXPECT_EQ(at1(os, 0), 3);
    EXPECT_EQ(at1(oh, 0), 5);
    EXPECT_EQ(at1(ol, 0), -2);
    EXPECT_EQ(at1(os, 2), 8);
    EXPECT_EQ(at1(oh, 2), 7);
    EXPECT_EQ(at1(ol, 2), -2);
    EXPECT_EQ(at1(os, 1), 0);
    if (dt == DType::float64) {
      EXPECT_EQ(oh.at<double>({1}), std::numeric_limits<double>::lowest());
      EXPECT_EQ(ol.at<double>({1}), std::numeric_limits<double>::max());
    } else {
      EXPECT_EQ(oh.at<std::int32_t>({1}), std::numeric_limits<std::int32_t>::lowest());
      EXPECT_EQ(ol.at<std::int32_t>({1}), std::numeric_limits<std::int32_t>::max());
    }
  }
}

TEST_F(Meshes, FixedIndexShiftThroughAMissingNeighbourIsADomainError) {
  ProgramBuilder pb("west");
  Expr fe = pb.field("fe", {Edge}, DType::float64);
  Expr out = pb.field("out", {Vertex}, DType::float64);
  pb.call("west_edge", fe(V2E[3]), {out}, {{Vertex, 0, nv(bounded)}});
  Field f = on(Edge, ne(bounded), 11), o = on(Vertex, nv(bounded), -1);
  const auto before = snapshot(o);
  EXPECT_ERROR(DomainError,
               run_program(pb.build(), Arguments().field("fe", f).field("out", o).connectivity("V2E", bounded.table("V2E"))),
               "program 'west'", "call 'west_edge'", "missing neighbour", "V2E[3]", "Vertex 0");
  EXPECT_TRUE(same_values(snapshot(o), before));
}

TEST_F(Meshes, FixedIndexShiftOnInteriorVerticesOnly) {
  // Vertex (i, j) = j*nx + i: the interior ones (i >= 1) all have a west edge.
  const int nx = 4, ny = 3;
  ProgramBuilder pb("west_interior");
  Expr fe = pb.field("fe", {Edge}, DType::float64);
  Expr out = pb.field("out", {Vertex}, DType::float64);
  pb.call("west_edge", fe(V2E[3]), {out}, {{Vertex, 1, 4}});  // vertices (1..3, 0)
  Field f = on(Edge, ne(bounded), 12), o = on(Vertex, nx * ny, -1);
  run_program(pb.build(), Arguments().field("fe", f).field("out", o).connectivity("V2E", bounded.table("V2E")));
  const auto& t = bounded.table("V2E");
  EXPECT_TRUE(matches(o, [&](const Index& x) { return at1(f, t(x[0], 3)); },
                      [](const Index& x) { return x[0] >= 1 && x[0] < 4; }));
}

TEST_F(Meshes, LocalFieldOutput) {
  ProgramBuilder pb("local_out");
  Expr fv = pb.field("fv", {Vertex}, DType::float64);
  Expr out = pb.field("out", {Edge, E2V.local}, DType::float64);
  pb.call("gather", fv(E2V) * 3, {out}, {{Edge, 0, ne(torus)}, {E2V.local, 0, 2}});
  Field f = on(Vertex, nv(torus), 13), o({Edge, E2V.local}, DType::float64, {ne(torus), 2});
  run_program(pb.build(), Arguments().field("fv", f).field("out", o).connectivity("E2V", torus.table("E2V")));
  const auto& t = torus.table("E2V");
  EXPECT_TRUE(matches(o, [&](const Index& x) { return at1(f, t(x[0], static_cast<int>(x[1]))) * 3; }));
}

TEST_F(Meshes, LocalFieldOutputThroughAMissingNeighbourIsADomainError) {
  ProgramBuilder pb("local_out_bounded");
  Expr fe = pb.field("fe", {Edge}, DType::float64);
  Expr out = pb.field("out", {Vertex, V2E.local}, DType::float64);
  pb.call("gather", fe(V2E), {out}, {{Vertex, 0, nv(bounded)}, {V2E.local, 0, 6}});
  Field f = on(Edge, ne(bounded), 14), o({Vertex, V2E.local}, DType::float64, {nv(bounded), 6});
  o.fill(kSentinel);
  EXPECT_ERROR(DomainError,
               run_program(pb.build(), Arguments().field("fe", f).field("out", o).connectivity("V2E", bounded.table("V2E"))),
               "missing neighbour", "V2E");
  EXPECT_TRUE(matches(o, [](const Index&) { return 0.0; }, [](const Index&) { return false; }));
}

void check_c2e2co(const Mesh& m) {
  ProgramBuilder pb("c2e2co");
  Expr fc = pb.field("fc", {Cell}, DType::float64);
  Expr out = pb.field("out", {Cell}, DType::float64);
  pb.call("smooth", neighbor_sum(fc(C2E2CO), C2E2CO) - fc(C2E2CO[0]), {out}, {{Cell, 0, nc(m)}});
  Field f = on(Cell, nc(m), 15), o = on(Cell, nc(m), -1);
  run_program(pb.build(), Arguments().field("fc", f).field("out", o).connectivity("C2E2CO", m.table("C2E2CO")));
  const auto& t = m.table("C2E2CO");
  EXPECT_TRUE(matches(o, [&](const Index& x) {
    double s = 0;
    for (int n = 0; n < 4; ++n)
      if (t(x[0], n) >= 0) s += at1(f, t(x[0], n));
    return s - at1(f, x[0]);  // slot 0 is the cell itself
  }));
}

TEST_F(Meshes, C2E2COSumOnTheTorus) { check_c2e2co(torus); }
TEST_F(Meshes, C2E2COSumOnTheBoundedMesh) {
  ASSERT_TRUE(bounded.table("C2E2CO").has_skip_values());
  check_c2e2co(bounded);
}

TEST_F(Meshes, SameLocationNeighbourAverage) {
  ProgramBuilder pb("v2e2v");
  Expr fv = pb.field("fv", {Vertex}, DType::float64);
  Expr out = pb.field("out", {Vertex}, DType::float64);
  pb.call("avg", neighbor_sum(fv(V2E2V), V2E2V) / 6 - fv, {out}, {{Vertex, 0, nv(torus)}});
  Field f = on(Vertex, nv(torus), 16), o = on(Vertex, nv(torus), -1);
  run_program(pb.build(), Arguments().field("fv", f).field("out", o).connectivity("V2E2V", torus.table("V2E2V")));
  const auto& t = torus.table("V2E2V");
  EXPECT_TRUE(matches(o, [&](const Index& x) {
    double s = 0;
    for (int n = 0; n < 6; ++n) s += at1(f, t(x[0], n));
    return s / 6 - at1(f, x[0]);
  }));
}

TEST_F(Meshes, E2C2VWithWeightsOnTheBoundedMesh) {
  ProgramBuilder pb("e2c2v");
  Expr fv = pb.field("fv", {Vertex}, DType::float64);
  Expr w = pb.field("w", {Edge, E2C2V.local}, DType::float64);
  Expr out = pb.field("out", {Edge}, DType::float64);
  pb.call("stencil", neighbor_sum(w * fv(E2C2V), E2C2V), {out}, {{Edge, 0, ne(bounded)}});
  Field f = on(Vertex, nv(bounded), 17), o = on(Edge, ne(bounded), -1);
  Field fw({Edge, E2C2V.local}, DType::float64, {ne(bounded), 4});
  fill_pattern(fw, 18);
  run_program(pb.build(),
                Arguments().field("fv", f).field("w", fw).field("out", o).connectivity("E2C2V", bounded.table("E2C2V")));
  const auto& t = bounded.table("E2C2V");
  ASSERT_TRUE(t.has_skip_values());
  EXPECT_TRUE(matches(o, [&](const Index& x) {
    double s = 0;
    for (int n = 0; n < 4; ++n)
      if (t(x[0], n) >= 0) s += fw.at<double>({x[0], n}) * at1(f, t(x[0], n));
    return s;
  }));
}

TEST_F(Meshes, DivergenceWithOrientationSparseField) {
  for (const Mesh* m : {&torus, &bounded}) {
    ProgramBuilder pb("div");
    Expr flux = pb.field("flux", {Edge}, DType::float64);
    Expr orient = pb.field("orient", {Vertex, V2E.local}, DType::int32);
    Expr area = pb.field("area", {Vertex}, DType::float64);
    Expr out = pb.field("out", {Vertex}, DType::float64);
    pb.call("div", neighbor_sum(astype(orient, DType::float64) * flux(V2E), V2E) / area, {out}, {{Vertex, 0, nv(*m)}});
    Field ff = on(Edge, ne(*m), 19), fa({Vertex}, DType::float64, {nv(*m)}), fo = on(Vertex, nv(*m), -1);
    Field fr({Vertex, V2E.local}, DType::int32, {nv(*m), 6});
    for (int v = 0; v < nv(*m); ++v) {
      fa.at<double>({v}) = m->dual_area[v];
      for (int n = 0; n < 6; ++n) fr.at<std::int32_t>({v, n}) = m->edge_orientation_v2e[v * 6 + n];
    }
    run_program(pb.build(), Arguments()
                                  .field("flux", ff)
                                  .field("orient", fr)
                                  .field("area", fa)
                                  .field("out", fo)
                                  .connectivity("V2E", m->table("V2E")));
    const auto& t = m->table("V2E");
    EXPECT_TRUE(matches(fo, [&](const Index& x) {
      double s = 0;
      for (int n = 0; n < 6; ++n)
        if (t(x[0], n) >= 0) s += static_cast<double>(m->edge_orientation_v2e[x[0] * 6 + n]) * at1(ff, t(x[0], n));
      return s / m->dual_area[x[0]];
    })) << m->name;
  }
}

TEST_F(Meshes, SubDomainOfEdgesLeavesTheRestUntouched) {
  ProgramBuilder pb("sub_edges");
  Expr fv = pb.field("fv", {Vertex}, DType::float64);
  Expr first = pb.scalar("first", DType::int32);
  Expr out = pb.field("out", {Edge}, DType::float64);
  pb.call("mean", neighbor_sum(fv(E2V), E2V) / 2, {out}, {{Edge, first, first + 10}});
  Field f = on(Vertex, nv(torus), 20), o = on(Edge, ne(torus), -1);
  run_program(pb.build(),
                Arguments().field("fv", f).scalar("first", 7).field("out", o).connectivity("E2V", torus.table("E2V")));
  const auto& t = torus.table("E2V");
  EXPECT_TRUE(matches(o, [&](const Index& x) { return (at1(f, t(x[0], 0)) + at1(f, t(x[0], 1))) / 2; },
                      [](const Index& x) { return x[0] >= 7 && x[0] < 17; }));
}

TEST_F(Meshes, TwoCallsCellsThenVertices) {
  // Cell means of vertex values, then each edge sums the means of its one or two cells.
  const Connectivity E2C = make_connectivity("E2C", Edge, Cell, 2);
  ProgramBuilder pb("two_calls");
  Expr fv = pb.field("fv", {Vertex}, DType::float64);
  Expr cm = pb.field("cm", {Cell}, DType::float64);
  Expr out = pb.field("out", {Edge}, DType::float64);
  pb.call("cell_mean", neighbor_sum(fv(C2V), C2V) / 3, {cm}, {{Cell, 0, nc(bounded)}});
  pb.call("edge_sum", neighbor_sum(cm(E2C), E2C), {out}, {{Edge, 0, ne(bounded)}});
  Field f = on(Vertex, nv(bounded), 21), c = on(Cell, nc(bounded), -1), o = on(Edge, ne(bounded), -1);
  run_program(pb.build(), Arguments()
                                .field("fv", f)
                                .field("cm", c)
                                .field("out", o)
                                .connectivity("C2V", bounded.table("C2V"))
                                .connectivity("E2C", bounded.table("E2C")));
  const auto &c2v = bounded.table("C2V"), &e2c = bounded.table("E2C");
  std::vector<double> mean(nc(bounded));
  for (int i = 0; i < nc(bounded); ++i)
    mean[i] = (at1(f, c2v(i, 0)) + at1(f, c2v(i, 1)) + at1(f, c2v(i, 2))) / 3;
  EXPECT_TRUE(matches(c, [&](const Index& x) { return mean[x[0]]; }));
  EXPECT_TRUE(matches(o, [&](const Index& x) {
    double s = 0;
    for (int n = 0; n < 2; ++n)
      if (e2c(x[0], n) >= 0) s += mean[e2c(x[0], n)];
    return s;
  }));
}

// A field needs to cover only the points a call really reads: a vertex field allocated from a
// non-zero origin, read through neighbour shifts over a range of edges whose vertices all lie in
// it, is accepted by both backends (the compiled one used to check the whole table range), and a
// field one vertex short is rejected by both.
struct VertexWindow {
  std::int64_t edge_lo, edge_hi, vertex_lo, vertex_hi;
};
VertexWindow window_of_edges(const Mesh& m, const std::vector<std::int32_t>& (*rows)(const Mesh&, std::int64_t)) {
  VertexWindow w{ne(m) / 2, ne(m), nv(m), 0};
  for (std::int64_t e = w.edge_lo; e < w.edge_hi; ++e)
    for (std::int32_t v : rows(m, e))
      if (v >= 0) {
        w.vertex_lo = std::min<std::int64_t>(w.vertex_lo, v);
        w.vertex_hi = std::max<std::int64_t>(w.vertex_hi, v + 1);
      }
  return w;
}
const std::vector<std::int32_t>& e2v_rows(const Mesh& m, std::int64_t e) {
  static std::vector<std::int32_t> row;
  const auto& t = m.table("E2V");
  row = {t(e, 0), t(e, 1)};
  return row;
}
const std::vector<std::int32_t>& e2c_c2v_rows(const Mesh& m, std::int64_t e) {
  static std::vector<std::int32_t> row;
  row.clear();
  for (int n = 0; n < 2; ++n) {
    const std::int32_t c = m.table("E2C")(e, n);
    row.push_back(c < 0 ? -1 : m.table("C2V")(c, 2));
  }
  return row;
}

TEST_F(Meshes, VertexFieldFromANonZeroOriginCoversTheVerticesReadThroughE2V) {
  const VertexWindow w = window_of_edges(bounded, e2v_rows);
  ASSERT_GT(w.vertex_lo, 0) << "the test needs edges whose vertices avoid vertex 0";
  ProgramBuilder pb("windowed_edge_diff");
  Expr fv = pb.field("fv", {Vertex}, DType::float64);
  Expr out = pb.field("out", {Edge}, DType::float64);
  pb.call("diff", fv(E2V[1]) - fv(E2V[0]) + neighbor_sum(fv(E2V), E2V), {out}, {{Edge, w.edge_lo, w.edge_hi}});
  const ir::Program program = pb.build();
  Field f({Vertex}, DType::float64, {w.vertex_hi - w.vertex_lo}, {w.vertex_lo});
  fill_pattern(f, 3);
  Field o = on(Edge, ne(bounded), -1);
  run_program(program, Arguments().field("fv", f).field("out", o).connectivity("E2V", bounded.table("E2V")));
  const auto& t = bounded.table("E2V");
  EXPECT_TRUE(matches(o, [&](const Index& x) {
    if (x[0] < w.edge_lo) return kSentinel;
    const double a = at1(f, t(x[0], 0)), b = at1(f, t(x[0], 1));
    return b - a + (a + b);
  }));
  // One vertex short at either end: both backends reject the call before writing.
  for (auto [lo, hi] : {std::pair{w.vertex_lo + 1, w.vertex_hi}, std::pair{w.vertex_lo, w.vertex_hi - 1}}) {
    Field shorter({Vertex}, DType::float64, {hi - lo}, {lo});
    Field untouched = on(Edge, ne(bounded), -1);
    EXPECT_ERROR(DomainError,
                 run_program(program, Arguments().field("fv", shorter).field("out", untouched).connectivity("E2V", bounded.table("E2V"))),
                 "fv");
    EXPECT_TRUE(matches(untouched, [&](const Index&) { return kSentinel; }));
  }
}

TEST_F(Meshes, ChainedShiftsAreCheckedAgainstTheVerticesTheyReach) {
  const VertexWindow w = window_of_edges(bounded, e2c_c2v_rows);
  ASSERT_TRUE(w.vertex_lo > 0 || w.vertex_hi < nv(bounded)) << "the test needs a window narrower than the mesh";
  const Connectivity E2C = make_connectivity("E2C", Edge, Cell, 2);
  ProgramBuilder pb("windowed_chain");
  Expr fv = pb.field("fv", {Vertex}, DType::float64);
  Expr out = pb.field("out", {Edge}, DType::float64);
  // Edges whose second cell is missing on the bounded mesh are skipped by the reduction.
  pb.call("chain", neighbor_sum(fv(C2V[2])(E2C), E2C), {out}, {{Edge, w.edge_lo, w.edge_hi}});
  const ir::Program program = pb.build();
  Field f({Vertex}, DType::float64, {w.vertex_hi - w.vertex_lo}, {w.vertex_lo});
  fill_pattern(f, 4);
  Field o = on(Edge, ne(bounded), -1);
  auto args = [&](Field& fv_field, Field& out_field) {
    return Arguments().field("fv", fv_field).field("out", out_field).connectivity("E2C", bounded.table("E2C"))
        .connectivity("C2V", bounded.table("C2V"));
  };
  run_program(program, args(f, o));
  const auto& e2c = bounded.table("E2C");
  const auto& c2v = bounded.table("C2V");
  EXPECT_TRUE(matches(o, [&](const Index& x) {
    if (x[0] < w.edge_lo) return kSentinel;
    double sum = 0;
    for (int n = 0; n < 2; ++n)
      if (e2c(x[0], n) >= 0) sum += at1(f, c2v(e2c(x[0], n), 2));
    return sum;
  }));
}

TEST_F(Meshes, StoredValueIsComputedOnlyWhereItsReadersReachThroughTables) {
  // t over edges is stored (materialize) and read through V2E by a sub-range of vertices: only
  // the edges those vertices reach are computed, so fv must cover only the vertices those edges
  // reach — not every vertex, as a producer looping over all edges would need.
  const Connectivity E2V_ = E2V;
  const std::int64_t v_lo = nv(bounded) / 2, v_hi = nv(bounded) / 2 + 3;
  std::int64_t lo = nv(bounded), hi = 0;
  const auto& v2e = bounded.table("V2E");
  const auto& e2v = bounded.table("E2V");
  for (std::int64_t v = v_lo; v < v_hi; ++v)
    for (int n = 0; n < 6; ++n)
      if (const auto e = v2e(v, n); e >= 0) {
        lo = std::min<std::int64_t>(lo, e2v(e, 0));
        hi = std::max<std::int64_t>(hi, e2v(e, 0) + 1);
      }
  ASSERT_TRUE(lo > 0 || hi < nv(bounded)) << "the test needs a window narrower than the mesh";
  ProgramBuilder pb("stored_through_tables");
  Expr fv = pb.field("fv", {Vertex}, DType::float64);
  Expr out = pb.field("out", {Vertex}, DType::float64);
  const Expr t = materialize("t", fv(E2V_[0]) * 3.0);
  pb.call("gather", neighbor_sum(t(V2E), V2E), {out}, {{Vertex, v_lo, v_hi}});
  const ir::Program program = pb.build();
  Field f({Vertex}, DType::float64, {hi - lo}, {lo});
  fill_pattern(f, 5);
  Field o = on(Vertex, nv(bounded), -1);
  run_program(program, Arguments().field("fv", f).field("out", o).connectivity("E2V", e2v).connectivity("V2E", v2e));
  EXPECT_TRUE(matches(o, [&](const Index& x) {
    if (x[0] < v_lo || x[0] >= v_hi) return kSentinel;
    double sum = 0;
    for (int n = 0; n < 6; ++n)
      if (const auto e = v2e(x[0], n); e >= 0) sum += at1(f, e2v(e, 0)) * 3.0;
    return sum;
  }));
}

}  // namespace
}  // namespace fieldflow
