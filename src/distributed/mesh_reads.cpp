// Point sets read by a schedule on a mesh (see mesh_reads.h).
#include "distributed/mesh_reads.h"

#include <fmt/format.h>

#include <optional>

#include "fieldflow/errors.h"
#include "ir/positions.h"

namespace fieldflow::distributed::detail {

namespace {

const ir::DimAccess* location_access(const ir::Access& a) {
  for (const auto& d : a.dims)
    if (d.dim.kind == DimKind::horizontal) return &d;
  return nullptr;
}

std::optional<Dimension> kernel_location(const ir::Schedule& s, const ir::Kernel& k) {
  const std::vector<Dimension> dims = ir::kernel_loop_dims(s, k);
  if (const Dimension* d = location_dim(dims)) return *d;
  return std::nullopt;
}

std::string table_of(const ir::Schedule& s, const std::string& connectivity) {
  const ir::Param* p = s.program.find(connectivity);
  return p && p->kind == ir::ParamKind::connectivity ? p->conn.name : connectivity;
}

// Follows `hops` from every point of `from`; `from` ends as what they reach (with repeats), and
// the rows looked up are marked in `rows` (per location). Returns false (and stops) if a row
// without complete entries is needed.
bool follow(const ir::Schedule& s, const MeshTables& t, const std::vector<ir::TableHop>& hops,
            std::vector<std::int64_t>& from, std::map<std::string, PointMask>& rows) {
  std::vector<std::int64_t> next;
  for (const auto& hop : hops) {
    const std::string name = table_of(s, hop.connectivity);
    const NeighborTable& table = t.mesh->table(name);
    const PointMask* complete = nullptr;
    if (t.complete_rows)
      if (auto it = t.complete_rows->find(name); it != t.complete_rows->end()) complete = &it->second;
    next.clear();
    const int lo = hop.slot < 0 ? 0 : hop.slot, hi = hop.slot < 0 ? table.max_neighbors : hop.slot + 1;
    PointMask& looked_up = rows[table.source];
    if (looked_up.size() < static_cast<std::size_t>(table.n_source)) looked_up.resize(static_cast<std::size_t>(table.n_source), 0);
    for (const std::int64_t p : from) {
      if (complete && !(*complete)[static_cast<std::size_t>(p)]) return false;
      looked_up[static_cast<std::size_t>(p)] = 1;
      for (int n = lo; n < hi; ++n)
        if (const std::int32_t q = table(p, n); q >= 0) next.push_back(q);
    }
    from.swap(next);
  }
  return true;
}

std::vector<std::int64_t> members(const PointMask& m) {
  std::vector<std::int64_t> v;
  for (std::size_t i = 0; i < m.size(); ++i)
    if (m[i]) v.push_back(static_cast<std::int64_t>(i));
  return v;
}

void unite(PointMask& into, const PointMask& m) {
  if (into.size() < m.size()) into.resize(m.size(), 0);
  for (std::size_t i = 0; i < m.size(); ++i) into[i] |= m[i];
}

// Rows a kernel looks up where it reads no field: a reduction or neighbour shift of a value read
// nowhere (neighbor_sum(broadcast(1), C2E2C) counts a cell's neighbours, so the row's skip
// values are what it computes; found by the distributed fuzzer, seed 2452). The reads' walk
// does not see those rows: they are marked here, rows_read of the table's source location.
// Returns false if a row without complete entries is needed.
bool mark_rows_of_reductions(const ir::Schedule& s, const ir::Kernel& kern, const MeshTables& t,
                             const std::vector<std::int64_t>& loop_list, std::map<std::string, PointMask>& rows) {
  std::vector<ir::Condition> conditions;
  bool complete = true;
  ir::walk_positions(kern.value, ir::loop_position(ir::kernel_loop_dims(s, kern)), conditions,
                     [&](const ir::Expr& e, const ir::Position& p, int) {
                       if (e.kind != ir::ExprKind::reduce && e.kind != ir::ExprKind::neighbor_shift) return true;
                       const ir::Coord* src = p.find(e.conn.source);
                       // At the kernel's own points the rows are kept whatever is read.
                       if (!src || src->kind != ir::DimAccess::Kind::table || src->hops.empty() || src->offset != 0 ||
                           src->root_offset != 0)
                         return true;
                       // The hops to the point, then the row looked up there (all its slots for a
                       // reduction: the skip values decide which count).
                       std::vector<ir::TableHop> hops = src->hops;
                       hops.push_back({e.conn.name, e.kind == ir::ExprKind::reduce || e.offset < 0 ? -1 : static_cast<int>(e.offset)});
                       std::vector<std::int64_t> reached = loop_list;
                       if (!follow(s, t, hops, reached, rows)) complete = false;
                       return true;
                     });
  return complete;
}

}  // namespace

const Dimension* location_dim(const std::vector<Dimension>& dims) {
  for (const auto& d : dims)
    if (d.kind == DimKind::horizontal) return &d;
  return nullptr;
}

std::vector<Dimension> statement_locations(const ir::Schedule& s) {
  std::vector<Dimension> out;
  for (const auto& st : s.program.stmts) {
    std::vector<Dimension> horizontal;
    for (const auto& r : st.domain)
      if (r.dim.kind == DimKind::horizontal) horizontal.push_back(r.dim);
    if (horizontal.size() != 1)
      throw ProgramError(fmt::format("program '{}', call '{}': a mesh program's statement runs over exactly one "
                                     "mesh location, this one over {}",
                                     s.program.name, st.op, horizontal.size()));
    out.push_back(horizontal[0]);
  }
  return out;
}

void check_mesh_reads_supported(const ir::Schedule& s) {
  // A rank numbers its points locally (owned first, then the halo): the index of a point along a
  // location, or a concat_where on it, would give each rank other values than one rank gives.
  for (const auto& st : s.program.stmts)
    for (const ir::Expr* e : ir::post_order(st.expr))
      if ((e->kind == ir::ExprKind::index || e->kind == ir::ExprKind::concat_where) && e->dim.kind == DimKind::horizontal)
        throw ProgramError(fmt::format("program '{}', call '{}': {} along the mesh location {}; a decomposed mesh "
                                       "numbers its points per rank, so the index is not the global one: pass the "
                                       "global numbers as a field instead",
                                       s.program.name, st.op,
                                       e->kind == ir::ExprKind::index ? "uses the index" : "selects by the index",
                                       e->dim.name));
  for (const auto& k : s.kernels)
    for (const auto& a : k.accesses) {
      const ir::DimAccess* d = location_access(a);
      if (!d) continue;
      const bool ok = (d->kind == ir::DimAccess::Kind::loop && d->min_offset == 0 && d->max_offset == 0) ||
                      (d->kind == ir::DimAccess::Kind::table && !d->hops.empty() && d->root_min == 0 &&
                       d->root_max == 0 && d->min_offset == 0 && d->max_offset == 0);
      if (!ok)
        throw ProgramError(fmt::format("program '{}', kernel '{}': reads '{}' along {} at an index that is neither "
                                       "the point computed nor found through neighbour tables from it; such a read "
                                       "cannot be decomposed",
                                       s.program.name, k.name, a.buffer, d->dim.name));
    }
}

MeshReads mesh_reads(const ir::Schedule& s, const MeshTables& t, const std::vector<PointMask>& seeds) {
  MeshReads r;
  std::vector<PointMask> transient_points(s.transients.size());
  for (int k = static_cast<int>(s.kernels.size()) - 1; k >= 0; --k) {
    const ir::Kernel& kern = s.kernels[k];
    const std::optional<Dimension> loc = kernel_location(s, kern);
    if (!loc) continue;
    const Dimension& location = *loc;
    const std::int64_t count = t.mesh->size_of(location.name);
    PointMask loop(static_cast<std::size_t>(count), 0);
    if (!kern.extent_from_outputs) {
      unite(loop, seeds.at(static_cast<std::size_t>(kern.stmt)));
    } else {
      for (const auto& o : kern.outputs)
        if (const int ti = s.transient_index(o); ti >= 0) unite(loop, transient_points[ti]);
    }
    unite(r.loop_points[location.name], loop);
    unite(r.reached[location.name], loop);
    const std::vector<std::int64_t> loop_list = members(loop);
    if (!mark_rows_of_reductions(s, kern, t, loop_list, r.rows_read))
      throw DomainError(fmt::format("program '{}': kernel '{}' looks up table rows this rank does not hold completely "
                                    "(the decomposition was built for other programs; build it for this one too)",
                                    s.program.name, kern.name));
    for (const auto& a : kern.accesses) {
      const ir::DimAccess* d = location_access(a);
      if (!d) continue;
      PointMask target(static_cast<std::size_t>(t.mesh->size_of(d->dim.name)), 0);
      if (d->kind == ir::DimAccess::Kind::loop) {
        unite(target, loop);
      } else if (std::vector<std::int64_t> reached = loop_list; follow(s, t, d->hops, reached, r.rows_read)) {
        for (const std::int64_t q : reached) target[static_cast<std::size_t>(q)] = 1;
      } else {
        throw DomainError(fmt::format("program '{}': reads '{}' through {} rows this rank does not hold completely "
                                      "(the decomposition was built for other programs; build it for this one too)",
                                      s.program.name, a.buffer, d->hops.front().connectivity));
      }
      unite(r.reached[d->dim.name], target);
      if (const int ti = s.transient_index(a.buffer); ti >= 0)
        unite(transient_points[ti], target);
      else
        unite(r.field_points[a.buffer], target);
    }
  }
  return r;
}

std::vector<PointMask> halo_dependent_points(const ir::Schedule& s, const MeshTables& t,
                                             const std::map<std::string, std::int64_t>& owned) {
  std::vector<PointMask> out(s.program.stmts.size());
  std::vector<PointMask> transient_taint(s.transients.size());
  for (const ir::Kernel& kern : s.kernels) {
    const std::optional<Dimension> loc = kernel_location(s, kern);
    if (!loc) continue;
    const std::string& location = loc->name;
    const std::int64_t n = kern.extent_from_outputs ? t.mesh->size_of(location) : owned.at(location);
    PointMask taint(static_cast<std::size_t>(n), 0);
    for (const auto& a : kern.accesses) {
      const ir::DimAccess* d = location_access(a);
      if (!d) continue;
      const int ti = s.transient_index(a.buffer);
      const std::int64_t buffer_owned = owned.at(d->dim.name);
      auto tainted = [&](std::int64_t q) {
        return ti >= 0 ? transient_taint[ti].empty() || transient_taint[ti][static_cast<std::size_t>(q)] != 0
                       : q >= buffer_owned;
      };
      std::vector<std::int64_t> reached;
      std::map<std::string, PointMask> rows;  // the rows looked up: not needed here
      for (std::int64_t p = 0; p < n; ++p) {
        char& tp = taint[static_cast<std::size_t>(p)];
        if (tp) continue;
        if (d->kind == ir::DimAccess::Kind::loop) {
          tp = tainted(p);
          continue;
        }
        reached.assign(1, p);
        if (!follow(s, t, d->hops, reached, rows)) {
          tp = 1;
          continue;
        }
        for (const std::int64_t q : reached) tp |= tainted(q);
      }
    }
    if (kern.extent_from_outputs) {
      for (const auto& o : kern.outputs)
        if (const int ti = s.transient_index(o); ti >= 0) transient_taint[ti] = taint;
    } else {
      unite(out.at(static_cast<std::size_t>(kern.stmt)), taint);
    }
  }
  return out;
}

}  // namespace fieldflow::distributed::detail
