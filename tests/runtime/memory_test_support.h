#pragma once
// Test helpers for the transient-memory tests: an event recorder on the allocation route, a fake
// CUDA backend (host memory standing in for device memory, every call counted) so the device paths
// are exercised without a GPU, and 256-byte aligned host buffers for caller-owned workspaces.
#include <atomic>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "fieldflow/memory.h"
#include "runtime/memory_route.h"

namespace fieldflow::testing {

// Records every event of the route while alive.
class EventLog {
 public:
  EventLog() {
    id_ = add_memory_listener([this](const MemoryEvent& e) {
      std::lock_guard lock(mutex_);
      events_.push_back(e);
    });
  }
  ~EventLog() { remove_memory_listener(id_); }
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;

  std::vector<MemoryEvent> events() const {
    std::lock_guard lock(mutex_);
    return events_;
  }
  std::size_t count(MemoryEvent::Kind k) const {
    std::lock_guard lock(mutex_);
    std::size_t n = 0;
    for (const MemoryEvent& e : events_) n += e.kind == k;
    return n;
  }
  std::size_t size() const {
    std::lock_guard lock(mutex_);
    return events_.size();
  }
  void clear() {
    std::lock_guard lock(mutex_);
    events_.clear();
  }

 private:
  int id_ = 0;
  mutable std::mutex mutex_;
  std::vector<MemoryEvent> events_;
};

// Registers a counting stand-in for the CUDA runtime while alive. `on_allocate` / `on_free` see
// every block it hands out and takes back (an emulated runtime records them as device memory).
class FakeCudaBackend {
 public:
  std::atomic<int> allocates{0}, frees{0}, async_allocates{0}, async_frees{0};
  std::atomic<void*> last_stream{nullptr};
  std::atomic<std::uint64_t> last_release_threshold{0};  // which pool the last stream allocation asked for

  using OnAllocate = std::function<void(void* p, std::size_t bytes)>;
  using OnFree = std::function<void(void* p)>;
  explicit FakeCudaBackend(OnAllocate on_allocate = {}, OnFree on_free = {})
      : on_allocate_(std::move(on_allocate)), on_free_(std::move(on_free)) {
    runtime::DeviceMemoryBackend b;
    b.name = "fake CUDA";
    b.allocate = [this](std::size_t bytes, std::size_t alignment) -> void* {
      ++allocates;
      return handed_out(std::aligned_alloc(alignment, (bytes + alignment - 1) / alignment * alignment), bytes);
    };
    b.free = [this](void* p, std::size_t) {
      ++frees;
      taken_back(p);
    };
    b.allocate_async = [this](std::size_t bytes, void* stream, std::uint64_t release_threshold) -> void* {
      ++async_allocates;
      last_stream = stream;
      last_release_threshold = release_threshold;
      return handed_out(std::aligned_alloc(256, (bytes + 255) / 256 * 256), bytes);
    };
    b.free_async = [this](void* p, std::size_t, void* stream) {
      ++async_frees;
      last_stream = stream;
      taken_back(p);
    };
    runtime::set_device_memory_backend(Device::cuda, std::move(b));
  }
  ~FakeCudaBackend() { runtime::set_device_memory_backend(Device::cuda, {}); }
  FakeCudaBackend(const FakeCudaBackend&) = delete;
  FakeCudaBackend& operator=(const FakeCudaBackend&) = delete;

 private:
  void* handed_out(void* p, std::size_t bytes) {
    if (on_allocate_) on_allocate_(p, bytes);
    return p;
  }
  void taken_back(void* p) {
    if (on_free_) on_free_(p);
    std::free(p);
  }
  OnAllocate on_allocate_;
  OnFree on_free_;
};

// A host buffer whose base is aligned to `alignment`.
struct AlignedBuffer {
  explicit AlignedBuffer(std::size_t bytes, std::size_t alignment = 256)
      : bytes(bytes), data(static_cast<std::byte*>(std::aligned_alloc(alignment, (bytes + alignment - 1) / alignment * alignment))) {}
  ~AlignedBuffer() { std::free(data); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  Workspace workspace(Device d = Device::cpu) const { return Workspace{data, bytes, d, {}}; }

  std::size_t bytes;
  std::byte* data;
};

inline std::vector<WorkspaceRequirement> on_cpu(std::size_t bytes) { return {{Device::cpu, bytes, 256}}; }
inline std::vector<WorkspaceRequirement> on_cuda(std::size_t bytes) { return {{Device::cuda, bytes, 256}}; }

}  // namespace fieldflow::testing
