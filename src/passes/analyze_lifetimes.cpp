#include "passes/analyze_lifetimes.h"

#include "fieldflow/errors.h"

namespace fieldflow::passes {

namespace {

// The first and last kernel that run interleaved with kernel k: its column group, a scan and the
// consumer fused into its level loop, or k alone.
std::pair<int, int> execution_span(const ir::Schedule& s, int k) {
  const int g = s.kernels[k].column_group;
  int first = k, last = k;
  if (s.kernels[k].fused_into >= 0) first = s.kernels[k].fused_into;
  if (k + 1 < static_cast<int>(s.kernels.size()) && s.kernels[k + 1].fused_into == k) last = k + 1;
  if (g < 0) return {first, last};
  while (first > 0 && s.kernels[first - 1].column_group == g) --first;
  while (last + 1 < static_cast<int>(s.kernels.size()) && s.kernels[last + 1].column_group == g) ++last;
  return {first, last};
}

}  // namespace

void analyze_lifetimes(ir::Schedule& s) {
  for (auto& t : s.transients) t.first_kernel = t.last_kernel = -1;
  auto touch = [&](int t, int k) {
    const auto [first, last] = execution_span(s, k);
    ir::Transient& tr = s.transients[t];
    tr.first_kernel = tr.first_kernel < 0 ? first : std::min(tr.first_kernel, first);
    tr.last_kernel = std::max(tr.last_kernel, last);
  };
  for (std::size_t k = 0; k < s.kernels.size(); ++k) {
    const ir::Kernel& kern = s.kernels[k];
    for (const auto& o : kern.outputs) {
      const int t = s.transient_index(o);
      if (t < 0) continue;
      s.transients[t].producer = static_cast<int>(k);
      touch(t, static_cast<int>(k));
    }
    for (const auto& a : kern.accesses) {
      const int t = s.transient_index(a.buffer);
      if (t >= 0) touch(t, static_cast<int>(k));
    }
  }
  for (const auto& t : s.transients)
    FIELDFLOW_ASSERT(t.first_kernel >= 0, "transient " + t.name + " has no producer");
}

}  // namespace fieldflow::passes
