#pragma once
// Runs the suite in-process and returns its report (the engine of `fieldflow bench`).
#include <nlohmann/json.hpp>
#include <string>

#include "suite.h"

namespace fieldflow::bench {

struct RunOptions {
  SuiteOptions suite;
  std::string filter;  // regular expression over case names; the copy probe always runs
};

// Registers the suite, runs the cases selected by the filter (progress on stdout, one line
// per case), and builds the report. Call at most once per process: Google Benchmark's
// registry is global.
nlohmann::json run_suite(const RunOptions& options);

}  // namespace fieldflow::bench
