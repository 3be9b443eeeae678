#pragma once
// Transient memory: how a compiled program obtains the memory of its intermediate fields.
// Normative description: design notes §3; user guide: docs/memory.md.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fieldflow/device.h"
#include "fieldflow/dtype.h"

namespace fieldflow {

// Where a transient lives. Only host_heap and gpu_global map to a device; the others exist so
// that a schedule naming them is rejected with a clear error instead of being misplaced.
enum class Storage : std::uint8_t { host_heap, gpu_global, gpu_shared, host_pinned };
std::string_view to_string(Storage s);
Storage parse_storage(std::string_view name);  // throws OptionError listing the valid names
Device device_of(Storage s);  // throws StorageError naming the storage

enum class TransientMemoryMode : std::uint8_t { scoped, persistent, pool, external };
std::string_view to_string(TransientMemoryMode m);
TransientMemoryMode parse_transient_memory_mode(std::string_view name);  // throws OptionError

// Every transient offset (and the base of every workspace) is aligned to this many bytes.
inline constexpr std::size_t transient_alignment = 256;

struct AllocationRequest {
  std::size_t bytes = 0;
  Device device = Device::cpu;
  std::size_t alignment = transient_alignment;
  std::string program;  // which compiled program asks (for the host's bookkeeping)
};

// Memory handed to fieldflow by the host. `release`, when set, runs when the compiled-program
// instance that borrowed it is destroyed (or when it asks again for a larger block).
struct Workspace {
  void* pointer = nullptr;
  std::size_t bytes = 0;
  Device device = Device::cpu;
  std::function<void()> release;
};

using ExternalMemoryAllocator = std::function<Workspace(const AllocationRequest&)>;

// The memory part of the compile options. Checked by validate() when the program is compiled.
// The allocator serves every device, so it cannot be combined with a workspace entry: which of
// the two would provide that device's memory would be ambiguous.
struct MemoryOptions {
  std::optional<TransientMemoryMode> mode;         // unset: pool, or external if memory is supplied
  ExternalMemoryAllocator external_memory_allocator;  // called once per instance and device
  std::map<Device, Workspace> external_workspace;     // caller-owned, may be shared, never freed

  // The effective mode; throws OptionError for any inconsistent combination (see design §3).
  TransientMemoryMode resolved_mode() const;
  void validate() const { (void)resolved_mode(); }
};

// Bytes and alignment a program needs on one device for given sizes.
struct WorkspaceRequirement {
  Device device = Device::cpu;
  std::size_t bytes = 0;
  std::size_t alignment = transient_alignment;
};

// Sizes one shared workspace per device as the maximum over several programs' requirements.
std::vector<WorkspaceRequirement> max_requirements(
    const std::vector<std::vector<WorkspaceRequirement>>& per_program);

// One transient in a memory plan.
struct PlannedTransient {
  std::string name;
  DType dtype = DType::float64;
  Device device = Device::cpu;
  std::size_t bytes = 0;
  int first_kernel = 0;  // live range, inclusive, in kernel order
  int last_kernel = 0;
  std::size_t offset = 0;  // from the device's workspace base, 256-byte aligned
};

struct MemoryPlan {
  std::vector<PlannedTransient> transients;
  std::size_t naive_sum_bytes = 0;    // every transient in its own block
  std::size_t packed_bytes = 0;       // after liveness-based packing
  std::size_t lower_bound_bytes = 0;  // peak of simultaneously live bytes
  std::size_t bytes_on(Device d) const;  // packed bytes needed on one device
  // What a workspace must provide: one entry per device that holds a transient (bytes may be 0).
  std::vector<WorkspaceRequirement> requirements() const;
};

// Counters per compiled-program instance, so steady-state behaviour can be checked.
struct MemoryStats {
  std::uint64_t calls = 0;
  std::uint64_t allocator_calls = 0;     // external_memory_allocator invocations
  std::uint64_t workspace_installs = 0;  // external memory validated and installed
  std::uint64_t system_allocations = 0;  // host heap / cudaMalloc through fieldflow's route
  std::uint64_t system_frees = 0;
  std::uint64_t pool_hits = 0;
  std::uint64_t pool_misses = 0;
  std::uint64_t stream_allocations = 0;  // device pool, stream-ordered (cudaMallocAsync)
  std::uint64_t stream_frees = 0;
  std::uint64_t release_actions = 0;     // Workspace::release run for allocator-supplied blocks
  std::uint64_t bytes_installed = 0;     // bytes currently held for transients (all devices)
  std::uint64_t last_call_system_allocations = 0;
};

// Observers of the single allocation route (tests, profilers). Events are delivered synchronously.
struct MemoryEvent {
  enum class Kind {
    system_allocate,  // aligned heap / cudaMalloc
    system_free,
    pool_hit,         // host pool served a cached block
    pool_miss,        // host pool had none cached (a system_allocate follows)
    pool_release,     // block returned to the host pool's cache
    stream_allocate,  // stream-ordered device allocation from fieldflow's pool (cudaMallocAsync)
    stream_free,
    allocator_call,   // external_memory_allocator invoked
    install,          // external memory validated and installed
    release           // an allocator-supplied block's release action ran (keep last: counted by kind)
  };
  Kind kind;
  Device device;
  std::size_t bytes;
  std::string label;  // program / transient
};
std::string_view to_string(MemoryEvent::Kind k);
// Listeners may be called from any thread that allocates; they must not throw and must not add or
// remove listeners themselves. Once remove_memory_listener returns, the listener is not running
// and will not be called again, so it may capture locals of the caller.
using MemoryListener = std::function<void(const MemoryEvent&)>;
int add_memory_listener(MemoryListener listener);  // returns an id for remove_memory_listener
void remove_memory_listener(int id);

// Releases what the host pool caches (e.g. between model phases). Thread-safe.
void trim_host_pool();

}  // namespace fieldflow
