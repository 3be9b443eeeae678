// Steady-state calls allocate nothing, counted by replacing the global operator new and the C
// allocation functions (support/counting_allocator.h: fieldflow's own counters only see the
// transient-memory route; malloc also counts what OpenMP or the C library allocate): the fast
// path of repeated calls, in pool mode, for a program with transients and one whose kernels check
// reads while running (their outputs are saved for atomic calls in copies kept across calls),
// views whose memory changes every step (a model's time levels), and no output copies for a
// program whose checks all run before the call (fixed-index neighbour shifts).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "fieldflow/compile.h"
#include "fieldflow/dsl.h"
#include "fieldflow/examples.h"
#include "support/counting_allocator.h"

namespace fieldflow {
namespace {

const Dimension I = horizontal_dim("I"), K = vertical_dim("K");

long allocations_in_calls(CompiledProgram& program, const Arguments& args, int calls) {
  for (int warm = 0; warm < 3; ++warm) program(args);
  const long before = testing_support::heap_allocations();
  for (int c = 0; c < calls; ++c) program(args);
  return testing_support::heap_allocations() - before;
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

// Two time levels in the model's own arrays, swapped after every step through the same views: the
// fields' data pointers change on every call, which takes the rebinding fast path.
TEST(SteadyState, ViewsSwappingTimeLevelsAllocateNothing) {
  const Dimension J = horizontal_dim("J");
  ProgramBuilder pb("swap_levels");
  Expr u = pb.field("u", {I, J, K}, DType::float64), out = pb.field("out", {I, J, K}, DType::float64);
  pb.call("lap", u(I + 1) + u(I - 1) + u(J + 1) + u(J - 1) - 4.0 * u, {out}, {{I, 1, 31}, {J, 1, 31}, {K, 0, 8}});
  for (Layout layout : {Layout::horizontal_fastest, Layout::any}) {
    CompileOptions o;
    o.layout = layout;
    o.num_threads = 2;
    o.parallel_threshold = 0;
    CompiledProgram program = compile(pb.build(), o);
    // Fortran order (I fastest) with a padded leading dimension of 34.
    std::vector<double> level[2] = {std::vector<double>(34 * 32 * 8, 1.0), std::vector<double>(34 * 32 * 8, 1.0)};
    const std::vector<std::int64_t> strides = {1, 34, 34 * 32};
    Field now = Field::view(level[0].data(), {I, J, K}, DType::float64, {32, 32, 8}, strides);
    Field next = Field::view(level[1].data(), {I, J, K}, DType::float64, {32, 32, 8}, strides);
    Arguments args;
    args.field("u", now).field("out", next);
    int step = 0;
    auto run_steps = [&](int steps) {
      for (int s = 0; s < steps; ++s, ++step) {
        program(args);
        now.set_view_data(level[(step + 1) % 2].data());
        next.set_view_data(level[step % 2].data());
      }
    };
    run_steps(4);
    const long before = testing_support::heap_allocations();
    run_steps(50);
    EXPECT_EQ(testing_support::heap_allocations() - before, 0) << to_string(layout);
  }
}

// The same with the two time levels interleaved in one array, (K, J, level, I): their spans
// overlap, so every call decides element by element that they share none (ir/memory_overlap.h),
// without allocating; the output, a strided view, is saved and restored element by element
// around kernels that check a dynamic offset, without allocating either.
TEST(SteadyState, InterleavedTimeLevelsAllocateNothing) {
  const Dimension J = horizontal_dim("J");
  ProgramBuilder pb("interleaved_levels");
  Expr u = pb.field("u", {I, J, K}, DType::float64), out = pb.field("out", {I, J, K}, DType::float64);
  Expr off = pb.field("off", {I, J, K}, DType::int32);
  pb.call("lap", u(I + 1) + u(I - 1) + u(J + 1) + u(J - 1) - 4.0 * u + u(K + off), {out},
          {{I, 1, 31}, {J, 1, 31}, {K, 0, 8}});
  CompileOptions o;
  o.layout = Layout::horizontal_fastest;
  o.num_threads = 2;
  o.parallel_threshold = 0;
  CompiledProgram program = compile(pb.build(), o);
  std::vector<double> levels(32 * 32 * 2 * 8, 1.0);
  const std::vector<std::int64_t> strides = {1, 64, 64 * 32};
  Field now = Field::view(levels.data(), {I, J, K}, DType::float64, {32, 32, 8}, strides);
  Field next = Field::view(levels.data() + 32, {I, J, K}, DType::float64, {32, 32, 8}, strides);
  Field foff({I, J, K}, DType::int32, {32, 32, 8}, {}, Layout::horizontal_fastest);
  Arguments args;
  args.field("u", now).field("out", next).field("off", foff);
  int step = 0;
  auto run_steps = [&](int steps) {
    for (int s = 0; s < steps; ++s, ++step) {
      program(args);
      now.set_view_data(levels.data() + (step + 1) % 2 * 32);
      next.set_view_data(levels.data() + step % 2 * 32);
    }
  };
  run_steps(4);
  const long before = testing_support::heap_allocations();
  run_steps(50);
  EXPECT_EQ(testing_support::heap_allocations() - before, 0);
  EXPECT_EQ(levels[64 * 32 + 64 + 1], 1.0) << "a constant field's Laplacian plus itself";
}

// diffusion_chain reads u(E2V[0]) and u(E2V[1]) through V2E: fixed-index shifts, whose table rows
// are checked for skip values before anything runs, so no check can fail halfway and nothing is
// saved (every output used to be copied before every call). The same mesh with 4 times the
// levels: what the first call allocates does not grow with the output.
TEST(SteadyState, ChecksBeforeTheCallKeepNoCopyOfTheOutputs) {
  const auto& ex = examples::example("diffusion_chain");
  CompileOptions o;
  o.num_threads = 2;
  o.parallel_threshold = 0;
  std::vector<long> first_call, output_bytes;
  for (int nk : {64, 256}) {
    examples::ExampleInstance inst = ex.make_instance({24, 24, nk, true}, Layout::vertical_fastest, 3);
    CompiledProgram fresh = compile(ex.program, o);  // the module is cached: a new instance, bound anew
    Arguments args = inst.arguments();
    const long before = testing_support::heap_allocated_bytes();
    fresh(args);
    first_call.push_back(testing_support::heap_allocated_bytes() - before);
    output_bytes.push_back(static_cast<long>(inst.fields.at("out").bytes()));
    EXPECT_EQ(allocations_in_calls(fresh, args, 20), 0) << nk << " levels";
  }
  EXPECT_LT(first_call[1] - first_call[0], (output_bytes[1] - output_bytes[0]) / 4)
      << "first calls allocated " << first_call[0] << " and " << first_call[1] << " bytes, for outputs of "
      << output_bytes[0] << " and " << output_bytes[1];
}

}  // namespace
}  // namespace fieldflow
