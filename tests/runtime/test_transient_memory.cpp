// TransientMemory: each mode obtains memory the way design §3 promises, checked through the
// events of the allocation route and the instance's statistics (style item 9), plus the
// acceptance cases of §3 that live at this layer.
#include "runtime/transient_memory.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <optional>
#include <thread>

#include "fieldflow/errors.h"
#include "runtime/host_pool.h"
#include "runtime/memory_test_support.h"

namespace fieldflow::runtime {
namespace {

using fieldflow::testing::AlignedBuffer;
using fieldflow::testing::EventLog;
using fieldflow::testing::FakeCudaBackend;
using fieldflow::testing::on_cpu;
using fieldflow::testing::on_cuda;
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

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

MemoryOptions mode(TransientMemoryMode m) {
  MemoryOptions o;
  o.mode = m;
  return o;
}

// An allocator backed by host memory that records every request and every release.
struct RecordingAllocator {
  struct Shared {
    std::vector<AllocationRequest> requests;
    std::vector<std::string> log;  // "request N" / "release N", in order
    int live = 0;
    int releases = 0;
  };
  std::shared_ptr<Shared> s = std::make_shared<Shared>();

  ExternalMemoryAllocator allocator() const {
    auto shared = s;
    return [shared](const AllocationRequest& r) {
      shared->requests.push_back(r);
      shared->log.push_back("request " + std::to_string(r.bytes));
      void* p = std::aligned_alloc(r.alignment, (r.bytes + r.alignment - 1) / r.alignment * r.alignment);
      ++shared->live;
      const std::size_t bytes = r.bytes;
      return Workspace{p, r.bytes, r.device, [shared, p, bytes] {
                         shared->log.push_back("release " + std::to_string(bytes));
                         ++shared->releases;
                         --shared->live;
                         std::free(p);
                       }};
    };
  }
  MemoryOptions options() const {
    MemoryOptions o;
    o.external_memory_allocator = allocator();
    return o;
  }
};

constexpr TransientMemoryMode all_modes[] = {TransientMemoryMode::scoped, TransientMemoryMode::persistent,
                                             TransientMemoryMode::pool, TransientMemoryMode::external};

// ---- construction ------------------------------------------------------------------------------

// Option mistakes surface when the instance is built, before any call.
TEST(TransientMemory, InvalidOptionsRejectedAtConstruction) {
  EXPECT_THROW(TransientMemory("p", mode(TransientMemoryMode::external)), OptionError);
  MemoryOptions o = mode(TransientMemoryMode::pool);
  o.external_memory_allocator = RecordingAllocator{}.allocator();
  EXPECT_THROW(TransientMemory("p", o), OptionError);
  EXPECT_EQ(TransientMemory("p", MemoryOptions{}).mode(), TransientMemoryMode::pool);
}

// ---- zero requirements -------------------------------------------------------------------------

// No transients: every mode runs, obtains nothing and asks the host nothing.
TEST(TransientMemory, ZeroRequirementAsksNothing) {
  RecordingAllocator alloc;
  AlignedBuffer buffer(1024);
  std::vector<MemoryOptions> configs = {mode(TransientMemoryMode::scoped), mode(TransientMemoryMode::persistent),
                                        mode(TransientMemoryMode::pool), alloc.options()};
  MemoryOptions null_workspace;  // even an unusable workspace is never looked at
  null_workspace.external_workspace[Device::cpu] = Workspace{nullptr, 0, Device::cpu, {}};
  configs.push_back(null_workspace);
  EventLog log;
  for (const MemoryOptions& o : configs) {
    TransientMemory tm("no_transients", o);
    tm.prepare({});
    for (int i = 0; i < 20; ++i) {
      TransientMemory::Lease a = tm.begin_call({});
      EXPECT_EQ(a.base(Device::cpu), nullptr);
      a.end();
      TransientMemory::Lease b = tm.begin_call({{Device::cpu, 0, 256}, {Device::cuda, 0, 256}});
      EXPECT_EQ(b.base(Device::cpu), nullptr);
      EXPECT_EQ(b.base(Device::cuda), nullptr);
    }
    const MemoryStats s = tm.stats();
    EXPECT_EQ(s.calls, 40u);
    EXPECT_EQ(s.allocator_calls, 0u);
    EXPECT_EQ(s.workspace_installs, 0u);
    EXPECT_EQ(s.system_allocations, 0u);
    EXPECT_EQ(s.pool_hits + s.pool_misses, 0u);
    EXPECT_EQ(s.bytes_installed, 0u);
    EXPECT_EQ(tm.installed_base(Device::cpu), nullptr);
  }
  EXPECT_EQ(log.size(), 0u);
  EXPECT_TRUE(alloc.s->requests.empty());
}

// ---- scoped ------------------------------------------------------------------------------------

// Scoped: one system allocation per device per call, freed when the call ends.
TEST(TransientMemory, ScopedAllocatesAndFreesEveryCall) {
  EventLog log;
  {
    TransientMemory tm("scoped_prog", mode(TransientMemoryMode::scoped));
    for (int i = 0; i < 10; ++i) {
      {
        TransientMemory::Lease l = tm.begin_call(on_cpu(3000));
        ASSERT_NE(l.base(Device::cpu), nullptr);
        EXPECT_EQ(reinterpret_cast<std::uintptr_t>(l.base(Device::cpu)) % 256, 0u);
        EXPECT_EQ(l.bytes(Device::cpu), 3000u);
        EXPECT_EQ(tm.installed_bytes(Device::cpu), 3000u);
        EXPECT_EQ(log.count(K::system_allocate), std::size_t(i + 1));
        EXPECT_EQ(log.count(K::system_free), std::size_t(i));
      }
      EXPECT_EQ(log.count(K::system_free), std::size_t(i + 1));
      EXPECT_EQ(tm.stats().last_call_system_allocations, 1u);
      EXPECT_EQ(tm.installed_bytes(Device::cpu), 0u);
    }
    const MemoryStats s = tm.stats();
    EXPECT_EQ(s.system_allocations, 10u);
    EXPECT_EQ(s.system_frees, 10u);
    EXPECT_EQ(s.allocator_calls, 0u);
    EXPECT_EQ(s.pool_hits + s.pool_misses, 0u);
  }
  for (const MemoryEvent& e : log.events()) {
    EXPECT_EQ(e.label, "scoped_prog");
    EXPECT_EQ(e.bytes, 3000u);
  }
  EXPECT_EQ(log.size(), 20u);
}

// ---- persistent --------------------------------------------------------------------------------

// Persistent: allocated on the first call, kept, freed when the instance is destroyed.
TEST(TransientMemory, PersistentAllocatesOnce) {
  EventLog log;
  {
    TransientMemory tm("persistent_prog", mode(TransientMemoryMode::persistent));
    const void* first = nullptr;
    for (int i = 0; i < 100; ++i) {
      TransientMemory::Lease l = tm.begin_call(on_cpu(10000));
      if (i == 0) first = l.base(Device::cpu);
      EXPECT_EQ(l.base(Device::cpu), first);
      EXPECT_EQ(tm.stats().last_call_system_allocations, i == 0 ? 1u : 0u);
    }
    EXPECT_EQ(tm.installed_base(Device::cpu), first);
    EXPECT_EQ(tm.installed_bytes(Device::cpu), 10000u);
    EXPECT_EQ(tm.stats().system_allocations, 1u);
    EXPECT_EQ(tm.stats().system_frees, 0u);
    EXPECT_EQ(tm.stats().bytes_installed, 10000u);
    EXPECT_EQ(log.count(K::system_free), 0u);
  }
  EXPECT_EQ(log.count(K::system_allocate), 1u);
  EXPECT_EQ(log.count(K::system_free), 1u);  // at destruction
}

// Persistent: a larger call frees and reallocates (never overflows); a smaller one reuses.
TEST(TransientMemory, PersistentGrowsAndReuses) {
  TransientMemory tm("p", mode(TransientMemoryMode::persistent));
  EventLog log;
  { auto l = tm.begin_call(on_cpu(1000)); }
  { auto l = tm.begin_call(on_cpu(5000)); EXPECT_GE(l.bytes(Device::cpu), 5000u); }
  auto ev = log.events();
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0].kind, K::system_allocate);
  EXPECT_EQ(ev[1].kind, K::system_free);  // the old block goes first
  EXPECT_EQ(ev[1].bytes, 1000u);
  EXPECT_EQ(ev[2].kind, K::system_allocate);
  EXPECT_EQ(ev[2].bytes, 5000u);
  { auto l = tm.begin_call(on_cpu(2000)); }
  EXPECT_EQ(log.size(), 3u);
  EXPECT_EQ(tm.installed_bytes(Device::cpu), 5000u);
}

// prepare() allocates when sizes are known, so the first call allocates nothing.
TEST(TransientMemory, PersistentPrepare) {
  TransientMemory tm("p", mode(TransientMemoryMode::persistent));
  tm.prepare(on_cpu(4096));
  EXPECT_EQ(tm.stats().system_allocations, 1u);
  { auto l = tm.begin_call(on_cpu(4096)); }
  EXPECT_EQ(tm.stats().system_allocations, 1u);
  EXPECT_EQ(tm.stats().last_call_system_allocations, 0u);
}

// ---- pool --------------------------------------------------------------------------------------

// Pool: after warm-up, zero system allocations per call (seen by a listener and by the stats).
TEST(TransientMemory, PoolMakesNoSystemAllocationsAfterWarmUp) {
  trim_host_pool();
  TransientMemory tm("pool_prog", MemoryOptions{});  // pool is the default
  { auto l = tm.begin_call(on_cpu(123456)); }
  EXPECT_EQ(tm.stats().pool_misses, 1u);
  EXPECT_EQ(tm.stats().system_allocations, 1u);
  EXPECT_EQ(tm.stats().last_call_system_allocations, 1u);
  EventLog log;
  for (int i = 0; i < 100; ++i) {
    auto l = tm.begin_call(on_cpu(123456));
    ASSERT_NE(l.base(Device::cpu), nullptr);
    EXPECT_GE(tm.installed_bytes(Device::cpu), 123456u);
  }
  EXPECT_EQ(log.count(K::system_allocate), 0u);
  EXPECT_EQ(log.count(K::system_free), 0u);
  EXPECT_EQ(log.count(K::pool_hit), 100u);
  EXPECT_EQ(log.count(K::pool_release), 100u);
  const MemoryStats s = tm.stats();
  EXPECT_EQ(s.pool_hits, 100u);
  EXPECT_EQ(s.system_allocations, 1u);
  EXPECT_EQ(s.last_call_system_allocations, 0u);
  EXPECT_EQ(s.bytes_installed, 0u);  // nothing held between calls
  trim_host_pool();
}

// Two pool-mode instances called in turn share the warm pool.
TEST(TransientMemory, PoolIsSharedBetweenInstances) {
  trim_host_pool();
  TransientMemory a("a", MemoryOptions{}), b("b", MemoryOptions{});
  { auto l = a.begin_call(on_cpu(8000)); }
  EventLog log;
  for (int i = 0; i < 10; ++i) {
    { auto l = a.begin_call(on_cpu(8000)); }
    { auto l = b.begin_call(on_cpu(7950)); }  // same size class as 8000
  }
  EXPECT_EQ(log.count(K::system_allocate), 0u);
  EXPECT_EQ(b.stats().pool_hits, 10u);
  trim_host_pool();
}

// ---- external: allocator -----------------------------------------------------------------------

// The allocator is called exactly once, with the right device, size, alignment and program.
TEST(TransientMemory, AllocatorCalledOnceOverManyCalls) {
  RecordingAllocator alloc;
  EventLog log;
  {
    TransientMemory tm("ext_prog", alloc.options());
    EXPECT_EQ(tm.mode(), TransientMemoryMode::external);
    for (int i = 0; i < 100; ++i) {
      auto l = tm.begin_call(on_cpu(7777));
      EXPECT_EQ(l.base(Device::cpu), tm.installed_base(Device::cpu));
      EXPECT_EQ(tm.stats().last_call_system_allocations, 0u);
    }
    ASSERT_EQ(alloc.s->requests.size(), 1u);
    const AllocationRequest& r = alloc.s->requests[0];
    EXPECT_EQ(r.device, Device::cpu);
    EXPECT_EQ(r.bytes, 7777u);
    EXPECT_EQ(r.alignment, 256u);
    EXPECT_EQ(r.program, "ext_prog");
    const MemoryStats s = tm.stats();
    EXPECT_EQ(s.allocator_calls, 1u);
    EXPECT_EQ(s.workspace_installs, 1u);
    EXPECT_EQ(s.system_allocations, 0u);
    EXPECT_EQ(s.bytes_installed, 7777u);
    EXPECT_EQ(alloc.s->releases, 0);
  }
  EXPECT_EQ(alloc.s->releases, 1);  // exactly once, at destruction
  EXPECT_EQ(alloc.s->live, 0);
  EXPECT_EQ(log.count(K::allocator_call), 1u);
  EXPECT_EQ(log.count(K::install), 1u);
  EXPECT_EQ(log.count(K::release), 1u);
  EXPECT_EQ(log.count(K::system_allocate), 0u);
}

// The allocator is asked per device that needs memory, and only for those.
TEST(TransientMemory, AllocatorPerDevice) {
  RecordingAllocator alloc;
  TransientMemory tm("two_devices", alloc.options());
  for (int i = 0; i < 5; ++i) auto l = tm.begin_call({{Device::cpu, 512, 256}, {Device::cuda, 2048, 1024}});
  ASSERT_EQ(alloc.s->requests.size(), 2u);
  EXPECT_EQ(alloc.s->requests[0].device, Device::cpu);
  EXPECT_EQ(alloc.s->requests[1].device, Device::cuda);
  EXPECT_EQ(alloc.s->requests[1].bytes, 2048u);
  EXPECT_EQ(alloc.s->requests[1].alignment, 1024u);
}

// prepare() asks the allocator when sizes are known; the calls then ask nothing.
TEST(TransientMemory, AllocatorCalledInPrepare) {
  RecordingAllocator alloc;
  TransientMemory tm("p", alloc.options());
  tm.prepare(on_cpu(1000));
  EXPECT_EQ(alloc.s->requests.size(), 1u);
  for (int i = 0; i < 10; ++i) auto l = tm.begin_call(on_cpu(1000));
  EXPECT_EQ(alloc.s->requests.size(), 1u);
}

// In every other mode the allocator cannot be attached, so it is never called.
TEST(TransientMemory, AllocatorNeverCalledInOtherModes) {
  for (auto m : {TransientMemoryMode::scoped, TransientMemoryMode::persistent, TransientMemoryMode::pool}) {
    RecordingAllocator alloc;
    MemoryOptions o = alloc.options();
    o.mode = m;
    EXPECT_THROW(TransientMemory("p", o), OptionError);
    EXPECT_TRUE(alloc.s->requests.empty());
  }
  // Caller-owned workspace mode: no allocator involved either.
  AlignedBuffer buffer(4096);
  MemoryOptions o;
  o.external_workspace[Device::cpu] = buffer.workspace();
  TransientMemory tm("p", o);
  for (int i = 0; i < 10; ++i) auto l = tm.begin_call(on_cpu(4096));
  EXPECT_EQ(tm.stats().allocator_calls, 0u);
}

// Growing sizes: the old block's release action runs before the allocator is asked again.
// Shrinking sizes reuse the installed block.
TEST(TransientMemory, AllocatorGrowAndShrink) {
  RecordingAllocator alloc;
  {
    TransientMemory tm("grow", alloc.options());
    { auto l = tm.begin_call(on_cpu(1000)); }
    { auto l = tm.begin_call(on_cpu(500)); }   // smaller: reuse
    { auto l = tm.begin_call(on_cpu(1000)); }  // equal: reuse
    EXPECT_EQ(alloc.s->requests.size(), 1u);
    {
      auto l = tm.begin_call(on_cpu(3000));
      EXPECT_EQ(l.base(Device::cpu), tm.installed_base(Device::cpu));
    }
    EXPECT_EQ(alloc.s->requests.size(), 2u);
    EXPECT_EQ(alloc.s->requests[1].bytes, 3000u);
    EXPECT_EQ(alloc.s->live, 1);  // never two blocks at once
    { auto l = tm.begin_call(on_cpu(2000)); }
    EXPECT_EQ(alloc.s->requests.size(), 2u);
    EXPECT_EQ(tm.stats().allocator_calls, 2u);
    EXPECT_EQ(tm.stats().workspace_installs, 2u);
    EXPECT_EQ(tm.stats().release_actions, 1u);
    EXPECT_EQ(tm.installed_bytes(Device::cpu), 3000u);
  }
  EXPECT_EQ(alloc.s->log, (std::vector<std::string>{"request 1000", "release 1000", "request 3000", "release 3000"}));
}

// An allocator that throws: the same exception type reaches the caller, nothing is installed,
// and the next call asks again.
TEST(TransientMemory, ThrowingAllocatorPropagatesAndRetries) {
  struct HostOutOfMemory : std::runtime_error {
    using std::runtime_error::runtime_error;
  };
  RecordingAllocator good;
  int calls = 0;
  MemoryOptions o;
  o.external_memory_allocator = [&](const AllocationRequest& r) -> Workspace {
    if (++calls == 1) throw HostOutOfMemory("the host's arena is full");
    return good.allocator()(r);
  };
  TransientMemory tm("p", o);
  EXPECT_THROW(tm.begin_call(on_cpu(2048)), HostOutOfMemory);
  EXPECT_EQ(tm.installed_base(Device::cpu), nullptr);
  EXPECT_EQ(tm.installed_bytes(Device::cpu), 0u);
  EXPECT_EQ(tm.stats().workspace_installs, 0u);
  {
    auto l = tm.begin_call(on_cpu(2048));  // the instance is not left locked, and retries
    EXPECT_NE(l.base(Device::cpu), nullptr);
  }
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(tm.stats().allocator_calls, 2u);
  EXPECT_EQ(tm.stats().workspace_installs, 1u);
}

// A fieldflow error thrown by the allocator keeps its type too.
TEST(TransientMemory, AllocatorFieldflowErrorKeepsType) {
  MemoryOptions o;
  o.external_memory_allocator = [](const AllocationRequest&) -> Workspace { throw AllocationError("host says no"); };
  TransientMemory tm("p", o);
  EXPECT_THROW(tm.begin_call(on_cpu(10)), AllocationError);
}

// Every way an allocator-supplied block can be unusable: WorkspaceError naming the problem, the
// block's release action run at once, nothing installed, and the next call (good block) succeeds.
TEST(TransientMemory, InvalidAllocatorBlocksAreRejected) {
  alignas(256) static std::byte storage[8192];
  struct Case {
    const char* what;
    Workspace ws;
    std::vector<std::string> words;
  };
  const std::vector<Case> cases = {
      {"null", {nullptr, 4096, Device::cpu, {}}, {"null", "device cpu", "'bad_block'"}},
      {"too small", {storage, 1000, Device::cpu, {}}, {"4000 bytes required", "1000 bytes given", "'bad_block'"}},
      {"misaligned", {storage + 64, 4096, Device::cpu, {}}, {"not aligned to 256", "'bad_block'"}},
      {"wrong device", {storage, 4096, Device::cuda, {}}, {"device cpu", "device cuda", "'bad_block'"}},
  };
  for (const Case& c : cases) {
    int releases = 0, calls = 0;
    MemoryOptions o;
    o.external_memory_allocator = [&](const AllocationRequest&) -> Workspace {
      Workspace w = ++calls == 1 ? c.ws : Workspace{storage, 8192, Device::cpu, {}};
      w.release = [&releases] { ++releases; };
      return w;
    };
    {
      TransientMemory tm("bad_block", o);
      std::string msg = "(no WorkspaceError)";
      try {
        tm.begin_call(on_cpu(4000));
      } catch (const WorkspaceError& e) {
        msg = e.what();
      }
      for (const std::string& w : c.words) EXPECT_TRUE(contains(msg, w)) << c.what << ": " << msg;
      EXPECT_EQ(releases, 1) << c.what;  // the rejected block went straight back
      EXPECT_EQ(tm.installed_base(Device::cpu), nullptr) << c.what;
      EXPECT_EQ(tm.installed_bytes(Device::cpu), 0u) << c.what;
      EXPECT_EQ(tm.stats().workspace_installs, 0u) << c.what;
      {
        auto l = tm.begin_call(on_cpu(4000));
        EXPECT_EQ(l.base(Device::cpu), storage) << c.what;
      }
      EXPECT_EQ(calls, 2) << c.what;
      EXPECT_EQ(releases, 1) << c.what;
      EXPECT_EQ(tm.stats().release_actions, 1u) << c.what;
    }
    EXPECT_EQ(releases, 2) << c.what;  // the installed block exactly once, at destruction
  }
}

// A device's memory check (set by a program whose kernels run on a device: it asks the device
// runtime what the memory is) refuses a block its kernels cannot use, with the check's words, and
// hands the block back; a check that fails (the runtime's query itself) hands it back too and its
// error reaches the caller. A caller's workspace is asked about once per address.
TEST(TransientMemory, TheDevicesMemoryCheckRefusesMemoryItsKernelsCannotUse) {
  alignas(256) static std::byte usable[8192], unusable[8192];
  int asked = 0;
  const auto check = [&](const void* p) -> std::string {
    ++asked;
    if (p == usable) return "";
    if (p == unusable) return "host memory, where kernels need device memory";
    throw CacheError("the query failed");  // any fieldflow error: it must pass through unchanged
  };
  {  // allocator blocks
    int releases = 0;
    std::vector<void*> blocks{unusable, nullptr, usable};
    MemoryOptions o;
    o.external_memory_allocator = [&](const AllocationRequest&) {
      void* b = blocks.front();
      blocks.erase(blocks.begin());
      return Workspace{b != nullptr ? b : usable + 256, 4096, Device::cpu, [&releases] { ++releases; }};
    };
    TransientMemory tm("checked", o);
    tm.set_memory_check(Device::cpu, check);
    const std::string msg = error_text([&] { tm.begin_call(on_cpu(4000)); });
    EXPECT_TRUE(contains(msg, "program 'checked': the block returned by external_memory_allocator for device cpu at"))
        << msg;
    EXPECT_TRUE(contains(msg, "is host memory, where kernels need device memory")) << msg;
    EXPECT_EQ(releases, 1);
    EXPECT_THROW(tm.begin_call(on_cpu(4000)), CacheError);  // the check of the second block failed
    EXPECT_EQ(releases, 2);
    EXPECT_EQ(tm.stats().workspace_installs, 0u);
    {
      auto l = tm.begin_call(on_cpu(4000));
      EXPECT_EQ(l.base(Device::cpu), usable);
    }
    EXPECT_EQ(asked, 3);
    auto again = tm.begin_call(on_cpu(4000));  // installed: nothing asked
    EXPECT_EQ(asked, 3);
  }
  {  // a caller's workspace
    asked = 0;
    MemoryOptions o;
    o.external_workspace[Device::cpu] = Workspace{unusable, 8192, Device::cpu, {}};
    TransientMemory tm("checked", o);
    tm.set_memory_check(Device::cpu, check);
    EXPECT_TRUE(contains(error_text([&] { tm.begin_call(on_cpu(4000)); }),
                         "the external workspace for device cpu at"));
    tm.set_external_workspace(Device::cpu, Workspace{usable, 8192, Device::cpu, {}});
    for (int i = 0; i < 5; ++i) tm.begin_call(on_cpu(4000));
    EXPECT_EQ(asked, 2) << "once per address";
  }
}

// ---- external: caller-owned workspace ----------------------------------------------------------

// The workspace is installed once and the identical buffer is used across many calls.
TEST(TransientMemory, WorkspaceInstalledOnceSameBuffer) {
  AlignedBuffer buffer(1 << 16);
  MemoryOptions o;
  o.external_workspace[Device::cpu] = buffer.workspace();
  EventLog log;
  TransientMemory tm("ws_prog", o);
  for (int i = 0; i < 100; ++i) {
    auto l = tm.begin_call(on_cpu(1000 + 100 * (i % 7)));
    EXPECT_EQ(l.base(Device::cpu), buffer.data);
    EXPECT_EQ(tm.installed_base(Device::cpu), buffer.data);
  }
  const MemoryStats s = tm.stats();
  EXPECT_EQ(s.workspace_installs, 1u);
  EXPECT_EQ(s.system_allocations, 0u);
  EXPECT_EQ(s.bytes_installed, buffer.bytes);
  EXPECT_EQ(log.count(K::install), 1u);
  EXPECT_EQ(log.count(K::system_allocate), 0u);
  EXPECT_EQ(log.count(K::pool_hit) + log.count(K::pool_miss), 0u);
}

// Too small: the error names required and given bytes; nothing installed; a call that fits works.
TEST(TransientMemory, WorkspaceTooSmall) {
  AlignedBuffer buffer(512);
  MemoryOptions o;
  o.external_workspace[Device::cpu] = buffer.workspace();
  TransientMemory tm("small_ws", o);
  EXPECT_THROW(tm.begin_call(on_cpu(1000)), WorkspaceError);
  const std::string msg = error_text([&] { tm.begin_call(on_cpu(1000)); });
  EXPECT_TRUE(contains(msg, "1000 bytes required")) << msg;
  EXPECT_TRUE(contains(msg, "512 bytes given")) << msg;
  EXPECT_TRUE(contains(msg, "'small_ws'")) << msg;
  EXPECT_TRUE(contains(msg, "cpu")) << msg;
  EXPECT_EQ(tm.installed_base(Device::cpu), nullptr);
  EXPECT_EQ(tm.stats().workspace_installs, 0u);
  { auto l = tm.begin_call(on_cpu(512)); EXPECT_EQ(l.base(Device::cpu), buffer.data); }
  // Installed now; a later call that needs more still gets a typed error, never an overflow.
  const std::string later = error_text([&] { tm.begin_call(on_cpu(600)); });
  EXPECT_TRUE(contains(later, "600 bytes required") && contains(later, "512 bytes given")) << later;
}

// Null and misaligned buffers are rejected before anything is installed; a good one then works.
TEST(TransientMemory, WorkspaceNullOrMisaligned) {
  AlignedBuffer buffer(8192);
  for (Workspace bad : {Workspace{nullptr, 8192, Device::cpu, {}}, Workspace{buffer.data + 16, 4096, Device::cpu, {}}}) {
    MemoryOptions o;
    o.external_workspace[Device::cpu] = bad;
    TransientMemory tm("p", o);
    EXPECT_THROW(tm.begin_call(on_cpu(1024)), WorkspaceError);
    const std::string msg = error_text([&] { tm.begin_call(on_cpu(1024)); });
    EXPECT_TRUE(contains(msg, bad.pointer ? "not aligned to 256" : "null")) << msg;
    EXPECT_EQ(tm.installed_base(Device::cpu), nullptr);
    EXPECT_EQ(tm.stats().workspace_installs, 0u);
    tm.set_external_workspace(Device::cpu, buffer.workspace());
    auto l = tm.begin_call(on_cpu(1024));
    EXPECT_EQ(l.base(Device::cpu), buffer.data);
    EXPECT_EQ(tm.stats().workspace_installs, 1u);
  }
}

// A requirement with stricter alignment than the buffer has is a misalignment too.
TEST(TransientMemory, WorkspaceStricterAlignment) {
  AlignedBuffer buffer(8192, 256);
  MemoryOptions o;
  o.external_workspace[Device::cpu] = Workspace{buffer.data + 256, 4096, Device::cpu, {}};
  TransientMemory tm("p", o);
  const bool aligned_4k = reinterpret_cast<std::uintptr_t>(buffer.data + 256) % 4096 == 0;
  if (!aligned_4k) {
    EXPECT_THROW(tm.begin_call({{Device::cpu, 1024, 4096}}), WorkspaceError);
  }
  auto l = tm.begin_call({{Device::cpu, 1024, 256}});
  EXPECT_EQ(l.base(Device::cpu), buffer.data + 256);
}

// A device with no buffer: the error names the missing device; nothing is installed at all,
// not even for the device that had a good buffer.
TEST(TransientMemory, WorkspaceMissingDevice) {
  AlignedBuffer buffer(4096);
  MemoryOptions o;
  o.external_workspace[Device::cpu] = buffer.workspace();
  TransientMemory tm("gpu_prog", o);
  EXPECT_THROW(tm.begin_call({{Device::cpu, 1024, 256}, {Device::cuda, 1024, 256}}), WorkspaceError);
  const std::string msg = error_text([&] { tm.begin_call({{Device::cpu, 1024, 256}, {Device::cuda, 1024, 256}}); });
  EXPECT_TRUE(contains(msg, "device cuda")) << msg;
  EXPECT_TRUE(contains(msg, "'gpu_prog'")) << msg;
  EXPECT_EQ(tm.installed_base(Device::cpu), nullptr);
  EXPECT_EQ(tm.stats().workspace_installs, 0u);
  auto l = tm.begin_call(on_cpu(1024));  // a call that needs only the CPU runs
  EXPECT_EQ(l.base(Device::cpu), buffer.data);
}

// A workspace for the wrong device is refused, naming both devices.
TEST(TransientMemory, WorkspaceWrongDevice) {
  AlignedBuffer buffer(4096);
  MemoryOptions o;
  o.external_workspace[Device::cpu] = buffer.workspace(Device::cuda);
  EXPECT_THROW(TransientMemory("p", o), OptionError);
  MemoryOptions ok;
  ok.external_workspace[Device::cpu] = buffer.workspace();
  TransientMemory tm("p", ok);
  EXPECT_THROW(tm.set_external_workspace(Device::cpu, buffer.workspace(Device::cuda)), OptionError);
  EXPECT_THROW(TransientMemory("p", mode(TransientMemoryMode::pool)).set_external_workspace(Device::cpu, buffer.workspace()),
               OptionError);
}

// Sequential programs may share one caller-owned buffer; each sees the identical base.
TEST(TransientMemory, SharedWorkspaceSequentially) {
  AlignedBuffer buffer(1 << 14);
  MemoryOptions o;
  o.external_workspace[Device::cpu] = buffer.workspace();
  TransientMemory a("prog_a", o), b("prog_b", o);
  for (int i = 0; i < 10; ++i) {
    { auto l = a.begin_call(on_cpu(1 << 14)); EXPECT_EQ(l.base(Device::cpu), buffer.data); }
    { auto l = b.begin_call(on_cpu(1 << 13)); EXPECT_EQ(l.base(Device::cpu), buffer.data); }
  }
}

// Two instances using one caller-owned buffer at the same time: ConcurrencyError naming both.
TEST(TransientMemory, SharedWorkspaceConcurrentlyRefused) {
  AlignedBuffer buffer(1 << 14);
  MemoryOptions o;
  o.external_workspace[Device::cpu] = buffer.workspace();
  TransientMemory a("prog_a", o), b("prog_b", o);
  {
    auto la = a.begin_call(on_cpu(4096));
    EXPECT_THROW(b.begin_call(on_cpu(4096)), ConcurrencyError);
    const std::string msg = error_text([&] { b.begin_call(on_cpu(4096)); });
    EXPECT_TRUE(contains(msg, "'prog_a'") && contains(msg, "'prog_b'")) << msg;
  }
  auto lb = b.begin_call(on_cpu(4096));  // once a's call ended, b may use it
  EXPECT_EQ(lb.base(Device::cpu), buffer.data);
}

// The same, from two real threads: never both inside a call on the shared buffer.
TEST(TransientMemory, SharedWorkspaceAcrossThreads) {
  AlignedBuffer buffer(4096);
  MemoryOptions o;
  o.external_workspace[Device::cpu] = buffer.workspace();
  TransientMemory a("prog_a", o), b("prog_b", o);
  std::atomic<int> inside{0}, overlaps{0}, refused{0}, ran{0};
  auto worker = [&](TransientMemory& tm) {
    for (int i = 0; i < 300; ++i) {
      try {
        auto l = tm.begin_call(on_cpu(4096));
        if (inside.fetch_add(1) != 0) ++overlaps;
        std::this_thread::yield();
        inside.fetch_sub(1);
        ++ran;
      } catch (const ConcurrencyError&) {
        ++refused;
      }
    }
  };
  std::thread t1(worker, std::ref(a)), t2(worker, std::ref(b));
  t1.join();
  t2.join();
  EXPECT_EQ(overlaps, 0);
  EXPECT_EQ(ran + refused, 600);
  EXPECT_GT(ran, 0);
}

// Disjoint parts of one buffer may be used at the same time.
TEST(TransientMemory, DisjointPartsOfOneBuffer) {
  AlignedBuffer buffer(8192);
  MemoryOptions oa, ob;
  oa.external_workspace[Device::cpu] = Workspace{buffer.data, 4096, Device::cpu, {}};
  ob.external_workspace[Device::cpu] = Workspace{buffer.data + 4096, 4096, Device::cpu, {}};
  TransientMemory a("a", oa), b("b", ob);
  auto la = a.begin_call(on_cpu(4096));
  auto lb = b.begin_call(on_cpu(4096));
  EXPECT_EQ(lb.base(Device::cpu), buffer.data + 4096);
}

// ---- concurrency on one instance ---------------------------------------------------------------

// Calls of one instance never overlap: other threads wait for the lease to end.
TEST(TransientMemory, CallsOnOneInstanceAreSerialised) {
  for (auto m : all_modes) {
    RecordingAllocator alloc;
    MemoryOptions o = m == TransientMemoryMode::external ? alloc.options() : mode(m);
    TransientMemory tm("shared_instance", o);
    std::atomic<bool> in_use{false};
    std::atomic<int> overlaps{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([&] {
        for (int i = 0; i < 100; ++i) {
          auto l = tm.begin_call(on_cpu(2048));
          if (in_use.exchange(true)) ++overlaps;
          std::memset(l.base(Device::cpu), i, 2048);  // a race here would show under TSan
          std::this_thread::yield();
          in_use.store(false);
        }
      });
    for (auto& t : threads) t.join();
    EXPECT_EQ(overlaps, 0) << to_string(m);
    EXPECT_EQ(tm.stats().calls, 400u) << to_string(m);
    if (m == TransientMemoryMode::external) {
      EXPECT_EQ(alloc.s->requests.size(), 1u);
    }
  }
}

// A second call begun on the thread that holds the first would wait forever: refused instead.
TEST(TransientMemory, NestedCallOnSameThreadRefused) {
  TransientMemory tm("nested", mode(TransientMemoryMode::persistent));
  auto l = tm.begin_call(on_cpu(256));
  EXPECT_THROW(tm.begin_call(on_cpu(256)), ConcurrencyError);
  EXPECT_TRUE(contains(error_text([&] { tm.begin_call(on_cpu(256)); }), "'nested'"));
  l.end();
  EXPECT_FALSE(l.active());
  auto again = tm.begin_call(on_cpu(256));
  EXPECT_TRUE(again.active());
}

// A lease may be moved and end on another thread; the instance is free again afterwards.
TEST(TransientMemory, LeaseMovesAcrossThreads) {
  TransientMemory tm("moved", mode(TransientMemoryMode::scoped));
  EventLog log;
  TransientMemory::Lease l = tm.begin_call(on_cpu(1024));
  void* base = l.base(Device::cpu);
  TransientMemory::Lease moved = std::move(l);
  EXPECT_FALSE(l.active());
  EXPECT_EQ(moved.base(Device::cpu), base);
  std::thread t([lease = std::move(moved)]() mutable { lease.end(); });
  t.join();
  EXPECT_EQ(log.count(K::system_free), 1u);
  // The lease ended elsewhere, so this thread may begin again (it waits for nothing).
  auto next = tm.begin_call(on_cpu(1024));
  EXPECT_TRUE(next.active());
}

// ---- devices (through a stand-in CUDA backend) -------------------------------------------------

// Each mode uses the device path it promises: scoped cudaMalloc/cudaFree per call, persistent once,
// pool stream-ordered on the given stream, external only through the allocator.
TEST(TransientMemory, DevicePathsPerMode) {
  FakeCudaBackend cuda;
  int stream = 0;
  {
    TransientMemory tm("s", mode(TransientMemoryMode::scoped));
    for (int i = 0; i < 5; ++i) auto l = tm.begin_call(on_cuda(1000), &stream);
    EXPECT_EQ(cuda.allocates, 5);
    EXPECT_EQ(cuda.frees, 5);
    EXPECT_EQ(tm.stats().system_allocations, 5u);
  }
  {
    TransientMemory tm("p", mode(TransientMemoryMode::persistent));
    for (int i = 0; i < 5; ++i) auto l = tm.begin_call(on_cuda(1000), &stream);
    EXPECT_EQ(cuda.allocates, 6);
    EXPECT_EQ(cuda.frees, 5);
  }
  EXPECT_EQ(cuda.frees, 6);
  {
    TransientMemory tm("pool", MemoryOptions{});
    for (int i = 0; i < 5; ++i) auto l = tm.begin_call(on_cuda(1000), &stream);
    EXPECT_EQ(cuda.async_allocates, 5);
    EXPECT_EQ(cuda.async_frees, 5);
    EXPECT_EQ(cuda.last_stream.load(), &stream);
    EXPECT_EQ(cuda.last_release_threshold.load(), UINT64_MAX) << "the default: the pool keeps everything";
    EXPECT_EQ(tm.stats().stream_allocations, 5u);
    EXPECT_EQ(tm.stats().system_allocations, 0u);
  }
  {
    // Another release threshold is another pool: the backend is told which, per allocation.
    TransientMemory tm("pool with a threshold", MemoryOptions{}, 1 << 20);
    auto l = tm.begin_call(on_cuda(1000), &stream);
    EXPECT_EQ(cuda.last_release_threshold.load(), 1u << 20);
  }
  {
    RecordingAllocator alloc;
    TransientMemory tm("e", alloc.options());
    for (int i = 0; i < 5; ++i) auto l = tm.begin_call(on_cuda(1000), &stream);
    ASSERT_EQ(alloc.s->requests.size(), 1u);
    EXPECT_EQ(alloc.s->requests[0].device, Device::cuda);
  }
  EXPECT_EQ(cuda.allocates, 6);  // external never touched the device runtime
  EXPECT_EQ(cuda.async_allocates, 6);
}

// A device allocation that fails mid-call gives back what the call already obtained.
TEST(TransientMemory, FailedCallReleasesWhatItObtained) {
  ASSERT_FALSE(has_device_memory_backend(Device::cuda));
  TransientMemory tm("half", mode(TransientMemoryMode::scoped));
  EventLog log;
  EXPECT_THROW(tm.begin_call({{Device::cpu, 1024, 256}, {Device::cuda, 1024, 256}}), AllocationError);
  EXPECT_EQ(log.count(K::system_allocate), 1u);
  EXPECT_EQ(log.count(K::system_free), 1u);
  auto l = tm.begin_call(on_cpu(1024));  // not left locked
  EXPECT_NE(l.base(Device::cpu), nullptr);
}

// Persistent without a device runtime: a typed error, nothing installed, later calls may retry.
TEST(TransientMemory, PersistentAllocationFailureInstallsNothing) {
  std::optional<FakeCudaBackend> cuda;  // declared first: it must outlive the instance's free
  TransientMemory tm("no_gpu", mode(TransientMemoryMode::persistent));
  const std::string msg = error_text([&] { tm.begin_call(on_cuda(4096)); });
  EXPECT_TRUE(contains(msg, "cannot allocate 4096 bytes on cuda for no_gpu")) << msg;
  EXPECT_EQ(tm.installed_base(Device::cuda), nullptr);
  cuda.emplace();
  { auto l = tm.begin_call(on_cuda(4096)); EXPECT_NE(l.base(Device::cuda), nullptr); }
  EXPECT_EQ(cuda->allocates, 1);
}

}  // namespace
}  // namespace fieldflow::runtime
