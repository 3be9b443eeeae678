// Per-call overhead of the C API against the C++ path, on a one-point program (the five-point
// Laplacian over a 1 x 1 x 1 domain): what a host pays per run beyond the kernel itself.
//   CppCall          CompiledProgram::operator() with Arguments built once
//   CApiRun          ff_program_run with views set once
//   CApiSetAndRun    every argument set again before each run (a Fortran time loop's pattern)
// Target (issue 9): CApiRun <= 1 us and equal to CppCall within noise.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "fieldflow/compile.h"
#include "fieldflow/examples.h"
#include "fieldflow/fieldflow.h"

namespace {

using namespace fieldflow;

const Dimension I = horizontal_dim("I"), J = horizontal_dim("J"), K = vertical_dim("K");

void CppCall(benchmark::State& state) {
  CompiledProgram program = compile(examples::example("laplacian").program);
  Field in({I, J, K}, DType::float64, {3, 3, 1}, {-1, -1, 0}), out({I, J, K}, DType::float64, {1, 1, 1});
  in.fill(1.0);
  Arguments args;
  args.field("in", in).field("out", out).scalar("nx", 1).scalar("ny", 1).scalar("nk", 1);
  program(args);
  for (auto _ : state) {
    program(args);
    benchmark::DoNotOptimize(out.data());
  }
}

struct CProgram {
  ff_program* p = nullptr;
  std::vector<double> in = std::vector<double>(9, 1.0), out = std::vector<double>(1, 0.0);
  const std::int64_t in_shape[3] = {3, 3, 1}, in_strides[3] = {3, 1, 1}, in_origin[3] = {-1, -1, 0};
  const std::int64_t shape[3] = {1, 1, 1}, strides[3] = {1, 1, 1};
  CProgram() {
    if (ff_program_create("laplacian", nullptr, &p) != FF_OK || set() != FF_OK || ff_program_run(p) != FF_OK) {
      std::fprintf(stderr, "%s\n", ff_last_error());
      std::abort();
    }
  }
  ~CProgram() { ff_program_destroy(p); }
  int set() {
    int s = ff_program_set_field(p, "in", FF_DTYPE_FLOAT64, in.data(), 3, in_shape, in_strides, in_origin);
    if (s == FF_OK) s = ff_program_set_field(p, "out", FF_DTYPE_FLOAT64, out.data(), 3, shape, strides, nullptr);
    if (s == FF_OK) s = ff_program_set_int(p, "nx", 1);
    if (s == FF_OK) s = ff_program_set_int(p, "ny", 1);
    if (s == FF_OK) s = ff_program_set_int(p, "nk", 1);
    return s;
  }
};

void CApiRun(benchmark::State& state) {
  CProgram c;
  for (auto _ : state) {
    if (ff_program_run(c.p) != FF_OK) state.SkipWithError(ff_last_error());
    benchmark::DoNotOptimize(c.out.data());
  }
}

void CApiSetAndRun(benchmark::State& state) {
  CProgram c;
  for (auto _ : state) {
    if (c.set() != FF_OK || ff_program_run(c.p) != FF_OK) state.SkipWithError(ff_last_error());
    benchmark::DoNotOptimize(c.out.data());
  }
}

BENCHMARK(CppCall);
BENCHMARK(CApiRun);
BENCHMARK(CApiSetAndRun);

}  // namespace

BENCHMARK_MAIN();
