// The pipeline as a whole: order, hazards, lifetimes, storage, and its description.
#include <gtest/gtest.h>

#include "pass_test_support.h"
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
  EXPECT_LT(d.find("build_kernels"), d.find("select_transients"));
  EXPECT_LT(d.find("select_transients"), d.find("infer_accesses"));
  EXPECT_LT(d.find("break_write_hazards"), d.find("analyze_lifetimes"));
  ProgramBuilder pb("obs");
  auto a = pb.field("a", {I}, DType::float64);
  auto b = pb.field("b", {I}, DType::float64);
  pb.call("copy", a, {b}, {{I, 0, 2}});
  std::vector<std::string> seen;
  passes::PipelineOptions o;
  o.verify_each = true;
  o.after_pass = [&](const std::string& name, const ir::Schedule&, bool, double) { seen.push_back(name); };
  passes::lower(pb.build(), o);
  ASSERT_EQ(seen.size(), 7u);
  EXPECT_EQ(seen.front(), "build_kernels");
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
