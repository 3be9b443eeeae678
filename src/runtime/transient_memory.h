#pragma once
// TransientMemory: the memory of one compiled-program instance's transients, obtained the way its
// TransientMemoryMode promises (design §3). Guarantees:
//  - options are validated at construction (OptionError), never at a call;
//  - a call whose requirement is zero bytes on a device obtains nothing and asks the host nothing;
//  - external memory (allocator- or caller-supplied) is fully validated (present, not null, large
//    enough, base aligned, right device, memory the device can use) before it is installed; on
//    failure nothing is installed for that device (for caller-owned buffers: for any device), a
//    rejected allocator block's release action has run, and a later call retries;
//  - the allocator is asked once per device, when sizes are first known, and again only when a
//    call needs more (after the old block's release action ran); release actions run exactly once;
//  - calls on one instance never overlap: a Lease holds the instance for its whole lifetime and
//    other callers wait (persistent and external memory is per-instance state); two instances using
//    overlapping bytes of one caller-owned workspace at the same time get a ConcurrencyError;
//  - every allocation goes through the route in memory_route.h and is counted in stats().
#include <array>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fieldflow/memory.h"
#include "runtime/memory_route.h"

namespace fieldflow::runtime {

class TransientMemory {
 public:
  // Throws OptionError when the options are inconsistent (see MemoryOptions::resolved_mode).
  // `device_pool_release_threshold`: pool mode on a device takes its memory from the backend's
  // pool for this threshold (CompileOptions::cuda_pool_release_threshold).
  TransientMemory(std::string program_name, MemoryOptions options,
                  std::uint64_t device_pool_release_threshold = UINT64_MAX);
  // Frees persistent memory and runs the release actions of allocator-supplied blocks. Every
  // Lease must have ended before.
  ~TransientMemory();
  TransientMemory(const TransientMemory&) = delete;
  TransientMemory& operator=(const TransientMemory&) = delete;

  // The memory of one call: per device, a base pointer aligned to at least the requirement's
  // alignment with at least the required bytes. Movable; the call ends when it is destroyed (or
  // end() is called), possibly on another thread than the one that began it; but the thread that
  // began it must not begin another call on the same instance while it lives (that is refused
  // with ConcurrencyError, because it is almost always a nested call that would wait forever).
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& other) noexcept;
    Lease& operator=(Lease&& other) noexcept;
    ~Lease() { end(); }

    void* base(Device d) const { return slots_[index(d)].base; }  // nullptr if nothing needed
    std::size_t bytes(Device d) const { return slots_[index(d)].bytes; }
    bool active() const { return owner_ != nullptr; }
    void end() noexcept;

   private:
    friend class TransientMemory;
    enum class Source : unsigned char { none, installed, scoped, pool, stream };
    struct Slot {
      void* base = nullptr;
      std::size_t bytes = 0;     // what the call needs
      std::size_t obtained = 0;  // what was obtained (pool: the size class)
      std::size_t alignment = 0;
      Source source = Source::none;
      bool caller_workspace = false;  // registered as in use in the shared-workspace registry
    };
    static std::size_t index(Device d) { return static_cast<std::size_t>(d); }

    TransientMemory* owner_ = nullptr;
    void* stream_ = nullptr;
    std::array<Slot, 2> slots_{};
  };

  // Begins a call needing `need` (entries with 0 bytes, or devices not listed, get nothing).
  // `cuda_stream` orders pool-mode device allocations; it is passed to the backend untouched.
  // Waits while another call on this instance is in progress. Throws WorkspaceError (external
  // memory unusable), AllocationError, ConcurrencyError, or whatever the allocator throws.
  Lease begin_call(const std::vector<WorkspaceRequirement>& need, void* cuda_stream = nullptr);

  // Obtains persistent or external memory now that sizes are known, so the first call allocates
  // nothing. Does nothing in scoped and pool modes. Same errors as begin_call.
  void prepare(const std::vector<WorkspaceRequirement>& need);

  // Replaces the caller-owned workspace of one device (external mode without an allocator). It is
  // validated at the next call, like the one given in the options. Throws OptionError otherwise,
  // or when the key and workspace.device differ. Waits for a call in progress.
  void set_external_workspace(Device device, Workspace workspace);

  // Where caller memory for `device` (its external workspace, its allocator's blocks) must be:
  // `check` returns "" for memory the program's kernels can use, else what the memory is and what
  // they need (DeviceRunner::memory_problem), which becomes a WorkspaceError. Asked when such
  // memory is installed (a caller's workspace: until it is, and again for a new one). Set
  // once, before the first call; without one the memory is not examined.
  using MemoryCheck = std::function<std::string(const void* pointer)>;
  void set_memory_check(Device device, MemoryCheck check);

  const std::string& program() const { return program_; }
  TransientMemoryMode mode() const { return mode_; }
  MemoryStats stats() const;
  // Memory held for the device right now: the installed persistent or external block, or during
  // a scoped/pool call the call's block; 0 / nullptr when there is none.
  std::size_t installed_bytes(Device d) const;
  const void* installed_base(Device d) const;

 private:
  struct Installed {
    void* base = nullptr;
    std::size_t bytes = 0;
    std::size_t alignment = 0;
    std::function<void()> release;  // allocator-supplied blocks only
    bool present = false;
  };

  struct Need {
    std::size_t bytes = 0;
    std::size_t alignment = transient_alignment;
  };
  using Needs = std::array<Need, 2>;
  static Needs normalize(const std::vector<WorkspaceRequirement>& need);

  void acquire_instance();   // waits until no call is in progress, then marks one
  void release_instance() noexcept;
  void ensure_installed(const Needs& needs, Lease* lease);  // persistent + external
  void install_from_allocator(Device d, const Need& n);
  void check_caller_workspace(Device d, const Need& n) const;
  void free_installed(Device d) noexcept;
  void end_lease(Lease& lease) noexcept;
  // Adds the route events this thread raised since `before`; `in_call`: they belong to the current call.
  void add_route_delta(const RouteCounters& before, bool in_call) noexcept;
  std::size_t held_bytes() const;

  const std::string program_;
  MemoryOptions options_;
  const std::uint64_t device_pool_release_threshold_;
  const TransientMemoryMode mode_;
  std::array<MemoryCheck, 2> memory_checks_{};

  // Serialises calls: `busy_` is true while a Lease (or prepare) is alive. A flag rather than a
  // held mutex because a Lease may end on another thread than the one that began it. Atomic, so
  // that an uncontended call takes and gives it back with one atomic operation each (the call
  // overhead of a small program); only a caller that finds it taken waits on call_done_, and the
  // one giving it back takes call_mutex_ only when someone waits (waiters_).
  std::atomic<bool> busy_{false};
  std::atomic<std::thread::id> busy_thread_{};  // who holds busy_; cleared before busy_ is
  std::atomic<int> waiters_{0};
  std::mutex call_mutex_;
  std::condition_variable call_done_;
  // stats_.calls, counted outside state_mutex_ so that a call in steady state takes no lock here.
  std::atomic<std::uint64_t> calls_{0};

  // Guarded by state_mutex_ for readers (stats, installed_*); written only by the busy caller,
  // which may therefore read them without the lock (busy_ orders successive callers).
  mutable std::mutex state_mutex_;
  std::array<Installed, 2> installed_{};
  std::array<std::size_t, 2> lease_bytes_{};  // scoped/pool: bytes of the live call
  std::array<const void*, 2> lease_base_{};
  MemoryStats stats_;
  std::uint64_t current_call_allocations_ = 0;
};

}  // namespace fieldflow::runtime
