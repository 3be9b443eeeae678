// The transient-memory acceptance cases of design §3, on compiled programs: each mode takes memory
// the way it promises (counted through the allocation route), external memory is validated before
// it is installed, and results are identical in every mode and equal to the reference.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <thread>

#include "fieldflow/compile.h"
#include "fieldflow/dsl.h"
#include "fieldflow/errors.h"
#include "fieldflow/examples.h"
#include "fieldflow/reference.h"
#include "memory_test_support.h"
#include "support/guarded_workspace.h"

namespace fieldflow {
namespace {

using testing::AlignedBuffer;
using testing::EventLog;

const Dimension I = horizontal_dim("I"), J = horizontal_dim("J");

// Three calls, each with its own transient; their live ranges do not overlap, so packing can
// place all three at offset 0.
ir::Program three_transients() {
  ProgramBuilder pb("three_transients");
  auto in = pb.field("in", {I, J}, DType::float64);
  auto o1 = pb.field("o1", {I, J}, DType::float64);
  auto o2 = pb.field("o2", {I, J}, DType::float64);
  auto o3 = pb.field("o3", {I, J}, DType::float64);
  auto n = pb.scalar("n", DType::int32);
  auto t1 = materialize("t1", in(I + 1) + in(I - 1));
  pb.call("first", t1(J + 1) - t1(J - 1), {o1}, {{I, 1, n - 1}, {J, 1, n - 1}});
  auto t2 = materialize("t2", o1 * 2.0 + in);
  pb.call("second", t2(J + 1) + t2, {o2}, {{I, 1, n - 1}, {J, 1, n - 2}});
  auto t3 = materialize("t3", o2 - in);
  pb.call("third", t3(I + 1) * t3, {o3}, {{I, 1, n - 2}, {J, 1, n - 2}});
  return pb.build();
}

struct Data {
  Field in, o1, o2, o3;
  explicit Data(int n)
      : in({I, J}, DType::float64, {n, n}), o1({I, J}, DType::float64, {n, n}), o2({I, J}, DType::float64, {n, n}),
        o3({I, J}, DType::float64, {n, n}) {
    for (std::int64_t i = 0; i < in.size(); ++i) in.set_from_double(i, std::cos(0.1 * static_cast<double>(i)));
  }
  Arguments args(int n) {
    Arguments a;
    a.field("in", in).field("o1", o1).field("o2", o2).field("o3", o3).scalar("n", n);
    return a;
  }
};

CompileOptions with_mode(TransientMemoryMode m) {
  CompileOptions o;
  o.memory.mode = m;
  return o;
}

struct CountingAllocator {
  std::atomic<int> calls{0}, releases{0};
  std::vector<AllocationRequest> requests;
  ExternalMemoryAllocator make() {
    return [this](const AllocationRequest& r) {
      ++calls;
      requests.push_back(r);
      void* p = std::aligned_alloc(r.alignment, (r.bytes + r.alignment - 1) / r.alignment * r.alignment);
      return Workspace{p, r.bytes, r.device, [this, p] {
                         ++releases;
                         std::free(p);
                       }};
    };
  }
};

TEST(CompiledMemory, PackingSharesBytesBetweenDisjointLifetimes) {
  auto prog = compile(three_transients());
  const MemoryPlan plan = prog.memory_plan({{"n", 10}});
  ASSERT_EQ(plan.transients.size(), 3u);
  for (const auto& t : plan.transients) {
    EXPECT_EQ(t.offset % 256, 0u) << t.name;
    EXPECT_EQ(t.offset, 0u) << t.name << " should reuse the bytes of the others";
    EXPECT_LT(t.first_kernel, t.last_kernel + 1);
  }
  EXPECT_GT(plan.naive_sum_bytes, plan.packed_bytes);
  EXPECT_EQ(plan.packed_bytes, plan.lower_bound_bytes);
  // Live ranges are disjoint and in program order.
  EXPECT_LT(plan.transients[0].last_kernel, plan.transients[1].first_kernel);
  EXPECT_LT(plan.transients[1].last_kernel, plan.transients[2].first_kernel);
}

TEST(CompiledMemory, ResultsIdenticalInAllModesAndEqualToReference) {
  Data ref(12);
  run_reference(three_transients(), ref.args(12));
  CountingAllocator alloc;
  for (auto mode : {TransientMemoryMode::scoped, TransientMemoryMode::persistent, TransientMemoryMode::pool,
                    TransientMemoryMode::external}) {
    CompileOptions o = with_mode(mode);
    if (mode == TransientMemoryMode::external) o.memory.external_memory_allocator = alloc.make();
    auto prog = compile(three_transients(), o);
    Data d(12);
    prog(d.args(12));
    for (auto [a, b] : {std::pair{&ref.o1, &d.o1}, std::pair{&ref.o2, &d.o2}, std::pair{&ref.o3, &d.o3}})
      EXPECT_EQ(std::memcmp(a->data(), b->data(), a->bytes()), 0) << to_string(mode);
  }
}

TEST(CompiledMemory, EachModeUsesItsAllocationPath) {
  for (auto mode : {TransientMemoryMode::scoped, TransientMemoryMode::persistent, TransientMemoryMode::pool,
                    TransientMemoryMode::external}) {
    CountingAllocator alloc;
    CompileOptions o = with_mode(mode);
    if (mode == TransientMemoryMode::external) o.memory.external_memory_allocator = alloc.make();
    auto prog = compile(three_transients(), o);
    Data d(10);
    Arguments args = d.args(10);
    prog(args);  // warm-up: persistent allocates, the pool fills, the allocator is asked
    EventLog log;
    for (int c = 0; c < 20; ++c) prog(args);
    const auto allocs = log.count(MemoryEvent::Kind::system_allocate);
    switch (mode) {
      case TransientMemoryMode::scoped:
        EXPECT_EQ(allocs, 20u) << "one packed allocation per call";
        EXPECT_EQ(log.count(MemoryEvent::Kind::system_free), 20u);
        break;
      case TransientMemoryMode::persistent:
      case TransientMemoryMode::pool:
        EXPECT_EQ(allocs, 0u) << to_string(mode) << " allocates nothing in steady state";
        EXPECT_EQ(prog.memory_stats().last_call_system_allocations, 0u);
        break;
      case TransientMemoryMode::external:
        EXPECT_EQ(allocs, 0u);
        EXPECT_EQ(alloc.calls.load(), 1);
        break;
    }
    if (mode == TransientMemoryMode::pool) {
      EXPECT_GE(log.count(MemoryEvent::Kind::pool_hit), 20u);
    }
  }
}

TEST(CompiledMemory, AllocatorCalledOnceWithDeviceAlignmentAndRequiredBytes) {
  CountingAllocator alloc;
  CompileOptions o;  // no mode: an allocator means external
  o.memory.external_memory_allocator = alloc.make();
  auto prog = compile(examples::example("vadv").program, o);
  EXPECT_EQ(prog.memory_mode(), TransientMemoryMode::external);
  auto inst = examples::example("vadv").make_instance({8, 6, 5}, Layout::vertical_fastest, 1);
  Arguments args = inst.arguments();
  const auto need = prog.workspace_requirements(size_symbols(prog.program(), args));  // before any call
  ASSERT_EQ(need.size(), 1u);
  EXPECT_EQ(alloc.calls.load(), 0) << "querying requirements asks nothing from the host";
  for (int c = 0; c < 100; ++c) prog(args);
  ASSERT_EQ(alloc.calls.load(), 1);
  EXPECT_EQ(alloc.requests[0].device, Device::cpu);
  EXPECT_EQ(alloc.requests[0].alignment, 256u);
  EXPECT_EQ(alloc.requests[0].bytes, need[0].bytes);
  EXPECT_EQ(alloc.requests[0].program, "vadv");
  EXPECT_EQ(prog.memory_stats().allocator_calls, 1u);
}

TEST(CompiledMemory, NoTransientsMeansNothingIsAskedFromTheHost) {
  CountingAllocator alloc;
  CompileOptions o;
  o.memory.external_memory_allocator = alloc.make();
  const auto& ex = examples::example("laplacian");
  auto prog = compile(ex.program, o);
  auto inst = ex.make_instance({6, 6, 3}, Layout::vertical_fastest, 1);
  EXPECT_TRUE(prog.workspace_requirements(size_symbols(ex.program, inst.arguments())).empty());
  for (int c = 0; c < 3; ++c) prog(inst.arguments());
  EXPECT_EQ(alloc.calls.load(), 0);
  EXPECT_EQ(prog.memory_stats().system_allocations, 0u);
}

TEST(CompiledMemory, CallerWorkspaceIsInstalledOnceAndTheSameBufferIsUsed) {
  auto probe = compile(three_transients());
  const auto need = probe.workspace_requirements({{"n", 12}});
  ASSERT_EQ(need.size(), 1u);
  testing_support::GuardedWorkspace buffer(need[0].bytes);
  CompileOptions o;
  o.memory.external_workspace[Device::cpu] = buffer.workspace();
  auto prog = compile(three_transients(), o);
  Data ref(12), d(12);
  run_reference(three_transients(), ref.args(12));
  EventLog log;
  for (int c = 0; c < 10; ++c) prog(d.args(12));
  EXPECT_EQ(log.count(MemoryEvent::Kind::system_allocate), 0u);
  EXPECT_EQ(prog.memory_stats().workspace_installs, 1u);
  EXPECT_EQ(std::memcmp(ref.o3.data(), d.o3.data(), d.o3.bytes()), 0);
}

TEST(CompiledMemory, WorkspaceTooSmallNamesBytesAndLaterSmallerCallWorks) {
  auto probe = compile(three_transients());
  const std::size_t small_need = probe.workspace_requirements({{"n", 8}})[0].bytes;
  const std::size_t big_need = probe.workspace_requirements({{"n", 16}})[0].bytes;
  AlignedBuffer buffer(small_need);
  CompileOptions o;
  o.memory.external_workspace[Device::cpu] = buffer.workspace();
  auto prog = compile(three_transients(), o);
  Data big(16);
  const Field before = big.o1.clone();
  try {
    prog(big.args(16));
    FAIL() << "expected WorkspaceError";
  } catch (const WorkspaceError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(std::to_string(big_need)), std::string::npos) << m;
    EXPECT_NE(m.find(std::to_string(small_need)), std::string::npos) << m;
    EXPECT_NE(m.find("three_transients"), std::string::npos) << m;
  }
  EXPECT_EQ(std::memcmp(before.data(), big.o1.data(), before.bytes()), 0) << "nothing ran";
  Data ok(8), ref(8);
  prog(ok.args(8));
  run_reference(three_transients(), ref.args(8));
  EXPECT_EQ(std::memcmp(ref.o3.data(), ok.o3.data(), ok.o3.bytes()), 0);
}

TEST(CompiledMemory, MisalignedOrWrongDeviceWorkspaceIsRefusedBeforeRunning) {
  AlignedBuffer buffer(1 << 20);
  {
    CompileOptions o;
    o.memory.external_workspace[Device::cpu] = Workspace{buffer.data + 8, buffer.bytes - 8, Device::cpu, {}};
    auto prog = compile(three_transients(), o);
    Data d(10);
    EXPECT_THROW(prog(d.args(10)), WorkspaceError);
  }
  {
    CompileOptions o;
    o.memory.external_workspace[Device::cuda] = Workspace{buffer.data, buffer.bytes, Device::cuda, {}};
    auto prog = compile(three_transients(), o);
    Data d(10);
    try {
      prog(d.args(10));
      FAIL() << "expected WorkspaceError";
    } catch (const WorkspaceError& e) {
      EXPECT_NE(std::string(e.what()).find("cpu"), std::string::npos) << e.what();
    }
  }
}

TEST(CompiledMemory, OptionsAreCheckedAtCompileTime) {
  CompileOptions o = with_mode(TransientMemoryMode::external);
  EXPECT_THROW(compile(three_transients(), o), OptionError);  // external with no memory
  CountingAllocator alloc;
  CompileOptions p = with_mode(TransientMemoryMode::pool);
  p.memory.external_memory_allocator = alloc.make();
  EXPECT_THROW(compile(three_transients(), p), OptionError);  // allocator with another mode
  CompileOptions q;
  q.num_threads = -1;
  EXPECT_THROW(compile(three_transients(), q), OptionError);
  EXPECT_EQ(alloc.calls.load(), 0);
}

struct Boom : std::runtime_error {
  using std::runtime_error::runtime_error;
};

TEST(CompiledMemory, ThrowingAllocatorReachesCallerAndNextCallRetries) {
  int calls = 0;
  CompileOptions o;
  o.memory.external_memory_allocator = [&](const AllocationRequest& r) -> Workspace {
    if (++calls == 1) throw Boom("host out of memory");
    void* p = std::aligned_alloc(256, (r.bytes + 255) / 256 * 256);
    return {p, r.bytes, r.device, [p] { std::free(p); }};
  };
  auto prog = compile(three_transients(), o);
  Data d(10);
  EXPECT_THROW(prog(d.args(10)), Boom);
  EXPECT_EQ(prog.memory_stats().bytes_installed, 0u);
  prog(d.args(10));
  EXPECT_EQ(calls, 2);
  Data ref(10);
  run_reference(three_transients(), ref.args(10));
  EXPECT_EQ(std::memcmp(ref.o3.data(), d.o3.data(), d.o3.bytes()), 0);
}

TEST(CompiledMemory, GrowingSizesAskTheAllocatorAgainAfterReleasingTheOldBlock) {
  CountingAllocator alloc;
  CompileOptions o;
  o.memory.external_memory_allocator = alloc.make();
  auto prog = compile(three_transients(), o);
  Data a(8), b(16), c(8);
  prog(a.args(8));
  prog(b.args(16));
  EXPECT_EQ(alloc.calls.load(), 2);
  EXPECT_EQ(alloc.releases.load(), 1) << "the old block is released before the larger one is requested";
  prog(c.args(8));  // smaller again: reuse
  EXPECT_EQ(alloc.calls.load(), 2);
  Data ref(16);
  run_reference(three_transients(), ref.args(16));
  EXPECT_EQ(std::memcmp(ref.o3.data(), b.o3.data(), b.o3.bytes()), 0);
}

TEST(CompiledMemory, OneWorkspaceSharedByThreeProgramsCalledInTurn) {
  const auto& hd = examples::example("hdiff");
  const auto& va = examples::example("vadv");
  auto p1 = compile(three_transients()), p2 = compile(hd.program), p3 = compile(va.program);
  auto hdi = hd.make_instance({10, 10, 4}, Layout::vertical_fastest, 1);
  auto vai = va.make_instance({10, 10, 4}, Layout::vertical_fastest, 1);
  const auto need = max_requirements({p1.workspace_requirements({{"n", 10}}),
                                      p2.workspace_requirements(size_symbols(hd.program, hdi.arguments())),
                                      p3.workspace_requirements(size_symbols(va.program, vai.arguments()))});
  ASSERT_EQ(need.size(), 1u);
  testing_support::GuardedWorkspace buffer(need[0].bytes);
  CompileOptions o;
  o.memory.external_workspace[Device::cpu] = buffer.workspace();
  auto q1 = compile(three_transients(), o), q2 = compile(hd.program, o), q3 = compile(va.program, o);
  auto hd_ref = hd.make_instance({10, 10, 4}, Layout::vertical_fastest, 1);
  auto va_ref = va.make_instance({10, 10, 4}, Layout::vertical_fastest, 1);
  run_reference(hd.program, hd_ref.arguments());
  run_reference(va.program, va_ref.arguments());
  Data d(10), ref(10);
  run_reference(three_transients(), ref.args(10));
  for (int round = 0; round < 3; ++round) {
    q1(d.args(10));
    q2(hdi.arguments());
    q3(vai.arguments());
  }
  EXPECT_EQ(buffer.damage(), "");
  for (auto [want, got] : {std::pair{&ref.o1, &d.o1}, std::pair{&ref.o2, &d.o2}, std::pair{&ref.o3, &d.o3}})
    EXPECT_EQ(std::memcmp(want->data(), got->data(), got->bytes()), 0);
  for (const auto& out : hd_ref.outputs)
    EXPECT_EQ(std::memcmp(hd_ref.fields.at(out).data(), hdi.fields.at(out).data(), hdi.fields.at(out).bytes()), 0) << out;
  ASSERT_FALSE(va_ref.outputs.empty());
  for (const auto& out : va_ref.outputs)
    EXPECT_EQ(std::memcmp(va_ref.fields.at(out).data(), vai.fields.at(out).data(), vai.fields.at(out).bytes()), 0) << out;
}

TEST(CompiledMemory, TwoThreadsOnOneInstanceAreSerialized) {
  CountingAllocator alloc;
  CompileOptions o;
  o.memory.external_memory_allocator = alloc.make();
  auto prog = compile(three_transients(), o);
  Data ref(12);
  run_reference(three_transients(), ref.args(12));
  Data a(12), b(12);
  auto work = [&](Data& d) {
    for (int c = 0; c < 20; ++c) prog(d.args(12));
  };
  std::thread t1(work, std::ref(a)), t2(work, std::ref(b));
  t1.join();
  t2.join();
  EXPECT_EQ(std::memcmp(ref.o3.data(), a.o3.data(), a.o3.bytes()), 0);
  EXPECT_EQ(std::memcmp(ref.o3.data(), b.o3.data(), b.o3.bytes()), 0);
  EXPECT_EQ(alloc.calls.load(), 1);
}

TEST(CompiledMemory, PrepareInstallsBeforeTheFirstCall) {
  CountingAllocator alloc;
  CompileOptions o;
  o.memory.external_memory_allocator = alloc.make();
  auto prog = compile(three_transients(), o);
  prog.prepare({{"n", 12}});
  EXPECT_EQ(alloc.calls.load(), 1);
  Data d(12);
  prog(d.args(12));
  EXPECT_EQ(alloc.calls.load(), 1);
}

// Transients whose live ranges overlap never share bytes; returns how many pairs that are not
// live together do share bytes (what packing saves).
int check_no_live_overlap(const MemoryPlan& plan, const std::string& what) {
  int shared = 0;
  for (std::size_t a = 0; a < plan.transients.size(); ++a)
    for (std::size_t b = a + 1; b < plan.transients.size(); ++b) {
      const PlannedTransient &x = plan.transients[a], &y = plan.transients[b];
      const bool live_together = x.first_kernel <= y.last_kernel && y.first_kernel <= x.last_kernel;
      const bool share = x.bytes > 0 && y.bytes > 0 && x.offset < y.offset + y.bytes && y.offset < x.offset + x.bytes;
      EXPECT_FALSE(live_together && share) << what << ": " << x.name << " and " << y.name
                                            << " are live together but share bytes";
      shared += share;
    }
  return shared;
}

// Peak of simultaneously live bytes (each transient rounded to the 256-byte alignment),
// computed here kernel by kernel.
std::size_t peak_live_bytes(const MemoryPlan& plan) {
  int last = 0;
  for (const auto& t : plan.transients) last = std::max(last, t.last_kernel);
  std::size_t peak = 0;
  for (int k = 0; k <= last; ++k) {
    std::size_t live = 0;
    for (const auto& t : plan.transients)
      if (t.first_kernel <= k && k <= t.last_kernel) live += (t.bytes + 255) / 256 * 256;
    peak = std::max(peak, live);
  }
  return peak;
}

// Transients of different sizes and live ranges: a and b live together in the first call, c in
// the second, and in the third d, e and another copy of c (a materialized value is stored per
// call that reads it; d's producer and the call share it), overlapping in a staircase.
ir::Program five_transients() {
  ProgramBuilder pb("five_transients");
  auto in = pb.field("in", {I, J}, DType::float64);
  auto o1 = pb.field("o1", {I, J}, DType::float64);
  auto o2 = pb.field("o2", {I, J}, DType::float64);
  auto o3 = pb.field("o3", {I, J}, DType::float64);
  auto n = pb.scalar("n", DType::int32);
  auto a = materialize("a", exp(in) * 2.0), b = materialize("b", sin(in) + cos(in));
  pb.call("first", a(I + 1) + b(I - 1) * a, {o1}, {{I, 1, n - 1}, {J, 0, n}});
  auto c = materialize("c", sqrt(abs(o1)) + in);
  pb.call("second", c(J + 1) + c(J - 1), {o2}, {{I, 1, n - 1}, {J, 1, n - 1}});
  auto d = materialize("d", exp(o2) - c), e = materialize("e", cos(o2) * in);
  pb.call("third", d(I + 1) * e(J - 1) + c(I - 1) + d(I - 1), {o3}, {{I, 2, n - 2}, {J, 2, n - 2}});
  return pb.build();
}

TEST(CompiledMemory, PackingOfSeveralTransientsIsSafeNearTheLowerBoundAndRight) {
  const ir::Program program = five_transients();
  auto probe = compile(program);
  const MemoryPlan plan = probe.memory_plan({{"n", 24}});
  ASSERT_EQ(plan.transients.size(), 6u) << probe.schedule_text();
  EXPECT_GT(check_no_live_overlap(plan, "five_transients"), 0) << "packing reused no bytes";
  EXPECT_EQ(plan.lower_bound_bytes, peak_live_bytes(plan));
  EXPECT_LT(plan.packed_bytes, plan.naive_sum_bytes);
  EXPECT_LE(static_cast<double>(plan.packed_bytes), 1.05 * static_cast<double>(plan.lower_bound_bytes));
  // The packed workspace, exactly that large and guarded, gives the reference's values.
  Field in({I, J}, DType::float64, {24, 24});
  for (std::int64_t i = 0; i < in.size(); ++i) in.set_from_double(i, std::cos(0.3 * static_cast<double>(i)));
  auto outputs = [] {
    std::vector<Field> o;
    for (int k = 0; k < 3; ++k) o.emplace_back(std::vector<Dimension>{I, J}, DType::float64, std::vector<std::int64_t>{24, 24});
    return o;
  };
  std::vector<Field> want = outputs(), got = outputs();
  run_reference(program, Arguments().field("in", in).field("o1", want[0]).field("o2", want[1]).field("o3", want[2]).scalar("n", 24));
  testing_support::GuardedWorkspace ws(plan.packed_bytes);
  CompileOptions o;
  o.memory.external_workspace[Device::cpu] = ws.workspace();
  compile(program, o)(Arguments().field("in", in).field("o1", got[0]).field("o2", got[1]).field("o3", got[2]).scalar("n", 24));
  EXPECT_EQ(ws.damage(), "");
  for (int k = 0; k < 3; ++k) EXPECT_EQ(std::memcmp(want[k].data(), got[k].data(), want[k].bytes()), 0) << "o" << k + 1;
}

TEST(CompiledMemory, PackedPlansOfBuiltInProgramsAreSafeAndNearTheLowerBound) {
  int with_transients = 0;
  for (const auto& ex : examples::all_examples())
    for (Layout layout : {Layout::vertical_fastest, Layout::horizontal_fastest}) {
      CompileOptions o;
      o.layout = layout;
      auto prog = compile(ex.program, o);
      auto inst = ex.make_instance({16, 16, 8}, layout, 1);
      const MemoryPlan plan = prog.memory_plan(size_symbols(ex.program, inst.arguments()));
      if (plan.transients.size() < 2) continue;  // nothing to pack (see test_builtin_schedules for which)
      ++with_transients;
      check_no_live_overlap(plan, ex.name);
      EXPECT_EQ(plan.lower_bound_bytes, peak_live_bytes(plan)) << ex.name;
      EXPECT_LE(static_cast<double>(plan.packed_bytes), 1.05 * static_cast<double>(plan.lower_bound_bytes)) << ex.name;
      EXPECT_LE(plan.packed_bytes, plan.naive_sum_bytes) << ex.name;
    }
  EXPECT_EQ(with_transients, 2) << "vadv in both layouts is the built-in program with several transients";
}

}  // namespace
}  // namespace fieldflow
