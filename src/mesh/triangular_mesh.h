#pragma once
// Internal: the one builder behind make_torus_mesh and make_bounded_mesh (see fieldflow/mesh.h for
// the numbering and the table orderings it produces).
#include <string>

#include "fieldflow/mesh.h"

namespace fieldflow::mesh_detail {

// Validates nx, ny (>= min_size, and small enough for int32 ids; ArgumentError otherwise) naming
// `generator` in the message, then builds the triangulated nx x ny grid, periodic or not.
Mesh build_triangular_mesh(const char* generator, int nx, int ny, int min_size, bool periodic);

}  // namespace fieldflow::mesh_detail
