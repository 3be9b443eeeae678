#pragma once
// Compiling a program and calling it. compile() lowers the program (passes), generates C++
// (codegen), builds it through the on-disk cache (toolchain) and returns a CompiledProgram that
// binds arguments, owns transient memory per the chosen mode and runs the kernels.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fieldflow/field.h"
#include "fieldflow/ir.h"
#include "fieldflow/memory.h"

namespace fieldflow {

// cuda: NVIDIA GPUs (docs/cuda.md). Compiling for it throws BackendUnavailableError when this
// fieldflow was built without the CUDA toolkit or the machine has no usable device.
enum class Backend : std::uint8_t { reference, cpu, cuda };
std::string_view to_string(Backend b);
Backend parse_backend(std::string_view name);  // throws OptionError

// How the cpu backend runs the level loops of horizontal-fastest mesh kernels' element blocks
// (elements of one kind together, their neighbour values loaded through the tables): scalar, or
// forced into vector form, where those loads become gathers. The results are the same bit for bit;
// which is faster depends on the machine (how it gathers) and the kernel (2x either way on the
// machines measured: docs/performance.md). tuned: each instance times both forms on its first
// calls and keeps the faster. Other kernels and backends have one form and ignore it.
enum class LoopForm : std::uint8_t { tuned, scalar, vector };
std::string_view to_string(LoopForm f);
LoopForm parse_loop_form(std::string_view name);  // throws OptionError
// OptionError naming `program` unless `form` is one of LoopForm's values (e.g. from a C host).
void check_loop_form(std::string_view program, LoopForm form);

struct CompileOptions {
  Backend backend = Backend::cpu;
  // Which dimension is unit-stride (checked per call). Unset: the backend's default,
  // default_layout(backend): vertical_fastest on the host, horizontal_fastest on cuda
  // (consecutive GPU threads then read consecutive horizontal points).
  std::optional<Layout> layout;
  MemoryOptions memory;                      // transient memory mode, allocator or workspace
  int num_threads = 0;                       // 0: OpenMP's default (OMP_NUM_THREADS)
  // Kernels with at most this many points run on the calling thread: waking threads costs a few
  // microseconds, more than small kernels take. 0 makes every kernel take the parallel path.
  std::int64_t parallel_threshold = 16384;
  std::string cache_dir;                     // empty: FIELDFLOW_CACHE_DIR, else ~/.cache/fieldflow
  LoopForm loop_form = LoopForm::tuned;      // not part of the module: a call field picks the form
  // Static scalar parameters (GT4Py's static params): their values are folded into the program at
  // compile time (dead where branches removed), so each set of values is its own module and cache
  // entry. Calls still pass these scalars; a different value is an ArgumentError.
  std::map<std::string, Scalar> static_scalars;
  // cuda backend (docs/cuda.md). The stream of every launch, copy and stream-ordered allocation of
  // this instance (a cudaStream_t); null: the instance creates and owns a stream, not the legacy
  // default stream but ordered after the work issued on it (docs/cuda.md, Streams).
  void* cuda_stream = nullptr;
  std::string cuda_arch;  // "sm_90", "sm_90a", ...; empty: the device's, else sm_90; else OptionError
  // Bytes fieldflow's own device pool (pool mode) keeps cached instead of returning them to the
  // driver: the default keeps everything, so steady-state calls make no system allocation.
  std::uint64_t cuda_pool_release_threshold = UINT64_MAX;
};

Layout default_layout(Backend backend);

// Size symbols: int scalar parameters by name, and "len(<Location>)" for unstructured dimensions
// (the sizes of neighbour tables). Everything a program's memory needs depends only on these.
using SizeMap = std::map<std::string, std::int64_t>;
SizeMap size_symbols(const ir::Program& program, const Arguments& args);

// Settings of one call.
struct CallOptions {
  // cuda backend: the stream of this call's launches, copies and stream-ordered allocations (a
  // cudaStream_t) instead of the instance's (CompileOptions::cuda_stream or its own). The call
  // still synchronises it before returning. Non-null for another backend: OptionError.
  void* cuda_stream = nullptr;
};

class CompiledProgram {
 public:
  struct Impl;
  explicit CompiledProgram(std::unique_ptr<Impl> impl);
  CompiledProgram(CompiledProgram&&) noexcept;
  CompiledProgram& operator=(CompiledProgram&&) noexcept;
  ~CompiledProgram();  // releases persistent memory and runs external release actions

  // Runs the program. Validates arguments exactly like run_reference. Calls on one instance are
  // serialized (its transient memory and bindings are per instance); use one instance per thread
  // to run in parallel.
  void operator()(const Arguments& args);
  void operator()(const Arguments& args, const CallOptions& call);
  // Checks `args` as a call does before it runs anything, and runs nothing: throws what such a
  // call would throw before it starts. Not what only running finds: a dynamic offset leaving a
  // field (checked by the kernels), or, for Backend::reference, reads outside an input's extent.
  // A host that runs several programs as one step checks them all first, so that a step rejected
  // by its last program has not run the others. A call with the same arguments right after
  // skips the checks already made.
  void check(const Arguments& args);

  const ir::Program& program() const;
  Backend backend() const;
  Layout layout() const;  // the compiled layout (the backend's default when the options had none)
  TransientMemoryMode memory_mode() const;
  // The loop form calls use: the options' scalar or vector; with tuned, tuned while the instance
  // still times both forms (its first calls, LoopForm), then the faster.
  LoopForm loop_form() const;
  // Pins the loop form of the following calls (scalar, vector), or starts the timing of both
  // forms afresh (tuned): e.g. after the sizes changed, since the faster form is a property of the
  // sizes as well as of the machine. Waits for a call in progress; from inside a call of this
  // instance (its allocator, a release action or a memory listener) a ConcurrencyError. A value
  // outside LoopForm is an OptionError. Either form gives the same bits.
  void set_loop_form(LoopForm form);

  // Memory needed for given sizes, per device, before any call (to size a shared workspace).
  std::vector<WorkspaceRequirement> workspace_requirements(const SizeMap& sizes) const;
  // Installs persistent / external memory for these sizes now instead of at the first call. A cuda
  // program: from a thread whose current device is the program's (else ArgumentError, as a call).
  void prepare(const SizeMap& sizes);
  // Replaces the caller-owned workspace of one device (mode external without an allocator), e.g.
  // with a buffer sized by workspace_requirements after compiling; validated and installed at the
  // next call. Throws OptionError in any other mode. Waits for a call in progress.
  void set_external_workspace(Device device, Workspace workspace);
  // Every transient with bytes, live range and offset for given sizes; naive / packed / bound.
  MemoryPlan memory_plan(const SizeMap& sizes) const;
  MemoryStats memory_stats() const;

  const std::string& generated_source() const;  // empty for the reference backend
  std::string schedule_text() const;
  double compile_seconds() const;  // 0 on a cache hit
  bool cache_hit() const;

 private:
  std::unique_ptr<Impl> impl_;
};

CompiledProgram compile(const ir::Program& program, const CompileOptions& options = {});

}  // namespace fieldflow
