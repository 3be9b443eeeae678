// infer_accesses + compute_extents: halos from shifts, branch-aware extents, swept scan ranges.
#include <gtest/gtest.h>

#include "fieldflow/errors.h"
#include "pass_test_support.h"
#include "passes/pipeline.h"

namespace fieldflow::pass_tests {
namespace {

// Reads of a Laplacian reach one point beyond the domain in I and J, none in K.
TEST(InferAccesses, CartesianHalosFromShifts) {
  ProgramBuilder pb("lap");
  auto in = pb.field("in", {I, J, K}, DType::float64);
  auto out = pb.field("out", {I, J, K}, DType::float64);
  auto n = pb.scalar("n", DType::int32);
  pb.call("lap", in(I + 1) + in(I - 1) + in(J + 1) + in(J - 1) - 4.0 * in, {out}, {{I, 0, n}, {J, 0, n}, {K, 0, 3}});
  const ir::Schedule s = passes::lower(pb.build());
  const auto ext = ir::compute_extents(s, {{"n", 10}});
  const ir::Box& box = ext.param_reads.at("in");
  EXPECT_EQ(box.to_string(), "{I: [-1, 11), J: [-1, 11), K: [0, 3)}");
  EXPECT_NE(s.print().find("reads in[I-1..+1, J-1..+1, K+0]"), std::string::npos) << s.print();
}

// A double buffer whose statement is empty at these sizes covers [0, 0), not the walk's
// "nothing read yet" box [max, min), whose sizes overflow (fuzzer seed 24 under UBSan).
TEST(InferAccesses, EmptyDoubleBufferIsAZeroBox) {
  ProgramBuilder pb("inout");
  auto w = pb.field("w", {I, K}, DType::float64);
  auto n = pb.scalar("n", DType::int32);
  pb.call("step", w + w(K + 1), {w}, {{I, 0, n}, {K, 0, 3}});
  const ir::Schedule s = passes::lower(pb.build());
  ASSERT_EQ(s.transients.size(), 1u);
  EXPECT_EQ(ir::compute_extents(s, {{"n", 0}}).transient_boxes[0].to_string(), "{I: [0, 0), K: [0, 0)}");
  EXPECT_EQ(ir::compute_extents(s, {{"n", 4}}).transient_boxes[0].to_string(), "{I: [0, 4), K: [0, 3)}");
  EXPECT_EQ(ir::transient_bytes(s, ir::compute_extents(s, {{"n", 0}}), 2)[0], 0u);
}

// concat_where branches only read where they run: K-1 is read from level 1 on, K+1 below the top.
TEST(InferAccesses, ConcatWhereRestrictsReads) {
  ProgramBuilder pb("edges");
  auto in = pb.field("in", {I, K}, DType::float64);
  auto out = pb.field("out", {I, K}, DType::float64);
  auto nk = pb.scalar("nk", DType::int32);
  auto lower = concat_where(K == 0, in, in(K - 1));
  pb.call("avg", concat_where(K == nk - 1, lower, lower + in(K + 1)), {out}, {{I, 0, 2}, {K, 0, nk}});
  const ir::Schedule s = passes::lower(pb.build());
  const auto ext = ir::compute_extents(s, {{"nk", 6}});
  EXPECT_EQ(ext.param_reads.at("in").to_string(), "{I: [0, 2), K: [0, 6)}");
}

// A transient covers exactly what its consumer reads; reading a scan beyond its swept range fails.
TEST(InferAccesses, TransientExtentsAndSweptScans) {
  ProgramBuilder pb("sweep");
  auto in = pb.field("in", {I, K}, DType::float64);
  auto out = pb.field("out", {I, K}, DType::float64);
  auto nk = pb.scalar("nk", DType::int32);
  auto sc = scan("s", ScanDirection::forward, {Scalar(0.0)},
                 [](const Expr& c, const std::vector<Expr>& x) { return c + x[0]; }, {in});
  auto m = materialize("m", in * 3.0);
  pb.call("use", sc(K + 1) + m(I + 2), {out}, {{I, 0, 4}, {K, 0, nk - 1}});
  const ir::Schedule s = passes::lower(pb.build());
  // The scan sweeps [0, nk-1) by definition, but the call reads it at K+1 up to nk-1.
  EXPECT_THROW(ir::compute_extents(s, {{"nk", 5}}), DomainError);
  ProgramBuilder ok("sweep_ok");
  auto in2 = ok.field("in", {I, K}, DType::float64);
  auto out2 = ok.field("out", {I, K}, DType::float64);
  auto m2 = materialize("m", in2 * 3.0);
  ok.call("use", m2(I + 2) + m2(I - 1), {out2}, {{I, 0, 4}, {K, 0, 3}});
  const ir::Schedule t = passes::lower(ok.build());
  const auto ext = ir::compute_extents(t, {});
  ASSERT_EQ(t.transients.size(), 1u);
  EXPECT_EQ(ext.transient_boxes[0].to_string(), "{I: [-1, 6), K: [0, 3)}");
}

}  // namespace
}  // namespace fieldflow::pass_tests
