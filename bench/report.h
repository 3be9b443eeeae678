#pragma once
// Turning benchmark runs into the suite's report: a reporter that keeps every repetition's time,
// the JSON object `fieldflow bench --json` writes (keys documented in docs/performance.md), a
// Markdown table and an SVG bar chart of the ratios.
#include <benchmark/benchmark.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "suite.h"

namespace fieldflow::bench {

// Seconds per call of every repetition, by case name, with the CPUs other processes used during
// that repetition (quiet.h; -1 unknown); for paired cases each repetition's seconds per call of
// the hand-written side and the fieldflow side; and the error of every failed case.
struct Samples {
  struct Pair {
    double handwritten = 0, fieldflow = 0;
  };
  std::map<std::string, std::vector<double>> seconds;
  std::map<std::string, std::vector<double>> others_cpu;
  std::map<std::string, std::vector<Pair>> paired;
  std::map<std::string, std::string> errors;
};

// Prints the median and min aggregates like the console reporter and collects every repetition.
class CollectingReporter : public benchmark::ConsoleReporter {
 public:
  CollectingReporter() = default;
  void ReportRuns(const std::vector<Run>& runs) override;
  const Samples& samples() const { return samples_; }

 private:
  Samples samples_;
};

struct ReportSettings {
  bool quick = false;
  int repetitions = 0;
  double min_time = 0;
  std::string filter;
  bool interleaved = false;
  std::vector<double> load_before;  // /proc/loadavg when the run started (the machine may be shared)
  // Quiet-run protocol: a repetition during which other processes used more than this many CPUs
  // is rejected (the medians are taken over the others).
  double max_others_cpu = 0.1;
  nlohmann::json idle_wait;  // what wait_until_idle found: idle, waited_s, others_cpu, message
  nlohmann::json gpu;        // the GPU suite's device (cuda_device_info); null for the CPU suite
};

// Targets of docs/performance.md, checked in the report's "targets" list (never in tests).
inline constexpr double target_call_overhead_us = 1.0;
inline constexpr double target_cold_compile_s = 0.5;
inline constexpr double target_warm_load_s = 1e-3;
// GPU (issue 10): fieldflow against hand-written CUDA, and the bandwidth-bound kernels (hdiff,
// nabla4, c2e2co_sum) against the device's copy of their own bytes.
inline constexpr double target_cuda_vs_handwritten = 0.9;
inline constexpr double target_cuda_vs_copy = 0.8;

std::vector<double> load_average();  // /proc/loadavg: 1, 5, 15 minutes (empty elsewhere)

// The report object: machine, settings, quiet, results, configurations, memory, compile,
// call_overhead, targets, errors (keys in docs/performance.md).
nlohmann::json make_report(const std::vector<CaseInfo>& cases, const Samples& samples, const ReportSettings& settings);

// Markdown tables of a report (kernels, memory plans, compile times, call overhead).
std::string markdown_tables(const nlohmann::json& report);

// A plain SVG bar chart: per benchmarked configuration, fieldflow (pool mode) vs_handwritten (of
// the separate medians and, where a paired case ran, paired) and vs_copy, and the hand-written
// code's vs_copy, with the target lines.
std::string svg_plot(const nlohmann::json& report);

std::string cpu_model();  // from /proc/cpuinfo ("unknown" elsewhere)

}  // namespace fieldflow::bench
