// fuse_kernels: adjacent pointwise kernels over one domain become one loop nest when legal.
#include <gtest/gtest.h>

#include <cstring>

#include "fieldflow/compile.h"
#include "fieldflow/reference.h"
#include "pass_test_support.h"
#include "passes/pipeline.h"

namespace fieldflow::pass_tests {
namespace {

// b = 2a; c = b + a over the same domain: one kernel writing both, c computed from b's value.
TEST(FuseKernels, SameDomainPointReadsFuse) {
  ProgramBuilder pb("two_steps");
  auto a = pb.field("a", {I, K}, DType::float64);
  auto b = pb.field("b", {I, K}, DType::float64);
  auto c = pb.field("c", {I, K}, DType::float64);
  pb.call("double", a * 2.0, {b}, {{I, 0, 4}, {K, 0, 3}});
  pb.call("add", b + a, {c}, {{I, 0, 4}, {K, 0, 3}});
  const ir::Schedule s = passes::lower(pb.build());
  ASSERT_EQ(s.kernels.size(), 1u);
  EXPECT_EQ(s.kernels[0].outputs, (std::vector<std::string>{"b", "c"}));
  EXPECT_EQ(s.kernels[0].name, "double+add");
}

// A shifted read of the earlier output needs the whole earlier result: no fusion.
TEST(FuseKernels, ShiftedReadOfEarlierOutputDoesNotFuse) {
  ProgramBuilder pb("halo");
  auto a = pb.field("a", {I, K}, DType::float64);
  auto b = pb.field("b", {I, K}, DType::float64);
  auto c = pb.field("c", {I, K}, DType::float64);
  pb.call("double", a * 2.0, {b}, {{I, 0, 5}, {K, 0, 3}});
  pb.call("diff", b(I + 1) - b, {c}, {{I, 0, 4}, {K, 0, 3}});
  EXPECT_EQ(passes::lower(pb.build()).kernels.size(), 2u);
}

// Different domains do not fuse; writing what the other reads at another point does not either.
TEST(FuseKernels, DifferentDomainsOrWriteAfterShiftedReadDoNotFuse) {
  ProgramBuilder pb("war");
  auto a = pb.field("a", {I, K}, DType::float64);
  auto b = pb.field("b", {I, K}, DType::float64);
  pb.call("read", a(I + 1) * 2.0, {b}, {{I, 0, 4}, {K, 0, 3}});
  pb.call("write", b * 3.0, {a}, {{I, 0, 4}, {K, 0, 3}});
  EXPECT_EQ(passes::lower(pb.build()).kernels.size(), 2u);
  ProgramBuilder pd("domains");
  auto x = pd.field("x", {I, K}, DType::float64);
  auto y = pd.field("y", {I, K}, DType::float64);
  auto z = pd.field("z", {I, K}, DType::float64);
  pd.call("first", x * 2.0, {y}, {{I, 0, 4}, {K, 0, 3}});
  pd.call("second", y + x, {z}, {{I, 1, 4}, {K, 0, 3}});
  EXPECT_EQ(passes::lower(pd.build()).kernels.size(), 2u);
}

// The fused program computes what the statements compute one after the other.
TEST(FuseKernels, FusedProgramMatchesReferenceBitwise) {
  ProgramBuilder pb("chain3");
  auto a = pb.field("a", {I, K}, DType::float64);
  auto b = pb.field("b", {I, K}, DType::float64);
  auto c = pb.field("c", {I, K}, DType::float64);
  pb.call("one", sqrt(abs(a)) + 1.0, {b}, {{I, 0, 6}, {K, 0, 4}});
  pb.call("two", b * b - a, {c}, {{I, 0, 6}, {K, 0, 4}});
  pb.call("three", c / b, {a}, {{I, 0, 6}, {K, 0, 4}});
  const ir::Program p = pb.build();
  EXPECT_EQ(passes::lower(p).kernels.size(), 1u);
  auto make = [] {
    std::vector<Field> f;
    for (int i = 0; i < 3; ++i) f.emplace_back(std::vector<Dimension>{I, K}, DType::float64, std::vector<std::int64_t>{6, 4});
    for (std::int64_t i = 0; i < f[0].size(); ++i) f[0].set_from_double(i, 0.3 * static_cast<double>(i) - 2);
    return f;
  };
  auto r = make(), x = make();
  Arguments ra, xa;
  ra.field("a", r[0]).field("b", r[1]).field("c", r[2]);
  xa.field("a", x[0]).field("b", x[1]).field("c", x[2]);
  run_reference(p, ra);
  compile(p)(xa);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(std::memcmp(r[i].data(), x[i].data(), r[i].bytes()), 0) << i;
}

}  // namespace
}  // namespace fieldflow::pass_tests
