// `fieldflow demo`: every built-in program through the reference executor and compiled in the
// four transient-memory modes, side by side.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fmt/format.h>
#include <omp.h>

#include "cli/commands.h"
#include "cli/common.h"
#include "fieldflow/compile.h"
#include "fieldflow/device_errors.h"
#include "fieldflow/reference.h"
#include "runtime/memory_route.h"

namespace fieldflow::cli {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double checksum(examples::ExampleInstance& inst) {
  double s = 0;
  for (const auto& o : inst.outputs) {
    const Field& f = inst.fields.at(o);
    for (std::int64_t i = 0; i < f.size(); ++i) s += f.get_as_double(i);
  }
  return s;
}

double max_difference(examples::ExampleInstance& a, examples::ExampleInstance& b) {
  double d = 0;
  for (const auto& o : a.outputs) {
    const Field &x = a.fields.at(o), &y = b.fields.at(o);
    for (std::int64_t i = 0; i < x.size(); ++i) d = std::max(d, std::abs(x.get_as_double(i) - y.get_as_double(i)));
  }
  return d;
}

std::string domain_text(const examples::Example& ex, const examples::ExampleSize& s) {
  return ex.unstructured ? fmt::format("torus {}x{}, {} levels", s.nx, s.ny, s.nk)
                         : fmt::format("{}x{}x{}", s.nx, s.ny, s.nk);
}

// An allocator for the demo's `external` column: hands out aligned blocks of the device asked for
// (device memory through the allocation route, which holds the CUDA runtime) and counts calls.
struct DemoAllocator {
  int calls = 0;
  Workspace operator()(const AllocationRequest& r) {
    ++calls;
    if (r.device == Device::cuda) {
      void* p = runtime::system_allocate(Device::cuda, r.bytes, r.alignment, "fieldflow demo allocator");
      const std::size_t bytes = r.bytes;
      return {p, bytes, r.device, [p, bytes] { runtime::system_free(Device::cuda, p, bytes, "fieldflow demo allocator"); }};
    }
    void* p = std::aligned_alloc(r.alignment, (r.bytes + r.alignment - 1) / r.alignment * r.alignment);
    return {p, r.bytes, r.device, [p] { std::free(p); }};
  }
};

void run_demo(const examples::ExampleSize& size, int calls, const std::string& only, Backend backend) {
  // The GPU reads horizontal points along its threads: the layout that makes them unit-stride.
  const Layout layout = backend == Backend::cuda ? Layout::horizontal_fastest : Layout::vertical_fastest;
  if (backend == Backend::cuda) {
    // Whether this build and machine can run it at all, before any output: a clear error if not.
    CompileOptions probe;
    probe.backend = backend;
    probe.layout = layout;
    try {
      (void)compile(examples::all_examples().front().program, probe);
    } catch (const BackendUnavailableError& e) {
      throw BackendUnavailableError(fmt::format("fieldflow demo --backend cuda cannot run here: {}", e.what()));
    }
  }
  fmt::print("fieldflow demo: every built-in program, reference executor vs compiled ({} backend) in each "
             "transient-memory mode; {} timed calls per mode; {}\n\n",
             to_string(backend), calls,
             backend == Backend::cuda ? std::string("kernels on the GPU, layout horizontal_fastest")
                                      : fmt::format("{} OpenMP threads for kernels above {} points",
                                                    omp_get_max_threads(), CompileOptions{}.parallel_threshold));
  for (const auto& ex : examples::all_examples()) {
    if (!only.empty() && ex.name != only) continue;
    auto ref = ex.make_instance(size, layout, 1);
    auto t0 = std::chrono::steady_clock::now();
    run_reference(ex.program, ref.arguments());
    const double ref_s = seconds_since(t0);
    fmt::print("{} ({}): {}\n  domain {}; reference {:.3f} s, checksum {:.12g}\n", ex.name, ex.description,
               ex.program.stmts.size() == 1 ? "1 call" : fmt::format("{} calls", ex.program.stmts.size()),
               domain_text(ex, size), ref_s, checksum(ref));
    fmt::print("  {:<11} {:>12} {:>17} {:>16} {:>32} {:>12}\n", "mode", "time/call", "sys allocs/call",
               "allocator calls", "bytes naive/packed/lower bound", "max |diff|");
    for (auto mode : {TransientMemoryMode::scoped, TransientMemoryMode::persistent, TransientMemoryMode::pool,
                      TransientMemoryMode::external}) {
      CompileOptions opt;
      DemoAllocator alloc;
      opt.backend = backend;
      opt.layout = layout;
      opt.memory.mode = mode;
      if (mode == TransientMemoryMode::external)
        opt.memory.external_memory_allocator = [&alloc](const AllocationRequest& r) { return alloc(r); };
      auto prog = compile(ex.program, opt);
      auto inst = ex.make_instance(size, layout, 1);
      Arguments args = inst.arguments();
      const SizeMap sizes = size_symbols(ex.program, args);
      const MemoryPlan plan = prog.memory_plan(sizes);
      // The first call warms up (binding, pool); the timed calls recompute the same outputs.
      std::vector<double> times;
      std::uint64_t allocs = 0;
      auto fresh = ex.make_instance(size, layout, 1);
      for (int c = 0; c <= calls; ++c) {
        for (const auto& o : inst.outputs) {
          Field& f = inst.fields.at(o);
          std::copy_n(static_cast<const std::byte*>(fresh.fields.at(o).data()), f.bytes(), static_cast<std::byte*>(f.data()));
        }
        t0 = std::chrono::steady_clock::now();
        prog(args);
        times.push_back(seconds_since(t0));
        if (c > 0) allocs += prog.memory_stats().last_call_system_allocations;
      }
      std::sort(times.begin() + 1, times.end());
      const double median = times[1 + (times.size() - 1) / 2];
      fmt::print("  {:<11} {:>9.3f} ms {:>17.2f} {:>16} {:>32} {:>12.3g}\n", to_string(mode), median * 1e3,
                 static_cast<double>(allocs) / calls, prog.memory_stats().allocator_calls,
                 fmt::format("{}/{}/{}", plan.naive_sum_bytes, plan.packed_bytes, plan.lower_bound_bytes),
                 max_difference(ref, inst));
    }
    fmt::print("\n");
  }
}

}  // namespace

void add_demo(CLI::App& app) {
  auto* cmd = app.add_subcommand("demo", "Run the built-in programs: reference vs compiled, in every memory mode");
  // Large enough that every program's kernels run on the parallel path (above the default
  // parallel_threshold of 16,384 points), small enough that the reference takes seconds.
  auto size = std::make_shared<std::string>("48x48x16");
  auto calls = std::make_shared<int>(5);
  auto only = std::make_shared<std::string>();
  auto backend = std::make_shared<std::string>("cpu");
  cmd->add_option("--size", *size, "Grid NXxNYxNK (mesh: torus NXxNY with NK levels)");
  cmd->add_option("--calls", *calls, "Timed calls per mode")->check(CLI::Range(1, 100000));
  cmd->add_option("--program", *only, "Run only this program");
  cmd->add_option("--backend", *backend, "cpu, or cuda (needs a CUDA device; says so and fails without one)");
  cmd->callback([=] { run_demo(parse_size(*size), *calls, *only, parse_backend(*backend)); });
}

}  // namespace fieldflow::cli
