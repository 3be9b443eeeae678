// TransientMemory: see transient_memory.h for what it guarantees. Per-instance statistics are
// taken from the allocation route's per-thread counters, read before and after each operation
// this instance performs, so they include what the host pool does on its behalf and nothing that
// other threads do meanwhile.
#include "runtime/transient_memory.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <utility>

#include "fieldflow/errors.h"
#include "runtime/host_pool.h"

namespace fieldflow::runtime {

namespace {

constexpr std::array<Device, 2> devices = {Device::cpu, Device::cuda};
std::size_t index(Device d) { return static_cast<std::size_t>(d); }

bool aligned(const void* p, std::size_t alignment) {
  return reinterpret_cast<std::uintptr_t>(p) % alignment == 0;
}

// Process-wide registry of caller-owned workspace bytes in use by a call right now. Ranges, not
// just base pointers, because two programs may share a buffer from different offsets.
class WorkspaceRegistry {
 public:
  void claim(Device d, const void* base, std::size_t bytes, const TransientMemory* owner,
             const std::string& program) {
    const auto begin = reinterpret_cast<std::uintptr_t>(base);
    const auto end = begin + bytes;
    std::lock_guard lock(mutex_);
    for (const Entry& e : in_use_) {
      if (e.device == d && e.owner != owner && begin < e.end && e.begin < end)
        throw ConcurrencyError(fmt::format(
            "program '{}' cannot use the external workspace on {} at {} ({} bytes): program '{}' "
            "is using those bytes in a call right now. Programs may share one workspace only one "
            "after another (common causes: calling them from several threads; give each thread "
            "its own buffer)",
            program, to_string(d), base, bytes, *e.program));
    }
    in_use_.push_back({d, begin, end, owner, &program});  // capacity is kept, so steady state does not allocate
  }

  void unclaim(Device d, const void* base, const TransientMemory* owner) noexcept {
    const auto begin = reinterpret_cast<std::uintptr_t>(base);
    std::lock_guard lock(mutex_);
    auto it = std::find_if(in_use_.begin(), in_use_.end(), [&](const Entry& e) {
      return e.device == d && e.begin == begin && e.owner == owner;
    });
    if (it != in_use_.end()) in_use_.erase(it);
  }

 private:
  struct Entry {
    Device device;
    std::uintptr_t begin, end;
    const TransientMemory* owner;
    const std::string* program;  // the owner's name; entries never outlive the owner's call
  };
  std::mutex mutex_;
  std::vector<Entry> in_use_;
};

WorkspaceRegistry& workspace_registry() {
  static WorkspaceRegistry* r = new WorkspaceRegistry;  // never destroyed: leases may end at exit
  return *r;
}

// Empty when `ws` can hold `need` on `d`, else why not. `what` names where the memory came from;
// `check` (when set) says whether the device can use the memory at all (set_memory_check).
std::string workspace_problem(const std::string& program, Device d, std::size_t bytes, std::size_t alignment,
                              const Workspace& ws, std::string_view what,
                              const TransientMemory::MemoryCheck* check) {
  if (ws.device != d)
    return fmt::format("program '{}' needs memory on device {}, but {} is on device {}", program, to_string(d),
                       what, to_string(ws.device));
  if (ws.pointer == nullptr)
    return fmt::format("program '{}': {} for device {} is a null pointer ({} bytes required)", program, what,
                       to_string(d), bytes);
  if (ws.bytes < bytes)
    return fmt::format("program '{}': {} for device {} is too small: {} bytes required, {} bytes given", program,
                       what, to_string(d), bytes, ws.bytes);
  if (!aligned(ws.pointer, alignment))
    return fmt::format("program '{}': {} for device {} at {} is not aligned to {} bytes", program, what,
                       to_string(d), ws.pointer, alignment);
  if (check != nullptr && *check) {
    const std::string elsewhere = (*check)(ws.pointer);
    if (!elsewhere.empty())
      return fmt::format("program '{}': {} for device {} at {} is {}", program, what, to_string(d), ws.pointer,
                         elsewhere);
  }
  return {};
}

}  // namespace

// ---- Lease -----------------------------------------------------------------------------------

TransientMemory::Lease::Lease(Lease&& other) noexcept
    : owner_(std::exchange(other.owner_, nullptr)), stream_(other.stream_), slots_(other.slots_) {}

TransientMemory::Lease& TransientMemory::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    end();
    owner_ = std::exchange(other.owner_, nullptr);
    stream_ = other.stream_;
    slots_ = other.slots_;
  }
  return *this;
}

void TransientMemory::Lease::end() noexcept {
  if (owner_ == nullptr) return;
  TransientMemory* owner = std::exchange(owner_, nullptr);
  owner->end_lease(*this);
  slots_ = {};
}

// ---- TransientMemory -------------------------------------------------------------------------

TransientMemory::TransientMemory(std::string program_name, MemoryOptions options,
                                 std::uint64_t device_pool_release_threshold)
    : program_(std::move(program_name)),
      options_(std::move(options)),
      device_pool_release_threshold_(device_pool_release_threshold),
      mode_(options_.resolved_mode()) {}

TransientMemory::~TransientMemory() {
  assert(!busy_.load() && "a Lease outlived its TransientMemory");
  for (Device d : devices) free_installed(d);
}

TransientMemory::Needs TransientMemory::normalize(const std::vector<WorkspaceRequirement>& need) {
  Needs out{};
  for (const WorkspaceRequirement& r : need) {
    FIELDFLOW_ASSERT(index(r.device) < out.size(), "requirement for an unknown device");
    Need& n = out[index(r.device)];
    n.bytes = std::max(n.bytes, r.bytes);
    n.alignment = std::max(n.alignment, effective_alignment(r.alignment));
  }
  return out;
}

void TransientMemory::acquire_instance() {
  const std::thread::id me = std::this_thread::get_id();
  bool expected = false;
  if (!busy_.compare_exchange_strong(expected, true)) {
    // busy_thread_ is cleared before busy_ on release and set right after the exchange, so it can
    // only name this thread while this thread really holds the instance.
    if (busy_thread_.load() == me)
      throw ConcurrencyError(fmt::format(
          "program '{}': a call began while this thread still holds a call of the same instance (a "
          "Lease is alive); waiting for it would never end. End the first call before the next",
          program_));
    // Registered as a waiter before retrying, so that release_instance, which clears busy_ before
    // it reads waiters_, either sees this waiter and notifies, or the retry sees busy_ cleared.
    std::unique_lock lock(call_mutex_);
    waiters_.fetch_add(1);
    call_done_.wait(lock, [&] {
      bool free = false;
      return busy_.compare_exchange_strong(free, true);
    });
    waiters_.fetch_sub(1);
  }
  busy_thread_.store(me);
}

void TransientMemory::release_instance() noexcept {
  busy_thread_.store(std::thread::id());
  busy_.store(false);
  if (waiters_.load() > 0) {
    // Taking the mutex once makes sure a waiter that registered is inside wait() before the notify.
    { std::lock_guard lock(call_mutex_); }
    call_done_.notify_one();
  }
}

void TransientMemory::add_route_delta(const RouteCounters& before, bool in_call) noexcept {
  using K = MemoryEvent::Kind;
  const RouteCounters d = thread_route_counters() - before;
  // Steady state (nothing allocated or freed): nothing to add, and no lock to take.
  if (std::all_of(d.by_kind.begin(), d.by_kind.end(), [](std::uint64_t n) { return n == 0; })) return;
  std::lock_guard lock(state_mutex_);
  stats_.system_allocations += d[K::system_allocate];
  stats_.system_frees += d[K::system_free];
  stats_.pool_hits += d[K::pool_hit];
  stats_.pool_misses += d[K::pool_miss];
  stats_.stream_allocations += d[K::stream_allocate];
  stats_.stream_frees += d[K::stream_free];
  if (!in_call) return;
  current_call_allocations_ += d[K::system_allocate];
  // Published as it grows, so that during a call it shows that call's allocations so far.
  stats_.last_call_system_allocations = current_call_allocations_;
}

TransientMemory::Lease TransientMemory::begin_call(const std::vector<WorkspaceRequirement>& need,
                                                   void* cuda_stream) {
  const Needs needs = normalize(need);
  acquire_instance();
  // From here on the lease owns the instance: if anything below throws, its destructor gives
  // back what this call obtained and lets the next caller in.
  Lease lease;
  lease.owner_ = this;
  lease.stream_ = cuda_stream;
  calls_.fetch_add(1, std::memory_order_relaxed);
  // Published at once, so that during a call the statistics show this call's allocations so far;
  // the lock only when the previous call left something to reset.
  if (current_call_allocations_ != 0 || stats_.last_call_system_allocations != 0) {
    std::lock_guard lock(state_mutex_);
    current_call_allocations_ = 0;
    stats_.last_call_system_allocations = 0;
  }
  const RouteCounters before = thread_route_counters();
  try {
    switch (mode_) {
      case TransientMemoryMode::scoped:
      case TransientMemoryMode::pool:
        for (Device d : devices) {
          const Need& n = needs[index(d)];
          if (n.bytes == 0) continue;
          Lease::Slot& slot = lease.slots_[index(d)];
          slot.bytes = n.bytes;
          if (mode_ == TransientMemoryMode::scoped) {
            slot.base = system_allocate(d, n.bytes, n.alignment, program_);
            slot.obtained = n.bytes;
            slot.alignment = n.alignment;
            slot.source = Lease::Source::scoped;
          } else if (d == Device::cpu) {
            const HostPool::Block b = host_pool().acquire(n.bytes, n.alignment, program_);
            slot.base = b.pointer;
            slot.obtained = b.bytes;
            slot.alignment = b.alignment;
            slot.source = Lease::Source::pool;
          } else {
            slot.base = stream_allocate(d, n.bytes, n.alignment, cuda_stream, device_pool_release_threshold_, program_);
            slot.obtained = n.bytes;
            slot.alignment = n.alignment;
            slot.source = Lease::Source::stream;
          }
          std::lock_guard lock(state_mutex_);
          lease_bytes_[index(d)] = slot.obtained;
          lease_base_[index(d)] = slot.base;
        }
        break;
      case TransientMemoryMode::persistent:
      case TransientMemoryMode::external:
        ensure_installed(needs, &lease);
        break;
    }
  } catch (...) {
    add_route_delta(before, true);
    throw;
  }
  add_route_delta(before, true);
  return lease;
}

void TransientMemory::prepare(const std::vector<WorkspaceRequirement>& need) {
  const Needs needs = normalize(need);
  if (mode_ != TransientMemoryMode::persistent && mode_ != TransientMemoryMode::external) return;
  acquire_instance();
  const RouteCounters before = thread_route_counters();
  try {
    ensure_installed(needs, nullptr);
  } catch (...) {
    add_route_delta(before, false);
    release_instance();
    throw;
  }
  add_route_delta(before, false);
  release_instance();
}

void TransientMemory::set_external_workspace(Device device, Workspace workspace) {
  if (mode_ != TransientMemoryMode::external || options_.external_memory_allocator)
    throw OptionError(fmt::format(
        "program '{}': set_external_workspace needs transient memory mode 'external' without an "
        "external_memory_allocator, but the mode is '{}'{}",
        program_, to_string(mode_), options_.external_memory_allocator ? " with an allocator" : ""));
  if (workspace.device != device)
    throw OptionError(fmt::format(
        "program '{}': external workspace for device {} describes a buffer on device {}", program_,
        to_string(device), to_string(workspace.device)));
  acquire_instance();
  options_.external_workspace[device] = std::move(workspace);
  {
    // Forget the old buffer: the next call validates and installs the new one.
    std::lock_guard lock(state_mutex_);
    installed_[index(device)] = {};
  }
  release_instance();
}

void TransientMemory::set_memory_check(Device device, MemoryCheck check) {
  memory_checks_[index(device)] = std::move(check);
}

void TransientMemory::ensure_installed(const Needs& needs, Lease* lease) {
  const bool caller_owned = mode_ == TransientMemoryMode::external && !options_.external_memory_allocator;
  if (caller_owned) {
    // Every device is checked before anything is installed (design §3).
    for (Device d : devices)
      if (needs[index(d)].bytes > 0) check_caller_workspace(d, needs[index(d)]);
    if (lease != nullptr) {
      for (Device d : devices) {
        const Need& n = needs[index(d)];
        if (n.bytes == 0) continue;
        const Workspace& ws = options_.external_workspace.at(d);
        workspace_registry().claim(d, ws.pointer, n.bytes, this, program_);
        Lease::Slot& slot = lease->slots_[index(d)];
        slot.caller_workspace = true;  // set right after the claim so the lease's end unclaims it
        slot.base = ws.pointer;
      }
    }
    for (Device d : devices) {
      const Need& n = needs[index(d)];
      if (n.bytes == 0 || installed_[index(d)].present) continue;
      const Workspace& ws = options_.external_workspace.at(d);
      {
        std::lock_guard lock(state_mutex_);
        installed_[index(d)] = {ws.pointer, ws.bytes, n.alignment, {}, true};
        stats_.workspace_installs += 1;
      }
      emit_memory_event(MemoryEvent::Kind::install, d, ws.bytes, program_);
    }
  } else {
    for (Device d : devices) {
      const Need& n = needs[index(d)];
      if (n.bytes == 0) continue;
      const Installed& inst = installed_[index(d)];
      if (inst.present && inst.bytes >= n.bytes && aligned(inst.base, n.alignment)) continue;
      // Too small (or first use): the old block goes back before a new one is obtained, so that
      // at most one block per device is held at any time.
      free_installed(d);
      if (mode_ == TransientMemoryMode::persistent) {
        void* p = system_allocate(d, n.bytes, n.alignment, program_);
        std::lock_guard lock(state_mutex_);
        installed_[index(d)] = {p, n.bytes, n.alignment, {}, true};
      } else {
        install_from_allocator(d, n);
      }
    }
  }
  if (lease != nullptr) {
    for (Device d : devices) {
      const Need& n = needs[index(d)];
      if (n.bytes == 0) continue;
      Lease::Slot& slot = lease->slots_[index(d)];
      slot.base = installed_[index(d)].base;
      slot.bytes = n.bytes;
      slot.obtained = installed_[index(d)].bytes;
      slot.alignment = n.alignment;
      slot.source = Lease::Source::installed;
    }
  }
}

void TransientMemory::check_caller_workspace(Device d, const Need& n) const {
  auto it = options_.external_workspace.find(d);
  if (it == options_.external_workspace.end()) {
    std::string have;
    for (const auto& [device, ws] : options_.external_workspace)
      have += fmt::format("{}{}", have.empty() ? "" : ", ", to_string(device));
    throw WorkspaceError(fmt::format(
        "program '{}' needs {} bytes on device {}, but external_workspace has no buffer for device {} "
        "(it has buffers for: {})",
        program_, n.bytes, to_string(d), to_string(d), have.empty() ? "none" : have));
  }
  // The device runtime is asked about the memory until it is installed (once per workspace given:
  // set_external_workspace uninstalls the old one), not on every call.
  const MemoryCheck* check = installed_[index(d)].present ? nullptr : &memory_checks_[index(d)];
  std::string problem = workspace_problem(program_, d, n.bytes, n.alignment, it->second, "the external workspace", check);
  if (!problem.empty()) throw WorkspaceError(problem);
}

void TransientMemory::install_from_allocator(Device d, const Need& n) {
  const AllocationRequest request{n.bytes, d, n.alignment, program_};
  {
    std::lock_guard lock(state_mutex_);
    stats_.allocator_calls += 1;
  }
  emit_memory_event(MemoryEvent::Kind::allocator_call, d, n.bytes, program_);
  // Whatever the allocator throws reaches the caller unchanged; nothing has been installed.
  Workspace ws = options_.external_memory_allocator(request);
  // A rejected block is handed straight back; the rejection (or the failure to examine the block)
  // is the error to report.
  const auto hand_back = [&]() noexcept {
    if (!ws.release) return;
    try {
      ws.release();
    } catch (...) {
    }
    {
      std::lock_guard lock(state_mutex_);
      stats_.release_actions += 1;
    }
    emit_memory_event(MemoryEvent::Kind::release, d, ws.bytes, program_);
  };
  std::string problem;
  try {
    problem = workspace_problem(program_, d, n.bytes, n.alignment, ws, "the block returned by external_memory_allocator",
                                &memory_checks_[index(d)]);
  } catch (...) {
    hand_back();
    throw;
  }
  if (!problem.empty()) {
    hand_back();
    throw WorkspaceError(problem);
  }
  {
    std::lock_guard lock(state_mutex_);
    installed_[index(d)] = {ws.pointer, ws.bytes, n.alignment, std::move(ws.release), true};
    stats_.workspace_installs += 1;
  }
  emit_memory_event(MemoryEvent::Kind::install, d, ws.bytes, program_);
}

void TransientMemory::free_installed(Device d) noexcept {
  Installed old;
  {
    std::lock_guard lock(state_mutex_);
    old = std::exchange(installed_[index(d)], {});
  }
  if (!old.present) return;
  // Route events are counted by the caller's bracket (begin_call / prepare), not here.
  if (mode_ == TransientMemoryMode::persistent) {
    system_free(d, old.base, old.bytes, program_);
  } else if (old.release) {
    // A release action that throws cannot be reported from a destructor; the block is gone either way.
    try {
      old.release();
    } catch (...) {
    }
    {
      std::lock_guard lock(state_mutex_);
      stats_.release_actions += 1;
    }
    emit_memory_event(MemoryEvent::Kind::release, d, old.bytes, program_);
  }
}

void TransientMemory::end_lease(Lease& lease) noexcept {
  const RouteCounters before = thread_route_counters();
  for (Device d : devices) {
    Lease::Slot& slot = lease.slots_[index(d)];
    switch (slot.source) {
      case Lease::Source::scoped: system_free(d, slot.base, slot.obtained, program_); break;
      case Lease::Source::pool: host_pool().release({slot.base, slot.obtained, slot.alignment}, program_); break;
      case Lease::Source::stream: stream_free(d, slot.base, slot.obtained, lease.stream_, program_); break;
      case Lease::Source::installed:
      case Lease::Source::none: break;
    }
    if (slot.caller_workspace) workspace_registry().unclaim(d, slot.base, this);
  }
  add_route_delta(before, true);
  if (lease_bytes_ != decltype(lease_bytes_){} || lease_base_ != decltype(lease_base_){}) {
    std::lock_guard lock(state_mutex_);
    lease_bytes_ = {};
    lease_base_ = {};
  }
  release_instance();
}

std::size_t TransientMemory::held_bytes() const {
  std::size_t total = 0;
  for (Device d : devices) total += installed_[index(d)].bytes + lease_bytes_[index(d)];
  return total;
}

MemoryStats TransientMemory::stats() const {
  std::lock_guard lock(state_mutex_);
  MemoryStats s = stats_;
  s.calls = calls_.load(std::memory_order_relaxed);
  s.bytes_installed = held_bytes();
  return s;
}

std::size_t TransientMemory::installed_bytes(Device d) const {
  std::lock_guard lock(state_mutex_);
  return installed_[index(d)].bytes + lease_bytes_[index(d)];
}

const void* TransientMemory::installed_base(Device d) const {
  std::lock_guard lock(state_mutex_);
  return installed_[index(d)].present ? installed_[index(d)].base : lease_base_[index(d)];
}

}  // namespace fieldflow::runtime
