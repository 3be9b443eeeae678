// The example registry, ExampleInstance and the helpers every example shares.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <numbers>
#include <set>

#include "examples/support.h"
#include "fieldflow/errors.h"

namespace fieldflow::examples {

Arguments ExampleInstance::arguments() {
  Arguments args;
  for (auto& [name, f] : fields) args.field(name, f);
  for (const auto& [name, s] : scalars) args.scalar(name, s);
  if (!connectivities.empty() && !mesh)
    throw ArgumentError(fmt::format("example instance: connectivities ({}) need a mesh, given none",
                                    fmt::join(connectivities, ", ")));
  for (const auto& t : connectivities) args.connectivity(t, mesh->table(t));
  return args;
}

const std::vector<Example>& all_examples() {
  static const std::vector<Example> examples = [] {
    std::vector<Example> made = detail::cartesian_examples();
    for (auto& e : detail::unstructured_examples()) made.push_back(std::move(e));
    // Simple to elaborate, Cartesian kernels before their unstructured peers.
    const std::vector<std::string> order = {"laplacian", "lap_of_lap", "hdiff", "vadv", "fvm_nabla", "nabla4",
                                            "c2e2co_sum", "vertical_interp", "masked_update", "diffusion_chain"};
    std::vector<Example> all;
    for (const auto& name : order)
      for (auto& e : made)
        if (e.name == name) all.push_back(std::move(e));
    FIELDFLOW_ASSERT(all.size() == made.size(), "an example is missing from the registry order");
    std::set<std::string> names;
    for (const auto& e : all) FIELDFLOW_ASSERT(names.insert(e.name).second, "duplicate example name " + e.name);
    return all;
  }();
  return examples;
}

const Example& example(const std::string& name) {
  const auto& all = all_examples();
  for (const auto& e : all)
    if (e.name == name) return e;
  std::vector<std::string> names;
  for (const auto& e : all) names.push_back(e.name);
  throw ArgumentError(fmt::format("unknown example '{}'; valid examples are: {}", name, fmt::join(names, ", ")));
}

namespace detail {

const Dimension& dim_I() { static const Dimension d = horizontal_dim("I"); return d; }
const Dimension& dim_J() { static const Dimension d = horizontal_dim("J"); return d; }
const Dimension& dim_K() { static const Dimension d = vertical_dim("K"); return d; }
const Dimension& dim_vertex() { static const Dimension d = horizontal_dim("Vertex"); return d; }
const Dimension& dim_edge() { static const Dimension d = horizontal_dim("Edge"); return d; }
const Dimension& dim_cell() { static const Dimension d = horizontal_dim("Cell"); return d; }

const Connectivity& conn_E2V() {
  static const Connectivity c = make_connectivity("E2V", dim_edge(), dim_vertex(), 2);
  return c;
}
const Connectivity& conn_V2E() {
  static const Connectivity c = make_connectivity("V2E", dim_vertex(), dim_edge(), 6);
  return c;
}
const Connectivity& conn_E2C2V() {
  static const Connectivity c = make_connectivity("E2C2V", dim_edge(), dim_vertex(), 4);
  return c;
}
const Connectivity& conn_C2E2CO() {
  static const Connectivity c = make_connectivity("C2E2CO", dim_cell(), dim_cell(), 4);
  return c;
}

Expr neighbor_shift(const Expr& x, const Connectivity& conn, int index) {
  if (!(conn.source == conn.target)) return index < 0 ? x(conn) : x(conn[index]);
  try {
    return index < 0 ? x(conn) : x(conn[index]);
  } catch (const DimensionError&) {
    // The frontend rejects an operand that already has the source dimension, which a
    // same-location connectivity cannot avoid; build the node as the DSL would for any other.
  }
  auto e = std::make_shared<ir::Expr>();
  e->kind = ir::ExprKind::neighbor_shift;
  std::vector<Dimension> dims = x.type().dims;
  if (index < 0) dims.push_back(conn.local);
  e->type = ir::Type{x.type().dtype, ir::canonical_dims(dims), {}};
  e->args = {x.node()};
  e->conn = conn;
  e->offset = index;
  return Expr(ir::ExprPtr(e));
}

namespace {

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

double uniform(std::uint64_t& state) { return static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53; }

std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

}  // namespace

Wave::Wave(std::uint64_t seed, std::string_view salt, double center, double amplitude, double period_x,
           double period_y)
    : center_(center), amplitude_(amplitude) {
  std::uint64_t state = seed ^ fnv1a(salt);
  splitmix64(state);
  constexpr double two_pi = 2 * std::numbers::pi;
  // Wavelengths of a few grid points: smooth, yet every neighbour sees a different value.
  fx_ = period_x > 0 ? two_pi * (1 + (splitmix64(state) & 1)) / period_x : 0.25 + 0.4 * uniform(state);
  fy_ = period_y > 0 ? two_pi * (1 + (splitmix64(state) & 1)) / period_y : 0.25 + 0.4 * uniform(state);
  fz_ = 0.3 + 0.4 * uniform(state);
  px_ = two_pi * uniform(state);
  py_ = two_pi * uniform(state);
  pz_ = two_pi * uniform(state);
}

double Wave::operator()(double x, double y, double z) const {
  return center_ + amplitude_ * (0.6 * std::sin(fx_ * x + px_) * std::cos(fy_ * y + py_) + 0.4 * std::sin(fz_ * z + pz_));
}

void fill(Field& f, const std::function<double(const std::vector<std::int64_t>&)>& value) {
  const std::size_t rank = f.dims().size();
  for (std::size_t a = 0; a < rank; ++a)
    if (f.shape()[a] == 0) return;
  std::vector<std::int64_t> rel(rank, 0), abs(rank);
  while (true) {
    for (std::size_t a = 0; a < rank; ++a) abs[a] = f.origin()[a] + rel[a];
    f.set_from_double(f.offset_of(abs), value(abs));
    std::size_t a = rank;
    while (a > 0) {
      --a;
      if (++rel[a] < f.shape()[a]) break;
      rel[a] = 0;
      if (a == 0) return;
    }
    if (rank == 0) return;
  }
}

std::vector<std::string> connectivity_names(const ir::Program& p) {
  std::vector<std::string> names;
  for (const auto& prm : p.params)
    if (prm.kind == ir::ParamKind::connectivity) names.push_back(prm.name);
  return names;
}

Scalar int_scalar(std::int64_t v) {
  if (v < 0 || v > INT32_MAX) throw ArgumentError(fmt::format("example size {} does not fit int32", v));
  return Scalar(static_cast<std::int32_t>(v));
}

}  // namespace detail
}  // namespace fieldflow::examples
