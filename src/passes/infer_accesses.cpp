#include "passes/infer_accesses.h"

#include <algorithm>

#include "fieldflow/errors.h"
#include "ir/positions.h"

namespace fieldflow::passes {

namespace {

using ir::Access;
using ir::DimAccess;

bool same_shape(const Access& a, const Access& b) {
  if (a.buffer != b.buffer || a.constraints != b.constraints || a.dims.size() != b.dims.size()) return false;
  for (std::size_t i = 0; i < a.dims.size(); ++i)
    if (!(a.dims[i].dim == b.dims[i].dim) || a.dims[i].kind != b.dims[i].kind || a.dims[i].hops != b.dims[i].hops ||
        !(a.dims[i].root == b.dims[i].root) || a.dims[i].value_constraints != b.dims[i].value_constraints)
      return false;
  return true;
}

void add_access(std::vector<Access>& list, Access a) {
  for (Access& b : list)
    if (same_shape(a, b)) {
      for (std::size_t i = 0; i < a.dims.size(); ++i) {
        b.dims[i].min_offset = std::min(b.dims[i].min_offset, a.dims[i].min_offset);
        b.dims[i].max_offset = std::max(b.dims[i].max_offset, a.dims[i].max_offset);
        b.dims[i].root_min = std::min(b.dims[i].root_min, a.dims[i].root_min);
        b.dims[i].root_max = std::max(b.dims[i].root_max, a.dims[i].root_max);
      }
      return;
    }
  list.push_back(std::move(a));
}

}  // namespace

void infer_accesses(ir::Schedule& s) {
  for (ir::Kernel& k : s.kernels) {
    k.accesses.clear();
    k.fixed_shifts.clear();
    k.conditions.clear();
    k.connectivities.clear();
    ir::walk_positions(k.value, ir::loop_position(ir::kernel_loop_dims(s, k)), k.conditions,
                       [&](const ir::Expr& e, const ir::Position& p, int) {
                         if (e.kind == ir::ExprKind::neighbor_shift || e.kind == ir::ExprKind::reduce) {
                           if (std::find(k.connectivities.begin(), k.connectivities.end(), e.conn.name) ==
                               k.connectivities.end())
                             k.connectivities.push_back(e.conn.name);
                           // Fixed-index shifts, and local fields read outside a reduction over
                           // them, fail on a missing neighbour: the runtime checks their rows.
                           const ir::Coord* local = e.kind == ir::ExprKind::neighbor_shift && e.offset < 0
                                                        ? p.find(e.conn.local) : nullptr;
                           if (e.kind == ir::ExprKind::neighbor_shift &&
                               (e.offset >= 0 || (local && local->kind != ir::DimAccess::Kind::local))) {
                             const ir::Coord* src = p.find(e.conn.source);
                             FIELDFLOW_ASSERT(src, "neighbour shift without its source");
                             k.fixed_shifts.push_back({e.conn.name, static_cast<int>(e.offset),
                                                       {e.conn.source, src->kind, src->offset, src->offset, src->hops, src->root,
                                                        src->root_offset, src->root_offset, {}},
                                                       p.constraints});
                           }
                         }
                         if (e.kind == ir::ExprKind::dynamic_shift) k.has_dynamic_shift = true;
                         if (e.kind != ir::ExprKind::field_ref) return true;
                         Access a{e.name, {}, p.constraints};
                         for (const Dimension& d : e.type.dims) {
                           const ir::Coord* c = p.find(d);
                           FIELDFLOW_ASSERT(c, "read of " + e.name + " at a position without " + d.name);
                           // A local coordinate reads the slots [offset, offset + extent).
                           const std::int64_t last =
                               c->kind == ir::DimAccess::Kind::local ? c->offset + c->extent - 1 : c->offset;
                           a.dims.push_back({d, c->kind, c->offset, last, c->hops, c->root, c->root_offset,
                                             c->root_offset, c->value_constraints});
                         }
                         add_access(k.accesses, std::move(a));
                         return true;
                       });
  }
}

}  // namespace fieldflow::passes
