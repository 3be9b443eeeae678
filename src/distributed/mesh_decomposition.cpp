// METIS partition of a mesh's cells, owned and halo points per location, local numbering and
// local tables (see MeshDecomposition in fieldflow/distributed.h).
#include <metis.h>

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <limits>
#include <set>
#include <tuple>

#include "distributed/collective.h"
#include "distributed/halo_exchange.h"
#include "distributed/mesh_reads.h"
#include "fieldflow/distributed.h"
#include "fieldflow/errors.h"
#include "passes/pipeline.h"

namespace fieldflow::distributed {

namespace {

using detail::PointMask;
const std::vector<std::string> location_names = {"Vertex", "Edge", "Cell"};

std::string mesh_fingerprint(const Mesh& m) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  auto mix = [&](std::uint64_t v) { h = (h ^ v) * 0x100000001b3ULL; };
  for (const auto& [name, t] : m.tables) {
    for (char c : name) mix(static_cast<unsigned char>(c));
    for (std::int64_t i = 0; i < t.n_source; ++i)
      for (int n = 0; n < t.max_neighbors; ++n) mix(static_cast<std::uint32_t>(t(i, n)));
  }
  return fmt::format("mesh with {} vertices, {} edges, {} cells, {} tables (fingerprint {:016x})", m.n_vertices,
                     m.n_edges, m.n_cells, m.tables.size(), h);
}

// Cell owners: METIS k-way partition of the cells' edge-adjacency graph, computed on rank 0.
std::vector<int> partition_cells(MPI_Comm comm, const Mesh& m, int parts, int seed) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  std::vector<int> owner(static_cast<std::size_t>(m.n_cells), 0);
  detail::collectively(comm, [&] {
    if (rank != 0 || parts == 1) return;
    if (m.n_cells < parts)
      throw ArgumentError(fmt::format("mesh decomposition: {} cells cannot be split over {} ranks", m.n_cells, parts));
    const NeighborTable& e2c = m.table("E2C");
    std::vector<std::vector<idx_t>> adjacent(static_cast<std::size_t>(m.n_cells));
    for (std::int64_t e = 0; e < e2c.n_source; ++e) {
      const std::int32_t a = e2c(e, 0), b = e2c(e, 1);
      if (a < 0 || b < 0 || a == b) continue;
      adjacent[a].push_back(b);
      adjacent[b].push_back(a);
    }
    std::vector<idx_t> xadj{0}, adjncy;
    for (auto& list : adjacent) {
      adjncy.insert(adjncy.end(), list.begin(), list.end());
      xadj.push_back(static_cast<idx_t>(adjncy.size()));
    }
    idx_t n = static_cast<idx_t>(m.n_cells), constraints = 1, nparts = parts, cut = 0;
    idx_t options[METIS_NOPTIONS];
    METIS_SetDefaultOptions(options);
    options[METIS_OPTION_SEED] = seed;
    std::vector<idx_t> part(static_cast<std::size_t>(m.n_cells));
    const int status = METIS_PartGraphKway(&n, &constraints, xadj.data(), adjncy.data(), nullptr, nullptr, nullptr,
                                           &nparts, nullptr, nullptr, options, &cut, part.data());
    if (status != METIS_OK)
      throw InternalError(fmt::format("METIS_PartGraphKway failed with status {} for {} cells in {} parts", status,
                                      m.n_cells, parts));
    std::copy(part.begin(), part.end(), owner.begin());
  });
  MPI_Bcast(owner.data(), static_cast<int>(owner.size()), MPI_INT, 0, comm);
  return owner;
}

// The owner of an edge or vertex: the owner of its lowest-numbered cell.
std::vector<int> owners_through(const NeighborTable& to_cells, const std::vector<int>& cell_owner) {
  std::vector<int> owner(static_cast<std::size_t>(to_cells.n_source), 0);
  for (std::int64_t p = 0; p < to_cells.n_source; ++p) {
    std::int32_t lowest = std::numeric_limits<std::int32_t>::max();
    for (int n = 0; n < to_cells.max_neighbors; ++n)
      if (const std::int32_t c = to_cells(p, n); c >= 0) lowest = std::min(lowest, c);
    if (lowest != std::numeric_limits<std::int32_t>::max()) owner[p] = cell_owner[lowest];
  }
  return owner;
}

// Graph distance of every point (all locations, joined by the tables) from the points this rank
// does not own; deep points first makes "reads no halo" a prefix of the owned points.
std::map<std::string, std::vector<int>> depth_inside(const Mesh& m, const std::vector<std::string>& tables,
                                                     const std::map<std::string, std::vector<int>>& owner, int rank) {
  std::map<std::string, std::int64_t> base;
  std::int64_t total = 0;
  for (const auto& l : location_names) {
    base[l] = total;
    total += m.size_of(l);
  }
  std::vector<std::vector<std::int64_t>> adjacent(static_cast<std::size_t>(total));
  for (const auto& name : tables) {
    const NeighborTable& t = m.table(name);
    for (std::int64_t p = 0; p < t.n_source; ++p)
      for (int n = 0; n < t.max_neighbors; ++n)
        if (const std::int32_t q = t(p, n); q >= 0) {
          adjacent[base[t.source] + p].push_back(base[t.target] + q);
          adjacent[base[t.target] + q].push_back(base[t.source] + p);
        }
  }
  std::vector<int> depth(static_cast<std::size_t>(total), -1);
  std::deque<std::int64_t> queue;
  for (const auto& l : location_names)
    for (std::int64_t p = 0; p < m.size_of(l); ++p)
      if (owner.at(l)[p] != rank) {
        depth[base[l] + p] = 0;
        queue.push_back(base[l] + p);
      }
  while (!queue.empty()) {
    const std::int64_t x = queue.front();
    queue.pop_front();
    for (const std::int64_t y : adjacent[x])
      if (depth[y] < 0) {
        depth[y] = depth[x] + 1;
        queue.push_back(y);
      }
  }
  std::map<std::string, std::vector<int>> out;
  for (const auto& l : location_names)
    out[l].assign(depth.begin() + base[l], depth.begin() + base[l] + m.size_of(l));
  return out;
}

}  // namespace

MeshDecomposition::MeshDecomposition(MPI_Comm comm, const Mesh& global, const std::vector<ir::Program>& programs,
                                     Options options)
    : patterns_(std::make_unique<HaloPatternCache>()) {
  MPI_Comm_dup(comm, &comm_);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  description_ = mesh_fingerprint(global);
  detail::require_same_on_all_ranks(comm_, description_ + fmt::format(", METIS seed {}", options.metis_seed),
                                    "the global mesh given to MeshDecomposition");

  // The programs as the compiler lowers them: their reads decide the halo.
  std::vector<ir::Schedule> schedules;
  std::vector<std::string> used_tables;
  detail::collectively(comm_, [&] {
    for (const auto& p : programs) {
      schedules.push_back(passes::lower(p));
      detail::check_mesh_reads_supported(schedules.back());
      (void)detail::statement_locations(schedules.back());
      for (const auto& prm : p.params)
        if (prm.kind == ir::ParamKind::connectivity) {
          (void)global.table(prm.conn.name);
          if (std::find(used_tables.begin(), used_tables.end(), prm.conn.name) == used_tables.end())
            used_tables.push_back(prm.conn.name);
        }
    }
  });

  std::map<std::string, std::vector<int>> owner;
  owner["Cell"] = partition_cells(comm_, global, size_, options.metis_seed);
  owner["Edge"] = owners_through(global.table("E2C"), owner["Cell"]);
  owner["Vertex"] = owners_through(global.table("V2C"), owner["Cell"]);

  std::map<std::string, PointMask> owned_mask, reached, rows;
  for (const auto& l : location_names) {
    auto& m = owned_mask[l];
    m.resize(static_cast<std::size_t>(global.size_of(l)));
    for (std::size_t p = 0; p < m.size(); ++p) m[p] = owner[l][p] == rank_;
    reached[l] = m;
    rows[l] = m;  // owned points: rows complete, whatever computes them
  }
  auto unite = [](PointMask& into, const PointMask& m) {
    for (std::size_t i = 0; i < m.size(); ++i) into[i] |= m[i];
  };
  const detail::MeshTables tables{&global, nullptr};
  for (const auto& s : schedules) {
    std::vector<PointMask> seeds;
    for (const auto& loc : detail::statement_locations(s)) seeds.push_back(owned_mask.at(loc.name));
    const detail::MeshReads r = detail::mesh_reads(s, tables, seeds);
    for (const auto& [l, m] : r.reached) unite(reached.at(l), m);
    for (const auto& [l, m] : r.loop_points) unite(rows.at(l), m);
    for (const auto& [l, m] : r.rows_read) unite(rows.at(l), m);  // midway along chains of tables too
  }
  // Every point a kernel may visit keeps its whole rows (a kernel runs over a bounding range).
  for (const auto& name : used_tables) {
    const NeighborTable& t = global.table(name);
    const PointMask& r = rows.at(t.source);
    for (std::int64_t p = 0; p < t.n_source; ++p)
      if (r[p])
        for (int n = 0; n < t.max_neighbors; ++n)
          if (const std::int32_t q = t(p, n); q >= 0) reached.at(t.target)[q] = 1;
  }

  // Local numbering: owned points deepest first, then halo points whose rows kernels visit, then
  // the rest; halo points grouped by owner (the order they arrive in).
  const auto depth = depth_inside(global, used_tables, owner, rank_);
  std::map<std::string, std::vector<std::int32_t>> local_of;
  for (const auto& l : location_names) {
    Location& loc = locations_[l];
    const std::int64_t n = global.size_of(l);
    std::vector<std::int64_t> mine, halo;
    for (std::int64_t p = 0; p < n; ++p) {
      if (owned_mask[l][p])
        mine.push_back(p);
      else if (reached[l][p])
        halo.push_back(p);
    }
    const auto& d = depth.at(l);
    std::stable_sort(mine.begin(), mine.end(), [&](std::int64_t a, std::int64_t b) { return d[a] > d[b]; });
    std::stable_sort(halo.begin(), halo.end(), [&](std::int64_t a, std::int64_t b) {
      return std::make_tuple(!rows[l][a], owner[l][a], a) < std::make_tuple(!rows[l][b], owner[l][b], b);
    });
    loc.owned = static_cast<std::int64_t>(mine.size());
    loc.global_size = n;
    loc.global_ids = mine;
    loc.global_ids.insert(loc.global_ids.end(), halo.begin(), halo.end());
    auto& map = local_of[l];
    map.assign(static_cast<std::size_t>(n), -1);
    for (std::size_t i = 0; i < loc.global_ids.size(); ++i) {
      map[loc.global_ids[i]] = static_cast<std::int32_t>(i);
      loc.owners.push_back(owner[l][loc.global_ids[i]]);
    }
  }

  // Local tables and geometry.
  local_.name = fmt::format("{}/rank{}", global.name, rank_);
  local_.n_vertices = local("Vertex");
  local_.n_edges = local("Edge");
  local_.n_cells = local("Cell");
  for (const auto& [name, t] : global.tables) {
    NeighborTable lt;
    lt.name = t.name;
    lt.source = t.source;
    lt.target = t.target;
    lt.n_source = local(t.source);
    lt.n_target = local(t.target);
    lt.max_neighbors = t.max_neighbors;
    lt.data.reserve(static_cast<std::size_t>(lt.n_source * lt.max_neighbors));
    PointMask& complete = complete_rows_[name];
    complete.assign(static_cast<std::size_t>(lt.n_source), 1);
    const auto& ids = locations_.at(t.source).global_ids;
    const auto& map = local_of.at(t.target);
    for (std::int64_t i = 0; i < lt.n_source; ++i)
      for (int n = 0; n < t.max_neighbors; ++n) {
        const std::int32_t g = t(ids[i], n);
        const std::int32_t q = g < 0 ? -1 : map[g];
        if (g >= 0 && q < 0) complete[i] = 0;
        lt.data.push_back(q);
      }
    local_.tables.emplace(name, std::move(lt));
  }
  auto pick = [](const std::vector<double>& all, const std::vector<std::int64_t>& ids) {
    std::vector<double> v;
    if (all.empty()) return v;
    for (const auto g : ids) v.push_back(all[g]);
    return v;
  };
  const auto &vid = global_ids("Vertex"), &eid = global_ids("Edge"), &cid = global_ids("Cell");
  local_.vertex_x = pick(global.vertex_x, vid);
  local_.vertex_y = pick(global.vertex_y, vid);
  local_.dual_area = pick(global.dual_area, vid);
  local_.edge_length = pick(global.edge_length, eid);
  local_.cell_area = pick(global.cell_area, cid);
  if (!global.edge_orientation_v2e.empty())
    for (const auto g : vid)
      for (int k = 0; k < 6; ++k) local_.edge_orientation_v2e.push_back(global.edge_orientation_v2e[g * 6 + k]);
}

MeshDecomposition::~MeshDecomposition() {
  patterns_.reset();
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

const MeshDecomposition::Location& MeshDecomposition::location_(const std::string& name) const {
  auto it = locations_.find(name);
  if (it == locations_.end())
    throw ArgumentError(fmt::format("mesh decomposition: unknown location '{}'; expected Vertex, Edge or Cell", name));
  return it->second;
}

std::int64_t MeshDecomposition::owned(const std::string& location) const { return location_(location).owned; }
std::int64_t MeshDecomposition::local(const std::string& location) const {
  return static_cast<std::int64_t>(location_(location).global_ids.size());
}
std::int64_t MeshDecomposition::global_size(const std::string& location) const {
  return location_(location).global_size;
}
const std::vector<std::int64_t>& MeshDecomposition::global_ids(const std::string& location) const {
  return location_(location).global_ids;
}
const std::vector<int>& MeshDecomposition::owners(const std::string& location) const {
  return location_(location).owners;
}
const std::vector<char>& MeshDecomposition::complete_rows(const std::string& table) const {
  auto it = complete_rows_.find(table);
  if (it == complete_rows_.end()) throw ConnectivityError(fmt::format("mesh decomposition: no table '{}'", table));
  return it->second;
}
std::string MeshDecomposition::describe() const { return description_; }

}  // namespace fieldflow::distributed
