// `fieldflow bench` without the command line: the suite run through Google Benchmark with a
// reporter that keeps every repetition.
#include "runner.h"

#include <benchmark/benchmark.h>

#include <cstdio>
#include <string>
#include <vector>

#include "cuda_suite.h"
#include "quiet.h"
#include "report.h"

namespace fieldflow::bench {

nlohmann::json run_suite(const RunOptions& options) {
  SuiteOptions suite = options.suite;
  suite.aggregates_only = false;  // the reporter computes medians from every repetition
  // The machine's copy probes always run (machine.copy_gbps); each selected configuration brings
  // its same-bytes copy along (register_suite).
  suite.filter = options.filter.empty() ? "" : "^(cuda/)?copy/|" + options.filter;
  register_suite(suite);

  // Google Benchmark takes its settings as flags.
  std::vector<std::string> flags = {"fieldflow-bench", "--benchmark_filter=."};
  if (suite.interleave) flags.push_back("--benchmark_enable_random_interleaving=true");
  std::vector<char*> argv;
  for (auto& f : flags) argv.push_back(f.data());
  int argc = static_cast<int>(argv.size());
  benchmark::Initialize(&argc, argv.data());

  const IdleWait idle = wait_until_idle(options.wait_idle_s, options.max_others_cpu);
  std::fprintf(stderr, "fieldflow bench: %s\n", idle.message.c_str());
  const std::vector<double> load_before = load_average();
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
  settings.max_others_cpu = options.max_others_cpu;
  if (suite.device == Device::cuda) settings.gpu = cuda_device_info();
  settings.idle_wait = nlohmann::json{{"idle", idle.idle},
                                      {"waited_s", idle.waited_s},
                                      {"others_cpu", idle.others_cpu},
                                      {"max_wait_s", options.wait_idle_s},
                                      {"message", idle.message}};
  return make_report(case_registry(), reporter.samples(), settings);
}

}  // namespace fieldflow::bench
