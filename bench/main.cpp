// fieldflow_bench: the suite as a plain Google Benchmark executable. Accepts every
// --benchmark_* flag (with --benchmark_enable_random_interleaving=true every configuration's data
// stays in memory), plus --quick (small sizes, few repetitions). For the JSON report with
// bandwidths and ratios use `fieldflow bench --json FILE` (docs/performance.md).
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "suite.h"

int main(int argc, char** argv) {
  bool quick = false, interleave = false;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (i > 0 && std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
      continue;
    }
    // Interleaved repetitions need every configuration's data kept between cases.
    if (std::strncmp(argv[i], "--benchmark_enable_random_interleaving", 38) == 0 &&
        std::strstr(argv[i], "=false") == nullptr)
      interleave = true;
    args.push_back(argv[i]);
  }
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 1;
  auto options = quick ? fieldflow::bench::SuiteOptions::quick_defaults() : fieldflow::bench::SuiteOptions{};
  options.interleave = interleave;
  fieldflow::bench::register_suite(options);
  benchmark::RunSpecifiedBenchmarks();
  fieldflow::bench::release_suite_state();
  benchmark::Shutdown();
  return 0;
}
