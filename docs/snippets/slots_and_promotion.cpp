// One neighbour slot of a sparse field, w(slot(E2C2V, 2)) (GT4Py: w[E2C2VDim(2)]), and implicit
// dimension promotion: an [Edge] field times a [K] field is over [Edge, K], no broadcast needed.
#include "fieldflow/dsl.h"

using namespace fieldflow;

ir::Program slot_program() {
  const Dimension Vertex = horizontal_dim("Vertex"), Edge = horizontal_dim("Edge"), K = vertical_dim("K");
  const Connectivity E2C2V = make_connectivity("E2C2V", Edge, Vertex, 4);
  ProgramBuilder p("slots");
  Expr w = p.field("w", {Edge, E2C2V.local, K}, DType::float64);  // one weight per edge, neighbour, level
  Expr length = p.field("length", {Edge}, DType::float64), depth = p.field("depth", {K}, DType::float64);
  Expr out = p.field("out", {Edge, K}, DType::float64);
  Expr n_edges = p.scalar("n_edges", DType::int32), nk = p.scalar("nk", DType::int32);
  p.call("third_weight", w(slot(E2C2V, 2)) + length * depth, {out}, {{Edge, 0, n_edges}, {K, 0, nk}});
  return p.build();  // no connectivity parameter: a stored slot needs no table
}
