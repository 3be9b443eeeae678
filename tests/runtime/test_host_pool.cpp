// The caching host pool behind pool mode: size classes, reuse, and no system allocation once warm.
#include "runtime/host_pool.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <thread>

#include "runtime/memory_test_support.h"

namespace fieldflow::runtime {
namespace {

using fieldflow::testing::EventLog;
using K = MemoryEvent::Kind;

// 256-byte classes up to 64 KiB, then quarter powers of two: never smaller, at most 25% more.
TEST(HostPool, SizeClasses) {
  EXPECT_EQ(HostPool::size_class(1), 256u);
  EXPECT_EQ(HostPool::size_class(256), 256u);
  EXPECT_EQ(HostPool::size_class(257), 512u);
  EXPECT_EQ(HostPool::size_class(65536), 65536u);
  EXPECT_EQ(HostPool::size_class(65537), 81920u);
  EXPECT_EQ(HostPool::size_class(100000), 114688u);
  EXPECT_EQ(HostPool::size_class(1u << 20), 1u << 20);
  EXPECT_EQ(HostPool::size_class((1u << 20) + 1), (1u << 20) + (1u << 18));
  for (std::size_t b = 1; b < (std::size_t(1) << 32); b = b * 3 + 7) {
    const std::size_t c = HostPool::size_class(b);
    EXPECT_GE(c, b);
    EXPECT_EQ(c % 256, 0u);
    if (b > 65536) {
      EXPECT_LE(c, b + b / 4) << b;
    }
  }
}

// A released block is served again to the next request of its class, with no system allocation.
TEST(HostPool, ReusesReleasedBlocks) {
  HostPool& pool = host_pool();
  pool.trim();
  EventLog log;
  HostPool::Block a = pool.acquire(5000, 256, "t");
  ASSERT_NE(a.pointer, nullptr);
  EXPECT_EQ(a.bytes, HostPool::size_class(5000));
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a.pointer) % 256, 0u);
  EXPECT_EQ(log.count(K::pool_miss), 1u);
  EXPECT_EQ(log.count(K::system_allocate), 1u);
  pool.release(a, "t");
  log.clear();
  for (int i = 0; i < 100; ++i) {
    HostPool::Block b = pool.acquire(4900 + i, 256, "t");  // same class as 5000
    EXPECT_EQ(b.pointer, a.pointer);
    pool.release(b, "t");
  }
  EXPECT_EQ(log.count(K::system_allocate), 0u);
  EXPECT_EQ(log.count(K::pool_hit), 100u);
  EXPECT_EQ(log.count(K::pool_release), 100u);
  pool.trim();
}

// Blocks in use at the same time are distinct; the cache grows only to the peak in use.
TEST(HostPool, ConcurrentBlocksAreDistinct) {
  HostPool& pool = host_pool();
  pool.trim();
  EventLog log;
  for (int round = 0; round < 3; ++round) {
    HostPool::Block a = pool.acquire(1024, 256, "t");
    HostPool::Block b = pool.acquire(1024, 256, "t");
    EXPECT_NE(a.pointer, b.pointer);
    pool.release(a, "t");
    pool.release(b, "t");
  }
  EXPECT_EQ(log.count(K::system_allocate), 2u);
  EXPECT_EQ(pool.stats().cached_blocks, 2u);
  pool.trim();
}

// trim() gives every cached block back to the system and leaves blocks in use alone.
TEST(HostPool, TrimFreesCachedBlocks) {
  HostPool& pool = host_pool();
  pool.trim();
  HostPool::Block keep = pool.acquire(300, 256, "t");
  HostPool::Block x = pool.acquire(70000, 256, "t");
  HostPool::Block y = pool.acquire(2000, 4096, "t");
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(y.pointer) % 4096, 0u);
  pool.release(x, "t");
  pool.release(y, "t");
  EXPECT_EQ(pool.stats().cached_blocks, 2u);
  EXPECT_EQ(pool.stats().cached_bytes, x.bytes + y.bytes);
  EXPECT_EQ(pool.stats().in_use_blocks, 1u);
  EventLog log;
  trim_host_pool();
  EXPECT_EQ(log.count(K::system_free), 2u);
  EXPECT_EQ(pool.stats().cached_blocks, 0u);
  EXPECT_EQ(pool.stats().in_use_bytes, keep.bytes);
  pool.release(keep, "t");  // a block acquired before the trim still returns fine
  EXPECT_EQ(pool.stats().cached_blocks, 1u);
  pool.trim();
}

// Zero bytes: an empty block, no event.
TEST(HostPool, ZeroBytes) {
  EventLog log;
  HostPool::Block b = host_pool().acquire(0, 256, "t");
  EXPECT_EQ(b.pointer, nullptr);
  host_pool().release(b, "t");
  EXPECT_EQ(log.size(), 0u);
}

// Many threads at once: every block handed out is exclusively theirs, and all come back.
TEST(HostPool, ThreadSafe) {
  HostPool& pool = host_pool();
  pool.trim();
  std::atomic<int> corrupt{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 500; ++i) {
        HostPool::Block b = pool.acquire(256 * (1 + i % 8), 256, "mt");
        auto* bytes = static_cast<unsigned char*>(b.pointer);
        std::fill_n(bytes, b.bytes, static_cast<unsigned char>(t));
        std::this_thread::yield();
        for (std::size_t k = 0; k < b.bytes; ++k)
          if (bytes[k] != t) {
            ++corrupt;
            break;
          }
        pool.release(b, "mt");
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(corrupt, 0);
  EXPECT_EQ(pool.stats().in_use_blocks, 0u);
  EXPECT_LE(pool.stats().cached_blocks, 4u * 8u);  // at most one per thread and class
  pool.trim();
}

}  // namespace
}  // namespace fieldflow::runtime
