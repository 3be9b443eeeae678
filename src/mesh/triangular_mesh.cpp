#include "mesh/triangular_mesh.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

#include <fmt/format.h>

#include "fieldflow/errors.h"

namespace fieldflow::mesh_detail {
namespace {

using i32 = std::int32_t;
using i64 = std::int64_t;

enum EdgeKind : int { kH = 0, kN = 1, kD = 2 };  // horizontal, vertical ("north"), diagonal
enum CellSide : int { kL = 0, kU = 1 };          // lower, upper triangle of a quad

// Vertex/edge/cell lookup by grid position; out-of-grid positions wrap (torus) or give -1.
struct Grid {
  i64 nx, ny;
  bool periodic;
  std::vector<i32> edge_id;  // [3 * vertex + kind] -> edge id or -1
  std::vector<i32> cell_id;  // [2 * quad + side] -> cell id or -1

  i64 vertex(i64 i, i64 j) const {
    if (periodic) {
      // Callers step at most one position outside the grid.
      if (i < 0) i += nx; else if (i >= nx) i -= nx;
      if (j < 0) j += ny; else if (j >= ny) j -= ny;
    } else if (i < 0 || i >= nx || j < 0 || j >= ny) {
      return -1;
    }
    return j * nx + i;
  }
  i32 edge(int kind, i64 i, i64 j) const {
    const i64 v = vertex(i, j);
    return v < 0 ? -1 : edge_id[3 * v + kind];
  }
  i32 cell(int side, i64 i, i64 j) const {
    const i64 q = vertex(i, j);
    return q < 0 ? -1 : cell_id[2 * q + side];
  }
};

NeighborTable make_table(const char* name, const char* source, const char* target, i64 n_source,
                         i64 n_target, int width) {
  NeighborTable t;
  t.name = name;
  t.source = source;
  t.target = target;
  t.n_source = n_source;
  t.n_target = n_target;
  t.max_neighbors = width;
  t.data.assign(static_cast<std::size_t>(n_source * width), -1);
  return t;
}

}  // namespace

Mesh build_triangular_mesh(const char* generator, int nx_in, int ny_in, int min_size, bool periodic) {
  if (nx_in < min_size || ny_in < min_size) {
    throw ArgumentError(fmt::format("{}: expected nx >= {} and ny >= {}, got nx = {}, ny = {}",
                                    generator, min_size, min_size, nx_in, ny_in));
  }
  const i64 nx = nx_in, ny = ny_in;
  const i64 nv = nx * ny;
  // The largest id space used is 3 * nv (edges) and tables index up to 6 * nv entries.
  constexpr i64 kMax = std::numeric_limits<i32>::max();
  if (nv > kMax / 6) {
    throw ArgumentError(fmt::format(
        "{}: expected nx * ny <= {} so that all indices fit int32, got nx = {}, ny = {} ({} vertices)",
        generator, kMax / 6, nx, ny, nv));
  }

  Grid g{nx, ny, periodic, std::vector<i32>(static_cast<std::size_t>(3 * nv), -1),
         std::vector<i32>(static_cast<std::size_t>(2 * nv), -1)};

  // Ids: edges vertex by vertex (h, n, d), cells quad by quad (L, U), skipping missing ones.
  std::vector<i64> edge_origin, cell_origin;  // the vertex / quad an edge / cell belongs to
  std::vector<int> edge_kind, cell_side;
  edge_origin.reserve(3 * nv);
  edge_kind.reserve(3 * nv);
  cell_origin.reserve(2 * nv);
  cell_side.reserve(2 * nv);
  for (i64 j = 0; j < ny; ++j) {
    for (i64 i = 0; i < nx; ++i) {
      const i64 v = j * nx + i;
      const bool has_east = periodic || i + 1 < nx;
      const bool has_north = periodic || j + 1 < ny;
      const bool exists[3] = {has_east, has_north, has_east && has_north};
      for (int k = 0; k < 3; ++k) {
        if (!exists[k]) continue;
        g.edge_id[3 * v + k] = static_cast<i32>(edge_origin.size());
        edge_origin.push_back(v);
        edge_kind.push_back(k);
      }
      if (has_east && has_north) {
        for (int s = 0; s < 2; ++s) {
          g.cell_id[2 * v + s] = static_cast<i32>(cell_origin.size());
          cell_origin.push_back(v);
          cell_side.push_back(s);
        }
      }
    }
  }
  const i64 ne = static_cast<i64>(edge_origin.size());
  const i64 nc = static_cast<i64>(cell_origin.size());

  Mesh m;
  m.name = fmt::format("{}_{}x{}", periodic ? "torus" : "bounded", nx, ny);
  m.n_vertices = nv;
  m.n_edges = ne;
  m.n_cells = nc;

  auto e2v = make_table("E2V", "Edge", "Vertex", ne, nv, 2);
  auto e2c = make_table("E2C", "Edge", "Cell", ne, nc, 2);
  auto c2v = make_table("C2V", "Cell", "Vertex", nc, nv, 3);
  auto c2e = make_table("C2E", "Cell", "Edge", nc, ne, 3);
  auto v2e = make_table("V2E", "Vertex", "Edge", nv, ne, 6);
  auto v2c = make_table("V2C", "Vertex", "Cell", nv, nc, 6);
  auto v2e2v = make_table("V2E2V", "Vertex", "Vertex", nv, nv, 6);
  auto e2c2v = make_table("E2C2V", "Edge", "Vertex", ne, nv, 4);
  auto e2c2e = make_table("E2C2E", "Edge", "Edge", ne, ne, 4);
  auto c2e2c = make_table("C2E2C", "Cell", "Cell", nc, nc, 3);
  auto c2e2co = make_table("C2E2CO", "Cell", "Cell", nc, nc, 4);

  // Edges: E2V, E2C (left, right; a missing one moves to the end), edge_length.
  m.edge_length.resize(static_cast<std::size_t>(ne));
  for (i64 e = 0; e < ne; ++e) {
    const i64 v = edge_origin[e], i = v % nx, j = v / nx;
    i64 end = -1;
    i32 left = -1, right = -1;
    switch (edge_kind[e]) {
      case kH: end = g.vertex(i + 1, j); left = g.cell(kL, i, j); right = g.cell(kU, i, j - 1); break;
      case kN: end = g.vertex(i, j + 1); left = g.cell(kL, i - 1, j); right = g.cell(kU, i, j); break;
      default: end = g.vertex(i + 1, j + 1); left = g.cell(kU, i, j); right = g.cell(kL, i, j); break;
    }
    if (left < 0) std::swap(left, right);
    e2v.data[2 * e] = static_cast<i32>(v);
    e2v.data[2 * e + 1] = static_cast<i32>(end);
    e2c.data[2 * e] = left;
    e2c.data[2 * e + 1] = right;
    m.edge_length[e] = edge_kind[e] == kD ? std::sqrt(2.0) : 1.0;
  }

  // Cells: C2V and C2E counter-clockwise from the quad origin.
  for (i64 c = 0; c < nc; ++c) {
    const i64 q = cell_origin[c], i = q % nx, j = q / nx;
    i64 vs[3];
    i32 es[3];
    if (cell_side[c] == kL) {
      vs[0] = q; vs[1] = g.vertex(i + 1, j); vs[2] = g.vertex(i + 1, j + 1);
      es[0] = g.edge(kH, i, j); es[1] = g.edge(kN, i + 1, j); es[2] = g.edge(kD, i, j);
    } else {
      vs[0] = q; vs[1] = g.vertex(i + 1, j + 1); vs[2] = g.vertex(i, j + 1);
      es[0] = g.edge(kD, i, j); es[1] = g.edge(kH, i, j + 1); es[2] = g.edge(kN, i, j);
    }
    for (int k = 0; k < 3; ++k) {
      c2v.data[3 * c + k] = static_cast<i32>(vs[k]);
      c2e.data[3 * c + k] = es[k];
    }
  }
  m.cell_area.assign(static_cast<std::size_t>(nc), 0.5);

  // Vertices: V2E (+ orientation, V2E2V), V2C counter-clockwise from east; geometry.
  m.edge_orientation_v2e.assign(static_cast<std::size_t>(6 * nv), 0);
  m.vertex_x.resize(static_cast<std::size_t>(nv));
  m.vertex_y.resize(static_cast<std::size_t>(nv));
  m.dual_area.assign(static_cast<std::size_t>(nv), 0.0);
  for (i64 j = 0; j < ny; ++j) {
    for (i64 i = 0; i < nx; ++i) {
      const i64 v = j * nx + i;
      const i32 es[6] = {g.edge(kH, i, j),     g.edge(kD, i, j),         g.edge(kN, i, j),
                         g.edge(kH, i - 1, j), g.edge(kD, i - 1, j - 1), g.edge(kN, i, j - 1)};
      const i32 cs[6] = {g.cell(kL, i, j),     g.cell(kU, i, j),         g.cell(kL, i - 1, j),
                         g.cell(kU, i - 1, j - 1), g.cell(kL, i - 1, j - 1), g.cell(kU, i, j - 1)};
      for (int k = 0; k < 6; ++k) {
        const i64 slot = 6 * v + k;
        v2e.data[slot] = es[k];
        v2c.data[slot] = cs[k];
        if (es[k] >= 0) {
          const bool outgoing = e2v.data[2 * es[k]] == v;
          m.edge_orientation_v2e[slot] = outgoing ? 1 : -1;
          v2e2v.data[slot] = e2v.data[2 * es[k] + (outgoing ? 1 : 0)];
        }
        if (cs[k] >= 0) m.dual_area[v] += m.cell_area[cs[k]] / 3.0;
      }
      m.vertex_x[v] = static_cast<double>(i);
      m.vertex_y[v] = static_cast<double>(j);
    }
  }

  // E2C2V and E2C2E from E2C and the cells' C2V / C2E.
  for (i64 e = 0; e < ne; ++e) {
    e2c2v.data[4 * e] = e2v.data[2 * e];
    e2c2v.data[4 * e + 1] = e2v.data[2 * e + 1];
    for (int s = 0; s < 2; ++s) {
      const i32 c = e2c.data[2 * e + s];
      if (c < 0) continue;
      int pos = 0;  // position of e in C2E(c); C2V(c, pos + 2) is the vertex opposite e
      while (c2e.data[3 * c + pos] != e) ++pos;
      e2c2v.data[4 * e + 2 + s] = c2v.data[3 * c + (pos + 2) % 3];
      e2c2e.data[4 * e + 2 * s] = c2e.data[3 * c + (pos + 1) % 3];
      e2c2e.data[4 * e + 2 * s + 1] = c2e.data[3 * c + (pos + 2) % 3];
    }
  }

  // C2E2C (across each C2E edge) and C2E2CO (self first).
  for (i64 c = 0; c < nc; ++c) {
    c2e2co.data[4 * c] = static_cast<i32>(c);
    for (int k = 0; k < 3; ++k) {
      const i32 e = c2e.data[3 * c + k];
      const i32 a = e2c.data[2 * e], b = e2c.data[2 * e + 1];
      const i32 across = a == c ? b : a;
      c2e2c.data[3 * c + k] = across;
      c2e2co.data[4 * c + 1 + k] = across;
    }
  }

  for (auto* t : {&e2v, &e2c, &c2v, &c2e, &v2e, &v2c, &v2e2v, &e2c2v, &e2c2e, &c2e2c, &c2e2co}) {
    std::string key = t->name;
    m.tables.emplace(std::move(key), std::move(*t));
  }
  return m;
}

}  // namespace fieldflow::mesh_detail
