// The pipeline as a whole: order, hazards, lifetimes, storage, and its description.
#include <gtest/gtest.h>

#include "pass_test_support.h"
#include "passes/fuse_columns.h"
#include "passes/pipeline.h"

namespace fieldflow::pass_tests {
namespace {

// An output read at another point of the same kernel gets a double buffer and a copy kernel.
TEST(Pipeline, InOutShiftedReadIsDoubleBuffered) {
  ProgramBuilder pb("inout");
  auto w = pb.field("w", {I, K}, DType::float64);
  pb.call("step", w + w(K + 1), {w}, {{I, 0, 3}, {K, 0, 3}});
  const ir::Schedule s = passes::lower(pb.build());
  ASSERT_EQ(s.kernels.size(), 2u);
  ASSERT_EQ(s.transients.size(), 1u);
  EXPECT_EQ(s.transients[0].name, "w_next");
  EXPECT_EQ(s.kernels[0].outputs, std::vector<std::string>{"w_next"});
  EXPECT_EQ(s.kernels[1].outputs, std::vector<std::string>{"w"});
  EXPECT_EQ(s.transients[0].first_kernel, 0);
  EXPECT_EQ(s.transients[0].last_kernel, 1);
}

// A point-wise in/out update needs no double buffer.
TEST(Pipeline, InOutAtSamePointNeedsNoBuffer) {
  ProgramBuilder pb("inplace");
  auto w = pb.field("w", {I, K}, DType::float64);
  pb.call("scale", w * 2.0, {w}, {{I, 0, 3}, {K, 0, 3}});
  const ir::Schedule s = passes::lower(pb.build());
  EXPECT_EQ(s.kernels.size(), 1u);
  EXPECT_TRUE(s.transients.empty());
}

TEST(Pipeline, DescriptionListsPassesInOrderAndObserverSeesEach) {
  const std::string d = passes::pipeline_description();
  EXPECT_LT(d.find("fold_static_scalars"), d.find("build_kernels"));
  EXPECT_LT(d.find("build_kernels"), d.find("select_transients"));
  EXPECT_LT(d.find("select_transients"), d.find("infer_accesses"));
  EXPECT_LT(d.find("break_write_hazards"), d.find("analyze_lifetimes"));
  EXPECT_LT(d.find("fuse_columns"), d.find("stage_scan_inputs"));
  EXPECT_LT(d.find("break_write_hazards"), d.find("fuse_scan_consumers"));
  EXPECT_LT(d.find("fuse_scan_consumers"), d.find("analyze_lifetimes"));
  EXPECT_LT(d.find("stage_scan_inputs"), d.find("analyze_lifetimes"));
  ProgramBuilder pb("obs");
  auto a = pb.field("a", {I}, DType::float64);
  auto b = pb.field("b", {I}, DType::float64);
  pb.call("copy", a, {b}, {{I, 0, 2}});
  std::vector<std::string> seen;
  passes::PipelineOptions o;
  o.verify_each = true;
  o.after_pass = [&](const std::string& name, const ir::Schedule&, bool, double) { seen.push_back(name); };
  passes::lower(pb.build(), o);
  ASSERT_EQ(seen.size(), 11u);
  EXPECT_EQ(seen.front(), "fold_static_scalars");
  EXPECT_EQ(seen.back(), "assign_storage");
}

TEST(Pipeline, TransientsAreOnTheHostHeapForCpu) {
  ProgramBuilder pb("store");
  auto a = pb.field("a", {I}, DType::float64);
  auto b = pb.field("b", {I}, DType::float64);
  auto m = materialize("m", a * 2.0);
  pb.call("use", m(I + 1) + m, {b}, {{I, 0, 2}});
  const ir::Schedule s = passes::lower(pb.build());
  ASSERT_EQ(s.transients.size(), 1u);
  EXPECT_EQ(s.transients[0].storage, Storage::host_heap);
  passes::PipelineOptions gpu;
  gpu.target = Device::cuda;
  EXPECT_EQ(passes::lower(pb.build(), gpu).transients[0].storage, Storage::gpu_global);
}

}  // namespace
}  // namespace fieldflow::pass_tests

namespace fieldflow::pass_tests {
namespace {

// A vertical solver (forward scan, backward scan, update) runs column by column, in blocks of
// neighbouring columns swept side by side: its scan results live in per-thread blocks of
// columns, not whole fields. The horizontal layout blocks stretches of rows instead; Layout::any
// keeps whole fields.
TEST(Pipeline, VerticalSolverRunsColumnByColumn) {
  ProgramBuilder pb("solver");
  auto a = pb.field("a", {I, J, K}, DType::float64);
  auto out = pb.field("out", {I, J, K}, DType::float64);
  auto fwd = scan("fwd", ScanDirection::forward, {Scalar(0.0)},
                  [](const Expr& c, const std::vector<Expr>& x) { return c * 0.5 + x[0]; }, {a});
  auto bwd = scan("bwd", ScanDirection::backward, {Scalar(0.0)},
                  [](const Expr& c, const std::vector<Expr>& x) { return c * 0.25 + x[0]; }, {fwd});
  pb.call("solve", bwd * 2.0 + a(I + 1), {out}, {{I, 0, 4}, {J, 0, 3}, {K, 0, 5}});
  const ir::Schedule s = passes::lower(pb.build());
  ASSERT_EQ(s.kernels.size(), 3u);
  for (const auto& k : s.kernels) {
    EXPECT_EQ(k.column_group, 0) << k.name;
    EXPECT_EQ(k.column_block, passes::scan_column_block) << k.name;
  }
  for (const auto& t : s.transients) {
    EXPECT_TRUE(t.column_local) << t.name;
    EXPECT_EQ(t.column_block, passes::scan_column_block) << t.name;
  }
  const auto ext = ir::compute_extents(s, {});
  const auto bytes = ir::transient_bytes(s, ext, 3);
  for (std::size_t t = 0; t < bytes.size(); ++t)
    EXPECT_EQ(bytes[t], 3u * (3u * 8u + 512u) * 8u)
        << "3 threads x (a block of the 3 columns along J x 5 levels padded to 8, then a 4 KiB gap)";
  passes::PipelineOptions h;
  h.layout = Layout::horizontal_fastest;
  for (const auto& t : passes::lower(pb.build(), h).transients) {
    EXPECT_TRUE(t.column_local) << t.name;
    EXPECT_EQ(t.column_block, passes::row_block) << t.name;
  }
  passes::PipelineOptions any;
  any.layout = Layout::any;
  for (const auto& t : passes::lower(pb.build(), any).transients) EXPECT_FALSE(t.column_local) << t.name;
}

// A group without a scan has no recurrence to interleave: one column at a time, one column
// buffer per thread.
TEST(Pipeline, PointwiseColumnGroupTakesOneColumnAtATime) {
  ProgramBuilder pb("pointwise_group");
  auto a = pb.field("a", {I, J, K}, DType::float64);
  auto out = pb.field("out", {I, J, K}, DType::float64);
  const Expr t = materialize("t", sin(a) * cos(a));
  pb.call("use", t(K + 1) + t(K - 1), {out}, {{I, 0, 4}, {J, 0, 3}, {K, 1, 4}});
  const ir::Schedule s = passes::lower(pb.build());
  ASSERT_EQ(s.transients.size(), 1u);
  ASSERT_TRUE(s.transients[0].column_local) << s.print();
  EXPECT_EQ(s.transients[0].column_block, 1);
  for (const auto& k : s.kernels) EXPECT_EQ(k.column_block, 1) << k.name;
}

// A value read in a neighbouring column cannot be column-local.
TEST(Pipeline, NeighbouringColumnReadsKeepWholeFields) {
  ProgramBuilder pb("neighbours");
  auto a = pb.field("a", {I, K}, DType::float64);
  auto out = pb.field("out", {I, K}, DType::float64);
  auto fwd = scan("fwd", ScanDirection::forward, {Scalar(0.0)},
                  [](const Expr& c, const std::vector<Expr>& x) { return c + x[0]; }, {a});
  pb.call("use", fwd(I + 1) - fwd, {out}, {{I, 0, 4}, {K, 0, 5}});
  const ir::Schedule s = passes::lower(pb.build());
  for (const auto& t : s.transients) EXPECT_FALSE(t.column_local) << t.name;
}

}  // namespace
}  // namespace fieldflow::pass_tests
