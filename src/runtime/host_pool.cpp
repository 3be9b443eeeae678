// The process-wide caching host pool; see host_pool.h for what it guarantees. Events (hit, miss,
// release) are raised outside the pool's lock so that a listener may inspect the pool.
#include "runtime/host_pool.h"

#include <bit>
#include <exception>

#include "fieldflow/errors.h"
#include "fieldflow/memory.h"
#include "runtime/memory_route.h"

namespace fieldflow::runtime {

namespace {
constexpr std::size_t fine_step = 256;
constexpr std::size_t fine_limit = 64 * 1024;
}  // namespace

std::size_t HostPool::size_class(std::size_t bytes) {
  if (bytes <= fine_limit) return round_up_bytes(Device::cpu, bytes, fine_step, "the host pool");
  // Quarter steps of the enclosing power of two bound the waste by 25% with few classes.
  const std::size_t step = std::bit_floor(bytes) / 4;
  return round_up_bytes(Device::cpu, bytes, step, "the host pool");
}

HostPool::Block HostPool::acquire(std::size_t bytes, std::size_t alignment, std::string_view label) {
  if (bytes == 0) return {};
  const std::size_t align = effective_alignment(alignment);
  const std::size_t cls = size_class(bytes);
  Block block{nullptr, cls, align};
  {
    std::lock_guard lock(mutex_);
    FreeList& list = classes_[{align, cls}];
    if (!list.blocks.empty()) {
      block.pointer = list.blocks.back();
      list.blocks.pop_back();
      stats_.cached_blocks -= 1;
      stats_.cached_bytes -= cls;
    } else {
      // Reserve the free-list slot the new block will return to before allocating it, so that
      // release() never needs memory and a failure here leaves nothing behind.
      list.blocks.reserve(list.total + 1);
      list.total += 1;
    }
    stats_.in_use_blocks += 1;
    stats_.in_use_bytes += cls;
  }
  if (block.pointer != nullptr) {
    emit_memory_event(MemoryEvent::Kind::pool_hit, Device::cpu, cls, label);
    return block;
  }
  emit_memory_event(MemoryEvent::Kind::pool_miss, Device::cpu, cls, label);
  try {
    block.pointer = system_allocate(Device::cpu, cls, align, label);
  } catch (...) {
    std::lock_guard lock(mutex_);
    classes_[{align, cls}].total -= 1;
    stats_.in_use_blocks -= 1;
    stats_.in_use_bytes -= cls;
    throw;
  }
  return block;
}

void HostPool::release(const Block& block, std::string_view label) noexcept {
  if (block.pointer == nullptr) return;
  {
    std::lock_guard lock(mutex_);
    auto it = classes_.find({block.alignment, block.bytes});
    // The slot was reserved in acquire(); a block this pool did not hand out is a bug of the caller.
    if (it == classes_.end() || it->second.blocks.size() >= it->second.blocks.capacity()) std::terminate();
    it->second.blocks.push_back(block.pointer);
    stats_.cached_blocks += 1;
    stats_.cached_bytes += block.bytes;
    stats_.in_use_blocks -= 1;
    stats_.in_use_bytes -= block.bytes;
  }
  emit_memory_event(MemoryEvent::Kind::pool_release, Device::cpu, block.bytes, label);
}

void HostPool::trim() noexcept {
  // Take the cached blocks out under the lock, free them after it: freeing raises events.
  std::vector<Block> to_free;
  {
    std::lock_guard lock(mutex_);
    std::size_t n = 0;
    for (auto& [key, list] : classes_) n += list.blocks.size();
    try {
      to_free.reserve(n);
    } catch (...) {
      return;  // out of memory while trimming: keep the cache rather than lose track of it
    }
    for (auto& [key, list] : classes_) {
      for (void* p : list.blocks) to_free.push_back({p, key.second, key.first});
      list.total -= list.blocks.size();
      list.blocks.clear();  // keeps its capacity: the slots of blocks in use stay reserved
    }
    stats_.cached_blocks = 0;
    stats_.cached_bytes = 0;
  }
  for (const Block& b : to_free) system_free(Device::cpu, b.pointer, b.bytes, "the host pool (trim)");
}

HostPool::Stats HostPool::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

HostPool& host_pool() {
  static HostPool* pool = new HostPool;  // never destroyed, see host_pool.h
  return *pool;
}

}  // namespace fieldflow::runtime

namespace fieldflow {
void trim_host_pool() { runtime::host_pool().trim(); }
}  // namespace fieldflow
