// fuse_scan_consumers: on CUDA, a pointwise kernel that reads a scan's results only at its own
// point runs in the scan's level loop, and results nothing else reads stay in registers.
#include <gtest/gtest.h>

#include "pass_test_support.h"
#include "passes/pipeline.h"

#include <functional>

namespace fieldflow::pass_tests {
namespace {

ir::Schedule lower_for(const ir::Program& p, Device target) {
  passes::PipelineOptions o;
  o.target = target;
  o.verify_each = true;
  return passes::lower(p, o);
}

Expr backward(const Expr& a, const Expr& b) {
  return scan("bwd", ScanDirection::backward, {Scalar(0.0)},
              [](const Expr& c, const std::vector<Expr>& x) { return x[1] - x[0] * c; }, {a, b});
}

// The solver's last steps: out = 2 * (x - u), x a backward sweep (vadv's shape).
ir::Program sweep_then(const std::function<Expr(const Expr& x, const Expr& u)>& update) {
  ProgramBuilder pb("sweep");
  auto a = pb.field("a", {I, J, K}, DType::float64), b = pb.field("b", {I, J, K}, DType::float64);
  auto u = pb.field("u", {I, J, K}, DType::float64), out = pb.field("out", {I, J, K}, DType::float64);
  pb.call("solve", update(backward(a, b), u), {out}, {{I, 0, 4}, {J, 0, 3}, {K, 0, 5}});
  return pb.build();
}

const ir::Transient& transient(const ir::Schedule& s, const std::string& name) {
  const int t = s.transient_index(name);
  EXPECT_GE(t, 0) << name;
  return s.transients.at(static_cast<std::size_t>(t));
}

TEST(FuseScanConsumers, AnUpdateAtTheSweptPointRunsInTheSweepAndItsResultStaysInRegisters) {
  const ir::Program p = sweep_then([](const Expr& x, const Expr& u) { return (x - u) * 2.0; });
  const ir::Schedule s = lower_for(p, Device::cuda);
  ASSERT_EQ(s.kernels.size(), 2u);
  EXPECT_EQ(s.kernels[0].kind, ir::KernelKind::scan);
  EXPECT_EQ(s.kernels[1].fused_into, 0);
  EXPECT_TRUE(transient(s, "bwd").in_registers);
  // Both run at once: the scan's inputs live as long as the update.
  EXPECT_EQ(transient(s, "bwd").last_kernel, 1);
  EXPECT_NE(s.print().find("in the level loop of kernel 0"), std::string::npos);
  EXPECT_NE(s.print().find("in registers"), std::string::npos);
  // The CPU keeps such results in cache (column groups) instead.
  const ir::Schedule cpu = lower_for(p, Device::cpu);
  for (const auto& k : cpu.kernels) EXPECT_EQ(k.fused_into, -1);
  for (const auto& t : cpu.transients) EXPECT_FALSE(t.in_registers);
}

// In registers means no memory: the plan gives the result no bytes, whatever the sizes.
TEST(FuseScanConsumers, AResultInRegistersNeedsNoBytes) {
  const ir::Schedule s = lower_for(sweep_then([](const Expr& x, const Expr& u) { return x * u; }), Device::cuda);
  const ir::ConcreteExtents e = ir::compute_extents(s, {});
  EXPECT_EQ(e.transient_boxes.at(0).count(), 4 * 3 * 5) << "its box is still what the update reads";
  EXPECT_EQ(ir::transient_bytes(s, e, 1), std::vector<std::size_t>{0});
}

TEST(FuseScanConsumers, AResultReadAtAnotherLevelOrOnlyInABranchIsNotFused) {
  for (const auto& update : std::vector<std::function<Expr(const Expr&, const Expr&)>>{
           [](const Expr& x, const Expr& u) { return x(K + 1) - u; },  // not computed yet at this level
           [](const Expr& x, const Expr& u) { return x(I + 1) - u; },  // another thread's column
           // Reads at only some points: the scan's box need not cover the update's.
           [](const Expr& x, const Expr& u) { return concat_where(K == 0, u, x); },
       }) {
    const ir::Schedule s = lower_for(sweep_then(update), Device::cuda);
    ASSERT_EQ(s.kernels.size(), 2u);
    EXPECT_EQ(s.kernels[1].fused_into, -1) << s.print();
    EXPECT_FALSE(transient(s, "bwd").in_registers);
  }
}

// t = x * u is fused; x is also read by the statement, two columns away: stored, and the scan's
// box is wider than t's (the generated code tests t's box: Scan.AConsumerInTheSweepRunsOnlyOver...).
TEST(FuseScanConsumers, AResultAlsoReadElsewhereIsStored) {
  const ir::Schedule s = lower_for(sweep_then([](const Expr& x, const Expr& u) {
                                     Expr t = materialize("t", x * u);
                                     return x(I + 2) + t(I + 1) - t(I - 1);
                                   }),
                                   Device::cuda);
  ASSERT_EQ(s.kernels.size(), 3u);
  EXPECT_EQ(s.kernels[1].name, "t");
  EXPECT_EQ(s.kernels[1].fused_into, 0);
  EXPECT_EQ(s.kernels[2].fused_into, -1);
  EXPECT_FALSE(transient(s, "bwd").in_registers);
  EXPECT_FALSE(transient(s, "t").in_registers);
  const ir::ConcreteExtents e = ir::compute_extents(s, {});
  EXPECT_EQ(e.kernel_domains[0].to_string(), "{I: [-1, 6), J: [0, 3), K: [0, 5)}");
  EXPECT_EQ(e.kernel_domains[1].to_string(), "{I: [-1, 5), J: [0, 3), K: [0, 5)}");
}

// A consumer that overwrites what the scan reads at other levels waits for the whole sweep: in
// the level loop, level k's update would overwrite b at k before level k - 1 reads it as b(K+1).
TEST(FuseScanConsumers, AnUpdateOfAFieldTheScanReadsIsNotFused) {
  ProgramBuilder pb("overwrite");
  auto a = pb.field("a", {I, J, K}, DType::float64), b = pb.field("b", {I, J, K}, DType::float64);
  pb.call("solve", backward(a, b(K + 1)) * 2.0, {b}, {{I, 0, 4}, {J, 0, 3}, {K, 0, 4}});
  const ir::Schedule s = lower_for(pb.build(), Device::cuda);
  for (const auto& k : s.kernels) EXPECT_EQ(k.fused_into, -1) << s.print();
}

// A scan that is a whole statement writes its own box of a parameter; a later statement may read
// that parameter where the scan did not write it.
TEST(FuseScanConsumers, AScanWritingAParameterIsNotFused) {
  ProgramBuilder pb("two_calls");
  auto a = pb.field("a", {I, J, K}, DType::float64), b = pb.field("b", {I, J, K}, DType::float64);
  auto x = pb.field("x", {I, J, K}, DType::float64), out = pb.field("out", {I, J, K}, DType::float64);
  pb.call("sweep", backward(a, b), {x}, {{I, 1, 4}, {J, 0, 3}, {K, 0, 5}});
  pb.call("update", x * 2.0, {out}, {{I, 0, 4}, {J, 0, 3}, {K, 0, 5}});
  const ir::Schedule s = lower_for(pb.build(), Device::cuda);
  for (const auto& k : s.kernels) EXPECT_EQ(k.fused_into, -1) << s.print();
}

}  // namespace
}  // namespace fieldflow::pass_tests
