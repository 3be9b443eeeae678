#pragma once
// The differential harness: runs a FuzzCase through the reference executor, the compiled CPU
// backend in every transient-memory mode and several thread counts, and the CUDA backend's kernels
// under host emulation of the launch grid, and reports the first disagreement (values,
// accepted/rejected, error type, bytes written outside the workspace).
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
  // Also the CUDA backend's generated kernels, run on the host under an emulated launch grid
  // (external mode, exact guarded workspace: the GPU schedule's transient offsets are checked).
  bool cuda_emulation = true;
  bool cpu_backend = true;  // false: the emulated CUDA instance only (shrinking a failure of it)
};

struct Failure {
  std::string kind;    // "values differ", "wrote past the workspace", "error mismatch", ...
  std::string detail;  // layout, sizes, mode, threads, call and the first differing element
  TransientMemoryMode mode = TransientMemoryMode::pool;
  int threads = 1;
  Layout layout = Layout::vertical_fastest;
  bool cuda = false;  // the emulated CUDA instance failed
};

struct RunStats {
  std::uint64_t compiled_calls = 0, reference_calls = 0, rejected_calls = 0, compiles = 0;
  std::uint64_t emulated_cuda_calls = 0;  // of compiled_calls
};

// Runs every size and layout of the case; returns the first failure, if any.
std::optional<Failure> check_case(const FuzzCase& c, const RunConfig& config, RunStats& stats);

}  // namespace fieldflow::fuzz
