#pragma once
// The benchmark suite: registers Google Benchmark cases for the machine's copy probe, every
// benchmarked example next to its hand-written baseline and a copy of exactly its compulsory
// bytes (its yardstick), compiled once per transient-memory mode when the program has
// transients (once, in pool mode, when it has none: the module is then the same in every mode),
// the call overhead of a one-point program, and cold / warm compile times. Shared by the `fieldflow_bench`
// executable and `fieldflow bench`; what each case measures is kept in a registry by name so a
// reporter can turn timings into bandwidths and ratios (report.h).
#include <optional>
#include <string>
#include <vector>

#include "baselines.h"
#include "fieldflow/compile.h"
#include "fieldflow/device.h"
#include "fieldflow/examples.h"
#include "fieldflow/field.h"
#include "fieldflow/memory.h"

namespace fieldflow::bench {

struct SuiteOptions {
  bool quick = false;          // small sizes (a smoke test, not a measurement)
  int repetitions = 9;         // medians over this many repetitions
  double min_time = 0.25;      // seconds per repetition of a kernel case
  int compile_repetitions = 3; // cold compiles per program (each one compiles from scratch)
  bool aggregates_only = true; // ReportAggregatesOnly (false: a reporter wants every repetition)
  // The repetitions of all cases run in random order (Google Benchmark's random interleaving):
  // slow drifts of a shared machine then hit every case alike instead of whichever ran during
  // them. Keeps every configuration's data in memory (about 4 GB for the full suite).
  bool interleave = false;
  // Only cases whose name matches this regular expression are registered (empty: all); the
  // machine's copy probes always are.
  std::string filter;
  // Device::cuda: the GPU suite instead (cuda_suite.h).
  Device device = Device::cpu;
  // The loop form of fieldflow's cases and the form of the mesh baselines (tuned: each keeps
  // the faster of its two on this machine; pinned, to compare the forms).
  LoopForm loop_form = LoopForm::tuned;
  BaselineForm baseline_form = BaselineForm::tuned;
  // Quick defaults: 2 repetitions, 0.01 s, 1 cold compile.
  static SuiteOptions quick_defaults();
};

// One benchmarked configuration of an example.
struct KernelConfig {
  std::string program;
  Layout layout = Layout::vertical_fastest;
  examples::ExampleSize size;
  std::string size_text() const;  // "256x256x80", "torus100x100x80" or "bounded100x100x80"
};

// copy: the machine's DRAM-sized copy probe; case_copy: the same-bytes copy of one kernel
// configuration (program, layout, size say which); paired: the hand-written code and fieldflow
// (pool mode) of one configuration called in turn within each repetition, each call timed, so
// both sides of a repetition's ratio saw the same moment of a shared machine.
enum class CaseKind { copy, case_copy, kernel, paired, call_overhead, compile_cold, compile_warm };

// The counters of a paired case's repetition: seconds per call of each side.
inline constexpr const char* paired_handwritten_counter = "handwritten_s";
inline constexpr const char* paired_fieldflow_counter = "fieldflow_s";

// What one registered case measures.
struct CaseInfo {
  std::string name;  // the Google Benchmark name
  CaseKind kind = CaseKind::kernel;
  std::string program;
  std::string variant;  // "fieldflow" | "handwritten" | "copy" | "paired"
  std::string mode;     // transient memory mode, "none" for hand-written code and copies
  std::string device = "cpu";  // where it runs: "cpu" or "cuda"
  // A fieldflow kernel of a program without transients: the module is the same in every mode,
  // so it runs once (in pool mode) and stands for all four.
  bool mode_independent = false;
  std::string layout;
  std::string size;
  double compulsory_bytes = 0;  // per call (copies: bytes read + written)
  std::optional<MemoryPlan> plan;  // filled when a fieldflow kernel case first runs
  std::string loop_form;  // a fieldflow kernel with two loop forms: the one tuning kept (LoopForm)
};

// Cases in registration order (stable: the report lists them in this order).
std::vector<CaseInfo>& case_registry();
CaseInfo* find_case(const std::string& name);

// The configurations the suite benchmarks (full or quick sizes).
std::vector<KernelConfig> kernel_configs(bool quick);

// Registers every case with Google Benchmark (call once, before RunSpecifiedBenchmarks) and
// returns how many were registered. Compiles each selected program once on a small instance to
// learn whether it has transients (a cache hit after the first run).
std::size_t register_suite(const SuiteOptions& options);

// Frees the cached instances and compiled programs (between runs, at exit).
void release_suite_state();

}  // namespace fieldflow::bench
