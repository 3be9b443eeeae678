#pragma once
// Unstructured meshes (ICON-style neighbour tables) for examples, tests and benchmarks.
//
// Both generators triangulate the same nx x ny grid of vertices with unit spacing:
//
//   vertex v(i,j) = j*nx + i          at (x, y) = (i, j),   0 <= i < nx, 0 <= j < ny
//
// Every vertex (i,j) is the origin of up to three edges, every grid quad (i,j)..(i+1,j+1) holds two
// triangles, the quad being cut along its south-west -> north-east diagonal:
//
//   horizontal edge  h(i,j): v(i,j) -> v(i+1,j)      lower cell L(i,j): v(i,j), v(i+1,j), v(i+1,j+1)
//   vertical edge    n(i,j): v(i,j) -> v(i,j+1)      upper cell U(i,j): v(i,j), v(i+1,j+1), v(i,j+1)
//   diagonal edge    d(i,j): v(i,j) -> v(i+1,j+1)
//
// Torus (make_torus_mesh): indices wrap around in both directions. Edge ids are 3*v(i,j) + {0: h,
// 1: n, 2: d}, cell ids are 2*v(i,j) + {0: L, 1: U}; n_edges = 3*nx*ny, n_cells = 2*nx*ny, every
// vertex has exactly 6 edges and 6 cells, V - E + C = 0, and no table contains -1.
//
// Bounded (make_bounded_mesh): no wrap-around; an edge or cell that would leave the grid does not
// exist. Ids are assigned in the same order (vertex by vertex, h/n/d; quad by quad, L/U), skipping
// the missing ones, so they stay dense: n_edges = (nx-1)*ny + nx*(ny-1) + (nx-1)*(ny-1),
// n_cells = 2*(nx-1)*(ny-1), V - E + C = 1. Missing neighbours are -1 ("skip values"); where the
// -1 sits is documented per table below.
//
// Tables (name: source -> target, width) and their orderings:
//   E2V    Edge -> Vertex (2): [origin, end] of the directed edge as drawn above. Never -1.
//   E2C    Edge -> Cell (2): [cell left of the directed edge, cell right of it]. Bounded mesh: a
//          boundary edge lists its single cell first, E2C(e,1) = -1 (padded at the end).
//   C2V    Cell -> Vertex (3): counter-clockwise, starting at the quad's origin v(i,j) (listed
//          above). Never -1.
//   C2E    Cell -> Edge (3): counter-clockwise; edge k joins C2V(c,k) and C2V(c,(k+1)%3), i.e.
//          L(i,j): [h(i,j), n(i+1,j), d(i,j)], U(i,j): [d(i,j), h(i,j+1), n(i,j)]. Never -1.
//   V2E    Vertex -> Edge (6): counter-clockwise by direction, starting east:
//          [E h(i,j), NE d(i,j), N n(i,j), W h(i-1,j), SW d(i-1,j-1), S n(i,j-1)].
//          Bounded mesh: fixed positions, a missing edge is -1 in its direction's slot.
//   V2E2V  Vertex -> Vertex (6): the vertex at the other end of V2E(v,k), same slots (so -1
//          exactly where V2E is -1).
//   V2C    Vertex -> Cell (6): counter-clockwise, slot k is the cell between V2E directions k and
//          k+1: [L(i,j), U(i,j), L(i-1,j), U(i-1,j-1), L(i-1,j-1), U(i,j-1)]. Bounded mesh: fixed
//          positions, -1 in the slot of a missing cell.
//   E2C2V  Edge -> Vertex (4): ICON convention [E2V(e,0), E2V(e,1), vertex of E2C(e,0) not on e,
//          vertex of E2C(e,1) not on e]. Bounded mesh: slot 3 is -1 where E2C(e,1) is.
//   E2C2E  Edge -> Edge (4): the other two edges of E2C(e,0), then those of E2C(e,1); within a cell
//          they follow its C2E order cyclically after e. Bounded mesh: slots 2, 3 are -1 where
//          E2C(e,1) is.
//   C2E2C  Cell -> Cell (3): slot k is the cell across edge C2E(c,k). Bounded mesh: fixed
//          positions, -1 in the slot of a boundary edge. Never the cell itself.
//   C2E2CO Cell -> Cell (4): [self, C2E2C(c,0), C2E2C(c,1), C2E2C(c,2)] (self FIRST).
//
// edge_orientation_v2e has the shape of V2E: +1 if the edge points away from the vertex (the vertex
// is E2V(e,0)), -1 if it points towards it, 0 for a skipped entry.
// Geometry: edge_length 1 (h, n) or sqrt(2) (d); cell_area 0.5; dual_area(v) = one third of the
// area of each cell around v (1.0 everywhere on the torus, less on the bounded mesh's boundary), so
// the dual areas add up to the total cell area.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace fieldflow {

namespace detail {
// A number no other table object of the process has had: a new object, a copy and an assignment
// each draw a fresh one (moves copy). See NeighborTable::identity().
class TableIdentity {
 public:
  TableIdentity() : value_(next()) {}
  TableIdentity(const TableIdentity&) : value_(next()) {}
  TableIdentity& operator=(const TableIdentity&) {
    value_ = next();
    return *this;
  }
  std::uint64_t value() const { return value_; }

 private:
  static std::uint64_t next();
  std::uint64_t value_;
};
}  // namespace detail

// An int32 neighbour table [n_source][max_neighbors], -1 = skipped. Either owned (`data`,
// row-major) or a view over caller memory (NeighborTable::view) with any strides.
struct NeighborTable {
  std::string name;            // "E2V", "C2E2CO", ...
  std::string source, target;  // "Edge", "Vertex", "Cell"
  std::int64_t n_source = 0, n_target = 0;
  int max_neighbors = 0;
  std::vector<std::int32_t> data;  // owned entries, row-major; empty for a view

  // A view: entry (i, n) is entries[i * source_stride + n * neighbor_stride]; no copy, the caller
  // keeps the memory alive. C order [n_source][max_neighbors]: (max_neighbors, 1); Fortran order
  // (n_source, max_neighbors): (1, n_source). Throws ConnectivityError for null entries with a
  // non-empty shape, misaligned entries, negative sizes or strides.
  static NeighborTable view(std::string name, std::string source, std::string target, std::int64_t n_source,
                            std::int64_t n_target, int max_neighbors, const std::int32_t* entries,
                            std::int64_t source_stride, std::int64_t neighbor_stride);
  bool is_view() const { return view_entries_ != nullptr; }

  const std::int32_t* entries() const { return view_entries_ ? view_entries_ : data.data(); }
  std::int64_t source_stride() const { return view_entries_ ? source_stride_ : max_neighbors; }
  std::int64_t neighbor_stride() const { return view_entries_ ? neighbor_stride_ : 1; }
  std::int32_t operator()(std::int64_t i, int n) const {
    return entries()[i * source_stride() + static_cast<std::int64_t>(n) * neighbor_stride()];
  }
  bool has_skip_values() const;  // any entry == -1
  // Bytes from entries() to the end of the last entry the strides reach; 0 without entries.
  std::size_t span_bytes() const;

  // Which table object this is, unique in the process (also against freed ones). A compiled
  // program checks a table's entries, and a cuda program copies them to the device, when a call
  // gives another table than the last; comparing identities rather than addresses makes a new
  // table object count as another table even where it reuses a freed table's memory. A table
  // rewritten in place keeps its identity: pass a new table object to have it checked again.
  std::uint64_t identity() const { return identity_.value(); }

 private:
  detail::TableIdentity identity_;
  const std::int32_t* view_entries_ = nullptr;
  std::int64_t source_stride_ = 0, neighbor_stride_ = 0;
};

struct Mesh {
  std::string name;  // "torus_4x5", "bounded_4x5"
  std::int64_t n_vertices = 0, n_edges = 0, n_cells = 0;
  std::map<std::string, NeighborTable> tables;  // keyed by table name

  // Geometry for examples.
  std::vector<double> vertex_x, vertex_y;  // per vertex
  std::vector<double> edge_length;         // per edge
  std::vector<double> dual_area;           // per vertex
  std::vector<double> cell_area;           // per cell
  std::vector<std::int32_t> edge_orientation_v2e;  // per V2E entry, see above

  // Throws ConnectivityError naming the table and listing the available ones.
  const NeighborTable& table(const std::string& name) const;
  // "Vertex", "Edge" or "Cell"; anything else throws ArgumentError.
  std::int64_t size_of(const std::string& location) const;
};

// Periodic triangular mesh, nx, ny >= 3 (so all neighbours are distinct); no skip values.
// Throws ArgumentError otherwise, or if the mesh would not fit int32 indices.
Mesh make_torus_mesh(int nx, int ny);
// Same triangulation without wrap-around, nx, ny >= 2; tables contain -1 at the boundary.
Mesh make_bounded_mesh(int nx, int ny);

}  // namespace fieldflow
