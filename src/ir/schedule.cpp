// Schedules: printing (the observable output of the passes) and the small queries passes share.
#include <algorithm>
#include <fmt/format.h>

#include "ir/schedule.h"

#include "fieldflow/errors.h"

namespace fieldflow::ir {

int Schedule::transient_index(const std::string& name) const {
  for (std::size_t i = 0; i < transients.size(); ++i)
    if (transients[i].name == name) return static_cast<int>(i);
  return -1;
}

namespace {

std::string print_access(const Access& a, const Kernel& k) {
  std::string s = a.buffer + "[";
  for (std::size_t i = 0; i < a.dims.size(); ++i) {
    const DimAccess& d = a.dims[i];
    s += i ? ", " : "";
    switch (d.kind) {
      case DimAccess::Kind::loop:
        s += d.min_offset == d.max_offset ? fmt::format("{}{:+d}", d.dim.name, d.min_offset)
                                          : fmt::format("{}{:+d}..{:+d}", d.dim.name, d.min_offset, d.max_offset);
        break;
      case DimAccess::Kind::table: s += fmt::format("{}:table", d.dim.name); break;
      case DimAccess::Kind::local: s += fmt::format("{}:{}..{}", d.dim.name, d.min_offset, d.max_offset + 1); break;
      case DimAccess::Kind::dynamic: s += fmt::format("{}:dynamic", d.dim.name); break;
    }
  }
  s += "]";
  for (const auto& [ci, outcome] : a.constraints) {
    const Condition& c = k.conditions[ci];
    s += fmt::format(" if {}({} {} {})", outcome ? "" : "!", c.dim.name, to_string(c.cmp), c.bound.to_string());
  }
  return s;
}

}  // namespace

bool Kernel::reads(const std::string& buffer) const {
  return std::any_of(accesses.begin(), accesses.end(), [&](const Access& a) { return a.buffer == buffer; });
}

bool Kernel::writes(const std::string& buffer) const {
  return std::find(outputs.begin(), outputs.end(), buffer) != outputs.end();
}

bool at_point(const Access& a) {
  return std::all_of(a.dims.begin(), a.dims.end(), [](const DimAccess& d) {
    return d.kind == DimAccess::Kind::loop && d.min_offset == 0 && d.max_offset == 0;
  });
}

std::string Schedule::print() const {
  std::string s = fmt::format("schedule {} (layout {})\n", program.name, to_string(layout));
  for (const Transient& t : transients) {
    std::string dims;
    for (std::size_t i = 0; i < t.dims.size(); ++i) dims += (i ? ", " : "") + t.dims[i].name;
    s += fmt::format("transient {} : {}[{}] storage {} produced by kernel {} live [{}, {}]{}\n", t.name,
                     fieldflow::to_string(t.dtype), dims, fieldflow::to_string(t.storage), t.producer, t.first_kernel,
                     t.last_kernel,
                     (t.swept ? fmt::format(" swept along {}", t.swept->name) : std::string()) +
                         (t.column_local ? fmt::format(" column-local x{}", t.column_block) : "") +
                         (t.in_registers ? " in registers" : ""));
  }
  for (std::size_t k = 0; k < kernels.size(); ++k) {
    const Kernel& kern = kernels[k];
    std::string outs;
    for (std::size_t i = 0; i < kern.outputs.size(); ++i) outs += (i ? ", " : "") + kern.outputs[i];
    s += fmt::format("kernel {} '{}' {} -> ({}) over {}{}\n", k, kern.name,
                     kern.kind == KernelKind::scan ? "scan" : "pointwise", outs,
                     kern.extent_from_outputs ? std::string("extent of its outputs") : to_string(kern.domain),
                     kern.column_group >= 0
                         ? fmt::format(" in column group {} of {}-column blocks", kern.column_group, kern.column_block)
                     : kern.fused_into >= 0 ? fmt::format(" in the level loop of kernel {}", kern.fused_into)
                                            : "");
    for (const Access& a : kern.accesses) s += "  reads " + print_access(a, kern) + "\n";
    std::string body = ir::print(*kern.value);
    std::string indented;
    for (std::size_t pos = 0; pos < body.size();) {
      const std::size_t nl = body.find('\n', pos);
      indented += "  " + body.substr(pos, nl - pos) + "\n";
      pos = nl == std::string::npos ? body.size() : nl + 1;
    }
    s += indented;
  }
  return s;
}

std::vector<Dimension> kernel_loop_dims(const ir::Schedule& s, const ir::Kernel& k) {
  std::vector<Dimension> dims;
  if (!k.extent_from_outputs)
    for (const auto& r : k.domain) dims.push_back(r.dim);
  else
    dims = s.transients.at(s.transient_index(k.outputs.at(0))).dims;
  return ir::canonical_dims(dims);
}

Dimension unit_stride_dim(const std::vector<Dimension>& dims, Layout layout) {
  // A single value has no stride at all; Layout::any reads every stride at run time.
  if (dims.empty() || layout == Layout::any) return Dimension{"", DimKind::horizontal};
  return layout == Layout::vertical_fastest ? dims.back() : dims.front();
}

Dimension column_block_dim(const std::vector<Dimension>& dims, Layout layout) {
  if (layout == Layout::horizontal_fastest && !dims.empty() && dims.front().kind != DimKind::vertical) return dims.front();
  for (std::size_t a = dims.size(); a-- > 0;)
    if (dims[a].kind != DimKind::vertical) return dims[a];
  FIELDFLOW_UNREACHABLE("a column group without a horizontal dimension");
}

}  // namespace fieldflow::ir
