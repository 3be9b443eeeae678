// fieldflow_bench_instructions: where the time goes, counted instead of timed. Calls every
// benchmarked program once compiled (pool mode) and once hand-written, each call inside
// measured_call(), for `valgrind --tool=callgrind --toggle-collect=measured_call
// --dump-after=measured_call` (scripts/where-time-goes.sh turns the dumps into a table):
// instruction counts are repeatable on a shared machine where timings are not. Run it with
// OMP_NUM_THREADS=1 so that every instruction of a call happens on the calling thread.
// Prints one line per measured call, in call order: "<program> <layout> <variant> <points> <bytes>"
// (points: elements of the first output; bytes: compulsory bytes of the call); then the steady-state
// call of a 1-point laplacian in each memory mode ("call_overhead laplacian <mode> 1 0").
#include <fmt/format.h>

#include <functional>
#include <set>

#include "baselines.h"
#include "fieldflow/compile.h"
#include "fieldflow/errors.h"
#include "suite.h"

extern "C" __attribute__((noinline)) void measured_call(const std::function<void()>& call) {
  call();
  __asm__ volatile("" ::: "memory");  // keeps the call from being folded into the caller
}

int main() {
  using namespace fieldflow;
  std::set<std::pair<std::string, Layout>> done;
  for (const bench::KernelConfig& c : bench::kernel_configs(true)) {
    if (!done.insert({c.program, c.layout}).second) continue;  // one size per program and layout
    const auto& ex = examples::example(c.program);
    // Small enough for valgrind, 80 levels like the benchmark.
    const examples::ExampleSize size = ex.unstructured ? examples::ExampleSize{20, 20, 80} : examples::ExampleSize{32, 32, 80};
    auto inst = ex.make_instance(size, c.layout, 1);
    Arguments args = inst.arguments();
    CompileOptions o;
    o.layout = c.layout;
    CompiledProgram program = compile(ex.program, o);
    const std::function<void()> compiled = [&] { program(args); };
    const std::function<void()> handwritten = bench::bind_baseline(c.program, inst);
    compiled();  // binds and checks the arguments, warms the pool
    handwritten();
    const auto points = inst.fields.at(inst.outputs.front()).size();
    for (const auto& [variant, call] : {std::pair{"fieldflow", &compiled}, std::pair{"handwritten", &handwritten}}) {
      measured_call(*call);
      fmt::print("{} {} {} {} {:.0f}\n", c.program, to_string(c.layout), variant, points, ex.compulsory_bytes(size));
    }
  }
  // The runtime's share of a call: one point, nothing to compute, after a first call that bound
  // the arguments.
  const auto& lap = examples::example("laplacian");
  auto tiny = lap.make_instance({1, 1, 1}, Layout::vertical_fastest, 1);
  Arguments args = tiny.arguments();
  for (TransientMemoryMode mode : {TransientMemoryMode::scoped, TransientMemoryMode::persistent,
                                   TransientMemoryMode::pool, TransientMemoryMode::external}) {
    CompileOptions o;
    o.memory.mode = mode;
    if (mode == TransientMemoryMode::external)
      o.memory.external_memory_allocator = [](const AllocationRequest& r) -> Workspace {
        throw ArgumentError(fmt::format("laplacian has no transients, yet {} bytes were requested", r.bytes));
      };
    CompiledProgram program = compile(lap.program, o);
    const std::function<void()> call = [&] { program(args); };
    call();
    call();
    measured_call(call);
    fmt::print("call_overhead laplacian {} 1 0\n", to_string(mode));
  }
  return 0;
}
