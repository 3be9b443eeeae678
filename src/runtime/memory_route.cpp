// The one allocation route: see memory_route.h for what it guarantees. The state here (listeners,
// backends) is a deliberately leaked singleton so that frees during static destruction (the host
// pool trimming at exit, a global program instance) always find it alive.
#include "runtime/memory_route.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>

#include "fieldflow/device_errors.h"

namespace fieldflow::runtime {
namespace {

constexpr std::size_t device_count = 2;

struct RouteState {
  // Listeners: notification holds the lock shared, (un)registration exclusively, which is what
  // makes "after remove_memory_listener returns, it is never called again" hold.
  std::shared_mutex listeners_mutex;
  std::map<int, MemoryListener> listeners;
  int next_listener_id = 1;
  std::atomic<std::size_t> listener_count{0};  // lets the hot path skip building an event

  // Backends are swapped rarely and read on every device allocation: readers copy a shared_ptr so
  // a backend stays alive while one of its functions runs even if it is unregistered meanwhile.
  std::mutex backends_mutex;
  std::array<std::shared_ptr<const DeviceMemoryBackend>, device_count> backends;
};

RouteState& state() {
  static RouteState* s = new RouteState;  // never destroyed, see the file comment
  return *s;
}

thread_local RouteCounters this_thread_counters;

std::size_t index_of(Device d) { return static_cast<std::size_t>(d); }

std::shared_ptr<const DeviceMemoryBackend> backend_of(Device d) {
  RouteState& s = state();
  std::lock_guard lock(s.backends_mutex);
  return s.backends[index_of(d)];
}

[[noreturn]] void throw_no_backend(Device device, std::size_t bytes, std::string_view label) {
  throw_allocation_failure(
      device, bytes, label,
      fmt::format("no {} backend is built into this fieldflow (common causes: the library was "
                  "configured without CUDA, or the device runtime failed to load)",
                  to_string(device)));
}

}  // namespace

RouteCounters RouteCounters::operator-(const RouteCounters& earlier) const {
  RouteCounters d;
  for (std::size_t i = 0; i < kinds; ++i) d.by_kind[i] = by_kind[i] - earlier.by_kind[i];
  return d;
}

RouteCounters thread_route_counters() noexcept { return this_thread_counters; }

void emit_memory_event(MemoryEvent::Kind kind, Device device, std::size_t bytes,
                       std::string_view label) noexcept {
  ++this_thread_counters.by_kind[static_cast<std::size_t>(kind)];
  RouteState& s = state();
  if (s.listener_count.load(std::memory_order_acquire) == 0) return;
  try {
    MemoryEvent event{kind, device, bytes, std::string(label)};
    std::shared_lock lock(s.listeners_mutex);
    for (auto& [id, listener] : s.listeners) {
      // A throwing observer must not turn a free into a leak or a terminate: its error is dropped.
      try {
        listener(event);
      } catch (...) {
      }
    }
  } catch (...) {
    // Building the event copies the label; if even that fails, observers miss one event.
  }
}

void set_device_memory_backend(Device device, DeviceMemoryBackend backend) {
  FIELDFLOW_ASSERT(device != Device::cpu, "the CPU allocation route is std::aligned_alloc and cannot be replaced");
  std::shared_ptr<const DeviceMemoryBackend> installed;
  if (backend.allocate || backend.allocate_async) {
    FIELDFLOW_ASSERT(static_cast<bool>(backend.allocate) == static_cast<bool>(backend.free) &&
                         static_cast<bool>(backend.allocate_async) == static_cast<bool>(backend.free_async),
                     "a device memory backend must provide each allocate function with its free");
    installed = std::make_shared<const DeviceMemoryBackend>(std::move(backend));
  }
  RouteState& s = state();
  std::lock_guard lock(s.backends_mutex);
  s.backends[index_of(device)] = std::move(installed);
}

bool has_device_memory_backend(Device device) {
  return device == Device::cpu || backend_of(device) != nullptr;
}

std::string allocation_failure_message(Device device, std::size_t bytes, std::string_view label,
                                       std::string_view reason) {
  std::string message = fmt::format("cannot allocate {} bytes on {} for {}", bytes, to_string(device), label);
  if (!reason.empty()) message += fmt::format(": {}", reason);
  return message;
}

void throw_allocation_failure(Device device, std::size_t bytes, std::string_view label,
                              std::string_view reason) {
  throw AllocationError(allocation_failure_message(device, bytes, label, reason));
}

std::size_t effective_alignment(std::size_t alignment) {
  std::size_t a = std::max(alignment, transient_alignment);
  FIELDFLOW_ASSERT(std::has_single_bit(a), fmt::format("alignment {} is not a power of two", alignment));
  return a;
}

std::size_t round_up_bytes(Device device, std::size_t bytes, std::size_t alignment, std::string_view label) {
  if (bytes > std::numeric_limits<std::size_t>::max() - (alignment - 1))
    throw_allocation_failure(device, bytes, label, "the size overflows when rounded up to the alignment");
  return (bytes + alignment - 1) & ~(alignment - 1);
}

void* system_allocate(Device device, std::size_t bytes, std::size_t alignment, std::string_view label) {
  if (bytes == 0) return nullptr;
  const std::size_t align = effective_alignment(alignment);
  void* p = nullptr;
  if (device == Device::cpu) {
    // aligned_alloc requires the size to be a multiple of the alignment.
    p = std::aligned_alloc(align, round_up_bytes(device, bytes, align, label));
    if (p == nullptr) throw_allocation_failure(device, bytes, label, "the host heap is exhausted");
  } else {
    auto backend = backend_of(device);
    if (!backend || !backend->allocate) throw_no_backend(device, bytes, label);
    try {
      p = backend->allocate(bytes, align);
    } catch (const OutOfMemoryError& e) {
      throw OutOfMemoryError(allocation_failure_message(device, bytes, label, e.what()), bytes);
    } catch (const std::exception& e) {
      throw_allocation_failure(device, bytes, label, e.what());
    }
    if (p == nullptr) throw_allocation_failure(device, bytes, label, backend->name + " returned no memory");
    if (reinterpret_cast<std::uintptr_t>(p) % align != 0) {
      backend->free(p, bytes);
      throw_allocation_failure(device, bytes, label,
                               fmt::format("{} returned a pointer not aligned to {} bytes", backend->name, align));
    }
  }
  emit_memory_event(MemoryEvent::Kind::system_allocate, device, bytes, label);
  return p;
}

void system_free(Device device, void* pointer, std::size_t bytes, std::string_view label) noexcept {
  if (pointer == nullptr) return;
  if (device == Device::cpu) {
    std::free(pointer);
  } else {
    // Without a backend the memory cannot be returned; leaking beats crashing inside a destructor.
    auto backend = backend_of(device);
    if (backend && backend->free) backend->free(pointer, bytes);
  }
  emit_memory_event(MemoryEvent::Kind::system_free, device, bytes, label);
}

void* stream_allocate(Device device, std::size_t bytes, std::size_t alignment, void* stream,
                      std::uint64_t release_threshold, std::string_view label) {
  if (bytes == 0) return nullptr;
  FIELDFLOW_ASSERT(device != Device::cpu, "stream-ordered allocation is for devices; the CPU uses the host pool");
  const std::size_t align = effective_alignment(alignment);
  auto backend = backend_of(device);
  if (!backend || !backend->allocate_async) throw_no_backend(device, bytes, label);
  void* p = nullptr;
  try {
    p = backend->allocate_async(bytes, stream, release_threshold);
  } catch (const OutOfMemoryError& e) {
    throw OutOfMemoryError(allocation_failure_message(device, bytes, label, e.what()), bytes);
  } catch (const std::exception& e) {
    throw_allocation_failure(device, bytes, label, e.what());
  }
  if (p == nullptr) throw_allocation_failure(device, bytes, label, backend->name + " returned no memory");
  if (reinterpret_cast<std::uintptr_t>(p) % align != 0) {
    backend->free_async(p, bytes, stream);
    throw_allocation_failure(device, bytes, label,
                             fmt::format("{} returned a pointer not aligned to {} bytes", backend->name, align));
  }
  emit_memory_event(MemoryEvent::Kind::stream_allocate, device, bytes, label);
  return p;
}

void stream_free(Device device, void* pointer, std::size_t bytes, void* stream, std::string_view label) noexcept {
  if (pointer == nullptr) return;
  auto backend = backend_of(device);
  if (backend && backend->free_async) backend->free_async(pointer, bytes, stream);
  emit_memory_event(MemoryEvent::Kind::stream_free, device, bytes, label);
}

}  // namespace fieldflow::runtime

// The public half of the route (include/fieldflow/memory.h).
namespace fieldflow {

int add_memory_listener(MemoryListener listener) {
  runtime::RouteState& s = runtime::state();
  std::unique_lock lock(s.listeners_mutex);
  int id = s.next_listener_id++;
  s.listeners.emplace(id, std::move(listener));
  s.listener_count.store(s.listeners.size(), std::memory_order_release);
  return id;
}

void remove_memory_listener(int id) {
  runtime::RouteState& s = runtime::state();
  std::unique_lock lock(s.listeners_mutex);
  s.listeners.erase(id);
  s.listener_count.store(s.listeners.size(), std::memory_order_release);
}

}  // namespace fieldflow
