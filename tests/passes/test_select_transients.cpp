// select_transients: what is recomputed (inlined) and what is stored.
#include <gtest/gtest.h>

#include "pass_test_support.h"
#include "passes/build_kernels.h"
#include "passes/select_transients.h"

namespace fieldflow::pass_tests {
namespace {

// Cheap producers read through shifts are recomputed: the Laplacian of a Laplacian fuses.
TEST(SelectTransients, CheapShiftedProducerIsInlined) {
  ProgramBuilder pb("lap2");
  auto in = pb.field("in", {I, J}, DType::float64);
  auto out = pb.field("out", {I, J}, DType::float64);
  auto lap = [](Expr f) { return -4.0 * f + f(I + 1) + f(I - 1) + f(J + 1) + f(J - 1); };
  pb.call("lap2", lap(lap(in)), {out}, {{I, 0, 4}, {J, 0, 4}});
  auto s = schedule_of(pb.build());
  passes::build_kernels(s);
  passes::select_transients(s);
  EXPECT_EQ(s.kernels.size(), 1u);
  EXPECT_TRUE(s.transients.empty());
}

// An expensive value read at many points is stored once instead of recomputed at each.
TEST(SelectTransients, ExpensiveValueReadAtManyPointsBecomesTransient) {
  ProgramBuilder pb("heavy");
  auto in = pb.field("in", {I, J}, DType::float64);
  auto out = pb.field("out", {I, J}, DType::float64);
  Expr heavy = in;
  for (int r = 0; r < 12; ++r) heavy = exp(heavy) * 0.5 + sin(heavy);
  heavy = named("heavy", heavy);
  pb.call("use", heavy(I + 1) + heavy(I - 1) + heavy(J + 1) + heavy(J - 1) + heavy, {out}, {{I, 0, 4}, {J, 0, 4}});
  auto s = schedule_of(pb.build());
  passes::build_kernels(s);
  passes::select_transients(s);
  ASSERT_EQ(s.transients.size(), 1u);
  EXPECT_EQ(s.transients[0].name, "heavy");
  ASSERT_EQ(s.kernels.size(), 2u);
  EXPECT_EQ(s.kernels[0].outputs, std::vector<std::string>{"heavy"});
  EXPECT_TRUE(s.kernels[0].extent_from_outputs) << "a transient producer covers what its consumer reads";
}

// materialize() always stores; a scan read by an expression becomes a scan kernel + transients.
TEST(SelectTransients, MaterializeAndScansAreStored) {
  ProgramBuilder pb("marked");
  auto in = pb.field("in", {I, K}, DType::float64);
  auto out = pb.field("out", {I, K}, DType::float64);
  auto sc = scan("acc", ScanDirection::forward, {Scalar(0.0), Scalar(0.0)},
                 [](const Expr& c, const std::vector<Expr>& x) { return make_tuple({c[0] + x[0], c[1] - x[0]}); }, {in});
  pb.call("use", materialize("m", in * 2.0) + sc[0] * sc[1], {out}, {{I, 0, 3}, {K, 0, 4}});
  auto s = schedule_of(pb.build());
  passes::build_kernels(s);
  passes::select_transients(s);
  EXPECT_EQ(count_kernels(s, ir::KernelKind::scan), 1);
  ASSERT_EQ(s.transients.size(), 3u);  // m, acc_0, acc_1
  int swept = 0;
  for (const auto& t : s.transients) swept += t.swept.has_value();
  EXPECT_EQ(swept, 2);
}

// A scan inside a labelled value and also read by the rest of the statement is swept once: both
// read one transient (the fuzzer's reused scans; taking the label first swept the scan twice).
TEST(SelectTransients, AScanReadInsideAndOutsideALabelIsSweptOnce) {
  ProgramBuilder pb("shared_scan");
  auto in = pb.field("in", {I, K}, DType::float64);
  auto out = pb.field("out", {I, K}, DType::float64);
  auto sc = scan("acc", ScanDirection::forward, {Scalar(0.0)},
                 [](const Expr& c, const std::vector<Expr>& x) { return c * 0.5 + x[0]; }, {in});
  pb.call("use", materialize("m", sc * 2.0 + 1.0) + sc(I + 1), {out}, {{I, 0, 3}, {K, 0, 4}});
  auto s = schedule_of(pb.build());
  passes::build_kernels(s);
  passes::select_transients(s);
  ASSERT_EQ(count_kernels(s, ir::KernelKind::scan), 1) << s.print();
  ASSERT_EQ(s.kernels.size(), 3u);
  EXPECT_EQ(s.kernels[0].outputs, std::vector<std::string>{"acc"});
  EXPECT_EQ(s.kernels[1].outputs, std::vector<std::string>{"m"});
  // A scan only the label reads still moves with the label (vadv's nested sweeps keep their order).
  ProgramBuilder inner("inner_scan");
  auto in2 = inner.field("in", {I, K}, DType::float64);
  auto out2 = inner.field("out", {I, K}, DType::float64);
  auto sc2 = scan("acc", ScanDirection::forward, {Scalar(0.0)},
                  [](const Expr& c, const std::vector<Expr>& x) { return c * 0.5 + x[0]; }, {in2});
  inner.call("use", materialize("m", sc2 * 2.0)(I + 1), {out2}, {{I, 0, 3}, {K, 0, 4}});
  auto s2 = schedule_of(inner.build());
  passes::build_kernels(s2);
  passes::select_transients(s2);
  ASSERT_EQ(s2.transients.size(), 2u);
  EXPECT_EQ(s2.transients[0].name, "m") << "the label is taken first";
  EXPECT_EQ(count_kernels(s2, ir::KernelKind::scan), 1);
}

// A statement whose value is a scan writes its outputs directly: no transient.
TEST(SelectTransients, RootScanWritesOutputsDirectly) {
  ProgramBuilder pb("root_scan");
  auto in = pb.field("in", {I, K}, DType::float64);
  auto out = pb.field("out", {I, K}, DType::float64);
  pb.call("sum", scan("s", ScanDirection::backward, {Scalar(0.0)},
                      [](const Expr& c, const std::vector<Expr>& x) { return c + x[0]; }, {in}),
          {out}, {{I, 0, 3}, {K, 0, 4}});
  auto s = schedule_of(pb.build());
  passes::build_kernels(s);
  passes::select_transients(s);
  EXPECT_TRUE(s.transients.empty());
  ASSERT_EQ(s.kernels.size(), 1u);
  EXPECT_EQ(s.kernels[0].kind, ir::KernelKind::scan);
}

}  // namespace
}  // namespace fieldflow::pass_tests
