// A model's own arrays as fieldflow fields and tables: no copies, no allocation per step.
#include <cstdint>
#include <vector>

#include "fieldflow/compile.h"
#include "fieldflow/dsl.h"
#include "fieldflow/mesh.h"

using namespace fieldflow;

// u(ni, nj, nk) in Fortran order with a padded leading dimension ld >= ni: element (i, j, k) is
// u[i + ld * (j + nj * k)]. `steps` diffusion steps between two time levels, u and scratch (whose
// boundary points must equal u's), swapped after every step; an even number leaves the result in u.
void diffuse_fortran_arrays(double* u, double* scratch, int ni, int nj, int nk, int ld, int steps) {
  const Dimension I = horizontal_dim("I"), J = horizontal_dim("J"), K = vertical_dim("K");
  ProgramBuilder pb("diffuse");
  Expr a = pb.field("a", {I, J, K}, DType::float64), b = pb.field("b", {I, J, K}, DType::float64);
  Expr n = pb.scalar("ni", DType::int32), m = pb.scalar("nj", DType::int32), l = pb.scalar("nk", DType::int32);
  pb.call("step", a + 0.1 * (a(I + 1) + a(I - 1) + a(J + 1) + a(J - 1) - 4.0 * a), {b},
          {{I, 1, n - 1}, {J, 1, m - 1}, {K, 0, l}});
  CompileOptions options;
  options.layout = Layout::horizontal_fastest;  // I has unit stride, as in Fortran
  CompiledProgram program = compile(pb.build(), options);

  const std::vector<std::int64_t> strides = {1, ld, std::int64_t{ld} * nj};  // in elements
  Field now = Field::view(u, {I, J, K}, DType::float64, {ni, nj, nk}, strides);
  Field next = Field::view(scratch, {I, J, K}, DType::float64, {ni, nj, nk}, strides);
  Arguments args;  // built once: it refers to the two views, whose memory changes every step
  args.field("a", now).field("b", next).scalar("ni", ni).scalar("nj", nj).scalar("nk", nk);
  for (int s = 0; s < steps; ++s) {
    program(args);
    void* old = now.data();
    now.set_view_data(next.data());  // the new time level becomes the input ...
    next.set_view_data(old);         // ... and the old one is overwritten next
  }
}

// ICON keeps neighbour tables as Fortran arrays e2v(n_edges, 2): neighbour k of edge e is
// e2v[e + n_edges * k] (0-based indices here). The gradient of psi along every edge.
void edge_gradient(const std::int32_t* e2v, const double* psi, double* grad, int n_vertices, int n_edges) {
  const Dimension Vertex = horizontal_dim("Vertex"), Edge = horizontal_dim("Edge");
  const Connectivity E2V = make_connectivity("E2V", Edge, Vertex, 2);
  ProgramBuilder pb("edge_gradient");
  Expr p = pb.field("psi", {Vertex}, DType::float64), g = pb.field("grad", {Edge}, DType::float64);
  Expr ne = pb.scalar("n_edges", DType::int32);
  pb.call("gradient", p(E2V[1]) - p(E2V[0]), {g}, {{Edge, 0, ne}});
  CompiledProgram program = compile(pb.build());

  const NeighborTable table = NeighborTable::view("E2V", "Edge", "Vertex", n_edges, n_vertices, 2, e2v,
                                                  /*source_stride=*/1, /*neighbor_stride=*/n_edges);
  Field psi_view = Field::view(const_cast<double*>(psi), {Vertex}, DType::float64, {n_vertices}, {1});
  Field grad_view = Field::view(grad, {Edge}, DType::float64, {n_edges}, {1});
  program(Arguments().field("psi", psi_view).field("grad", grad_view).connectivity("E2V", table).scalar("n_edges", n_edges));
}
