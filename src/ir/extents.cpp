// Concrete extents of a schedule for one call's sizes (see schedule.h).
#include <algorithm>
#include <fmt/format.h>
#include <limits>
#include <optional>
#include <tuple>

#include "fieldflow/errors.h"
#include "ir/schedule.h"

namespace fieldflow::ir {

namespace {

constexpr std::int64_t empty_lo = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t empty_hi = std::numeric_limits<std::int64_t>::min();
// The indices a call may loop over: beyond any field, and far enough from int64's ends that the
// program's shifts added to them cannot overflow. Bounds evaluate in wrapping arithmetic
// (SymExpr::evaluate), so a huge size scalar must be refused here, not added to.
constexpr std::int64_t max_index = std::int64_t(1) << 62;
// A concat_where bound beyond every index compares like this one (restrict adds 1 to it).
constexpr std::int64_t far_bound = max_index + (max_index >> 1);

// An axis nobody reads ([max, min) while the walk unites reads, or hi < lo) becomes [0, 0).
void make_empty_axes_zero(Box& b) {
  for (std::size_t a = 0; a < b.dims.size(); ++a)
    if (b.hi[a] < b.lo[a]) b.lo[a] = b.hi[a] = 0;
}

Box empty_box(const std::vector<Dimension>& dims) {
  return {dims, std::vector<std::int64_t>(dims.size(), empty_lo), std::vector<std::int64_t>(dims.size(), empty_hi)};
}

void unite(Box& into, const Box& b) {
  for (std::size_t a = 0; a < into.dims.size(); ++a) {
    const int i = b.axis(into.dims[a]);
    if (i < 0) continue;
    into.lo[a] = std::min(into.lo[a], b.lo[i]);
    into.hi[a] = std::max(into.hi[a], b.hi[i]);
  }
}

// The part [lo, hi) of [lo, hi) where `index cmp bound` has the given outcome, as a bounding range.
std::pair<std::int64_t, std::int64_t> restrict(std::int64_t lo, std::int64_t hi, CompareOp cmp, std::int64_t b,
                                               bool outcome) {
  // Normalise to "index in [a, c)" or its complement.
  std::int64_t a = 0, c = 0;
  bool inside = outcome;
  switch (cmp) {
    case CompareOp::less: a = empty_hi; c = b; break;
    case CompareOp::less_equal: a = empty_hi; c = b + 1; break;
    case CompareOp::greater: a = b + 1; c = empty_lo; break;
    case CompareOp::greater_equal: a = b; c = empty_lo; break;
    case CompareOp::equal: a = b; c = b + 1; break;
    case CompareOp::not_equal: a = b; c = b + 1; inside = !outcome; break;
  }
  if (inside) return {std::max(lo, a), std::min(hi, c)};
  // Complement of [a, c) within [lo, hi): two pieces, keep their bounding range.
  const bool left = lo < std::min(hi, a), right = std::max(lo, c) < hi;
  if (left && right) return {lo, hi};
  if (left) return {lo, std::min(hi, a)};
  if (right) return {std::max(lo, c), hi};
  return {0, 0};
}

std::int64_t size_symbol(const std::map<std::string, std::int64_t>& sizes, const Dimension& d) {
  auto it = sizes.find(location_size_symbol(d));
  if (it == sizes.end())
    throw ArgumentError(fmt::format("size of {} is unknown: expected size symbol '{}' (taken from the neighbour "
                                    "tables of a call)", d.name, location_size_symbol(d)));
  return it->second;
}

// The walk through the bound tables of a table-indexed index, from the rows `sub` gives its root;
// nullopt when it has no such path (any index of its dimension).
std::optional<ConcreteExtents::TablePath> table_path(const DimAccess& d, const Box& sub) {
  const int r = d.kind == DimAccess::Kind::table && !d.hops.empty() ? sub.axis(d.root) : -1;
  if (r < 0) return std::nullopt;
  return ConcreteExtents::TablePath{d.hops, sub.lo[r] + d.root_min, sub.hi[r] + d.root_max, d.min_offset, d.max_offset};
}

// Narrows `sub` to where the constraints (concat_where outcomes) hold; false if nowhere.
bool restrict_box(const Kernel& kern, const std::vector<std::pair<int, bool>>& constraints,
                  const std::map<std::string, std::int64_t>& sizes, Box& sub) {
  for (const auto& [ci, outcome] : constraints) {
    const Condition& c = kern.conditions[ci];
    const int a = sub.axis(c.dim);
    if (a < 0) continue;
    const std::int64_t bound = std::clamp(c.bound.evaluate(sizes), -far_bound, far_bound);
    auto [lo, hi] = restrict(sub.lo[a], sub.hi[a], c.cmp, bound, outcome);
    if (hi <= lo) return false;
    sub.lo[a] = lo;
    sub.hi[a] = hi;
  }
  return true;
}

}  // namespace

int Box::axis(const Dimension& d) const {
  for (std::size_t a = 0; a < dims.size(); ++a)
    if (dims[a] == d) return static_cast<int>(a);
  return -1;
}

std::int64_t Box::count() const {
  std::int64_t n = 1;
  bool saturated = false;
  for (std::size_t a = 0; a < dims.size(); ++a) {
    if (hi[a] <= lo[a]) return 0;
    std::int64_t extent = 0;
    if (__builtin_sub_overflow(hi[a], lo[a], &extent)) extent = std::numeric_limits<std::int64_t>::max();
    saturated |= __builtin_mul_overflow(n, extent, &n);
  }
  return saturated ? std::numeric_limits<std::int64_t>::max() : n;  // too many to count is still "not empty"
}

std::string Box::to_string() const {
  std::string s = "{";
  for (std::size_t a = 0; a < dims.size(); ++a) s += fmt::format("{}{}: [{}, {})", a ? ", " : "", dims[a].name, lo[a], hi[a]);
  return s + "}";
}

std::string location_size_symbol(const Dimension& d) { return "len(" + d.name + ")"; }

ConcreteExtents compute_extents(const Schedule& s, const std::map<std::string, std::int64_t>& sizes,
                                const TableResolver& resolve) {
  ConcreteExtents out;
  out.kernel_domains.resize(s.kernels.size());
  for (const auto& t : s.transients) out.transient_boxes.push_back(empty_box(t.dims));
  for (int k = static_cast<int>(s.kernels.size()) - 1; k >= 0; --k) {
    const Kernel& kern = s.kernels[k];
    Box box;
    if (!kern.extent_from_outputs) {
      for (const auto& r : kern.domain) {
        box.dims.push_back(r.dim);
        box.lo.push_back(r.lo.evaluate(sizes));
        box.hi.push_back(r.hi.evaluate(sizes));
      }
      const bool runs = box.count() > 0;
      for (std::size_t a = 0; a < box.dims.size(); ++a) {
        if (!runs) box.lo[a] = box.hi[a] = 0;  // runs nowhere, whatever its bounds
        else if (box.lo[a] < -max_index || box.hi[a] > max_index)
          throw DomainError(fmt::format("program '{}', call '{}': domain along {} is [{}, {}), beyond the indices a "
                                        "call can address: expected bounds within +-2^62", s.program.name,
                                        s.program.stmts.at(kern.stmt).op, box.dims[a].name, box.lo[a], box.hi[a]));
      }
      // A statement kernel that writes a transient (a double buffer) writes its whole box.
      if (runs)
        for (const auto& o : kern.outputs)
          if (const int t = s.transient_index(o); t >= 0) unite(out.transient_boxes[t], box);
    } else {
      // A transient producer covers what its consumers read.
      const int t0 = s.transient_index(kern.outputs.at(0));
      FIELDFLOW_ASSERT(t0 >= 0, "kernel without a domain must produce a transient");
      box = out.transient_boxes[t0];
      for (const auto& o : kern.outputs) unite(box, out.transient_boxes[s.transient_index(o)]);
      const Transient& t = s.transients[t0];
      if (t.swept && box.count() > 0) {
        // A scan sweeps exactly its statement's range, as the language defines it.
        const Stmt& st = s.program.stmts.at(kern.stmt);
        for (const auto& r : st.domain)
          if (r.dim == *t.swept) {
            const int a = box.axis(r.dim);
            const std::int64_t lo = r.lo.evaluate(sizes), hi = r.hi.evaluate(sizes);
            if (box.lo[a] < lo || box.hi[a] > hi)
              throw DomainError(fmt::format("program '{}', call '{}': reads scan '{}' at {} in [{}, {}), outside "
                                            "the swept range [{}, {})", s.program.name, st.op, kern.name,
                                            r.dim.name, box.lo[a], box.hi[a], lo, hi));
            box.lo[a] = lo;
            box.hi[a] = hi;
          }
      }
      make_empty_axes_zero(box);  // nobody reads it
      for (const auto& o : kern.outputs) out.transient_boxes[s.transient_index(o)] = box;
    }
    out.kernel_domains[k] = box;
    if (box.count() == 0) continue;
    for (const auto& fs : kern.fixed_shifts) {
      Box sub = box;
      if (!restrict_box(kern, fs.constraints, sizes, sub)) continue;
      const int a = sub.axis(fs.source.dim);
      std::int64_t slot_lo = fs.index, slot_hi = fs.index + 1;
      if (fs.index < 0) {  // a local field outside a reduction: the slots its loop covers
        const Param* c = s.program.find(fs.connectivity);
        const int l = sub.axis(c->conn.local);
        slot_lo = l >= 0 ? sub.lo[l] : 0;
        slot_hi = l >= 0 ? sub.hi[l] : c->conn.max_neighbors;
      }
      const DimAccess& d = fs.source;
      const auto path = table_path(d, sub);
      if (d.kind == DimAccess::Kind::loop && a >= 0) {
        out.table_rows.push_back({fs.connectivity, k, sub.lo[a] + d.min_offset, sub.hi[a] + d.max_offset, slot_lo, slot_hi, {}});
      } else if (path && resolve) {
        // Rows reached through other tables: the rows those tables give (found by fuzz_call_binding:
        // an E2V longer than the edges V2E names, its extra rows -1, was refused, while the
        // reference reads only the rows it reaches). A bounding range of them, and the path.
        if (const auto range = resolve(*path))
          out.table_rows.push_back({fs.connectivity, k, range->first, range->second, slot_lo, slot_hi, *path});
      } else {
        out.table_rows.push_back({fs.connectivity, k, 0, -1, slot_lo, slot_hi, {}});
      }
    }
    for (const Access& acc : kern.accesses) {
      Box sub = box;
      bool active = restrict_box(kern, acc.constraints, sizes, sub);
      if (!active) continue;
      Box need;
      for (const DimAccess& d : acc.dims) {
        std::int64_t lo = 0, hi = 0;
        switch (d.kind) {
          case DimAccess::Kind::loop: {
            const int a = sub.axis(d.dim);
            FIELDFLOW_ASSERT(a >= 0, "loop access along a dimension the kernel does not loop over");
            lo = sub.lo[a] + d.min_offset;
            hi = sub.hi[a] + d.max_offset;
            break;
          }
          case DimAccess::Kind::table: {
            lo = d.min_offset;
            hi = size_symbol(sizes, d.dim) + d.max_offset;
            const auto path = table_path(d, sub);
            if (path && resolve) {  // else any index of the dimension
              if (const auto range = resolve(*path)) {
                std::tie(lo, hi) = *range;
              } else {
                active = false;  // the tables lead nowhere: nothing is read
              }
            }
            // Read only in the branches whose conditions the looked-up index satisfies: only the
            // indices they admit, the condition moved by the read's offset (found by the
            // differential fuzzer, seed 7205210: a field short where no branch reads it was
            // refused). Reads merged from several offsets keep the whole range.
            if (d.min_offset != d.max_offset) break;
            for (const auto& [ci, outcome] : d.value_constraints) {
              const Condition& c = kern.conditions[ci];
              const std::int64_t bound = std::clamp(c.bound.evaluate(sizes), -far_bound, far_bound);
              std::tie(lo, hi) = restrict(lo, hi, c.cmp, bound + d.min_offset, outcome);
              if (hi <= lo) {
                active = false;  // no index the tables give is admitted
                break;
              }
            }
            break;
          }
          case DimAccess::Kind::local: lo = d.min_offset; hi = d.max_offset + 1; break;  // the slots read
          case DimAccess::Kind::dynamic: {
            // Checked in the kernel; a transient still needs the kernel's own range.
            const int a = sub.axis(d.dim);
            lo = a >= 0 ? sub.lo[a] : 0;
            hi = a >= 0 ? sub.hi[a] : 0;
            break;
          }
        }
        need.dims.push_back(d.dim);
        need.lo.push_back(lo);
        need.hi.push_back(hi);
      }
      if (!active) continue;
      const int t = s.transient_index(acc.buffer);
      if (t >= 0) {
        unite(out.transient_boxes[t], need);
      } else {
        // A read at a data-dependent offset is checked inside the kernel against the field's own
        // extent, read by read like the reference: the host checks the other dims only. (It
        // required the kernel's range too, and refused a field covering just the levels read:
        // fuzzer seed 20900015, docs/reliability.md class 21.)
        Box checked = need;
        for (std::size_t a = 0; a < acc.dims.size(); ++a)
          if (acc.dims[a].kind == DimAccess::Kind::dynamic) checked.lo[a] = checked.hi[a] = 0;
        out.kernel_reads.push_back({acc.buffer, k, checked});
        auto it = out.param_reads.find(acc.buffer);
        if (it == out.param_reads.end()) {
          const Param* p = s.program.find(acc.buffer);
          it = out.param_reads.emplace(acc.buffer, empty_box(p->type.dims)).first;
        }
        unite(it->second, need);
      }
    }
  }
  // A transient written by a statement kernel (a double buffer) whose readers read nothing is
  // still the "nothing yet" box of the walk: [max, min) would overflow every size computed from it.
  for (Box& b : out.transient_boxes) make_empty_axes_zero(b);
  // A consumer fused into a scan's level loop runs only at the scan's columns and levels: the
  // pass fuses only consumers that read the scan's results at every point of their box, so the
  // scan's box covers theirs.
  for (std::size_t k = 0; k < s.kernels.size(); ++k) {
    const int into = s.kernels[k].fused_into;
    const Box& inner = out.kernel_domains[k];
    if (into < 0 || inner.count() == 0) continue;
    const Box& outer = out.kernel_domains[into];
    for (std::size_t a = 0; a < inner.dims.size(); ++a) {
      const int b = outer.axis(inner.dims[a]);
      FIELDFLOW_ASSERT(b >= 0 && outer.lo[b] <= inner.lo[a] && inner.hi[a] <= outer.hi[b],
                       fmt::format("kernel {} over {} is fused into kernel {} over {}, which does not cover it", k,
                                   inner.to_string(), into, outer.to_string()));
    }
  }
  return out;
}

std::int64_t column_stride(const Transient& t, const Box& box) {
  std::int64_t n = 0;
  for (std::size_t a = 0; a < box.dims.size(); ++a)
    if (box.dims[a].kind == DimKind::vertical) n = std::max<std::int64_t>(0, box.hi[a] - box.lo[a]);
  const std::int64_t per_line = static_cast<std::int64_t>(64 / size_of(t.dtype));
  return (n + per_line - 1) / per_line * per_line;
}

std::int64_t column_thread_stride(const Transient& t, const Box& box, std::int64_t block_columns) {
  constexpr std::int64_t gap_bytes = 4096;
  const std::int64_t block = block_columns * column_stride(t, box);
  return block == 0 ? 0 : block + gap_bytes / static_cast<std::int64_t>(size_of(t.dtype));
}

std::int64_t block_columns(const Schedule& s, const ConcreteExtents& e, std::size_t transient) {
  const Transient& tr = s.transients[transient];
  if (!tr.column_local || tr.column_block == 1) return 1;
  const int group = s.kernels[tr.producer].column_group;
  const Dimension along = column_block_dim(tr.dims, s.layout);
  std::int64_t lo = std::numeric_limits<std::int64_t>::max(), hi = std::numeric_limits<std::int64_t>::min();
  for (std::size_t k = 0; k < s.kernels.size(); ++k) {
    const Box& box = e.kernel_domains[k];
    if (s.kernels[k].column_group != group || box.count() == 0) continue;
    for (std::size_t a = 0; a < box.dims.size(); ++a)
      if (box.dims[a] == along) {
        lo = std::min(lo, box.lo[a]);
        hi = std::max(hi, box.hi[a]);
      }
  }
  return hi <= lo ? 1 : std::min<std::int64_t>(tr.column_block, hi - lo);
}

std::vector<std::size_t> transient_bytes(const Schedule& s, const ConcreteExtents& e, int threads) {
  // Sizes are the caller's: absurd ones must give a typed error, never a byte count that wrapped
  // around (a small workspace that the kernels would then overrun). The limit leaves room for
  // rounding every transient up to its alignment and adding them all up in the memory plan.
  constexpr std::uint64_t limit = std::numeric_limits<std::int64_t>::max() / 4;
  std::vector<std::size_t> bytes;
  std::uint64_t total = 0;
  for (std::size_t t = 0; t < s.transients.size(); ++t) {
    const Transient& tr = s.transients[t];
    const Box& box = e.transient_boxes[t];
    std::uint64_t n = tr.column_local ? static_cast<std::uint64_t>(threads) : 1;
    bool overflow = false;
    if (tr.in_registers) {
      n = 0;  // passed from the scan to its fused consumer in registers
    } else if (tr.column_local) {
      const std::int64_t stride = column_thread_stride(tr, box, block_columns(s, e, t));
      overflow |= __builtin_mul_overflow(n, static_cast<std::uint64_t>(stride), &n);
    } else {
      for (std::size_t a = 0; a < box.dims.size(); ++a)
        overflow |= __builtin_mul_overflow(n, static_cast<std::uint64_t>(std::max<std::int64_t>(0, box.hi[a] - box.lo[a])), &n);
    }
    overflow |= __builtin_mul_overflow(n, static_cast<std::uint64_t>(size_of(tr.dtype)), &n);
    overflow |= n > limit || __builtin_add_overflow(total, n, &total) || total > limit;
    if (overflow)
      throw DomainError(fmt::format("program '{}': transient '{}' over {} would need more than {} bytes (together with "
                                    "the transients before it): the call's sizes are too large",
                                    s.program.name, tr.name, box.to_string(), limit));
    bytes.push_back(static_cast<std::size_t>(n));
  }
  return bytes;
}

}  // namespace fieldflow::ir
