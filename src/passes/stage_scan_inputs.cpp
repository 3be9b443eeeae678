#include "passes/stage_scan_inputs.h"

#include <fmt/format.h>
#include <map>

#include "ir/positions.h"
#include "passes/infer_accesses.h"

namespace fieldflow::passes {

namespace {

using ir::Expr;
using ir::ExprKind;

// An input worth staging: computed (not a load, scalar or literal, nor a broadcast, one load
// for the whole column) and defined at every point of the scan's loop.
bool stageable(const Expr& arg, const std::vector<Dimension>& loop_dims) {
  if (arg.kind == ExprKind::field_ref || arg.kind == ExprKind::scalar_ref || arg.kind == ExprKind::literal ||
      arg.kind == ExprKind::index || arg.kind == ExprKind::broadcast || arg.type.is_tuple())
    return false;
  return arg.type.dims == loop_dims;
}

std::string fresh_name(const ir::Schedule& s, const std::string& base) {
  std::string name = base;
  for (int n = 1; s.program.find(name) || s.transient_index(name) >= 0; ++n) name = fmt::format("{}_{}", base, n);
  return name;
}

}  // namespace

void stage_scan_inputs(ir::Schedule& s) {
  if (s.layout != Layout::vertical_fastest) return;
  bool changed = false;
  for (std::size_t k = 0; k < s.kernels.size(); ++k) {
    const ir::Kernel& scan_kernel = s.kernels[k];
    if (scan_kernel.kind != ir::KernelKind::scan || scan_kernel.column_group < 0 || scan_kernel.column_block == 1)
      continue;
    const std::vector<Dimension> loop_dims = ir::kernel_loop_dims(s, scan_kernel);
    const Expr& scan = *scan_kernel.value;
    ir::Kernel stage;
    stage.name = fresh_name(s, scan.name + "_inputs");
    stage.stmt = scan_kernel.stmt;
    stage.extent_from_outputs = true;
    stage.column_group = scan_kernel.column_group;
    stage.column_block = scan_kernel.column_block;
    std::vector<ir::ExprPtr> values;
    std::map<const Expr*, ir::ExprPtr> staged;  // an input given twice is staged once
    std::vector<ir::Transient> buffers;
    for (std::size_t i = 0; i < scan.args.size(); ++i) {
      const ir::ExprPtr& arg = scan.args[i];
      if (!stageable(*arg, loop_dims) || staged.count(arg.get())) continue;
      ir::Transient t;
      // Distinct per input (its index is in the name), and clear of the program's names.
      t.name = fresh_name(s, fmt::format("{}_in{}", scan.name, i));
      t.dtype = arg->type.dtype;
      t.dims = arg->type.dims;
      t.producer = static_cast<int>(k);
      t.column_local = true;
      t.column_block = scan_kernel.column_block;
      staged[arg.get()] = ir::buffer_ref(t.name, t.dtype, t.dims);
      stage.outputs.push_back(t.name);
      values.push_back(arg);
      buffers.push_back(std::move(t));
    }
    if (values.empty()) continue;
    if (values.size() == 1) {
      stage.value = values[0];
    } else {
      auto tuple = std::make_shared<Expr>();
      tuple->kind = ExprKind::make_tuple;
      for (const auto& v : values) tuple->type.elements.push_back(v->type);
      tuple->args = values;
      stage.value = tuple;
    }
    // The scan reads its staged inputs from the block buffers.
    auto rewritten = std::make_shared<Expr>(scan);
    for (auto& arg : rewritten->args)
      if (auto it = staged.find(arg.get()); it != staged.end()) arg = it->second;
    s.kernels[k].value = rewritten;
    // Kernels from index k on move one place later.
    for (auto& tr : s.transients)
      if (tr.producer >= static_cast<int>(k)) ++tr.producer;
    for (auto& b : buffers) s.transients.push_back(std::move(b));
    s.kernels.insert(s.kernels.begin() + static_cast<long>(k), std::move(stage));
    ++k;  // past the scan, now at k + 1
    changed = true;
  }
  if (changed) infer_accesses(s);
}

}  // namespace fieldflow::passes
