// Sparse (local) fields: a field over [Edge, E2C2VDim] holds one weight per edge and neighbour.
// Chained shifts: fe(V2E)(E2V[0]) is, for each edge, the edges around its first vertex.
#include "fieldflow/dsl.h"

using namespace fieldflow;

ir::Program sparse_program() {
  const Dimension Vertex = horizontal_dim("Vertex"), Edge = horizontal_dim("Edge");
  const Connectivity E2C2V = make_connectivity("E2C2V", Edge, Vertex, 4);
  const Connectivity E2V = make_connectivity("E2V", Edge, Vertex, 2);
  const Connectivity V2E = make_connectivity("V2E", Vertex, Edge, 6);
  ProgramBuilder p("sparse");
  Expr fv = p.field("fv", {Vertex}, DType::float64), fe = p.field("fe", {Edge}, DType::float64);
  Expr w = p.field("w", {Edge, E2C2V.local}, DType::float64);
  Expr interp = p.field("interp", {Edge}, DType::float64), peak = p.field("peak", {Edge}, DType::float64);
  Expr n = p.scalar("n_edges", DType::int32);
  p.call("stencil", make_tuple({neighbor_sum(w * fv(E2C2V), E2C2V), max_over(fe(V2E)(E2V[0]), V2E)}),
         {interp, peak}, {{Edge, 0, n}});
  return p.build();  // parameters: fv, fe, w, interp, peak, n_edges, then E2C2V, V2E, E2V
}
