// The lowering pipeline, top to bottom. Each step names a pass (one file each in this folder),
// runs it, and reports it to an optional observer (the CLI prints the schedule after any pass
// and times them).
#include "passes/pipeline.h"

#include <chrono>
#include <fmt/format.h>

#include "fieldflow/errors.h"
#include "passes/analyze_lifetimes.h"
#include "passes/assign_storage.h"
#include "passes/break_write_hazards.h"
#include "passes/build_kernels.h"
#include "passes/fold_static_scalars.h"
#include "passes/fuse_columns.h"
#include "passes/fuse_kernels.h"
#include "passes/fuse_scan_consumers.h"
#include "passes/infer_accesses.h"
#include "passes/select_transients.h"
#include "passes/stage_scan_inputs.h"

namespace fieldflow::passes {

namespace {

struct Step {
  const char* name;
  std::function<void(ir::Schedule&, const PipelineOptions&)> run;
};

const std::vector<Step>& steps() {
  static const std::vector<Step> list = {
      // First: every later pass then sees the static values as literals and dead branches gone.
      {"fold_static_scalars", [](ir::Schedule& s, const PipelineOptions& o) { fold_static_scalars(s, o.static_scalars); }},
      {"build_kernels", [](ir::Schedule& s, const PipelineOptions&) { build_kernels(s); }},
      // Before anything reasons about reads: afterwards every kernel value only contains
      // pointwise code, shifts of buffers and reductions, which the later passes rely on.
      {"select_transients", [](ir::Schedule& s, const PipelineOptions&) { select_transients(s); }},
      {"infer_accesses", [](ir::Schedule& s, const PipelineOptions&) { infer_accesses(s); }},
      // Needs the access summaries (fusion is legal only for reads at the computed point); runs
      // before hazard breaking so a fused kernel's own hazards get double buffers too.
      {"fuse_kernels", [](ir::Schedule& s, const PipelineOptions&) { fuse_kernels(s); }},
      // Needs the access summaries to see which outputs are read at other points.
      {"break_write_hazards", [](ir::Schedule& s, const PipelineOptions&) { break_write_hazards(s); }},
      // After hazards are broken: the kernel order and every buffer written are final.
      // CPU only: a column group runs whole columns per thread with column-local transients; a
      // GPU thread grid has no such columns (codegen/cuda launches one kernel per schedule kernel).
      {"fuse_columns", [](ir::Schedule& s, const PipelineOptions& o) { if (o.target == Device::cpu) fuse_columns(s); }},
      // Its GPU counterpart: a scan's thread also computes the pointwise kernel after it, level
      // by level, and results only that kernel reads stay in registers.
      {"fuse_scan_consumers", [](ir::Schedule& s, const PipelineOptions& o) { if (o.target == Device::cuda) fuse_scan_consumers(s); }},
      // Needs the column groups and their blocks: it splits scans of blocked groups.
      {"stage_scan_inputs", [](ir::Schedule& s, const PipelineOptions&) { stage_scan_inputs(s); }},
      // Last structural change is done: live ranges are final.
      {"analyze_lifetimes", [](ir::Schedule& s, const PipelineOptions&) { analyze_lifetimes(s); }},
      {"assign_storage", [](ir::Schedule& s, const PipelineOptions& o) { assign_storage(s, o.target); }},
  };
  return list;
}

}  // namespace

ir::Schedule lower(const ir::Program& program, const PipelineOptions& options) {
  ir::verify(program);
  ir::Schedule s;
  s.program = program;
  s.layout = options.layout;
  for (const Step& step : steps()) {
    const std::string before = options.after_pass ? s.print() : std::string();
    const auto t0 = std::chrono::steady_clock::now();
    step.run(s, options);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
#ifndef NDEBUG
    verify_schedule(s, false);
#else
    if (options.verify_each) verify_schedule(s, false);
#endif
    if (options.after_pass) options.after_pass(step.name, s, s.print() != before, seconds);
  }
  verify_schedule(s, true);
  return s;
}

std::string pipeline_description() {
  std::string d = "fieldflow-pipeline-v1:";
  for (const Step& step : steps()) d += std::string(step.name) + ",";
  return d;
}

void verify_schedule(const ir::Schedule& s, bool lowered) {
  std::vector<bool> produced(s.transients.size(), false);
  for (std::size_t k = 0; k < s.kernels.size(); ++k) {
    const ir::Kernel& kern = s.kernels[k];
    FIELDFLOW_ASSERT(kern.value, fmt::format("kernel {} has no value", k));
    for (const ir::Expr* e : ir::post_order(kern.value)) {
      if (e->kind != ir::ExprKind::field_ref) continue;
      const int t = s.transient_index(e->name);
      if (t >= 0) {
        FIELDFLOW_ASSERT(produced[t], fmt::format("kernel {} reads transient {} before it is produced", k, e->name));
      } else {
        const ir::Param* p = s.program.find(e->name);
        FIELDFLOW_ASSERT(p && p->kind == ir::ParamKind::field, fmt::format("kernel {} reads unknown buffer {}", k, e->name));
      }
    }
    for (const ir::Expr* e : ir::post_order(kern.value))
      FIELDFLOW_ASSERT(!lowered || e->kind != ir::ExprKind::scan || (kern.kind == ir::KernelKind::scan && e == kern.value.get()),
                       fmt::format("kernel {} contains a scan that is not its root", k));
    for (const auto& o : kern.outputs) {
      const int t = s.transient_index(o);
      if (t >= 0) produced[t] = true;
      else FIELDFLOW_ASSERT(s.program.find(o), fmt::format("kernel {} writes unknown buffer {}", k, o));
    }
    FIELDFLOW_ASSERT(!kern.extent_from_outputs || (!kern.outputs.empty() && s.transient_index(kern.outputs[0]) >= 0),
                     fmt::format("kernel {} has neither a domain nor a transient output", k));
    FIELDFLOW_ASSERT(kern.fused_into < 0 || (kern.fused_into + 1 == static_cast<int>(k) &&
                                             s.kernels[k - 1].kind == ir::KernelKind::scan && kern.column_group < 0),
                     fmt::format("kernel {} is fused into kernel {}, not a scan right before it", k, kern.fused_into));
  }
  // A result kept in registers is read by nothing but the consumer fused into its scan.
  for (const ir::Transient& t : s.transients) {
    if (!t.in_registers) continue;
    for (std::size_t k = 0; k < s.kernels.size(); ++k)
      for (const ir::Access& a : s.kernels[k].accesses)
        FIELDFLOW_ASSERT(a.buffer != t.name || (s.kernels[k].fused_into >= 0 && s.kernels[k - 1].writes(t.name)),
                         fmt::format("kernel {} reads {}, which lives in registers of another kernel", k, t.name));
  }
}

}  // namespace fieldflow::passes
