// A few time steps of a diffusion on a mesh partitioned over MPI ranks. METIS splits the cells;
// each rank holds its part of the mesh plus the halo the program reads, and every call exchanges
// exactly that halo, computing the points that need none while the messages travel. At the end
// the result is compared with the same steps run on one rank over the whole mesh.
//   mpirun -np 4 build/release/tests/distributed/distributed_diffusion
#include <mpi.h>

#include <cmath>
#include <cstdio>

#include "fieldflow/distributed.h"
#include "fieldflow/dsl.h"

using namespace fieldflow;

const Dimension Vertex = horizontal_dim("Vertex"), Edge = horizontal_dim("Edge"), K = vertical_dim("K");
const Connectivity E2V = make_connectivity("E2V", Edge, Vertex, 2);
const Connectivity V2E = make_connectivity("V2E", Vertex, Edge, 6);

// u + dt * (the differences along the edges around each vertex, signed towards the vertex)
ir::Program diffusion() {
  ProgramBuilder p("mesh_diffusion");
  Expr u = p.field("u", {Vertex, K}, DType::float64);
  Expr sign = p.field("sign", {Vertex, V2E.local}, DType::float64);
  Expr out = p.field("out", {Vertex, K}, DType::float64);
  Expr nv = p.scalar("n_vertices", DType::int32), nk = p.scalar("nk", DType::int32);
  const Expr along_edge = u(E2V[1]) - u(E2V[0]);
  p.call("diffuse", u + 0.1 * neighbor_sum(along_edge(V2E) * sign, V2E), {out}, {{Vertex, 0, nv}, {K, 0, nk}});
  return p.build();
}

// A field over the vertices of `mesh` (u: a bump, sign: the edge orientation around the vertex).
Field vertex_field(const Mesh& mesh, int nk, bool bump) {
  Field f({Vertex, K}, DType::float64, {mesh.n_vertices, nk});
  for (std::int64_t v = 0; v < mesh.n_vertices; ++v)
    for (int k = 0; k < nk; ++k) {
      const double dx = mesh.vertex_x[v] - 12, dy = mesh.vertex_y[v] - 10;
      f.at<double>({v, k}) = bump ? std::exp(-(dx * dx + dy * dy) / 8) + k : 0.0;
    }
  return f;
}
Field sign_field(const Mesh& mesh) {
  Field f({Vertex, V2E.local}, DType::float64, {mesh.n_vertices, 6});
  for (std::int64_t v = 0; v < mesh.n_vertices; ++v)
    for (int k = 0; k < 6; ++k) f.at<double>({v, k}) = mesh.edge_orientation_v2e[v * 6 + k];
  return f;
}

// Runs `steps` steps from u into u (ping-pong with a second field), one call per step.
template <class Program>
void run(Program& program, const Mesh& mesh, Field& u, Field& sign, int nk, int steps, std::int64_t n_vertices) {
  Field next = u.clone();
  Arguments even, odd;
  even.field("u", u).field("sign", sign).field("out", next);
  odd.field("u", next).field("sign", sign).field("out", u);
  for (Arguments* a : {&even, &odd})
    a->scalar("n_vertices", static_cast<std::int32_t>(n_vertices)).scalar("nk", nk)
        .connectivity("E2V", mesh.table("E2V")).connectivity("V2E", mesh.table("V2E"));
  for (int s = 0; s < steps; ++s) program(s % 2 == 0 ? even : odd);
  if (steps % 2 == 1) u.copy_values_from(next);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int differing = 0;
  {
    const int nk = 4, steps = 6;
    const Mesh global = make_torus_mesh(24, 20);  // the same on every rank
    const ir::Program program = diffusion();

    // Partition for this program's reads, compile, run on the rank's part of the mesh.
    distributed::MeshDecomposition parts(MPI_COMM_WORLD, global, {program});
    distributed::DistributedProgram step(program, parts);
    const Mesh& mesh = parts.local_mesh();  // owned vertices first, then the halo
    Field u = vertex_field(mesh, nk, true), sign = sign_field(mesh);
    run(step, mesh, u, sign, nk, steps, global.n_vertices);  // global sizes, local fields and tables

    // The same steps on one rank over the whole mesh, against the gathered result.
    CompiledProgram whole = compile(program);
    Field reference = vertex_field(global, nk, true), reference_sign = sign_field(global);
    run(whole, global, reference, reference_sign, nk, steps, global.n_vertices);
    Field gathered = vertex_field(global, nk, false);
    distributed::gather(parts, u, gathered);
    double total = 0;
    for (std::int64_t v = 0; v < global.n_vertices; ++v)
      for (int k = 0; k < nk; ++k) {
        total += gathered.at<double>({v, k});
        differing += gathered.at<double>({v, k}) != reference.at<double>({v, k});
      }
    const auto stats = step.exchange_stats();
    if (parts.rank() == 0)
      std::printf("%d ranks, %d steps: total %.6f, %lld bytes sent per step by rank 0, points differing from "
                  "one rank: %d\n", parts.size(), steps, total, static_cast<long long>(stats.bytes_sent / stats.calls),
                  differing);
  }
  MPI_Finalize();
  return differing == 0 ? 0 : 1;
}
