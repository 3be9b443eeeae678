#include "fieldflow/mesh.h"
#include "mesh/triangular_mesh.h"

namespace fieldflow {

Mesh make_torus_mesh(int nx, int ny) {
  // With fewer than 3 vertices per direction, a vertex's east and west neighbours coincide.
  return mesh_detail::build_triangular_mesh("make_torus_mesh", nx, ny, 3, /*periodic=*/true);
}

}  // namespace fieldflow
