#pragma once
// The differential harness: runs a FuzzCase through the reference executor and the compiled CPU
// backend in every transient-memory mode and several thread counts, and reports the first
// disagreement (values, accepted/rejected, error type, bytes written outside the workspace).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fieldflow/memory.h"
#include "fuzz/program_generator.h"

namespace fieldflow::fuzz {

// Which compiled variants to run. The defaults run every mode; external with each thread count.
struct RunConfig {
  std::vector<int> threads = {1, 2, 3, 4};
  std::vector<TransientMemoryMode> modes = {TransientMemoryMode::external, TransientMemoryMode::pool,
                                            TransientMemoryMode::scoped, TransientMemoryMode::persistent};
  bool every_thread_count_in_every_mode = false;  // else external gets them all, others one each
  std::string cache_dir;                          // empty: the compile default
};

struct Failure {
  std::string kind;    // "values differ", "wrote past the workspace", "error mismatch", ...
  std::string detail;  // layout, sizes, mode, threads, call and the first differing element
  TransientMemoryMode mode = TransientMemoryMode::pool;
  int threads = 1;
  Layout layout = Layout::vertical_fastest;
};

struct RunStats {
  std::uint64_t compiled_calls = 0, reference_calls = 0, rejected_calls = 0, compiles = 0;
};

// Runs every size and layout of the case; returns the first failure, if any.
std::optional<Failure> check_case(const FuzzCase& c, const RunConfig& config, RunStats& stats);

}  // namespace fieldflow::fuzz
