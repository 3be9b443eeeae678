// The schedule each built-in program lowers to, pinned: a change of the cost model or of a fusion
// pass that splits a fused kernel or stores a value it used to recompute (hdiff's fluxes, once)
// shows up here as a test failure, not only as a slower benchmark.
#include <gtest/gtest.h>

#include "fieldflow/examples.h"
#include "passes/pipeline.h"

namespace fieldflow {
namespace {

// Kernels as "name:kind[@group]" and transients as "name[:column]", in schedule order.
std::string shape(const ir::Schedule& s) {
  std::string out;
  for (const auto& k : s.kernels)
    out += k.name + (k.kind == ir::KernelKind::scan ? ":scan" : ":pointwise") +
           (k.column_group >= 0 ? "@" + std::to_string(k.column_group) : "") + " ";
  out += "|";
  for (const auto& t : s.transients) out += " " + t.name + (t.column_local ? ":column" : "");
  return out;
}

struct Expected {
  const char* program;
  const char* vertical_fastest;
  const char* horizontal_fastest;
};

// One fused kernel and no transient for every stencil and mesh program; vadv's two scans stay
// separate kernels in one column group with per-thread block buffers: in the vertical layout
// (blocks of 8 columns) the forward scan's four inputs are staged column by column into their
// own block buffers first; in the horizontal layout (rows of 256 columns) they are computed in
// the scan's vector loop along the row.
const Expected expected[] = {
    {"laplacian", "laplacian:pointwise |", "laplacian:pointwise |"},
    {"lap_of_lap", "lap_of_lap:pointwise |", "lap_of_lap:pointwise |"},
    {"hdiff", "hdiff:pointwise |", "hdiff:pointwise |"},
    {"vadv",
     "thomas_forward_inputs:pointwise@0 thomas_forward:scan@0 thomas_backward:scan@0 vadv:pointwise@0 | "
     "thomas_backward:column thomas_forward_0:column thomas_forward_1:column thomas_forward_in0:column "
     "thomas_forward_in1:column thomas_forward_in2:column thomas_forward_in3:column",
     "thomas_forward:scan@0 thomas_backward:scan@0 vadv:pointwise@0 | thomas_backward:column thomas_forward_0:column "
     "thomas_forward_1:column"},
    {"fvm_nabla", "fvm_nabla:pointwise |", "fvm_nabla:pointwise |"},
    {"nabla4", "nabla4:pointwise |", "nabla4:pointwise |"},
    {"c2e2co_sum", "c2e2co_sum:pointwise |", "c2e2co_sum:pointwise |"},
    {"vertical_interp", "vertical_interp:pointwise |", "vertical_interp:pointwise |"},
    {"masked_update", "masked_update:pointwise |", "masked_update:pointwise |"},
    {"diffusion_chain", "diffusion_chain:pointwise |", "diffusion_chain:pointwise |"},
};

TEST(BuiltinSchedules, EveryBuiltInProgramLowersToItsKnownShape) {
  std::size_t checked = 0;
  for (const auto& e : expected) {
    const auto& ex = examples::example(e.program);
    for (Layout layout : {Layout::vertical_fastest, Layout::horizontal_fastest}) {
      passes::PipelineOptions o;
      o.layout = layout;
      const std::string want = layout == Layout::vertical_fastest ? e.vertical_fastest : e.horizontal_fastest;
      EXPECT_EQ(shape(passes::lower(ex.program, o)), want) << e.program << " in layout " << to_string(layout);
    }
    ++checked;
  }
  EXPECT_EQ(checked, examples::all_examples().size()) << "a built-in program has no pinned schedule";
}

}  // namespace
}  // namespace fieldflow
