// Mesh helpers of the C API: the element counts and neighbour tables of fieldflow's triangular
// meshes (include/fieldflow/mesh.h), copied into caller memory in any order, so C and Fortran
// drivers can run the unstructured examples on the same mesh the C++ tests use.
#include <fmt/format.h>

#include "capi/status.h"
#include "fieldflow/errors.h"
#include "fieldflow/fieldflow.h"
#include "fieldflow/mesh.h"

namespace fieldflow::capi {
namespace {

Mesh make_mesh(const char* kind, int nx, int ny, const char* function) {
  const std::string k = kind ? kind : "";
  if (k == "torus") return make_torus_mesh(nx, ny);
  if (k == "bounded") return make_bounded_mesh(nx, ny);
  throw ArgumentError(fmt::format("{}: mesh kind '{}' is unknown: expected \"torus\" or \"bounded\"", function,
                                  kind ? kind : "NULL"));
}

}  // namespace
}  // namespace fieldflow::capi

using namespace fieldflow;

extern "C" {

ff_status ff_mesh_sizes(const char* kind, int nx, int ny, int64_t* n_vertices, int64_t* n_edges, int64_t* n_cells) {
  return capi::guarded([&] {
    const Mesh m = capi::make_mesh(kind, nx, ny, "ff_mesh_sizes");
    if (n_vertices) *n_vertices = m.n_vertices;
    if (n_edges) *n_edges = m.n_edges;
    if (n_cells) *n_cells = m.n_cells;
  });
}

ff_status ff_mesh_table(const char* kind, int nx, int ny, const char* table, int32_t* data, int64_t n_source,
                        int max_neighbors, int64_t source_stride, int64_t neighbor_stride) {
  return capi::guarded([&] {
    const Mesh m = capi::make_mesh(kind, nx, ny, "ff_mesh_table");
    const NeighborTable& t = m.table(table ? table : "");
    if (t.n_source != n_source || t.max_neighbors != max_neighbors)
      throw ConnectivityError(fmt::format("ff_mesh_table: table '{}' of the {} mesh {}x{} is {} x {}, given {} x {}",
                                          t.name, kind, nx, ny, t.n_source, t.max_neighbors, n_source, max_neighbors));
    if (data == nullptr && t.n_source * t.max_neighbors > 0)
      throw ArgumentError(fmt::format("ff_mesh_table: data for table '{}' is NULL", t.name));
    if (source_stride < 0 || neighbor_stride < 0)
      throw ArgumentError(fmt::format("ff_mesh_table: table '{}': strides must be >= 0, given ({}, {})", t.name,
                                      source_stride, neighbor_stride));
    for (std::int64_t i = 0; i < t.n_source; ++i)
      for (int n = 0; n < t.max_neighbors; ++n) data[i * source_stride + n * neighbor_stride] = t(i, n);
  });
}

}  // extern "C"
