#include "passes/fuse_scan_consumers.h"

#include <algorithm>

namespace fieldflow::passes {

namespace {

using ir::Access;
using ir::Kernel;

// A read at the point being computed, whatever branch the point takes.
bool at_point_always(const Access& a) { return a.constraints.empty() && ir::at_point(a); }

bool can_fuse(const ir::Schedule& s, const Kernel& scan, const Kernel& consumer) {
  if (scan.kind != ir::KernelKind::scan || consumer.kind != ir::KernelKind::pointwise) return false;
  // The scan's box is then what its readers need (see compute_extents), so it covers every point
  // the consumer reads its results at, which is every point of the consumer's box.
  if (!scan.extent_from_outputs) return false;
  if (ir::kernel_loop_dims(s, scan) != ir::kernel_loop_dims(s, consumer)) return false;
  bool reads_results = false;
  for (const auto& o : scan.outputs) {
    if (s.transient_index(o) < 0) return false;
    reads_results |= consumer.reads(o);
  }
  if (!reads_results) return false;
  for (const Access& a : consumer.accesses)
    if (scan.writes(a.buffer) && !at_point_always(a)) return false;
  // The scan reads its inputs at other levels after the consumer has run at this one.
  for (const auto& o : consumer.outputs)
    if (scan.reads(o) || scan.writes(o)) return false;
  return true;
}

}  // namespace

void fuse_scan_consumers(ir::Schedule& s) {
  for (std::size_t k = 0; k + 1 < s.kernels.size(); ++k) {
    const Kernel& scan = s.kernels[k];
    if (!can_fuse(s, scan, s.kernels[k + 1])) continue;
    s.kernels[k + 1].fused_into = static_cast<int>(k);
    for (const auto& o : scan.outputs) {
      bool read_elsewhere = false;
      for (std::size_t r = 0; r < s.kernels.size(); ++r)
        read_elsewhere |= r != k + 1 && s.kernels[r].reads(o);
      s.transients[s.transient_index(o)].in_registers = !read_elsewhere;
    }
    ++k;  // the consumer, pointwise, starts no fusion of its own
  }
}

}  // namespace fieldflow::passes
