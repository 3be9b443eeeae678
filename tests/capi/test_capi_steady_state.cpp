// Steady-state runs through the C API allocate nothing, counted below fieldflow's own counters:
// the global operator new AND malloc (calloc, realloc, the aligned variants) are replaced in this
// executable (support/counting_allocator.h), so every heap allocation of the process — fieldflow,
// libstdc++, OpenMP — is seen.
// Covered: runs with nothing set again; a time loop that sets every argument each step (same
// arrays); one that swaps two buffers (double buffering); a scalar that changes every step;
// external memory (a caller workspace) and a mesh program with tables.
#include <gtest/gtest.h>

#include <cstdlib>

#include "capi/capi_harness.h"
#include "support/counting_allocator.h"

namespace fieldflow::capi_test {
namespace {

const examples::ExampleSize size{12, 10, 6};

// Allocations made by `steps` calls of `step` after three warm-up steps.
template <class Step>
long allocations_in(int steps, Step&& step) {
  for (int i = 0; i < 3; ++i) step(i);
  const long before = testing_support::heap_allocations();
  for (int i = 0; i < steps; ++i) step(i);
  return testing_support::heap_allocations() - before;
}

ff_options options(int memory_mode) {
  ff_options o;
  ff_options_init(&o);
  o.layout = FF_LAYOUT_HORIZONTAL_FASTEST;
  o.memory_mode = memory_mode;
  o.num_threads = 2;
  o.parallel_threshold = 0;
  return o;
}

TEST(CApiSteadyState, TheCounterSeesMallocAndNew) {
  const long before = testing_support::heap_allocations();
  // Through volatile pointers: the compiler may drop a malloc/free or new/delete pair it can see.
  void* volatile p = std::malloc(16);
  std::free(p);
  int* volatile q = new int(3);
  delete q;
  EXPECT_EQ(testing_support::heap_allocations() - before, 2);
}

TEST(CApiSteadyState, RunsWithExternalWorkspaceAllocateNothing) {
  const examples::Example& ex = examples::example("vadv");
  CallerArguments args(ex, size, Layout::horizontal_fastest, Order::fortran, 1);
  ff_program* p = nullptr;
  const ff_options o = options(FF_MEMORY_EXTERNAL);
  FF_ASSERT_OK(ff_program_create("vadv", &o, &p));
  FF_ASSERT_OK(args.set_all(p, Order::fortran));
  std::size_t bytes = 0, alignment = 0;
  FF_ASSERT_OK(ff_program_workspace_for_arguments(p, FF_DEVICE_CPU, &bytes, &alignment));
  ASSERT_GT(bytes, 0u);
  void* ws = std::aligned_alloc(alignment, (bytes + alignment - 1) / alignment * alignment);
  FF_ASSERT_OK(ff_program_set_workspace(p, FF_DEVICE_CPU, ws, bytes));

  int failures = 0;  // every call below must succeed, or counting its allocations means nothing
  auto ok = [&](int status) { failures += status != FF_OK; };
  EXPECT_EQ(allocations_in(50, [&](int) { ok(ff_program_run(p)); }), 0) << "runs with nothing set again";

  Buffer& out = args.fields.at("out");
  Buffer& u = args.fields.at("u_stage");
  EXPECT_EQ(allocations_in(50,
                           [&](int step) {
                             // A model's step: every argument set again, dt changing, then run.
                             ok(ff_program_set_field(p, "u_stage", FF_DTYPE_FLOAT64, u.data, 3, u.shape.data(),
                                                     u.strides.data(), u.origin.data()));
                             ok(ff_program_set_field(p, "out", FF_DTYPE_FLOAT64, out.data, 3, out.shape.data(),
                                                     out.strides.data(), out.origin.data()));
                             ok(ff_program_set_real(p, "dtr_stage", 0.15 + 0.001 * step));
                             ok(ff_program_set_int(p, "nk", size.nk));
                             ok(ff_program_run(p));
                           }),
            0)
      << "a step that sets every argument again";

  // Double buffering: the output alternates between two arrays of the same layout.
  Buffer other = out;
  other.storage = out.storage;
  other.data = static_cast<std::byte*>(out.data) - out.storage.data() + other.storage.data();
  EXPECT_EQ(allocations_in(50,
                           [&](int step) {
                             Buffer& b = step % 2 ? other : out;
                             ok(ff_program_set_field(p, "out", FF_DTYPE_FLOAT64, b.data, 3, b.shape.data(),
                                                     b.strides.data(), b.origin.data()));
                             ok(ff_program_run(p));
                           }),
            0)
      << "swapping two output buffers";
  EXPECT_EQ(failures, 0) << ff_last_error();
  ff_memory_stats s{};
  FF_ASSERT_OK(ff_program_memory_stats(p, &s));
  EXPECT_EQ(s.calls, 3u * 53u);
  EXPECT_EQ(s.workspace_installs, 1u);
  EXPECT_EQ(s.last_call_system_allocations, 0u);
  FF_ASSERT_OK(ff_program_run(p));  // still valid after all that
  FF_ASSERT_OK(ff_program_destroy(p));
  std::free(ws);
}

TEST(CApiSteadyState, MeshProgramInPoolModeAllocatesNothing) {
  const examples::Example& ex = examples::example("fvm_nabla");
  CallerArguments args(ex, size, Layout::horizontal_fastest, Order::fortran, 0);
  ff_program* p = nullptr;
  const ff_options o = options(FF_MEMORY_DEFAULT);
  FF_ASSERT_OK(ff_program_create("fvm_nabla", &o, &p));
  FF_ASSERT_OK(args.set_all(p, Order::fortran));
  int failures = 0;
  EXPECT_EQ(allocations_in(50,
                           [&](int) {
                             const NeighborTable& t = args.instance.mesh->table("V2E");
                             failures += ff_program_set_table(p, "V2E", args.tables.at("V2E").data(), t.n_source,
                                                              t.n_target, t.max_neighbors, 1, t.n_source) != FF_OK;
                             failures += ff_program_run(p) != FF_OK;
                           }),
            0);
  EXPECT_EQ(failures, 0) << ff_last_error();
  FF_ASSERT_OK(ff_program_destroy(p));
}

}  // namespace
}  // namespace fieldflow::capi_test
