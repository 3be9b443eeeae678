// On a mesh: vertex values averaged onto edges (fixed neighbour shifts), then averaged back around
// each vertex (a local field reduced with neighbor_sum). On the bounded mesh, boundary vertices
// have fewer than six edges: their -1 table entries are skipped by the reductions.
#include "fieldflow/dsl.h"
#include "fieldflow/mesh.h"
#include "fieldflow/reference.h"

using namespace fieldflow;

void vertex_edge_vertex(const Mesh& mesh, Field& fv, Field& fe, Field& gv) {
  const Dimension Vertex = horizontal_dim("Vertex"), Edge = horizontal_dim("Edge");
  const Connectivity E2V = make_connectivity("E2V", Edge, Vertex, 2);
  const Connectivity V2E = make_connectivity("V2E", Vertex, Edge, 6);
  ProgramBuilder p("vev");
  Expr v = p.field("fv", {Vertex}, DType::float64);
  Expr e = p.field("fe", {Edge}, DType::float64), g = p.field("gv", {Vertex}, DType::float64);
  Expr ne = p.scalar("n_edges", DType::int32), nv = p.scalar("n_vertices", DType::int32);
  const Expr edges_around = neighbor_sum(broadcast(1.0, {Vertex, V2E.local}), V2E);  // 6 or fewer
  p.call("to_edges", 0.5 * (v(E2V[0]) + v(E2V[1])), {e}, {{Edge, 0, ne}});
  p.call("to_vertices", neighbor_sum(e(V2E), V2E) / edges_around, {g}, {{Vertex, 0, nv}});
  run_reference(p.build(), Arguments()
                               .field("fv", fv).field("fe", fe).field("gv", gv)
                               .scalar("n_edges", mesh.n_edges).scalar("n_vertices", mesh.n_vertices)
                               .connectivity("E2V", mesh.table("E2V"))    // tables are given per call,
                               .connectivity("V2E", mesh.table("V2E")));  // named like the connectivity
}
