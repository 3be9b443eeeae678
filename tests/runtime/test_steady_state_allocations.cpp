// Steady-state calls allocate nothing, counted by replacing the global operator new (fieldflow's
// own counters only see the transient-memory route): the fast path of repeated calls, in pool
// mode, for a program with transients and one whose kernels check reads while running (their
// outputs are saved for atomic calls in copies kept across calls).
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <new>

#include "fieldflow/compile.h"
#include "fieldflow/dsl.h"

namespace {
std::atomic<long> allocations{0};
}  // namespace

void* operator new(std::size_t n) {
  allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace fieldflow {
namespace {

const Dimension I = horizontal_dim("I"), K = vertical_dim("K");

long allocations_in_calls(CompiledProgram& program, const Arguments& args, int calls) {
  for (int warm = 0; warm < 3; ++warm) program(args);
  const long before = allocations.load();
  for (int c = 0; c < calls; ++c) program(args);
  return allocations.load() - before;
}

TEST(SteadyState, RepeatedCallsAllocateNothing) {
  // A transient (materialize) and a dynamic vertical offset (checked in the kernel, so the
  // outputs are saved before each call).
  ProgramBuilder pb("steady");
  Expr in = pb.field("in", {I, K}, DType::float64), off = pb.field("off", {I, K}, DType::int32);
  Expr out = pb.field("out", {I, K}, DType::float64), n = pb.scalar("n", DType::int32);
  const Expr t = materialize("t", exp(in) * 0.5);
  pb.call("s", t(I + 1) + t(I - 1) + in(K + off), {out}, {{I, 1, n - 1}, {K, 0, 4}});
  CompileOptions o;
  o.num_threads = 2;
  o.parallel_threshold = 0;
  CompiledProgram program = compile(pb.build(), o);
  Field fin({I, K}, DType::float64, {64, 4}), foff({I, K}, DType::int32, {64, 4}), fout({I, K}, DType::float64, {64, 4});
  fin.fill(0.25);
  Arguments args;
  args.field("in", fin).field("off", foff).field("out", fout).scalar("n", 64);
  EXPECT_EQ(allocations_in_calls(program, args, 50), 0);
  EXPECT_DOUBLE_EQ(fout.at<double>({5, 2}), 2 * std::exp(0.25) * 0.5 + 0.25);
  EXPECT_EQ(program.memory_stats().last_call_system_allocations, 0u);
}

}  // namespace
}  // namespace fieldflow
