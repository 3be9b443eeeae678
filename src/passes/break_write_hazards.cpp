#include "passes/break_write_hazards.h"

#include <fmt/format.h>

#include "ir/positions.h"
#include "passes/infer_accesses.h"

namespace fieldflow::passes {

namespace {

bool reads_elsewhere(const ir::Kernel& k, const std::string& buffer) {
  for (const ir::Access& a : k.accesses) {
    if (a.buffer != buffer) continue;
    for (const ir::DimAccess& d : a.dims)
      if (d.kind != ir::DimAccess::Kind::loop || d.min_offset != 0 || d.max_offset != 0) return true;
  }
  return false;
}

}  // namespace

void break_write_hazards(ir::Schedule& s) {
  bool changed = false;
  for (std::size_t k = 0; k < s.kernels.size(); ++k) {
    // The copies run in output order: a fused kernel may write one field for two statements
    // (s0 then s1), and the later statement's value must be the one left in the field.
    std::size_t copies = 0;
    for (std::size_t o = 0; o < s.kernels[k].outputs.size(); ++o) {
      const std::string out = s.kernels[k].outputs[o];
      // Kernels that may fail an in-kernel check (dynamic offsets) write through a double buffer
      // too: the copy runs only if the call succeeded, so a failing call leaves the field as it was.
      if (s.transient_index(out) >= 0 || (!reads_elsewhere(s.kernels[k], out) && !s.kernels[k].has_dynamic_shift))
        continue;
      const ir::Param& p = *s.program.find(out);
      ir::Transient t;
      t.name = fmt::format("{}_next", out);
      for (int n = 1; s.program.find(t.name) || s.transient_index(t.name) >= 0; ++n)
        t.name = fmt::format("{}_next{}", out, n);
      t.dtype = p.type.dtype;
      t.dims = p.type.dims;
      t.producer = static_cast<int>(k);
      s.kernels[k].outputs[o] = t.name;
      ir::Kernel copy;
      copy.name = fmt::format("copy_{}", out);
      copy.stmt = s.kernels[k].stmt;
      copy.domain = s.kernels[k].domain;
      copy.outputs = {out};
      copy.value = ir::buffer_ref(t.name, t.dtype, t.dims);
      for (auto& tr : s.transients)
        if (tr.producer > static_cast<int>(k)) ++tr.producer;
      s.transients.push_back(t);
      s.kernels.insert(s.kernels.begin() + static_cast<long>(k + 1 + copies++), std::move(copy));
      changed = true;
    }
  }
  // The copy kernels read their double buffers: summarise them like every other kernel.
  if (changed) infer_accesses(s);
}

}  // namespace fieldflow::passes
