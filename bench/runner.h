#pragma once
// Runs the suite in-process and returns its report (the engine of `fieldflow bench`).
#include <nlohmann/json.hpp>
#include <string>

#include "suite.h"

namespace fieldflow::bench {

struct RunOptions {
  SuiteOptions suite;
  std::string filter;  // regular expression over case names; the copy probes always run
  // Quiet-run protocol (quiet.h): wait at most this long for an idle machine (0: one 1-second
  // sample, no waiting); idle = other processes use fewer CPUs than max_others_cpu, which is also
  // the limit above which a repetition counts as disturbed and is rejected.
  double wait_idle_s = 120;
  double max_others_cpu = 0.1;
};

// Waits for an idle machine, registers the suite, runs the cases selected by the filter
// (progress on stdout, one line per case), and builds the report. Call at most once per process: Google Benchmark's
// registry is global.
nlohmann::json run_suite(const RunOptions& options);

}  // namespace fieldflow::bench
