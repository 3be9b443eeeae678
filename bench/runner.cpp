// `fieldflow bench` without the command line: the suite run through Google Benchmark with a
// reporter that keeps every repetition.
#include "runner.h"

#include <benchmark/benchmark.h>

#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "report.h"

namespace fieldflow::bench {

nlohmann::json run_suite(const RunOptions& options) {
  SuiteOptions suite = options.suite;
  suite.aggregates_only = false;  // the reporter computes medians from every repetition
  register_suite(suite);

  // Google Benchmark takes its settings as flags; the copy probe always runs (vs_copy).
  std::string filter = options.filter.empty() ? "." : "^copy/|" + options.filter;
  std::vector<std::string> flags = {"fieldflow-bench", "--benchmark_filter=" + filter};
  if (suite.interleave) flags.push_back("--benchmark_enable_random_interleaving=true");
  std::vector<char*> argv;
  for (auto& f : flags) argv.push_back(f.data());
  int argc = static_cast<int>(argv.size());
  benchmark::Initialize(&argc, argv.data());

  const std::vector<double> load_before = load_average();
  const int cpus = static_cast<int>(std::thread::hardware_concurrency());
  if (!load_before.empty() && cpus > 0 && load_before[0] > 0.5 * cpus)
    std::fprintf(stderr, "fieldflow bench: load average %.2f on %d CPUs: other work shares the machine, "
                         "timings will be noisy\n", load_before[0], cpus);
  CollectingReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  release_suite_state();

  ReportSettings settings;
  settings.quick = suite.quick;
  settings.repetitions = suite.repetitions;
  settings.min_time = suite.min_time;
  settings.filter = options.filter;
  settings.load_before = load_before;
  settings.interleaved = suite.interleave;
  return make_report(case_registry(), reporter.samples(), settings);
}

}  // namespace fieldflow::bench
