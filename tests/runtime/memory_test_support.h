#pragma once
// Test helpers for the transient-memory tests: an event recorder on the allocation route, a fake
// CUDA backend (host memory standing in for device memory, every call counted) so the device paths
// are exercised without a GPU, and 256-byte aligned host buffers for caller-owned workspaces.
#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
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

// Registers a counting stand-in for the CUDA runtime while alive.
class FakeCudaBackend {
 public:
  std::atomic<int> allocates{0}, frees{0}, async_allocates{0}, async_frees{0};
  std::atomic<void*> last_stream{nullptr};

  FakeCudaBackend() {
    runtime::DeviceMemoryBackend b;
    b.name = "fake CUDA";
    b.allocate = [this](std::size_t bytes, std::size_t alignment) -> void* {
      ++allocates;
      return std::aligned_alloc(alignment, (bytes + alignment - 1) / alignment * alignment);
    };
    b.free = [this](void* p, std::size_t) {
      ++frees;
      std::free(p);
    };
    b.allocate_async = [this](std::size_t bytes, void* stream) -> void* {
      ++async_allocates;
      last_stream = stream;
      return std::aligned_alloc(256, (bytes + 255) / 256 * 256);
    };
    b.free_async = [this](void* p, std::size_t, void* stream) {
      ++async_frees;
      last_stream = stream;
      std::free(p);
    };
    runtime::set_device_memory_backend(Device::cuda, std::move(b));
  }
  ~FakeCudaBackend() { runtime::set_device_memory_backend(Device::cuda, {}); }
  FakeCudaBackend(const FakeCudaBackend&) = delete;
  FakeCudaBackend& operator=(const FakeCudaBackend&) = delete;
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
