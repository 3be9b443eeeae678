#pragma once
// The state behind fieldflow::CompiledProgram. Built by the compile driver from a schedule and a
// loaded module (JIT), or from a schedule and a function linked into an ahead-of-time library
// (load_aot); knows nothing of passes or code generation: it talks to generated code through the
// C ABI (fieldflow/abi.h) and reads the schedule only as data (extents, memory plan).
#include <atomic>
#include <cmath>
#include <memory>
#include <thread>
#include <mutex>
#include <optional>

#include "fieldflow/abi.h"
#include "fieldflow/compile.h"
#include "ir/call_binding.h"
#include "ir/schedule.h"
#include "runtime/device_runner.h"
#include "runtime/transient_memory.h"
#include "toolchain/loaded_module.h"

namespace fieldflow {

struct CompiledProgram::Impl {
  // What the compile driver hands over.
  struct Image {
    ir::Program program;
    CompileOptions options;
    ir::Schedule schedule;                               // cpu and cuda backends
    std::string source;                                  // cpu and cuda backends
    // cpu backend: the generated ff_run. JIT: a symbol of `module`, which keeps it mapped; AOT:
    // a function linked into the host's library, and no module at all.
    std::int32_t (*entry)(const ff_call*) = nullptr;
    std::optional<toolchain::LoadedModule> module;
    // cuda backend: runs the kernels on the device (entry stays null).
    std::shared_ptr<runtime::DeviceRunner> device;
    double compile_seconds = 0;
    bool cache_hit = false;
    bool loop_forms = false;  // cpu: the module has loops in both forms (codegen::has_loop_forms)
  };
  explicit Impl(Image image);
  bool compiled() const { return image.entry != nullptr || image.device != nullptr; }

  void call(const Arguments& args, const CallOptions& options = {});
  void check(const Arguments& args);

  // Extents and packed memory for one set of sizes.
  struct SizedPlan {
    ir::ConcreteExtents extents;
    MemoryPlan plan;
    std::vector<WorkspaceRequirement> requirements;
  };
  SizedPlan plan_for(const SizeMap& sizes) const;

  Image image;
  TransientMemoryMode mode;
  Layout layout;  // the compiled one: the options', else the backend's default
  int num_threads = 1;
  std::int32_t (*run)(const ff_call*) = nullptr;
  // The form calls use (LoopForm). tuned: the calls alternate the forms, the first of them a
  // warm-up, until each form has been timed loop_form_samples times; then the form whose fastest
  // call was faster stays (the fastest: the one a shared machine disturbed least).
  std::atomic<LoopForm> loop_form{LoopForm::scalar};  // read by CompiledProgram::loop_form() from any thread
  static constexpr int loop_form_samples = 3;
  int loop_form_calls = 0;
  double loop_form_best[2] = {HUGE_VAL, HUGE_VAL};  // fastest timed call, seconds: scalar, vector
  std::int32_t run_in_loop_form(const ff_call& call);
  // Takes `asked` as the form of the following calls; tuned starts the timing from its warm-up.
  void start_loop_form(LoopForm asked);
  void set_loop_form(LoopForm asked);  // start_loop_form between calls (under the call lock)
  std::unique_ptr<runtime::TransientMemory> memory;

  // Per-call state, guarded by call_mutex: calls of one instance are serialized.
  std::mutex call_mutex;
  std::atomic<std::thread::id> calling_thread{};  // the thread inside call(), to refuse nested calls
  struct Binding {
    bool valid = false;
    std::vector<std::string> names;  // argument names in the order of the last call
    std::vector<int> param_of_entry;
    std::vector<const void*> data;   // per parameter: field / table data pointer
    std::vector<std::vector<std::int64_t>> shape, origin, strides;
    std::vector<std::uint64_t> table_identity;  // per parameter: NeighborTable::identity()
    ir::BoundCall bound;
  } binding;
  SizeMap sizes;
  bool sized = false;
  SizedPlan sized_plan;          // from the sizes alone: memory, transient layout
  ir::ConcreteExtents call_extents;  // with the bound tables too: loop boxes, reads, table rows
  std::vector<ff_buffer> buffers;
  std::vector<ff_table> tables;
  std::vector<ff_scalar> scalars, next_scalars;
  std::vector<std::int64_t> domains;
  std::vector<std::size_t> transient_offsets;
  // Output fields saved before a call whose kernels check reads themselves (dynamic offsets):
  // restored when one fails, so a failed call leaves every argument unchanged.
  std::vector<Field*> checked_outputs;  // outputs of kernels that check reads while running
  std::vector<std::vector<std::byte>> saved_outputs;
  // cuda backend: the memory of every field and table of the bound call.
  std::vector<runtime::ArgumentSpan> field_spans, table_spans;
  std::vector<std::string> param_names;

 private:
  class CallScope;  // the instance's lock, held by a call or a check, and the refusal of nested calls
  enum class Change { nothing, field_data, everything };
  Change what_changed(const Arguments& args) const;
  void rebind_field_data();
  void prepare_call(const Arguments& args);
  void checked_prepare_call(const Arguments& args);
  void bind(const Arguments& args);
  void resize(const SizeMap& new_sizes);
  void check_reads();
  void describe_argument_spans();
};

}  // namespace fieldflow
