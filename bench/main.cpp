// fieldflow_bench: the suite as a plain Google Benchmark executable. Accepts every
// --benchmark_* flag, plus --quick (small sizes, few repetitions). For the JSON report with
// bandwidths and ratios use `fieldflow bench --json FILE` (docs/performance.md).
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "suite.h"

int main(int argc, char** argv) {
  bool quick = false;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (i > 0 && std::strcmp(argv[i], "--quick") == 0)
      quick = true;
    else
      args.push_back(argv[i]);
  }
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 1;
  fieldflow::bench::register_suite(quick ? fieldflow::bench::SuiteOptions::quick_defaults()
                                         : fieldflow::bench::SuiteOptions{});
  benchmark::RunSpecifiedBenchmarks();
  fieldflow::bench::release_suite_state();
  benchmark::Shutdown();
  return 0;
}
