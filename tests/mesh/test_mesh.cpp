#include "fieldflow/mesh.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "fieldflow/errors.h"

namespace fieldflow {
namespace {

struct Case {
  Mesh m;
  int nx, ny;
  bool periodic;
};

Case torus(int nx, int ny) { return {make_torus_mesh(nx, ny), nx, ny, true}; }
Case bounded(int nx, int ny) { return {make_bounded_mesh(nx, ny), nx, ny, false}; }

// The meshes every consistency property is checked on.
std::vector<Case> all_cases() {
  std::vector<Case> cs;
  for (auto [nx, ny] : {std::pair{3, 3}, {4, 5}, {10, 7}}) cs.push_back(torus(nx, ny));
  for (auto [nx, ny] : {std::pair{2, 2}, {3, 3}, {4, 5}, {10, 7}}) cs.push_back(bounded(nx, ny));
  return cs;
}

const std::vector<std::string> kTables = {"E2V",   "E2C",   "C2V",   "C2E",   "V2E",   "V2C",
                                          "V2E2V", "E2C2V", "E2C2E", "C2E2C", "C2E2CO"};

std::vector<std::int32_t> row(const NeighborTable& t, std::int64_t i) {
  return {t.data.begin() + i * t.max_neighbors, t.data.begin() + (i + 1) * t.max_neighbors};
}
bool contains(const std::vector<std::int32_t>& r, std::int64_t x) {
  return std::find(r.begin(), r.end(), x) != r.end();
}
int count(const std::vector<std::int32_t>& r, std::int64_t x) {
  return static_cast<int>(std::count(r.begin(), r.end(), x));
}

// Displacement from vertex a to vertex b (the shortest one on the torus).
std::pair<double, double> displacement(const Case& c, std::int32_t a, std::int32_t b) {
  double dx = c.m.vertex_x[b] - c.m.vertex_x[a], dy = c.m.vertex_y[b] - c.m.vertex_y[a];
  if (c.periodic) {
    if (dx > c.nx / 2.0) dx -= c.nx;
    if (dx < -c.nx / 2.0) dx += c.nx;
    if (dy > c.ny / 2.0) dy -= c.ny;
    if (dy < -c.ny / 2.0) dy += c.ny;
  }
  return {dx, dy};
}

std::int64_t torus_edges(std::int64_t nx, std::int64_t ny) { return 3 * nx * ny; }
std::int64_t bounded_edges(std::int64_t nx, std::int64_t ny) {
  return (nx - 1) * ny + nx * (ny - 1) + (nx - 1) * (ny - 1);
}

// ---------------------------------------------------------------------------------------------
// Counts and shapes

TEST(MeshCounts, TorusCountsAndEulerCharacteristicZero) {
  for (auto [nx, ny] : {std::pair{3, 3}, {4, 5}, {10, 7}, {100, 100}}) {
    const Mesh m = make_torus_mesh(nx, ny);
    SCOPED_TRACE(m.name);
    EXPECT_EQ(m.n_vertices, std::int64_t{nx} * ny);
    EXPECT_EQ(m.n_edges, torus_edges(nx, ny));
    EXPECT_EQ(m.n_cells, 2 * std::int64_t{nx} * ny);
    EXPECT_EQ(m.n_vertices - m.n_edges + m.n_cells, 0);
  }
}

TEST(MeshCounts, BoundedCountsAndEulerCharacteristicOne) {
  for (auto [nx, ny] : {std::pair{2, 2}, {3, 3}, {4, 5}, {10, 7}, {100, 100}}) {
    const Mesh m = make_bounded_mesh(nx, ny);
    SCOPED_TRACE(m.name);
    EXPECT_EQ(m.n_vertices, std::int64_t{nx} * ny);
    EXPECT_EQ(m.n_edges, bounded_edges(nx, ny));
    EXPECT_EQ(m.n_cells, 2 * std::int64_t{nx - 1} * (ny - 1));
    EXPECT_EQ(m.n_vertices - m.n_edges + m.n_cells, 1);
  }
}

TEST(MeshCounts, NamesAndSizeOf) {
  const Mesh t = make_torus_mesh(4, 5), b = make_bounded_mesh(4, 5);
  EXPECT_EQ(t.name, "torus_4x5");
  EXPECT_EQ(b.name, "bounded_4x5");
  EXPECT_EQ(t.size_of("Vertex"), 20);
  EXPECT_EQ(t.size_of("Edge"), 60);
  EXPECT_EQ(t.size_of("Cell"), 40);
  EXPECT_EQ(b.size_of("Edge"), b.n_edges);
  EXPECT_THROW(t.size_of("Face"), ArgumentError);
}

TEST(MeshShapes, AllTablesPresentWithDocumentedShape) {
  struct Spec { const char* name; const char* src; const char* dst; int width; };
  const Spec specs[] = {{"E2V", "Edge", "Vertex", 2},   {"E2C", "Edge", "Cell", 2},
                        {"C2V", "Cell", "Vertex", 3},   {"C2E", "Cell", "Edge", 3},
                        {"V2E", "Vertex", "Edge", 6},   {"V2C", "Vertex", "Cell", 6},
                        {"V2E2V", "Vertex", "Vertex", 6}, {"E2C2V", "Edge", "Vertex", 4},
                        {"E2C2E", "Edge", "Edge", 4},   {"C2E2C", "Cell", "Cell", 3},
                        {"C2E2CO", "Cell", "Cell", 4}};
  for (const Case& c : all_cases()) {
    SCOPED_TRACE(c.m.name);
    EXPECT_EQ(c.m.tables.size(), std::size(specs));
    for (const Spec& s : specs) {
      const NeighborTable& t = c.m.table(s.name);
      EXPECT_EQ(t.name, s.name);
      EXPECT_EQ(t.source, s.src);
      EXPECT_EQ(t.target, s.dst);
      EXPECT_EQ(t.max_neighbors, s.width);
      EXPECT_EQ(t.n_source, c.m.size_of(s.src));
      EXPECT_EQ(t.n_target, c.m.size_of(s.dst));
      EXPECT_EQ(static_cast<std::int64_t>(t.data.size()), t.n_source * t.max_neighbors);
    }
    EXPECT_EQ(static_cast<std::int64_t>(c.m.edge_orientation_v2e.size()), 6 * c.m.n_vertices);
  }
}

TEST(MeshShapes, IndicesInRangeOrSkip) {
  for (const Case& c : all_cases()) {
    for (const auto& [name, t] : c.m.tables) {
      SCOPED_TRACE(c.m.name + " " + name);
      for (std::int32_t x : t.data) {
        ASSERT_TRUE(x == -1 || (x >= 0 && x < t.n_target)) << x;
      }
    }
  }
}

TEST(MeshShapes, TorusHasNoSkipValues) {
  for (const Case& c : all_cases()) {
    if (!c.periodic) continue;
    for (const auto& [name, t] : c.m.tables) {
      EXPECT_FALSE(t.has_skip_values()) << c.m.name << " " << name;
      EXPECT_EQ(std::count(t.data.begin(), t.data.end(), -1), 0);
    }
    EXPECT_EQ(std::count(c.m.edge_orientation_v2e.begin(), c.m.edge_orientation_v2e.end(), 0), 0);
  }
}

TEST(MeshShapes, BoundedSkipValuesOnlyInNeighbourhoodTables) {
  for (const Case& c : all_cases()) {
    if (c.periodic) continue;
    SCOPED_TRACE(c.m.name);
    for (const char* name : {"E2V", "C2V", "C2E"}) EXPECT_FALSE(c.m.table(name).has_skip_values()) << name;
    for (const char* name : {"E2C", "V2E", "V2C", "V2E2V", "E2C2V", "E2C2E", "C2E2C", "C2E2CO"}) {
      EXPECT_TRUE(c.m.table(name).has_skip_values()) << name;
    }
  }
}

TEST(MeshShapes, HasSkipValuesOnHandMadeTable) {
  NeighborTable t;
  t.n_source = 2;
  t.max_neighbors = 2;
  t.data = {0, 1, 2, 3};
  EXPECT_FALSE(t.has_skip_values());
  t.data[3] = -1;
  EXPECT_TRUE(t.has_skip_values());
  EXPECT_EQ(t(1, 0), 2);
  EXPECT_EQ(t(1, 1), -1);
}

TEST(MeshShapes, TableViewsReadCallerMemoryInEitherOrder) {
  // The same 3 x 2 table in C order and in Fortran order.
  const std::int32_t c_order[6] = {0, 1, 2, -1, 4, 5}, fortran_order[6] = {0, 2, 4, 1, -1, 5};
  const NeighborTable c = NeighborTable::view("T", "A", "B", 3, 6, 2, c_order, 2, 1);
  const NeighborTable f = NeighborTable::view("T", "A", "B", 3, 6, 2, fortran_order, 1, 3);
  for (std::int64_t i = 0; i < 3; ++i)
    for (int k = 0; k < 2; ++k) {
      EXPECT_EQ(c(i, k), c_order[i * 2 + k]);
      EXPECT_EQ(f(i, k), c(i, k));
    }
  EXPECT_TRUE(c.is_view());
  EXPECT_TRUE(f.has_skip_values());
  EXPECT_TRUE(c.data.empty());  // nothing copied
  EXPECT_EQ(f.entries(), fortran_order);
}

// ---------------------------------------------------------------------------------------------
// Mutual consistency of the tables

TEST(MeshConsistency, E2VAndV2EAreInverse) {
  for (const Case& c : all_cases()) {
    SCOPED_TRACE(c.m.name);
    const auto& e2v = c.m.table("E2V");
    const auto& v2e = c.m.table("V2E");
    for (std::int64_t e = 0; e < c.m.n_edges; ++e) {
      ASSERT_NE(e2v(e, 0), e2v(e, 1));
      for (int k = 0; k < 2; ++k) ASSERT_EQ(count(row(v2e, e2v(e, k)), e), 1) << "edge " << e;
    }
    std::int64_t valid = 0;
    for (std::int64_t v = 0; v < c.m.n_vertices; ++v) {
      for (int k = 0; k < 6; ++k) {
        const std::int32_t e = v2e(v, k);
        if (e < 0) continue;
        ++valid;
        ASSERT_TRUE(contains(row(e2v, e), v)) << "vertex " << v << " edge " << e;
      }
    }
    EXPECT_EQ(valid, 2 * c.m.n_edges);  // every edge seen from exactly its two vertices
  }
}

TEST(MeshConsistency, V2EOrientationOppositeAtBothEnds) {
  for (const Case& c : all_cases()) {
    SCOPED_TRACE(c.m.name);
    const auto& e2v = c.m.table("E2V");
    const auto& v2e = c.m.table("V2E");
    std::vector<int> sum(c.m.n_edges, 0), seen(c.m.n_edges, 0);
    for (std::int64_t v = 0; v < c.m.n_vertices; ++v) {
      for (int k = 0; k < 6; ++k) {
        const std::int32_t e = v2e(v, k);
        const int o = c.m.edge_orientation_v2e[6 * v + k];
        if (e < 0) {
          ASSERT_EQ(o, 0);
          continue;
        }
        ASSERT_EQ(o, e2v(e, 0) == v ? 1 : -1);
        sum[e] += o;
        ++seen[e];
      }
    }
    for (std::int64_t e = 0; e < c.m.n_edges; ++e) {
      ASSERT_EQ(seen[e], 2);
      ASSERT_EQ(sum[e], 0);
    }
    // Discrete divergence of a constant flux: sum_v sum_k o * 1 over all vertices vanishes.
    long total = 0;
    for (int o : c.m.edge_orientation_v2e) total += o;
    EXPECT_EQ(total, 0);
  }
}

TEST(MeshConsistency, C2EAndE2CAreInverse) {
  for (const Case& c : all_cases()) {
    SCOPED_TRACE(c.m.name);
    const auto& c2e = c.m.table("C2E");
    const auto& e2c = c.m.table("E2C");
    for (std::int64_t cell = 0; cell < c.m.n_cells; ++cell) {
      const auto r = row(c2e, cell);
      ASSERT_EQ(std::set<std::int32_t>(r.begin(), r.end()).size(), 3u);
      for (std::int32_t e : r) ASSERT_EQ(count(row(e2c, e), cell), 1);
    }
    std::int64_t valid = 0;
    for (std::int64_t e = 0; e < c.m.n_edges; ++e) {
      ASSERT_NE(e2c(e, 0), -1) << "every edge has at least one cell, listed first";
      ASSERT_NE(e2c(e, 0), e2c(e, 1));
      for (int k = 0; k < 2; ++k) {
        if (e2c(e, k) < 0) continue;
        ++valid;
        ASSERT_TRUE(contains(row(c2e, e2c(e, k)), e));
      }
    }
    EXPECT_EQ(valid, 3 * c.m.n_cells);
  }
}

TEST(MeshConsistency, C2VIsUnionOfE2VOverC2EAndEdgeKJoinsVerticesKAndKPlus1) {
  for (const Case& c : all_cases()) {
    SCOPED_TRACE(c.m.name);
    const auto& c2e = c.m.table("C2E");
    const auto& c2v = c.m.table("C2V");
    const auto& e2v = c.m.table("E2V");
    for (std::int64_t cell = 0; cell < c.m.n_cells; ++cell) {
      std::set<std::int32_t> from_edges;
      for (int k = 0; k < 3; ++k) {
        const std::int32_t e = c2e(cell, k);
        from_edges.insert(e2v(e, 0));
        from_edges.insert(e2v(e, 1));
        const std::set<std::int32_t> ends = {e2v(e, 0), e2v(e, 1)};
        const std::set<std::int32_t> expected = {c2v(cell, k), c2v(cell, (k + 1) % 3)};
        ASSERT_EQ(ends, expected) << "cell " << cell << " edge slot " << k;
      }
      const auto r = row(c2v, cell);
      ASSERT_EQ(from_edges, std::set<std::int32_t>(r.begin(), r.end()));
      ASSERT_EQ(from_edges.size(), 3u);
    }
  }
}

TEST(MeshConsistency, CellsAreCounterClockwiseWithAreaOneHalf) {
  for (const Case& c : all_cases()) {
    SCOPED_TRACE(c.m.name);
    const auto& c2v = c.m.table("C2V");
    for (std::int64_t cell = 0; cell < c.m.n_cells; ++cell) {
      auto [ax, ay] = displacement(c, c2v(cell, 0), c2v(cell, 1));
      auto [bx, by] = displacement(c, c2v(cell, 0), c2v(cell, 2));
      const double signed_area = 0.5 * (ax * by - ay * bx);
      ASSERT_DOUBLE_EQ(signed_area, 0.5) << "cell " << cell;
      ASSERT_DOUBLE_EQ(c.m.cell_area[cell], signed_area);
    }
  }
}

TEST(MeshConsistency, E2C2VIsE2VThenOppositeVertices) {
  for (const Case& c : all_cases()) {
    SCOPED_TRACE(c.m.name);
    const auto& e2c2v = c.m.table("E2C2V");
    const auto& e2v = c.m.table("E2V");
    const auto& e2c = c.m.table("E2C");
    const auto& c2v = c.m.table("C2V");
    for (std::int64_t e = 0; e < c.m.n_edges; ++e) {
      ASSERT_EQ(e2c2v(e, 0), e2v(e, 0));
      ASSERT_EQ(e2c2v(e, 1), e2v(e, 1));
      for (int s = 0; s < 2; ++s) {
        const std::int32_t cell = e2c(e, s);
        if (cell < 0) {
          ASSERT_EQ(e2c2v(e, 2 + s), -1);
          continue;
        }
        std::vector<std::int32_t> off_edge;
        for (std::int32_t v : row(c2v, cell)) {
          if (v != e2v(e, 0) && v != e2v(e, 1)) off_edge.push_back(v);
        }
        ASSERT_EQ(off_edge.size(), 1u);
        ASSERT_EQ(e2c2v(e, 2 + s), off_edge[0]);
      }
    }
  }
}

TEST(MeshConsistency, E2CIsLeftThenRightOfDirectedEdge) {
  for (const Case& c : all_cases()) {
    SCOPED_TRACE(c.m.name);
    const auto& e2c2v = c.m.table("E2C2V");
    for (std::int64_t e = 0; e < c.m.n_edges; ++e) {
      auto [ex, ey] = displacement(c, e2c2v(e, 0), e2c2v(e, 1));
      auto side = [&](int slot) {
        auto [px, py] = displacement(c, e2c2v(e, 0), e2c2v(e, slot));
        return ex * py - ey * px;  // > 0: left of the edge
      };
      if (e2c2v(e, 3) >= 0) {
        ASSERT_GT(side(2), 0) << "edge " << e;
        ASSERT_LT(side(3), 0) << "edge " << e;
      } else {
        ASSERT_NE(side(2), 0);  // boundary edge: the single cell, whichever side it is on
      }
    }
  }
}

TEST(MeshConsistency, E2C2EAreTheOtherEdgesOfTheAdjacentCells) {
  for (const Case& c : all_cases()) {
    SCOPED_TRACE(c.m.name);
    const auto& e2c2e = c.m.table("E2C2E");
    const auto& e2c = c.m.table("E2C");
    const auto& c2e = c.m.table("C2E");
    for (std::int64_t e = 0; e < c.m.n_edges; ++e) {
      for (int s = 0; s < 2; ++s) {
        const std::int32_t cell = e2c(e, s);
        const std::int32_t a = e2c2e(e, 2 * s), b = e2c2e(e, 2 * s + 1);
        if (cell < 0) {
          ASSERT_EQ(a, -1);
          ASSERT_EQ(b, -1);
          continue;
        }
        ASSERT_NE(a, e);
        ASSERT_NE(b, e);
        ASSERT_NE(a, b);
        const auto edges = row(c2e, cell);
        ASSERT_TRUE(contains(edges, a));
        ASSERT_TRUE(contains(edges, b));
        // Cyclic C2E order after e.
        const int pos = static_cast<int>(std::find(edges.begin(), edges.end(), e) - edges.begin());
        ASSERT_EQ(a, edges[(pos + 1) % 3]);
        ASSERT_EQ(b, edges[(pos + 2) % 3]);
      }
    }
  }
}

TEST(MeshConsistency, C2E2CIsSymmetricNeverSelfAndAcrossC2EEdge) {
  for (const Case& c : all_cases()) {
    SCOPED_TRACE(c.m.name);
    const auto& c2e2c = c.m.table("C2E2C");
    const auto& c2e = c.m.table("C2E");
    const auto& e2c = c.m.table("E2C");
    for (std::int64_t a = 0; a < c.m.n_cells; ++a) {
      for (int k = 0; k < 3; ++k) {
        const std::int32_t b = c2e2c(a, k);
        const std::int32_t e = c2e(a, k);
        const bool boundary = e2c(e, 1) < 0;
        if (b < 0) {
          ASSERT_TRUE(boundary) << "cell " << a << " slot " << k;
          continue;
        }
        ASSERT_FALSE(boundary);
        ASSERT_NE(b, a);
        ASSERT_TRUE(contains(row(c2e2c, b), a));
        // b shares the k-th edge of a, and lists the same edge in its matching slot.
        ASSERT_TRUE(contains(row(c2e, b), e));
        const auto bn = row(c2e2c, b), be = row(c2e, b);
        const auto back = std::find(bn.begin(), bn.end(), a) - bn.begin();
        ASSERT_EQ(be[back], e);
      }
    }
  }
}

TEST(MeshConsistency, C2E2COIsSelfFollowedByC2E2C) {
  for (const Case& c : all_cases()) {
    SCOPED_TRACE(c.m.name);
    const auto& c2e2co = c.m.table("C2E2CO");
    const auto& c2e2c = c.m.table("C2E2C");
    for (std::int64_t a = 0; a < c.m.n_cells; ++a) {
      ASSERT_EQ(c2e2co(a, 0), a);
      ASSERT_EQ(count(row(c2e2co, a), a), 1);
      for (int k = 0; k < 3; ++k) ASSERT_EQ(c2e2co(a, 1 + k), c2e2c(a, k));
    }
  }
}

TEST(MeshConsistency, V2CAndC2VAreInverse) {
  for (const Case& c : all_cases()) {
    SCOPED_TRACE(c.m.name);
    const auto& v2c = c.m.table("V2C");
    const auto& c2v = c.m.table("C2V");
    for (std::int64_t cell = 0; cell < c.m.n_cells; ++cell) {
      for (std::int32_t v : row(c2v, cell)) ASSERT_EQ(count(row(v2c, v), cell), 1);
    }
    std::int64_t valid = 0;
    for (std::int64_t v = 0; v < c.m.n_vertices; ++v) {
      for (std::int32_t cell : row(v2c, v)) {
        if (cell < 0) continue;
        ++valid;
        ASSERT_TRUE(contains(row(c2v, cell), v));
      }
    }
    EXPECT_EQ(valid, 3 * c.m.n_cells);
  }
}

TEST(MeshConsistency, V2CSlotKLiesBetweenV2EEdgesKAndKPlus1) {
  for (const Case& c : all_cases()) {
    SCOPED_TRACE(c.m.name);
    const auto& v2c = c.m.table("V2C");
    const auto& v2e = c.m.table("V2E");
    const auto& c2e = c.m.table("C2E");
    for (std::int64_t v = 0; v < c.m.n_vertices; ++v) {
      for (int k = 0; k < 6; ++k) {
        const std::int32_t cell = v2c(v, k);
        if (cell < 0) continue;
        ASSERT_EQ(v2e(v, k) >= 0 && v2e(v, (k + 1) % 6) >= 0, true);
        ASSERT_TRUE(contains(row(c2e, cell), v2e(v, k)));
        ASSERT_TRUE(contains(row(c2e, cell), v2e(v, (k + 1) % 6)));
      }
    }
  }
}

TEST(MeshConsistency, V2E2VIsOtherEndOfV2EAndSymmetric) {
  for (const Case& c : all_cases()) {
    SCOPED_TRACE(c.m.name);
    const auto& v2e2v = c.m.table("V2E2V");
    const auto& v2e = c.m.table("V2E");
    const auto& e2v = c.m.table("E2V");
    for (std::int64_t v = 0; v < c.m.n_vertices; ++v) {
      for (int k = 0; k < 6; ++k) {
        const std::int32_t e = v2e(v, k), w = v2e2v(v, k);
        if (e < 0) {
          ASSERT_EQ(w, -1);
          continue;
        }
        ASSERT_NE(w, v);
        const std::set<std::int32_t> ends = {e2v(e, 0), e2v(e, 1)};
        ASSERT_EQ(ends, (std::set<std::int32_t>{static_cast<std::int32_t>(v), w}));
        ASSERT_TRUE(contains(row(v2e2v, w), v));
      }
    }
  }
}

TEST(MeshConsistency, V2EIsCounterClockwiseFromEastInFixedSlots) {
  // Directions E, NE, N, W, SW, S at every vertex; slot k is that direction even on the boundary.
  const std::pair<double, double> dirs[6] = {{1, 0}, {1, 1}, {0, 1}, {-1, 0}, {-1, -1}, {0, -1}};
  for (const Case& c : all_cases()) {
    SCOPED_TRACE(c.m.name);
    const auto& v2e2v = c.m.table("V2E2V");
    for (std::int64_t v = 0; v < c.m.n_vertices; ++v) {
      for (int k = 0; k < 6; ++k) {
        const std::int32_t w = v2e2v(v, k);
        const double x = c.m.vertex_x[v] + dirs[k].first, y = c.m.vertex_y[v] + dirs[k].second;
        const bool inside = x >= 0 && x < c.nx && y >= 0 && y < c.ny;
        if (!c.periodic && !inside) {
          ASSERT_EQ(w, -1) << "vertex " << v << " slot " << k;
          continue;
        }
        ASSERT_GE(w, 0);
        ASSERT_EQ(displacement(c, static_cast<std::int32_t>(v), w), dirs[k]) << "vertex " << v;
      }
    }
  }
}

TEST(MeshConsistency, TorusNeighboursDistinctOnSmallestTorus) {
  const Mesh m = make_torus_mesh(3, 3);
  for (const char* name : {"V2E", "V2C", "V2E2V", "C2E2C", "C2E2CO", "E2C2V", "E2C2E", "E2C"}) {
    const auto& t = m.table(name);
    for (std::int64_t i = 0; i < t.n_source; ++i) {
      const auto r = row(t, i);
      ASSERT_EQ(std::set<std::int32_t>(r.begin(), r.end()).size(), r.size()) << name << " row " << i;
    }
  }
}

TEST(MeshConsistency, TorusIdsFollowDocumentedNumbering) {
  const int nx = 4, ny = 5;
  const Mesh m = make_torus_mesh(nx, ny);
  auto v = [&](int i, int j) { return ((j + ny) % ny) * nx + (i + nx) % nx; };
  auto edge = [&](int kind, int i, int j) { return 3 * v(i, j) + kind; };
  auto cell = [&](int side, int i, int j) { return 2 * v(i, j) + side; };
  for (int j = 0; j < ny; ++j) {
    for (int i = 0; i < nx; ++i) {
      const auto& e2v = m.table("E2V");
      EXPECT_EQ(e2v(edge(0, i, j), 1), v(i + 1, j));
      EXPECT_EQ(e2v(edge(1, i, j), 1), v(i, j + 1));
      EXPECT_EQ(e2v(edge(2, i, j), 1), v(i + 1, j + 1));
      EXPECT_EQ(row(m.table("C2V"), cell(0, i, j)),
                (std::vector<std::int32_t>{v(i, j), v(i + 1, j), v(i + 1, j + 1)}));
      EXPECT_EQ(row(m.table("C2V"), cell(1, i, j)),
                (std::vector<std::int32_t>{v(i, j), v(i + 1, j + 1), v(i, j + 1)}));
      EXPECT_EQ(row(m.table("V2E"), v(i, j)),
                (std::vector<std::int32_t>{edge(0, i, j), edge(2, i, j), edge(1, i, j),
                                           edge(0, i - 1, j), edge(2, i - 1, j - 1), edge(1, i, j - 1)}));
      EXPECT_EQ(row(m.table("V2C"), v(i, j)),
                (std::vector<std::int32_t>{cell(0, i, j), cell(1, i, j), cell(0, i - 1, j),
                                           cell(1, i - 1, j - 1), cell(0, i - 1, j - 1), cell(1, i, j - 1)}));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Bounded mesh specifics

TEST(BoundedMesh, BoundaryEdgesHaveOneCellFirst) {
  for (auto [nx, ny] : {std::pair{2, 2}, {4, 5}, {10, 7}}) {
    const Mesh m = make_bounded_mesh(nx, ny);
    SCOPED_TRACE(m.name);
    const auto& e2c = m.table("E2C");
    const auto& e2v = m.table("E2V");
    std::int64_t boundary = 0;
    for (std::int64_t e = 0; e < m.n_edges; ++e) {
      EXPECT_NE(e2c(e, 0), -1);
      if (e2c(e, 1) != -1) continue;
      ++boundary;
      // Both vertices of a boundary edge lie on the same side of the rectangle.
      const double x0 = m.vertex_x[e2v(e, 0)], x1 = m.vertex_x[e2v(e, 1)];
      const double y0 = m.vertex_y[e2v(e, 0)], y1 = m.vertex_y[e2v(e, 1)];
      const bool on_side = (x0 == 0 && x1 == 0) || (x0 == nx - 1 && x1 == nx - 1) ||
                           (y0 == 0 && y1 == 0) || (y0 == ny - 1 && y1 == ny - 1);
      EXPECT_TRUE(on_side) << "edge " << e;
    }
    EXPECT_EQ(boundary, 2 * (nx - 1) + 2 * (ny - 1));
  }
}

TEST(BoundedMesh, SkipPatternsFollowE2C) {
  const Mesh m = make_bounded_mesh(6, 4);
  const auto& e2c = m.table("E2C");
  const auto& e2c2v = m.table("E2C2V");
  const auto& e2c2e = m.table("E2C2E");
  for (std::int64_t e = 0; e < m.n_edges; ++e) {
    const bool missing = e2c(e, 1) == -1;
    EXPECT_EQ(e2c2v(e, 3) == -1, missing);
    EXPECT_EQ(e2c2e(e, 2) == -1, missing);
    EXPECT_EQ(e2c2e(e, 3) == -1, missing);
    for (int k : {0, 1, 2}) EXPECT_NE(e2c2v(e, k), -1);
    for (int k : {0, 1}) EXPECT_NE(e2c2e(e, k), -1);
  }
}

TEST(BoundedMesh, VertexDegreesMatchGridPosition) {
  const int nx = 5, ny = 4;
  const Mesh m = make_bounded_mesh(nx, ny);
  const auto& v2e = m.table("V2E");
  const auto& v2c = m.table("V2C");
  std::vector<int> degree(m.n_vertices, 0);
  const auto& e2v = m.table("E2V");
  for (std::int64_t e = 0; e < m.n_edges; ++e) ++degree[e2v(e, 0)], ++degree[e2v(e, 1)];
  for (std::int64_t v = 0; v < m.n_vertices; ++v) {
    const auto r = row(v2e, v);
    EXPECT_EQ(6 - count(r, -1), degree[v]);
    const bool interior = m.vertex_x[v] > 0 && m.vertex_x[v] < nx - 1 && m.vertex_y[v] > 0 &&
                          m.vertex_y[v] < ny - 1;
    if (interior) {
      EXPECT_EQ(count(r, -1), 0);
      EXPECT_EQ(count(row(v2c, v), -1), 0);
    }
  }
  // Corners: (0,0) has E, NE, N; (nx-1,ny-1) has W, SW, S.
  EXPECT_EQ(row(m.table("V2E2V"), 0), (std::vector<std::int32_t>{1, nx + 1, nx, -1, -1, -1}));
  const std::int32_t last = nx * ny - 1;
  EXPECT_EQ(row(m.table("V2E2V"), last),
            (std::vector<std::int32_t>{-1, -1, -1, last - 1, last - nx - 1, last - nx}));
  EXPECT_EQ(count(row(v2c, 0), -1), 4);
  EXPECT_EQ(count(row(v2c, last), -1), 4);
}

TEST(BoundedMesh, InteriorMatchesTorusNeighbourhoodStructure) {
  // Away from the boundary, the bounded mesh sees the same local geometry as the torus: 6 edges,
  // 6 cells, and 3 cell neighbours for cells whose edges are all interior.
  const Mesh m = make_bounded_mesh(8, 8);
  const auto& c2e2c = m.table("C2E2C");
  const auto& c2v = m.table("C2V");
  for (std::int64_t c = 0; c < m.n_cells; ++c) {
    bool touches_boundary = false;
    for (std::int32_t v : row(c2v, c)) {
      touches_boundary |= m.vertex_x[v] == 0 || m.vertex_x[v] == 7 || m.vertex_y[v] == 0 ||
                          m.vertex_y[v] == 7;
    }
    if (!touches_boundary) {
      EXPECT_EQ(count(row(c2e2c, c), -1), 0) << "cell " << c;
    }
    EXPECT_LE(count(row(c2e2c, c), -1), 2);
  }
}

// ---------------------------------------------------------------------------------------------
// Geometry

TEST(MeshGeometry, LengthsAreDistancesAndAreasAddUp) {
  for (const Case& c : all_cases()) {
    SCOPED_TRACE(c.m.name);
    const auto& e2v = c.m.table("E2V");
    ASSERT_EQ(static_cast<std::int64_t>(c.m.edge_length.size()), c.m.n_edges);
    ASSERT_EQ(static_cast<std::int64_t>(c.m.cell_area.size()), c.m.n_cells);
    ASSERT_EQ(static_cast<std::int64_t>(c.m.dual_area.size()), c.m.n_vertices);
    for (std::int64_t e = 0; e < c.m.n_edges; ++e) {
      auto [dx, dy] = displacement(c, e2v(e, 0), e2v(e, 1));
      ASSERT_DOUBLE_EQ(c.m.edge_length[e], std::hypot(dx, dy));
    }
    double cells = 0, duals = 0;
    for (double a : c.m.cell_area) cells += a;
    for (double a : c.m.dual_area) {
      ASSERT_GT(a, 0);
      duals += a;
    }
    EXPECT_NEAR(cells, duals, 1e-9);
    if (c.periodic) {
      EXPECT_DOUBLE_EQ(cells, double(c.nx) * c.ny);
      for (double a : c.m.dual_area) ASSERT_NEAR(a, 1.0, 1e-12);
    } else {
      EXPECT_DOUBLE_EQ(cells, double(c.nx - 1) * (c.ny - 1));
    }
  }
}

TEST(MeshGeometry, VertexCoordinatesAreTheGrid) {
  const Mesh m = make_bounded_mesh(4, 3);
  for (std::int64_t v = 0; v < m.n_vertices; ++v) {
    EXPECT_EQ(m.vertex_x[v], double(v % 4));
    EXPECT_EQ(m.vertex_y[v], double(v / 4));
  }
}

// ---------------------------------------------------------------------------------------------
// Errors, determinism, speed

TEST(MeshErrors, BadSizesThrowArgumentError) {
  EXPECT_THROW(make_torus_mesh(2, 5), ArgumentError);
  EXPECT_THROW(make_torus_mesh(5, 2), ArgumentError);
  EXPECT_THROW(make_torus_mesh(0, 0), ArgumentError);
  EXPECT_THROW(make_torus_mesh(-3, 4), ArgumentError);
  EXPECT_THROW(make_bounded_mesh(1, 5), ArgumentError);
  EXPECT_THROW(make_bounded_mesh(5, 1), ArgumentError);
  EXPECT_THROW(make_torus_mesh(100000, 100000), ArgumentError);  // ids would overflow int32
  EXPECT_NO_THROW(make_torus_mesh(3, 3));
  EXPECT_NO_THROW(make_bounded_mesh(2, 2));
  try {
    make_torus_mesh(2, 7);
    FAIL() << "expected ArgumentError";
  } catch (const ArgumentError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("make_torus_mesh"), std::string::npos) << what;
    EXPECT_NE(what.find(">= 3"), std::string::npos) << what;
    EXPECT_NE(what.find("nx = 2"), std::string::npos) << what;
    EXPECT_NE(what.find("ny = 7"), std::string::npos) << what;
  }
  try {
    make_bounded_mesh(4, 1);
    FAIL() << "expected ArgumentError";
  } catch (const ArgumentError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(">= 2"), std::string::npos) << what;
    EXPECT_NE(what.find("ny = 1"), std::string::npos) << what;
  }
}

TEST(MeshErrors, UnknownTableThrowsConnectivityErrorNamingIt) {
  const Mesh m = make_torus_mesh(3, 4);
  EXPECT_THROW(m.table("nope"), ConnectivityError);
  try {
    m.table("nope");
    FAIL() << "expected ConnectivityError";
  } catch (const ConnectivityError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("'nope'"), std::string::npos) << what;
    EXPECT_NE(what.find("torus_3x4"), std::string::npos) << what;
    for (const auto& name : kTables) EXPECT_NE(what.find(name), std::string::npos) << name;
  }
  // A ConnectivityError is a fieldflow::Error.
  EXPECT_THROW(m.table("c2e"), Error);
}

// Table identities (what compiled programs use to tell tables apart): stable for one object, new
// for every new object, copy, assignment and move target, never reused.
TEST(MeshTables, EveryTableObjectHasItsOwnIdentity) {
  const Mesh a = make_torus_mesh(3, 3);
  const NeighborTable& e2v = a.table("E2V");
  const std::uint64_t id = e2v.identity();
  EXPECT_EQ(e2v.identity(), id);  // stable
  std::set<std::uint64_t> seen;
  for (const auto& [name, t] : a.tables) EXPECT_TRUE(seen.insert(t.identity()).second) << name;
  const Mesh b = a;  // a copy: same entries, new tables
  for (const auto& [name, t] : b.tables) EXPECT_TRUE(seen.insert(t.identity()).second) << name << " (copy)";
  NeighborTable assigned = b.table("V2E");
  const std::uint64_t before = assigned.identity();
  assigned = e2v;
  EXPECT_TRUE(seen.insert(before).second);
  EXPECT_TRUE(seen.insert(assigned.identity()).second) << "assignment draws a new identity";
  NeighborTable moved = std::move(assigned);
  EXPECT_TRUE(seen.insert(moved.identity()).second) << "a move target is a new object";
  const std::int32_t entries[2] = {0, 1};
  for (int i = 0; i < 3; ++i)  // views over the same entries are distinct tables
    EXPECT_TRUE(seen.insert(NeighborTable::view("E2V", "Edge", "Vertex", 1, 2, 2, entries, 2, 1).identity()).second);
}

TEST(MeshDeterminism, RepeatedCallsGiveIdenticalMeshes) {
  const Mesh a = make_bounded_mesh(7, 6), b = make_bounded_mesh(7, 6);
  ASSERT_EQ(a.tables.size(), b.tables.size());
  for (const auto& [name, t] : a.tables) EXPECT_EQ(t.data, b.table(name).data) << name;
  EXPECT_EQ(a.edge_orientation_v2e, b.edge_orientation_v2e);
  EXPECT_EQ(a.dual_area, b.dual_area);
}

TEST(MeshPerformance, LargeTorusForBenchmarksIsFast) {
  const auto start = std::chrono::steady_clock::now();
  const Mesh m = make_torus_mesh(500, 400);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(m.n_cells, 400000);
  EXPECT_EQ(m.n_edges, 600000);
  EXPECT_FALSE(m.table("C2E2CO").has_skip_values());
  // Well under a second in an optimised build; generous bound for sanitizer / debug builds.
  EXPECT_LT(seconds, 10.0);
  RecordProperty("seconds", std::to_string(seconds));
}

}  // namespace
}  // namespace fieldflow
