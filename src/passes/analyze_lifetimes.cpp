#include "passes/analyze_lifetimes.h"

#include "fieldflow/errors.h"

namespace fieldflow::passes {

void analyze_lifetimes(ir::Schedule& s) {
  for (auto& t : s.transients) t.first_kernel = t.last_kernel = -1;
  for (std::size_t k = 0; k < s.kernels.size(); ++k) {
    const ir::Kernel& kern = s.kernels[k];
    for (const auto& o : kern.outputs) {
      const int t = s.transient_index(o);
      if (t < 0) continue;
      s.transients[t].producer = static_cast<int>(k);
      if (s.transients[t].first_kernel < 0) s.transients[t].first_kernel = static_cast<int>(k);
      s.transients[t].last_kernel = std::max(s.transients[t].last_kernel, static_cast<int>(k));
    }
    for (const auto& a : kern.accesses) {
      const int t = s.transient_index(a.buffer);
      if (t >= 0) s.transients[t].last_kernel = std::max(s.transients[t].last_kernel, static_cast<int>(k));
    }
  }
  for (const auto& t : s.transients)
    FIELDFLOW_ASSERT(t.first_kernel >= 0, "transient " + t.name + " has no producer");
}

}  // namespace fieldflow::passes
