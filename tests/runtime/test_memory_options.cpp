// Names, parsing and validation of the memory options (design §3: option checks happen when
// options are built, and every mistake is an error naming what was given and what is accepted).
#include <gtest/gtest.h>

#include "fieldflow/errors.h"
#include "fieldflow/memory.h"

namespace fieldflow {
namespace {

template <class F>
std::string error_text(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

Workspace some_workspace(Device d) {
  alignas(256) static std::byte buffer[1024];
  return Workspace{buffer, sizeof buffer, d, {}};
}

Workspace dummy_allocator(const AllocationRequest&) { return {}; }

// Every mode prints and parses back to itself.
TEST(MemoryOptions, ModeNamesRoundTrip) {
  for (auto m : {TransientMemoryMode::scoped, TransientMemoryMode::persistent, TransientMemoryMode::pool,
                 TransientMemoryMode::external})
    EXPECT_EQ(parse_transient_memory_mode(to_string(m)), m);
  EXPECT_EQ(to_string(TransientMemoryMode::scoped), "scoped");
  EXPECT_EQ(to_string(TransientMemoryMode::persistent), "persistent");
  EXPECT_EQ(to_string(TransientMemoryMode::pool), "pool");
  EXPECT_EQ(to_string(TransientMemoryMode::external), "external");
}

// An unknown mode name is rejected with the list of valid names.
TEST(MemoryOptions, BadModeNameListsValidNames) {
  EXPECT_THROW(parse_transient_memory_mode("pooled"), OptionError);
  EXPECT_THROW(parse_transient_memory_mode(""), OptionError);
  EXPECT_THROW(parse_transient_memory_mode("Pool"), OptionError);  // names are case-sensitive
  const std::string msg = error_text([] { parse_transient_memory_mode("pooled"); });
  EXPECT_NE(msg.find("'pooled'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("scoped, persistent, pool, external"), std::string::npos) << msg;
}

TEST(MemoryOptions, DeviceAndStorageNamesRoundTrip) {
  EXPECT_EQ(to_string(Device::cpu), "cpu");
  EXPECT_EQ(to_string(Device::cuda), "cuda");
  EXPECT_EQ(parse_device("cpu"), Device::cpu);
  EXPECT_EQ(parse_device("cuda"), Device::cuda);
  for (auto s : {Storage::host_heap, Storage::gpu_global, Storage::gpu_shared, Storage::host_pinned})
    EXPECT_EQ(parse_storage(to_string(s)), s);
  EXPECT_EQ(to_string(Storage::gpu_shared), "gpu_shared");
  const std::string dev = error_text([] { parse_device("gpu"); });
  EXPECT_NE(dev.find("'gpu'"), std::string::npos) << dev;
  EXPECT_NE(dev.find("cpu, cuda"), std::string::npos) << dev;
  EXPECT_THROW(parse_storage("shared"), OptionError);
}

// Storage maps explicitly to a device; anything else is an error naming the storage.
TEST(MemoryOptions, StorageMapsToDevice) {
  EXPECT_EQ(device_of(Storage::host_heap), Device::cpu);
  EXPECT_EQ(device_of(Storage::gpu_global), Device::cuda);
  EXPECT_THROW(device_of(Storage::gpu_shared), StorageError);
  EXPECT_THROW(device_of(Storage::host_pinned), StorageError);
  const std::string msg = error_text([] { device_of(Storage::gpu_shared); });
  EXPECT_NE(msg.find("gpu_shared"), std::string::npos) << msg;
  EXPECT_NE(msg.find("host_heap"), std::string::npos) << msg;  // says what is accepted
  EXPECT_NE(error_text([] { device_of(Storage::host_pinned); }).find("host_pinned"), std::string::npos);
}

// Nothing set: the default is pool.
TEST(MemoryOptions, DefaultIsPool) {
  MemoryOptions o;
  EXPECT_EQ(o.resolved_mode(), TransientMemoryMode::pool);
  EXPECT_NO_THROW(o.validate());
}

// Explicit modes without supplied memory resolve to themselves.
TEST(MemoryOptions, ExplicitModesWithoutMemory) {
  for (auto m : {TransientMemoryMode::scoped, TransientMemoryMode::persistent, TransientMemoryMode::pool}) {
    MemoryOptions o;
    o.mode = m;
    EXPECT_EQ(o.resolved_mode(), m);
  }
}

// external with neither an allocator nor a workspace is an error, naming both ways to fix it.
TEST(MemoryOptions, ExternalNeedsMemory) {
  MemoryOptions o;
  o.mode = TransientMemoryMode::external;
  EXPECT_THROW(o.resolved_mode(), OptionError);
  EXPECT_THROW(o.validate(), OptionError);
  const std::string msg = error_text([&] { o.validate(); });
  EXPECT_NE(msg.find("external_memory_allocator"), std::string::npos) << msg;
  EXPECT_NE(msg.find("external_workspace"), std::string::npos) << msg;
}

// Supplying memory with no mode set means external.
TEST(MemoryOptions, SuppliedMemoryImpliesExternal) {
  MemoryOptions with_allocator;
  with_allocator.external_memory_allocator = dummy_allocator;
  EXPECT_EQ(with_allocator.resolved_mode(), TransientMemoryMode::external);
  MemoryOptions with_workspace;
  with_workspace.external_workspace[Device::cpu] = some_workspace(Device::cpu);
  EXPECT_EQ(with_workspace.resolved_mode(), TransientMemoryMode::external);
  with_workspace.mode = TransientMemoryMode::external;  // explicit and supplied: fine too
  EXPECT_EQ(with_workspace.resolved_mode(), TransientMemoryMode::external);
}

// Supplied memory with another explicit mode is never silently ignored; the message names both.
TEST(MemoryOptions, SuppliedMemoryConflictsWithOtherModes) {
  for (auto m : {TransientMemoryMode::scoped, TransientMemoryMode::persistent, TransientMemoryMode::pool}) {
    MemoryOptions a;
    a.mode = m;
    a.external_memory_allocator = dummy_allocator;
    EXPECT_THROW(a.resolved_mode(), OptionError);
    const std::string msg = error_text([&] { a.validate(); });
    EXPECT_NE(msg.find(std::string("'") + std::string(to_string(m)) + "'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("external_memory_allocator"), std::string::npos) << msg;

    MemoryOptions w;
    w.mode = m;
    w.external_workspace[Device::cpu] = some_workspace(Device::cpu);
    EXPECT_THROW(w.resolved_mode(), OptionError);
    const std::string wmsg = error_text([&] { w.validate(); });
    EXPECT_NE(wmsg.find(std::string(to_string(m))), std::string::npos) << wmsg;
    EXPECT_NE(wmsg.find("external_workspace"), std::string::npos) << wmsg;
  }
}

// An allocator and a workspace for the same device conflict.
TEST(MemoryOptions, AllocatorAndWorkspaceConflict) {
  MemoryOptions o;
  o.external_memory_allocator = dummy_allocator;
  o.external_workspace[Device::cuda] = some_workspace(Device::cuda);
  EXPECT_THROW(o.resolved_mode(), OptionError);
  const std::string msg = error_text([&] { o.validate(); });
  EXPECT_NE(msg.find("cuda"), std::string::npos) << msg;
  o.mode = TransientMemoryMode::external;
  EXPECT_THROW(o.resolved_mode(), OptionError);
}

// A workspace filed under one device but describing another is an error naming both.
TEST(MemoryOptions, WorkspaceKeyMustMatchItsDevice) {
  MemoryOptions o;
  o.external_workspace[Device::cpu] = some_workspace(Device::cuda);
  EXPECT_THROW(o.resolved_mode(), OptionError);
  const std::string msg = error_text([&] { o.validate(); });
  EXPECT_NE(msg.find("cpu"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cuda"), std::string::npos) << msg;
}

// One shared workspace per device is sized as the maximum over programs.
TEST(MemoryOptions, MaxRequirements) {
  auto r = max_requirements({{{Device::cpu, 1000, 256}},
                             {{Device::cuda, 4096, 256}, {Device::cpu, 5000, 256}},
                             {{Device::cpu, 3000, 512}},
                             {}});
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].device, Device::cpu);
  EXPECT_EQ(r[0].bytes, 5000u);
  EXPECT_EQ(r[0].alignment, 512u);
  EXPECT_EQ(r[1].device, Device::cuda);
  EXPECT_EQ(r[1].bytes, 4096u);
  EXPECT_EQ(r[1].alignment, 256u);
  EXPECT_TRUE(max_requirements({}).empty());
}

// bytes_on is the end of the highest block on the device, sizes rounded to 256.
TEST(MemoryOptions, PlanBytesOnAndRequirements) {
  MemoryPlan p;
  p.transients = {{"a", DType::float64, Device::cpu, 1000, 0, 1, 0},
                  {"b", DType::float64, Device::cpu, 100, 1, 2, 1024},
                  {"c", DType::float32, Device::cuda, 300, 0, 0, 0}};
  EXPECT_EQ(p.bytes_on(Device::cpu), 1024u + 256u);
  EXPECT_EQ(p.bytes_on(Device::cuda), 512u);
  auto r = p.requirements();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].device, Device::cpu);
  EXPECT_EQ(r[0].bytes, 1280u);
  EXPECT_EQ(r[0].alignment, transient_alignment);
  EXPECT_EQ(r[1].device, Device::cuda);
  EXPECT_EQ(r[1].bytes, 512u);
  EXPECT_TRUE(MemoryPlan{}.requirements().empty());
}

TEST(MemoryOptions, EventKindNames) {
  EXPECT_EQ(to_string(MemoryEvent::Kind::system_allocate), "system_allocate");
  EXPECT_EQ(to_string(MemoryEvent::Kind::pool_hit), "pool_hit");
  EXPECT_EQ(to_string(MemoryEvent::Kind::release), "release");
}

}  // namespace
}  // namespace fieldflow
