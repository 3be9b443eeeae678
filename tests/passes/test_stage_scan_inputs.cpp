// stage_scan_inputs: a blocked scan's computed inputs move to a pointwise kernel of its group
// that writes them into column-local block buffers.
#include <gtest/gtest.h>

#include "pass_test_support.h"
#include "passes/fuse_columns.h"
#include "passes/pipeline.h"

namespace fieldflow::pass_tests {
namespace {

// fwd(in0 = a * 2 + b (computed), in1 = a (a load), in2 = the surface s broadcast along K (one
// load per column)), its result read by an update: one column group.
ir::Program solver() {
  ProgramBuilder pb("stage");
  auto a = pb.field("a", {I, J, K}, DType::float64), b = pb.field("b", {I, J, K}, DType::float64);
  auto surface = pb.field("s", {I, J}, DType::float64);
  auto out = pb.field("out", {I, J, K}, DType::float64);
  auto fwd = scan("fwd", ScanDirection::forward, {Scalar(0.0)},
                  [](const Expr& c, const std::vector<Expr>& x) { return c * x[1] + x[0] * x[2]; },
                  {a * 2.0 + b, a, broadcast(surface, {I, J, K})});
  pb.call("solve", fwd * 2.0, {out}, {{I, 0, 4}, {J, 0, 3}, {K, 0, 5}});
  return pb.build();
}

// Only the computed input over every loop dimension is staged, in the scan's group and block.
TEST(StageScanInputs, ComputedInputsOfABlockedScanMoveToAPointwiseKernelBeforeIt) {
  const ir::Schedule s = passes::lower(solver());
  ASSERT_EQ(s.kernels.size(), 3u) << s.print();
  EXPECT_EQ(s.kernels[0].name, "fwd_inputs");
  EXPECT_EQ(s.kernels[0].kind, ir::KernelKind::pointwise);
  EXPECT_EQ(s.kernels[0].outputs, std::vector<std::string>{"fwd_in0"});
  EXPECT_EQ(s.kernels[0].column_group, s.kernels[1].column_group);
  EXPECT_EQ(s.kernels[0].column_block, passes::scan_column_block);
  const int t = s.transient_index("fwd_in0");
  ASSERT_GE(t, 0);
  EXPECT_TRUE(s.transients[t].column_local);
  EXPECT_EQ(s.transients[t].producer, 0);
  // The scan reads the staged input where it read the expression, the others as before.
  const ir::Expr& scan = *s.kernels[1].value;
  ASSERT_EQ(scan.args.size(), 3u);
  EXPECT_EQ(scan.args[0]->kind, ir::ExprKind::field_ref);
  EXPECT_EQ(scan.args[0]->name, "fwd_in0");
  EXPECT_EQ(scan.args[1]->name, "a");
  EXPECT_NE(scan.args[2]->kind, ir::ExprKind::field_ref);
  bool reads_staged = false;
  for (const auto& acc : s.kernels[1].accesses) reads_staged |= acc.buffer == "fwd_in0";
  EXPECT_TRUE(reads_staged) << "the scan's access summary was not renewed";
}

// The horizontal layout computes the inputs in the scan's vector loop along the row: unchanged.
TEST(StageScanInputs, HorizontalLayoutKeepsInputsInTheScan) {
  passes::PipelineOptions o;
  o.layout = Layout::horizontal_fastest;
  const ir::Schedule s = passes::lower(solver(), o);
  ASSERT_EQ(s.kernels.size(), 2u) << s.print();
  EXPECT_EQ(s.kernels[0].kind, ir::KernelKind::scan);
  EXPECT_EQ(s.kernels[0].column_block, passes::row_block);
}

}  // namespace
}  // namespace fieldflow::pass_tests
