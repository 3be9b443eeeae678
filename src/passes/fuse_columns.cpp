#include "passes/fuse_columns.h"

#include <algorithm>

namespace fieldflow::passes {

namespace {

using ir::Access;
using ir::DimAccess;

std::vector<Dimension> horizontal_dims(const ir::Schedule& s, const ir::Kernel& k) {
  std::vector<Dimension> h;
  for (const auto& d : ir::kernel_loop_dims(s, k))
    if (d.kind != DimKind::vertical) h.push_back(d);
  return h;
}

bool has_vertical(const ir::Schedule& s, const ir::Kernel& k) {
  for (const auto& d : ir::kernel_loop_dims(s, k))
    if (d.kind == DimKind::vertical) return true;
  return false;
}

// The horizontal range of a statement kernel along d (transient producers inherit theirs).
const ir::DomainRange* range_of(const ir::Kernel& k, const Dimension& d) {
  for (const auto& r : k.domain)
    if (r.dim == d) return &r;
  return nullptr;
}

bool same_column(const Access& a) {
  for (const DimAccess& d : a.dims)
    if (d.dim.kind != DimKind::vertical && (d.kind != DimAccess::Kind::loop || d.min_offset != 0 || d.max_offset != 0))
      return false;
  return true;
}

// Can kernels [first, last] run column by column?
bool legal(const ir::Schedule& s, std::size_t first, std::size_t last) {
  const auto h = horizontal_dims(s, s.kernels[first]);
  if (h.empty()) return false;
  const ir::Kernel* stmt_kernel = nullptr;
  for (std::size_t k = first; k <= last; ++k) {
    const ir::Kernel& kern = s.kernels[k];
    if (!has_vertical(s, kern) || horizontal_dims(s, kern) != h) return false;
    if (!kern.extent_from_outputs) {
      // Statement kernels must agree on the horizontal box; producers take their consumers'.
      if (stmt_kernel)
        for (const auto& d : h) {
          const auto *a = range_of(*stmt_kernel, d), *b = range_of(kern, d);
          if (!a || !b || !(a->lo == b->lo) || !(a->hi == b->hi)) return false;
        }
      stmt_kernel = &kern;
    }
    // Whatever the group writes, it reads only in the same column.
    for (const Access& a : kern.accesses)
      for (std::size_t w = first; w <= last; ++w)
        if (s.kernels[w].writes(a.buffer) && !same_column(a)) return false;
  }
  // A group of transient producers only has no box to loop over.
  return stmt_kernel != nullptr;
}

bool read_outside(const ir::Schedule& s, const std::string& t, std::size_t first, std::size_t last) {
  for (std::size_t k = 0; k < s.kernels.size(); ++k) {
    if (k >= first && k <= last) continue;
    if (s.kernels[k].reads(t)) return true;
  }
  return false;
}

}  // namespace

void fuse_columns(ir::Schedule& s) {
  // Layout::any reads every stride at run time: no layout to block for.
  if (s.layout == Layout::any) return;
  const bool vertical_fastest = s.layout == Layout::vertical_fastest;
  int group = 0;
  for (std::size_t first = 0; first < s.kernels.size();) {
    // The longest legal group starting here (a prefix of producers alone is not legal: it has
    // no box of its own, so look from the far end).
    std::size_t last = first;
    for (std::size_t e = s.kernels.size() - 1; e > first; --e)
      if (legal(s, first, e)) {
        last = e;
        break;
      }
    // Worth it only when some transient can shrink to a column.
    std::vector<int> local;
    if (last > first)
      for (std::size_t t = 0; t < s.transients.size(); ++t) {
        const auto& tr = s.transients[t];
        bool produced = false;
        for (std::size_t k = first; k <= last; ++k) produced |= s.kernels[k].writes(tr.name);
        if (produced && !read_outside(s, tr.name, first, last)) local.push_back(static_cast<int>(t));
      }
    bool has_scan = false;
    for (std::size_t k = first; k <= last; ++k) has_scan |= s.kernels[k].kind == ir::KernelKind::scan;
    // Horizontal-fastest code already vectorises a pointwise kernel along its rows; only a scan
    // gains from a row block: its results stay in the block instead of whole fields.
    if (local.empty() || (!vertical_fastest && !has_scan)) {
      ++first;
      continue;
    }
    // A scan alone on a column waits for the latency of its recurrence (a division chain in a
    // tridiagonal solve) level after level; a block of neighbouring columns swept side by side
    // keeps that many independent chains in flight. Pointwise-only groups gain nothing from it
    // and would only multiply their column buffers.
    const int block = !has_scan ? 1 : vertical_fastest ? scan_column_block : row_block;
    for (int t : local) {
      s.transients[t].column_local = true;
      s.transients[t].column_block = block;
    }
    for (std::size_t k = first; k <= last; ++k) {
      s.kernels[k].column_group = group;
      s.kernels[k].column_block = block;
    }
    ++group;
    first = last + 1;
  }
}

}  // namespace fieldflow::passes
