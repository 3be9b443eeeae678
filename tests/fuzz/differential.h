#pragma once
// The differential harness: runs a FuzzCase through the reference executor, the compiled CPU
// backend in every transient-memory mode and several thread counts, and the CUDA backend's kernels
// under host emulation (directly, and through the CUDA runner on an emulated runtime), and reports
// the first disagreement (values, accepted/rejected, error type, bytes written outside the
// workspace or a view).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fieldflow/field.h"
#include "fieldflow/memory.h"
#include "fuzz/program_generator.h"

namespace fieldflow::fuzz {

// What runs the compiled code: the CPU backend; the CUDA backend's generated kernels under host
// emulation of the launch grid (driver::compile_cuda_emulated: the GPU's schedule, its transients
// in host memory, bound and checked by the CPU runtime); or those kernels launched by the CUDA
// runner through an emulated CUDA runtime (support/cuda_emulator.h: the runner's staging, copies,
// descriptor and device memory modes; builds with FIELDFLOW_WITH_CUDA only); or the CPU backend
// through the C API a C or Fortran host calls (capi::wrap, every argument set as a view with
// ff_program_set_*_at, statuses mapped back to error kinds).
enum class Path { cpu, cuda_kernels, cuda_runner, c_api };
std::string to_string(Path p);

// Which compiled variants to run. The defaults run every mode; external with each thread count.
struct RunConfig {
  std::vector<int> threads = {1, 2, 3, 4};
  std::vector<TransientMemoryMode> modes = {TransientMemoryMode::external, TransientMemoryMode::pool,
                                            TransientMemoryMode::scoped, TransientMemoryMode::persistent};
  std::vector<Path> paths = {Path::cpu, Path::cuda_kernels, Path::cuda_runner, Path::c_api};
  bool every_thread_count_in_every_mode = false;  // else external gets them all, others one each
  std::string cache_dir;                          // empty: the compile default
  bool runs(Path p) const;
};

struct Failure {
  std::string kind;    // "values differ", "wrote past the workspace", "error mismatch", ...
  std::string detail;  // path, layout, sizes, mode, threads, call and the first differing element
  Path path = Path::cpu;
  TransientMemoryMode mode = TransientMemoryMode::pool;
  int threads = 1;
  Layout layout = Layout::vertical_fastest;
};

struct RunStats {
  std::uint64_t compiled_calls = 0, reference_calls = 0, rejected_calls = 0, compiles = 0;
  std::uint64_t cuda_kernel_calls = 0, cuda_runner_calls = 0;  // of compiled_calls
  std::uint64_t static_scalar_calls = 0;                       // of compiled_calls: every scalar folded in
  std::uint64_t specialised_calls = 0;  // of static_scalar_calls: refused by the plain reference, accepted as specialised
  std::uint64_t c_api_calls = 0;                               // of compiled_calls: through the C API
};

// The most derived fieldflow error kind of an exception, by name ("DomainError", ...).
std::string error_kind(const std::exception& e);

// Whether element ia of `a` equals element ib of `b` (linear offsets, same dtype) bit for bit,
// where any NaN equals any NaN (a NaN's sign and payload depend on operand order, which is not
// semantics).
bool same_element(const Field& a, std::int64_t ia, const Field& b, std::int64_t ib);

// Runs every size and layout of the case; returns the first failure, if any.
std::optional<Failure> check_case(const FuzzCase& c, const RunConfig& config, RunStats& stats);

}  // namespace fieldflow::fuzz
