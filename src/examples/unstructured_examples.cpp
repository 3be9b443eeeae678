// Unstructured examples on the periodic triangular mesh make_torus_mesh(nx, ny) with nk levels
// (or, with ExampleSize::bounded, on make_bounded_mesh, whose tables have skip values).
//
// Programs take the number of elements of the location they write (n_vertices, n_edges or
// n_cells) and nk as int32 scalars, and write [0, n) x [0, nk). Inputs hold smooth periodic
// functions of the elements' positions (vertices, edge midpoints, cell centroids); geometric
// inputs (lengths, areas, orientations, normals) come from the mesh.
#include <cmath>

#include "examples/support.h"

namespace fieldflow::examples::detail {

namespace {

constexpr double f64_bytes = 8, index_bytes = 4;

// Positions of every vertex, edge midpoint and cell centroid, unwrapped across the torus seam
// (each element's vertices taken nearest to its first one).
struct Positions {
  std::vector<double> vx, vy, ex, ey, cx, cy;
  std::vector<double> edge_dx, edge_dy;  // E2V[0] -> E2V[1]
};

double nearest(double d, double period) {
  if (d > period / 2) return d - period;
  if (d < -period / 2) return d + period;
  return d;
}

Positions positions(const Mesh& m, int nx, int ny) {
  Positions p;
  p.vx = m.vertex_x;
  p.vy = m.vertex_y;
  const NeighborTable& e2v = m.table("E2V");
  for (std::int64_t e = 0; e < m.n_edges; ++e) {
    const auto v0 = e2v(e, 0), v1 = e2v(e, 1);
    const double dx = nearest(p.vx[v1] - p.vx[v0], nx), dy = nearest(p.vy[v1] - p.vy[v0], ny);
    p.edge_dx.push_back(dx);
    p.edge_dy.push_back(dy);
    p.ex.push_back(p.vx[v0] + dx / 2);
    p.ey.push_back(p.vy[v0] + dy / 2);
  }
  const NeighborTable& c2v = m.table("C2V");
  for (std::int64_t c = 0; c < m.n_cells; ++c) {
    double sx = 0, sy = 0;
    const auto v0 = c2v(c, 0);
    for (int k = 0; k < 3; ++k) {
      const auto v = c2v(c, k);
      sx += nearest(p.vx[v] - p.vx[v0], nx);
      sy += nearest(p.vy[v] - p.vy[v0], ny);
    }
    p.cx.push_back(p.vx[v0] + sx / 3);
    p.cy.push_back(p.vy[v0] + sy / 3);
  }
  return p;
}

// Common state of an unstructured instance: the mesh and the element positions.
struct MeshSetup {
  std::shared_ptr<const Mesh> mesh;
  Positions pos;
  int nx, ny, nk;
  Layout layout;
  std::uint64_t seed;

  MeshSetup(const ExampleSize& s, Layout l, std::uint64_t sd)
      : mesh(std::make_shared<const Mesh>(s.bounded ? make_bounded_mesh(s.nx, s.ny) : make_torus_mesh(s.nx, s.ny))),
        pos(positions(*mesh, s.nx, s.ny)), nx(s.nx), ny(s.ny), nk(s.nk), layout(l), seed(sd) {}

  std::int64_t count(const Dimension& loc) const { return mesh->size_of(loc.name); }
  const std::vector<double>& xs(const Dimension& loc) const {
    return loc == dim_vertex() ? pos.vx : loc == dim_edge() ? pos.ex : pos.cx;
  }
  const std::vector<double>& ys(const Dimension& loc) const {
    return loc == dim_vertex() ? pos.vy : loc == dim_edge() ? pos.ey : pos.cy;
  }

  // A float64 [loc, K] field holding a seeded wave of the element positions and the level.
  Field level_field(const std::string& salt, const Dimension& loc, double center, double amplitude) const {
    Field f({loc, dim_K()}, DType::float64, {count(loc), nk}, {0, 0}, layout);
    const Wave w(seed, salt, center, amplitude, nx, ny);
    const auto &x = xs(loc), &y = ys(loc);
    fill(f, [&](const std::vector<std::int64_t>& i) { return w(x[i[0]], y[i[0]], static_cast<double>(i[1])); });
    return f;
  }
  // A float64 [loc] field from a per-element value.
  Field element_field(const Dimension& loc, const std::function<double(std::int64_t)>& value) const {
    Field f({loc}, DType::float64, {count(loc)}, {0}, layout);
    fill(f, [&](const std::vector<std::int64_t>& i) { return value(i[0]); });
    return f;
  }
  // A float64 [conn.source, conn.local] field from a per-(element, neighbour slot) value.
  Field local_field(const Connectivity& conn, const std::function<double(std::int64_t, std::int64_t)>& value) const {
    Field f({conn.source, conn.local}, DType::float64, {count(conn.source), conn.max_neighbors}, {0, 0}, layout);
    fill(f, [&](const std::vector<std::int64_t>& i) { return value(i[0], i[1]); });
    return f;
  }

  ExampleInstance instance(const ir::Program& p, const std::string& n_name, const Dimension& loc) const {
    ExampleInstance inst;
    inst.mesh = mesh;
    inst.connectivities = connectivity_names(p);
    inst.scalars[n_name] = int_scalar(count(loc));
    inst.scalars["nk"] = int_scalar(nk);
    return inst;
  }

  // Edge orientation relative to each vertex (+1 outgoing, -1 incoming), as float64.
  Field sign_field() const {
    return local_field(conn_V2E(), [&](std::int64_t v, std::int64_t k) {
      return static_cast<double>(mesh->edge_orientation_v2e[v * 6 + k]);
    });
  }
};

std::vector<ProgramBuilder::Bound> domain(const Dimension& loc, const Expr& n, const Expr& nk) {
  return {{loc, 0, n}, {dim_K(), 0, nk}};
}

double elements(const ExampleSize& s, const Dimension& loc) {
  const double v = static_cast<double>(s.nx) * s.ny;
  return loc == dim_vertex() ? v : loc == dim_edge() ? 3 * v : 2 * v;
}

// ---------------------------------------------------------------------------------------------
// FVM nabla (the Atlas / GT4Py benchmark): the gradient of pp at vertices by Green-Gauss over the
// dual cell: edge averages times the edge's dual normal, summed with the edge orientation.
Example make_fvm_nabla() {
  const Connectivity &E2V = conn_E2V(), &V2E = conn_V2E();
  ProgramBuilder pb("fvm_nabla");
  Expr pp = pb.field("pp", {dim_vertex(), dim_K()}, DType::float64);
  Expr S_x = pb.field("S_x", {dim_edge()}, DType::float64);
  Expr S_y = pb.field("S_y", {dim_edge()}, DType::float64);
  Expr sign = pb.field("sign", {dim_vertex(), V2E.local}, DType::float64);
  Expr vol = pb.field("vol", {dim_vertex()}, DType::float64);
  Expr pnabla_x = pb.field("pnabla_x", {dim_vertex(), dim_K()}, DType::float64);
  Expr pnabla_y = pb.field("pnabla_y", {dim_vertex(), dim_K()}, DType::float64);
  Expr n_vertices = pb.scalar("n_vertices", DType::int32);
  Expr nk = pb.scalar("nk", DType::int32);
  const Expr zavg = named("zavg", 0.5 * (pp(E2V[0]) + pp(E2V[1])));
  const Expr zavgS_x = named("zavgS_x", zavg * S_x);
  const Expr zavgS_y = named("zavgS_y", zavg * S_y);
  const Expr px = neighbor_sum(zavgS_x(V2E) * sign, V2E) / vol;
  const Expr py = neighbor_sum(zavgS_y(V2E) * sign, V2E) / vol;
  pb.call("fvm_nabla", make_tuple({px, py}), {pnabla_x, pnabla_y}, domain(dim_vertex(), n_vertices, nk));

  Example ex;
  ex.name = "fvm_nabla";
  ex.unstructured = true;
  ex.description = "finite-volume gradient (nabla) of a vertex field over E2V and V2E; two outputs";
  ex.program = pb.build();
  ex.make_instance = [program = ex.program](const ExampleSize& s, Layout layout, std::uint64_t seed) {
    const MeshSetup m(s, layout, seed);
    ExampleInstance inst = m.instance(program, "n_vertices", dim_vertex());
    inst.fields.emplace("pp", m.level_field("pp", dim_vertex(), 1.0, 0.5));
    // The dual normal of an edge: the edge vector turned clockwise (length = edge length).
    inst.fields.emplace("S_x", m.element_field(dim_edge(), [&](std::int64_t e) { return m.pos.edge_dy[e]; }));
    inst.fields.emplace("S_y", m.element_field(dim_edge(), [&](std::int64_t e) { return -m.pos.edge_dx[e]; }));
    inst.fields.emplace("sign", m.sign_field());
    inst.fields.emplace("vol", m.element_field(dim_vertex(), [&](std::int64_t v) { return m.mesh->dual_area[v]; }));
    inst.fields.emplace("pnabla_x", m.level_field("pnabla_x", dim_vertex(), -1.0, 0.25));
    inst.fields.emplace("pnabla_y", m.level_field("pnabla_y", dim_vertex(), -1.0, 0.25));
    inst.outputs = {"pnabla_x", "pnabla_y"};
    return inst;
  };
  // pp, sign, vol at every vertex; S_x, S_y at every edge; both outputs; tables E2V and V2E.
  ex.compulsory_bytes = [](const ExampleSize& s) {
    const double nv = elements(s, dim_vertex()), ne = elements(s, dim_edge());
    return f64_bytes * (nv * s.nk + 2 * ne + 6 * nv + nv + 2 * nv * s.nk) + index_bytes * (2 * ne + 6 * nv);
  };
  return ex;
}

// ---------------------------------------------------------------------------------------------
// ICON's nabla4 (calculate_nabla4 of the diffusion): second differences of the vertex velocity
// projected on the edge normal, along the edge (its own vertices, E2C2V slots 0, 1) and across
// it (the opposite vertices, slots 2, 3), against twice the edge value z_nabla2_e. The slots are
// selected by per-neighbour weights over [Edge, E2C2VDim] that are zero in the other slots.
Example make_nabla4() {
  const Connectivity& E2C2V = conn_E2C2V();
  ProgramBuilder pb("nabla4");
  Expr u_vert = pb.field("u_vert", {dim_vertex(), dim_K()}, DType::float64);
  Expr v_vert = pb.field("v_vert", {dim_vertex(), dim_K()}, DType::float64);
  Expr tang_weight_u = pb.field("tang_weight_u", {dim_edge(), E2C2V.local}, DType::float64);
  Expr tang_weight_v = pb.field("tang_weight_v", {dim_edge(), E2C2V.local}, DType::float64);
  Expr norm_weight_u = pb.field("norm_weight_u", {dim_edge(), E2C2V.local}, DType::float64);
  Expr norm_weight_v = pb.field("norm_weight_v", {dim_edge(), E2C2V.local}, DType::float64);
  Expr z_nabla2_e = pb.field("z_nabla2_e", {dim_edge(), dim_K()}, DType::float64);
  Expr inv_vert_vert_length = pb.field("inv_vert_vert_length", {dim_edge()}, DType::float64);
  Expr inv_primal_edge_length = pb.field("inv_primal_edge_length", {dim_edge()}, DType::float64);
  Expr z_nabla4_e2 = pb.field("z_nabla4_e2", {dim_edge(), dim_K()}, DType::float64);
  Expr n_edges = pb.scalar("n_edges", DType::int32);
  Expr nk = pb.scalar("nk", DType::int32);
  const Expr u = u_vert(E2C2V), v = v_vert(E2C2V);
  const Expr nabv_tang = named("nabv_tang", neighbor_sum(u * tang_weight_u + v * tang_weight_v, E2C2V));
  const Expr nabv_norm = named("nabv_norm", neighbor_sum(u * norm_weight_u + v * norm_weight_v, E2C2V));
  const Expr twice_ve = 2.0 * z_nabla2_e;
  const Expr value = 4.0 * ((nabv_norm - twice_ve) * (inv_vert_vert_length * inv_vert_vert_length) +
                            (nabv_tang - twice_ve) * (inv_primal_edge_length * inv_primal_edge_length));
  pb.call("nabla4", value, {z_nabla4_e2}, domain(dim_edge(), n_edges, nk));

  Example ex;
  ex.name = "nabla4";
  ex.unstructured = true;
  ex.description = "ICON-style nabla4 on edges: weighted E2C2V neighbour sums of vertex velocities";
  ex.program = pb.build();
  ex.make_instance = [program = ex.program](const ExampleSize& s, Layout layout, std::uint64_t seed) {
    const MeshSetup m(s, layout, seed);
    ExampleInstance inst = m.instance(program, "n_edges", dim_edge());
    const NeighborTable& e2c2v = m.mesh->table("E2C2V");
    inst.fields.emplace("u_vert", m.level_field("u_vert", dim_vertex(), 1.0, 0.5));
    inst.fields.emplace("v_vert", m.level_field("v_vert", dim_vertex(), -0.5, 0.5));
    // The unit primal normal of the edge seen from each of its four vertices, slightly varied
    // per vertex (as on the sphere), kept only in the slots of the sum it belongs to.
    const Wave vary(seed, "primal_normal_vert", 1.0, 0.05, s.nx, s.ny);
    auto weight = [&](bool x_component, bool tangential) {
      return m.local_field(conn_E2C2V(), [&, x_component, tangential](std::int64_t e, std::int64_t k) {
        if ((k < 2) != tangential) return 0.0;
        const double len = std::hypot(m.pos.edge_dx[e], m.pos.edge_dy[e]);
        const double n = x_component ? m.pos.edge_dy[e] / len : -m.pos.edge_dx[e] / len;
        const auto vert = e2c2v(e, static_cast<int>(k));
        if (vert < 0) return 0.0;  // a missing neighbour (bounded mesh): skipped by the sum anyway
        return n * vary(m.pos.vx[vert], m.pos.vy[vert], static_cast<double>(k));
      });
    };
    inst.fields.emplace("tang_weight_u", weight(true, true));
    inst.fields.emplace("tang_weight_v", weight(false, true));
    inst.fields.emplace("norm_weight_u", weight(true, false));
    inst.fields.emplace("norm_weight_v", weight(false, false));
    inst.fields.emplace("z_nabla2_e", m.level_field("z_nabla2_e", dim_edge(), 0.25, 0.5));
    inst.fields.emplace("inv_vert_vert_length", m.element_field(dim_edge(), [&](std::int64_t e) {
      const auto a = e2c2v(e, 2), b = e2c2v(e, 3);
      if (a < 0 || b < 0) return 0.0;  // a boundary edge of the bounded mesh has one cell only
      return 1.0 / std::hypot(nearest(m.pos.vx[b] - m.pos.vx[a], m.nx), nearest(m.pos.vy[b] - m.pos.vy[a], m.ny));
    }));
    inst.fields.emplace("inv_primal_edge_length",
                        m.element_field(dim_edge(), [&](std::int64_t e) { return 1.0 / m.mesh->edge_length[e]; }));
    inst.fields.emplace("z_nabla4_e2", m.level_field("z_nabla4_e2", dim_edge(), -1.0, 0.25));
    inst.outputs = {"z_nabla4_e2"};
    return inst;
  };
  // u_vert, v_vert at every vertex; four [Edge, 4] weights; z_nabla2_e, two lengths, the output
  // at every edge; table E2C2V.
  ex.compulsory_bytes = [](const ExampleSize& s) {
    const double nv = elements(s, dim_vertex()), ne = elements(s, dim_edge());
    return f64_bytes * (2 * nv * s.nk + 4 * 4 * ne + ne * s.nk + 2 * ne + ne * s.nk) + index_bytes * 4 * ne;
  };
  return ex;
}

// ---------------------------------------------------------------------------------------------
// A weighted average of a cell field over the cell itself and its three edge neighbours.
Example make_c2e2co_sum() {
  const Connectivity& C2E2CO = conn_C2E2CO();
  ProgramBuilder pb("c2e2co_sum");
  Expr in = pb.field("in", {dim_cell(), dim_K()}, DType::float64);
  Expr weights = pb.field("weights", {dim_cell(), C2E2CO.local}, DType::float64);
  Expr out = pb.field("out", {dim_cell(), dim_K()}, DType::float64);
  Expr n_cells = pb.scalar("n_cells", DType::int32);
  Expr nk = pb.scalar("nk", DType::int32);
  pb.call("c2e2co_sum", neighbor_sum(neighbor_shift(in, C2E2CO) * weights, C2E2CO), {out},
          domain(dim_cell(), n_cells, nk));

  Example ex;
  ex.name = "c2e2co_sum";
  ex.unstructured = true;
  ex.description = "weighted average of a cell field over C2E2CO (the cell and its three neighbours)";
  ex.program = pb.build();
  ex.make_instance = [program = ex.program](const ExampleSize& s, Layout layout, std::uint64_t seed) {
    const MeshSetup m(s, layout, seed);
    ExampleInstance inst = m.instance(program, "n_cells", dim_cell());
    inst.fields.emplace("in", m.level_field("in", dim_cell(), 1.0, 0.5));
    // Positive weights summing to one per cell, the cell itself weighted most.
    const Wave raw(seed, "weights", 1.0, 0.3, s.nx, s.ny);
    inst.fields.emplace("weights", m.local_field(conn_C2E2CO(), [&](std::int64_t c, std::int64_t k) {
      double w[4], total = 0;
      for (int n = 0; n < 4; ++n) {
        w[n] = (n == 0 ? 2.0 : 1.0) * raw(m.pos.cx[c], m.pos.cy[c], n);
        total += w[n];
      }
      return w[k] / total;
    }));
    inst.fields.emplace("out", m.level_field("out", dim_cell(), -1.0, 0.25));
    inst.outputs = {"out"};
    return inst;
  };
  ex.compulsory_bytes = [](const ExampleSize& s) {
    const double nc = elements(s, dim_cell());
    return f64_bytes * (nc * s.nk + 4 * nc + nc * s.nk) + index_bytes * 4 * nc;
  };
  return ex;
}

// ---------------------------------------------------------------------------------------------
// One explicit diffusion step on the mesh, fused into one call: the edge gradient is shared by
// the six edges around each vertex, so a compiler materialises it as a transient rather than
// recompute it six times per vertex.
Example make_diffusion_chain() {
  const Connectivity &E2V = conn_E2V(), &V2E = conn_V2E();
  ProgramBuilder pb("diffusion_chain");
  Expr u = pb.field("u", {dim_vertex(), dim_K()}, DType::float64);
  Expr inv_len = pb.field("inv_len", {dim_edge()}, DType::float64);
  Expr sign = pb.field("sign", {dim_vertex(), V2E.local}, DType::float64);
  Expr dt = pb.scalar("dt", DType::float64);
  Expr out = pb.field("out", {dim_vertex(), dim_K()}, DType::float64);
  Expr n_vertices = pb.scalar("n_vertices", DType::int32);
  Expr nk = pb.scalar("nk", DType::int32);
  const Expr edge_flux = named("edge_flux", (u(E2V[1]) - u(E2V[0])) * inv_len);
  const Expr div = named("div", neighbor_sum(edge_flux(V2E) * sign, V2E));
  pb.call("diffusion_chain", u + dt * div, {out}, domain(dim_vertex(), n_vertices, nk));

  Example ex;
  ex.name = "diffusion_chain";
  ex.unstructured = true;
  ex.description = "fused diffusion step: edge gradient (shared, read through V2E) -> vertex divergence -> update";
  ex.program = pb.build();
  ex.make_instance = [program = ex.program](const ExampleSize& s, Layout layout, std::uint64_t seed) {
    const MeshSetup m(s, layout, seed);
    ExampleInstance inst = m.instance(program, "n_vertices", dim_vertex());
    inst.fields.emplace("u", m.level_field("u", dim_vertex(), 1.0, 0.5));
    inst.fields.emplace("inv_len",
                        m.element_field(dim_edge(), [&](std::int64_t e) { return 1.0 / m.mesh->edge_length[e]; }));
    inst.fields.emplace("sign", m.sign_field());
    inst.fields.emplace("out", m.level_field("out", dim_vertex(), -1.0, 0.25));
    inst.scalars["dt"] = Scalar(0.05);
    inst.outputs = {"out"};
    return inst;
  };
  // u, sign, out at every vertex; inv_len at every edge; tables E2V and V2E.
  ex.compulsory_bytes = [](const ExampleSize& s) {
    const double nv = elements(s, dim_vertex()), ne = elements(s, dim_edge());
    return f64_bytes * (nv * s.nk + ne + 6 * nv + nv * s.nk) + index_bytes * (2 * ne + 6 * nv);
  };
  return ex;
}

}  // namespace

std::vector<Example> unstructured_examples() {
  std::vector<Example> v;
  v.push_back(make_fvm_nabla());
  v.push_back(make_nabla4());
  v.push_back(make_c2e2co_sum());
  v.push_back(make_diffusion_chain());
  return v;
}

}  // namespace fieldflow::examples::detail
