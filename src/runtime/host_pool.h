#pragma once
// The caching host pool behind pool mode on the CPU: one per process, owned by fieldflow, safe to
// use from any thread. Requests are rounded up to size classes (256-byte steps up to 64 KiB, then
// quarter-power-of-two steps, so at most 25% is wasted) and every class keeps a free list. A block
// is obtained from the system (through the allocation route) only when its class has nothing
// cached, so once the classes a program uses are warm, acquire/release make no system allocation
// and no heap allocation at all. Cached memory is returned to the system only by trim().
#include <cstddef>
#include <map>
#include <mutex>
#include <string_view>
#include <utility>
#include <vector>

namespace fieldflow::runtime {

class HostPool {
 public:
  // A block as the pool hands it out: `bytes` is the size class, at least what was asked for.
  struct Block {
    void* pointer = nullptr;
    std::size_t bytes = 0;
    std::size_t alignment = 0;
  };

  struct Stats {
    std::size_t cached_blocks = 0;
    std::size_t cached_bytes = 0;
    std::size_t in_use_blocks = 0;
    std::size_t in_use_bytes = 0;
  };

  // bytes == 0 gives an empty block without touching the pool. Throws AllocationError.
  Block acquire(std::size_t bytes, std::size_t alignment, std::string_view label);
  // Takes back a block from acquire (an empty block is ignored). Never allocates.
  void release(const Block& block, std::string_view label) noexcept;
  // Frees every cached block; blocks in use are unaffected.
  void trim() noexcept;
  Stats stats() const;

  static std::size_t size_class(std::size_t bytes);

 private:
  struct FreeList {
    std::vector<void*> blocks;  // capacity kept >= total so release never reallocates
    std::size_t total = 0;      // blocks of this class in existence (cached + in use)
  };
  using Key = std::pair<std::size_t, std::size_t>;  // (alignment, size class)

  mutable std::mutex mutex_;
  std::map<Key, FreeList> classes_;
  Stats stats_;
};

// The process-wide pool. Never destroyed, so leases that end during static destruction are safe.
HostPool& host_pool();

}  // namespace fieldflow::runtime
