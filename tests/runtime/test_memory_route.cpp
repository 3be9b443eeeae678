// The one allocation route (style item 8): it counts, reports failures in one fixed format and
// notifies listeners; device memory only through a registered backend.
#include "runtime/memory_route.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <thread>

#include "fieldflow/device_errors.h"
#include "runtime/memory_test_support.h"

namespace fieldflow::runtime {
namespace {

using fieldflow::testing::EventLog;
using fieldflow::testing::FakeCudaBackend;
using K = MemoryEvent::Kind;

template <class F>
std::string error_text(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// A CPU allocation is aligned, usable, and raises one event each way with its label and size.
TEST(MemoryRoute, CpuAllocateAndFreeRaiseEvents) {
  EventLog log;
  const RouteCounters before = thread_route_counters();
  void* p = system_allocate(Device::cpu, 1000, 256, "prog/tmp");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 256, 0u);
  std::fill_n(static_cast<unsigned char*>(p), 1000, 0xAB);  // the whole range is writable
  system_free(Device::cpu, p, 1000, "prog/tmp");
  auto ev = log.events();
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].kind, K::system_allocate);
  EXPECT_EQ(ev[0].device, Device::cpu);
  EXPECT_EQ(ev[0].bytes, 1000u);
  EXPECT_EQ(ev[0].label, "prog/tmp");
  EXPECT_EQ(ev[1].kind, K::system_free);
  const RouteCounters d = thread_route_counters() - before;
  EXPECT_EQ(d[K::system_allocate], 1u);
  EXPECT_EQ(d[K::system_free], 1u);
}

// Alignment is at least 256 and at least what was asked.
TEST(MemoryRoute, AlignmentIsHonoured) {
  for (std::size_t a : {1u, 64u, 256u, 4096u}) {
    void* p = system_allocate(Device::cpu, 10, a, "align");
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % std::max<std::size_t>(a, 256), 0u) << a;
    system_free(Device::cpu, p, 10, "align");
  }
  EXPECT_THROW(system_allocate(Device::cpu, 10, 384, "bad"), InternalError);  // not a power of two
}

// Nothing is allocated and nothing reported for zero bytes.
TEST(MemoryRoute, ZeroBytesIsNothing) {
  EventLog log;
  EXPECT_EQ(system_allocate(Device::cpu, 0, 256, "none"), nullptr);
  system_free(Device::cpu, nullptr, 0, "none");
  EXPECT_EQ(log.size(), 0u);
}

// Failures use the one fixed format: size, device and label.
TEST(MemoryRoute, FailureFormat) {
  const std::size_t huge = std::numeric_limits<std::size_t>::max() - 10;
  EXPECT_THROW(system_allocate(Device::cpu, huge, 256, "prog/tmp"), AllocationError);
  const std::string msg = error_text([&] { system_allocate(Device::cpu, huge, 256, "prog/tmp"); });
  EXPECT_EQ(msg.rfind("cannot allocate " + std::to_string(huge) + " bytes on cpu for prog/tmp", 0), 0u) << msg;
}

// Without a registered backend a CUDA request fails with a clear reason.
TEST(MemoryRoute, CudaWithoutBackend) {
  EXPECT_FALSE(has_device_memory_backend(Device::cuda));
  EXPECT_TRUE(has_device_memory_backend(Device::cpu));
  const std::string msg = error_text([] { system_allocate(Device::cuda, 512, 256, "prog"); });
  EXPECT_EQ(msg.rfind("cannot allocate 512 bytes on cuda for prog", 0), 0u) << msg;
  EXPECT_NE(msg.find("no cuda backend"), std::string::npos) << msg;
  EXPECT_THROW(stream_allocate(Device::cuda, 512, 256, nullptr, UINT64_MAX, "prog"), AllocationError);
}

// A registered backend serves both the synchronous and the stream-ordered path.
TEST(MemoryRoute, CudaThroughBackend) {
  FakeCudaBackend cuda;
  EventLog log;
  EXPECT_TRUE(has_device_memory_backend(Device::cuda));
  void* p = system_allocate(Device::cuda, 4000, 256, "dev");
  system_free(Device::cuda, p, 4000, "dev");
  int stream_token = 0;
  void* q = stream_allocate(Device::cuda, 100, 256, &stream_token, 4096, "dev");
  EXPECT_EQ(cuda.last_stream.load(), &stream_token);
  EXPECT_EQ(cuda.last_release_threshold.load(), 4096u);
  stream_free(Device::cuda, q, 100, &stream_token, "dev");
  EXPECT_EQ(cuda.allocates, 1);
  EXPECT_EQ(cuda.frees, 1);
  EXPECT_EQ(cuda.async_allocates, 1);
  EXPECT_EQ(cuda.async_frees, 1);
  EXPECT_EQ(log.count(K::system_allocate), 1u);
  EXPECT_EQ(log.count(K::system_free), 1u);
  EXPECT_EQ(log.count(K::stream_allocate), 1u);
  EXPECT_EQ(log.count(K::stream_free), 1u);
  for (const MemoryEvent& e : log.events()) EXPECT_EQ(e.device, Device::cuda);
}

// A backend that fails (null, misaligned, throwing) is reported in the fixed format.
TEST(MemoryRoute, BackendFailuresUseFixedFormat) {
  int frees = 0;
  alignas(512) static std::byte storage[1024];
  DeviceMemoryBackend b;
  b.name = "stub";
  int behaviour = 0;
  b.allocate = [&](std::size_t, std::size_t) -> void* {
    if (behaviour == 0) return nullptr;
    if (behaviour == 1) return storage + 8;
    throw std::runtime_error("out of device memory");
  };
  b.free = [&](void*, std::size_t) { ++frees; };
  set_device_memory_backend(Device::cuda, b);
  for (behaviour = 0; behaviour < 3; ++behaviour) {
    const std::string msg = error_text([] { system_allocate(Device::cuda, 64, 256, "p"); });
    EXPECT_EQ(msg.rfind("cannot allocate 64 bytes on cuda for p", 0), 0u) << msg;
  }
  EXPECT_EQ(frees, 1);  // the misaligned block was given back
  behaviour = 2;
  EXPECT_NE(error_text([] { system_allocate(Device::cuda, 64, 256, "p"); }).find("out of device memory"),
            std::string::npos);
  set_device_memory_backend(Device::cuda, {});
  EXPECT_FALSE(has_device_memory_backend(Device::cuda));
}

// A device out of memory (cudaMalloc, the device pool) is its own error, in the fixed format and
// with the bytes that were required, on the synchronous and the stream-ordered path alike.
TEST(MemoryRoute, DeviceOutOfMemoryKeepsItsKindAndRequiredBytes) {
  DeviceMemoryBackend b;
  b.name = "stub";
  b.allocate = [](std::size_t bytes, std::size_t) -> void* {
    throw OutOfMemoryError("cudaMalloc: cudaErrorMemoryAllocation: out of memory", bytes);
  };
  b.free = [](void*, std::size_t) {};
  b.allocate_async = [](std::size_t bytes, void*, std::uint64_t) -> void* {
    throw OutOfMemoryError("cudaMallocFromPoolAsync: cudaErrorMemoryAllocation: out of memory", bytes);
  };
  b.free_async = [](void*, std::size_t, void*) {};
  set_device_memory_backend(Device::cuda, b);
  try {
    system_allocate(Device::cuda, 4096, 256, "prog");
    ADD_FAILURE() << "no error";
  } catch (const OutOfMemoryError& e) {
    EXPECT_EQ(e.required_bytes(), 4096u);
    EXPECT_EQ(std::string(e.what()).rfind("cannot allocate 4096 bytes on cuda for prog: cudaMalloc", 0), 0u) << e.what();
  }
  try {
    stream_allocate(Device::cuda, 512, 256, nullptr, UINT64_MAX, "prog");
    ADD_FAILURE() << "no error";
  } catch (const OutOfMemoryError& e) {
    EXPECT_EQ(e.required_bytes(), 512u);
    EXPECT_NE(std::string(e.what()).find("cudaMallocFromPoolAsync"), std::string::npos) << e.what();
  }
  set_device_memory_backend(Device::cuda, {});
}

// The CPU route is fixed: it cannot be swapped out from under the host pool.
TEST(MemoryRoute, CpuRouteCannotBeReplaced) {
  EXPECT_THROW(set_device_memory_backend(Device::cpu, {}), InternalError);
}

// A removed listener is not called again; ids are distinct.
TEST(MemoryRoute, RemovedListenerIsSilent) {
  int calls = 0;
  int id = add_memory_listener([&](const MemoryEvent&) { ++calls; });
  int other = add_memory_listener([](const MemoryEvent&) {});
  EXPECT_NE(id, other);
  void* p = system_allocate(Device::cpu, 10, 256, "l");
  system_free(Device::cpu, p, 10, "l");
  EXPECT_EQ(calls, 2);
  remove_memory_listener(id);
  remove_memory_listener(other);
  p = system_allocate(Device::cpu, 10, 256, "l");
  system_free(Device::cpu, p, 10, "l");
  EXPECT_EQ(calls, 2);
}

// A listener that throws does not break the route.
TEST(MemoryRoute, ThrowingListenerIsContained) {
  int id = add_memory_listener([](const MemoryEvent&) { throw std::runtime_error("observer bug"); });
  void* p = nullptr;
  EXPECT_NO_THROW(p = system_allocate(Device::cpu, 10, 256, "l"));
  system_free(Device::cpu, p, 10, "l");
  remove_memory_listener(id);
}

// Per-thread counters see only their own thread; listeners see every thread.
TEST(MemoryRoute, CountersArePerThreadListenersGlobal) {
  EventLog log;
  const RouteCounters before = thread_route_counters();
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      const RouteCounters mine = thread_route_counters();
      for (int i = 0; i < 100; ++i) {
        void* p = system_allocate(Device::cpu, 64 + i, 256, "t");
        system_free(Device::cpu, p, 64 + i, "t");
      }
      const RouteCounters d = thread_route_counters() - mine;
      if (d[K::system_allocate] != 100 || d[K::system_free] != 100) ++mismatches;
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatches, 0);
  const RouteCounters d = thread_route_counters() - before;
  EXPECT_EQ(d[K::system_allocate], 0u);
  EXPECT_EQ(log.count(K::system_allocate), 400u);
  EXPECT_EQ(log.count(K::system_free), 400u);
}

}  // namespace
}  // namespace fieldflow::runtime
