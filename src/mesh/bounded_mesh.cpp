#include "fieldflow/mesh.h"
#include "mesh/triangular_mesh.h"

namespace fieldflow {

Mesh make_bounded_mesh(int nx, int ny) {
  // At least one grid quad (two cells) is needed.
  return mesh_detail::build_triangular_mesh("make_bounded_mesh", nx, ny, 2, /*periodic=*/false);
}

}  // namespace fieldflow
