#pragma once
// The one allocation route for transient memory (style item 8). Every byte fieldflow obtains for
// transients, on any device and in any mode, is allocated and freed here; the host pool and
// TransientMemory sit on top. The route guarantees: (1) failures raise AllocationError in one
// fixed format, "cannot allocate N bytes on <device> for <label>" (optionally ": reason");
// (2) every event is counted in this thread's counters and delivered to the listeners;
// (3) returned pointers are aligned to at least max(alignment, 256). CPU memory comes from
// std::aligned_alloc; CUDA memory only from a registered DeviceMemoryBackend, so this library
// builds and is testable without a CUDA toolkit.
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "fieldflow/memory.h"

namespace fieldflow::runtime {

// What a device runtime plugs into the route. allocate/free are the synchronous path (cudaMalloc /
// cudaFree: scoped and persistent modes); allocate_async/free_async are stream-ordered from a pool
// the backend owns (cudaMallocAsync / cudaFreeAsync on a fieldflow-created pool: pool mode), the
// one for `release_threshold` (the bytes it keeps cached; programs asking the same share a pool).
// An allocate function reports failure by returning nullptr or throwing; free functions must not
// throw.
struct DeviceMemoryBackend {
  std::string name;  // e.g. "CUDA runtime 12.4", used in messages
  std::function<void*(std::size_t bytes, std::size_t alignment)> allocate;
  std::function<void(void* pointer, std::size_t bytes)> free;
  std::function<void*(std::size_t bytes, void* stream, std::uint64_t release_threshold)> allocate_async;
  std::function<void(void* pointer, std::size_t bytes, void* stream)> free_async;
};

// Registers (or, with an empty backend, unregisters) the backend of a non-CPU device. Memory still
// outstanding from a previous backend is freed through whichever backend is registered when it is
// freed, so swap backends only while nothing is allocated. The CPU route cannot be replaced.
void set_device_memory_backend(Device device, DeviceMemoryBackend backend);
bool has_device_memory_backend(Device device);

// Synchronous allocation. bytes == 0 returns nullptr without an event.
void* system_allocate(Device device, std::size_t bytes, std::size_t alignment, std::string_view label);
// `bytes` and `device` must be those of the matching system_allocate.
void system_free(Device device, void* pointer, std::size_t bytes, std::string_view label) noexcept;

// Stream-ordered allocation for pool mode on devices; there is no CPU variant (the host pool is
// the CPU's pool). `stream` and `release_threshold` (which of the backend's pools) are passed
// through to the backend untouched.
void* stream_allocate(Device device, std::size_t bytes, std::size_t alignment, void* stream,
                      std::uint64_t release_threshold, std::string_view label);
void stream_free(Device device, void* pointer, std::size_t bytes, void* stream,
                 std::string_view label) noexcept;

// Counts the event in this thread's counters and delivers it to the listeners. Used by the layers
// above for events that are not allocations (pool hits, allocator calls, installs, releases).
void emit_memory_event(MemoryEvent::Kind kind, Device device, std::size_t bytes,
                       std::string_view label) noexcept;

// Running totals of the events raised on the calling thread, by kind. A caller brackets an
// operation with two reads to learn what the operation itself caused, unaffected by other threads.
struct RouteCounters {
  static constexpr std::size_t kinds = static_cast<std::size_t>(MemoryEvent::Kind::release) + 1;
  std::array<std::uint64_t, kinds> by_kind{};
  std::uint64_t operator[](MemoryEvent::Kind k) const { return by_kind[static_cast<std::size_t>(k)]; }
  RouteCounters operator-(const RouteCounters& earlier) const;
};
RouteCounters thread_route_counters() noexcept;

// The fixed failure format; `reason` is appended after ": " when not empty. A backend that throws
// OutOfMemoryError (a device out of memory) gets one in this format, keeping the required bytes.
std::string allocation_failure_message(Device device, std::size_t bytes, std::string_view label,
                                       std::string_view reason = {});
[[noreturn]] void throw_allocation_failure(Device device, std::size_t bytes, std::string_view label,
                                           std::string_view reason = {});

// Rounds up to a multiple of `alignment` (a power of two); throws AllocationError on overflow.
std::size_t round_up_bytes(Device device, std::size_t bytes, std::size_t alignment,
                           std::string_view label);
// max(alignment, transient_alignment); throws InternalError unless it is a power of two.
std::size_t effective_alignment(std::size_t alignment);

}  // namespace fieldflow::runtime
