// The CUDA runner (src/runtime/cuda/cuda_runner.cpp) without a device: its CUDA runtime calls go to
// a host emulation (runtime::cuda::CudaApi), whose "device memory" is host memory it knows by
// address and whose cudaLaunchKernel runs the generated kernels, compiled for the host, over the
// grid the runner computed. So the runner's own logic runs and is checked against the reference:
// fields in device memory used in place, host fields copied in and back, tables copied only when
// bound, no call descriptor uploaded (kernels take their parameters by value), the error flag
// cleared only after a call that raised and read only for kernels
// that raise, one synchronisation per steady-state call, device outputs restored after an
// in-kernel failure, memory that is not where a field says refused, per-call streams, an image the
// device cannot run refused when the program is created, calls from another current device refused,
// caller memory for transients that is not the device's refused.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <optional>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "driver/cpu_build.h"
#include "driver/cuda_build.h"
#include "fieldflow/device_errors.h"
#include "fieldflow/dsl.h"
#include "fieldflow/examples.h"
#include "fieldflow/mesh.h"
#include "passes/pipeline.h"
#include "runtime/compiled_program.h"
#include "runtime/cuda/cuda_runner.h"
#include "runtime/memory_route.h"
#include "reference/lang_test_util.h"
#include "runtime/memory_test_support.h"
#include "support/backend_harness.h"
#include "support/cuda_emulator.h"
#include "support/cuda_harness.h"
#include "toolchain/compiler.h"
#include "toolchain/module_cache.h"

namespace fieldflow {
namespace {

using testing_support::gather_program;

using testing_support::same_bits;
using testing_support::Emulator;
using testing_support::EmulatedDeviceFields;
using testing_support::EmulatedDeviceMemory;
using testing_support::EmulatedProgram;
using testing_support::owned_stream;

class EmulatedRunner : public ::testing::Test {
 protected:
  void TearDown() override { testing_support::emulator = nullptr; }

  EmulatedProgram make(const ir::Program& program, TransientMemoryMode mode = TransientMemoryMode::pool,
                       ExternalMemoryAllocator allocator = {}) {
    CompileOptions o;
    o.memory.mode = mode;
    o.memory.external_memory_allocator = std::move(allocator);
    return testing_support::compile_with_emulated_runtime(emulator_, program, o);
  }

  Emulator emulator_;
  EmulatedDeviceMemory memory_{emulator_};
};

// A box with more rows than CUDA allows blocks along y (or z) is launched in pieces, each given
// its first row: 70,000 rows of J become launches of 65,535 and 4,465 blocks along y, 65,600
// levels along z launches of 65,535 and 65 (the emulated runtime refuses a grid past CUDA's
// limits, as a device does). Each point reads its neighbour in the next row, across the pieces'
// boundary too, and equals the reference.
TEST_F(EmulatedRunner, ABoxWithMoreRowsThanCudaHasBlocksIsLaunchedInPieces) {
  for (const bool along_z : {false, true}) {
    SCOPED_TRACE(along_z ? "levels along z" : "rows along y");
    testing_support::TallBox box = testing_support::tall_box(along_z);
    const ir::Program& program = box.program;
    const Arguments& args = box.args;
    const testing_support::ReferenceOutcome ref = testing_support::run_reference_on_copies(program, args);
    ASSERT_EQ(ref.error, nullptr);
    EmulatedProgram p = make(program, TransientMemoryMode::pool);
    emulator_.forget_calls();
    (*p.program)(args);
    ASSERT_EQ(emulator_.launch_pieces.size(), 2u);
    const auto& first = emulator_.launch_pieces[0];
    const auto& second = emulator_.launch_pieces[1];
    if (along_z) {
      EXPECT_EQ(first.grid_z, 65535u);
      EXPECT_EQ(second.grid_z, 65u);
      EXPECT_EQ(second.z0, 65535);
      EXPECT_EQ(second.y0, 0);
    } else {
      EXPECT_EQ(first.grid_y, 65535u);
      EXPECT_EQ(second.grid_y, 4465u);
      EXPECT_EQ(second.y0, 65535);
      EXPECT_EQ(second.z0, 0);
    }
    EXPECT_EQ(first.y0, 0);
    EXPECT_EQ(first.z0, 0);
    for (const auto& [mine, theirs] : ref.pairs) EXPECT_TRUE(same_bits(*theirs, *mine, "a field"));
  }
}

// A call whose boxes and buffers fit 32-bit indexing (fieldflow/abi.h, ff_fits_32bit_indexing)
// launches each kernel's 32-bit entry point, any other the 64-bit one: a field whose levels lie
// 2^29 float32 elements apart (its offsets pass 2^31), or just past the check's bound, and every
// call equals the reference. The choice is made per call: the same program takes both.
TEST_F(EmulatedRunner, CallsThatFit32BitIndexingRunThe32BitKernelsAndOthersThe64BitOnes) {
  const auto launched_only = [&](bool narrow) {
    if (emulator_.launched.empty()) return false;
    return std::all_of(emulator_.launched.begin(), emulator_.launched.end(), [&](const std::string& symbol) {
      return symbol.ends_with("_i32") == narrow;
    });
  };
  std::optional<EmulatedProgram> p;
  for (const auto& [stride, narrow] : {std::pair<std::int64_t, bool>{306'783'377, true}, {306'783'378, false},
                                       {std::int64_t{1} << 29, false}, {12, true}}) {
    SCOPED_TRACE(stride);
    const auto far = testing_support::far_apart_levels(stride);
    if (!p) p.emplace(make(far->program));
    const testing_support::ReferenceOutcome ref = testing_support::run_reference_on_copies(far->program, far->args);
    ASSERT_EQ(ref.error, nullptr);
    // Device views of the same memory: the emulator calls the mapping and o device memory.
    emulator_.add_device(far->memory.data(), far->memory.bytes());
    emulator_.add_device(far->o.data(), far->o.span_bytes());
    const Dimension I = horizontal_dim("I"), K = vertical_dim("K");
    Field a = Field::view(far->memory.data(), {I, K}, DType::float32, {5, 5}, {1, stride}, {0, -1}, Device::cuda);
    Field o = Field::view(far->o.data(), {I, K}, DType::float32, {5, 3}, {1, 5}, {0, 0}, Device::cuda);
    Arguments args;
    args.field("a", a).field("o", o);
    emulator_.forget_calls();
    (*p->program)(args);
    EXPECT_TRUE(launched_only(narrow)) << (emulator_.launched.empty() ? "nothing" : emulator_.launched[0]) << " launched";
    emulator_.remove_device(far->memory.data());
    emulator_.remove_device(far->o.data());
    for (const auto& [mine, theirs] : ref.pairs) {
      if (mine == &far->o) {
        EXPECT_TRUE(same_bits(*theirs, *mine, "o"));  // a is strided: same_bits compares bytes
      }
    }
  }
  // The built-in programs at the tests' sizes fit.
  const auto& ex = examples::example("hdiff");
  EmulatedProgram hdiff = make(ex.program);
  auto dev = ex.make_instance({13, 7, 5}, Layout::horizontal_fastest, 3);
  EmulatedDeviceFields d(emulator_, dev);
  emulator_.forget_calls();
  (*hdiff.program)(d.args);
  EXPECT_TRUE(launched_only(true));
}

// A steady-state call copies nothing: the fields are on the device, the tables copied once, and
// the kernels take what they read of the call as parameters (no descriptor to upload, also in
// pool mode, where the transients may come back at other addresses).
TEST_F(EmulatedRunner, DeviceFieldsEqualTheReferenceWithOneSyncAndNoCopies) {
  for (const char* name : {"hdiff", "vadv", "fvm_nabla", "nabla4", "c2e2co_sum", "diffusion_chain"})
    for (TransientMemoryMode mode : {TransientMemoryMode::persistent, TransientMemoryMode::pool}) {
      SCOPED_TRACE(fmt::format("{}, {}", name, to_string(mode)));
    const auto& ex = examples::example(name);
    EmulatedProgram p = make(ex.program, mode);
    const examples::ExampleSize size{131, 5, 7, ex.unstructured};  // bounded mesh: skip values
    auto ref = ex.make_instance(size, Layout::horizontal_fastest, 3);
    auto dev = ex.make_instance(size, Layout::horizontal_fastest, 3);
    run_reference(ex.program, ref.arguments());
    EmulatedDeviceFields d(emulator_, dev);
    emulator_.forget_calls();
    (*p.program)(d.args);
    // First call: every table goes to the device, no field does.
    std::size_t tables = 0, to_device = 0;
    for (const auto& e : d.args.entries()) tables += e.kind == Arguments::Entry::Kind::connectivity;
    for (const auto& c : emulator_.copies) {
      EXPECT_TRUE(c.to_device && !c.from_device) << c.bytes << " bytes copied";
      to_device += c.to_device;
    }
    EXPECT_EQ(to_device, tables) << "the tables";
    EXPECT_EQ(emulator_.syncs, 1);
    emulator_.forget_calls();
    (*p.program)(d.args);  // steady state: nothing to copy, one synchronisation
    EXPECT_EQ(emulator_.copies.size(), 0u)
        << emulator_.copies.size() << " copies, the first of "
        << (emulator_.copies.empty() ? 0 : emulator_.copies[0].bytes) << " bytes";
    EXPECT_EQ(emulator_.syncs, 1);
    EXPECT_LE(emulator_.launch_streams.size(), emulator_.symbols.size() / 2) << "one launch per kernel at most";
    EXPECT_GT(emulator_.launch_streams.size(), 0u);
    for (cudaStream_t s : emulator_.launch_streams) EXPECT_EQ(s, owned_stream);
    d.copy_back(dev);
    for (auto& [field, f] : ref.fields) EXPECT_TRUE(same_bits(f, dev.fields.at(field), field));
  }
}

TEST_F(EmulatedRunner, HostFieldsAreCopiedInAndBack) {
  for (const char* name : {"hdiff", "fvm_nabla"}) {
    SCOPED_TRACE(name);
    const auto& ex = examples::example(name);
    EmulatedProgram p = make(ex.program, TransientMemoryMode::scoped);
    const examples::ExampleSize size{40, 9, 6};
    auto ref = ex.make_instance(size, Layout::horizontal_fastest, 4);
    auto host = ex.make_instance(size, Layout::horizontal_fastest, 4);
    run_reference(ex.program, ref.arguments());
    const Arguments args = host.arguments();
    (*p.program)(args);
    emulator_.forget_calls();
    (*p.program)(args);
    std::size_t in = 0, back = 0;
    for (const auto& c : emulator_.copies) {
      in += c.to_device && !c.from_device;
      back += c.from_device && !c.to_device;
    }
    EXPECT_EQ(in, host.fields.size()) << "every field, outputs too (points outside the domain stay)";
    EXPECT_EQ(back, host.outputs.size());
    EXPECT_EQ(emulator_.syncs, 1);
    for (auto& [field, f] : ref.fields) EXPECT_TRUE(same_bits(f, host.fields.at(field), field));
  }
}

// Every built-in program in every transient-memory mode equals the reference, and each mode takes
// its memory from the allocation API it promises (counted through the allocation route): scoped
// one synchronous allocation per call, persistent one per instance, pool stream-ordered ones on
// the call's stream, external none (the allocator once, for device cuda, alignment >= 256).
TEST_F(EmulatedRunner, EveryExampleInEveryModeEqualsTheReferenceAndUsesTheModesApi) {
  using K = MemoryEvent::Kind;
  for (const auto& ex : examples::all_examples())
    for (TransientMemoryMode mode : {TransientMemoryMode::scoped, TransientMemoryMode::persistent,
                                     TransientMemoryMode::pool, TransientMemoryMode::external}) {
      SCOPED_TRACE(fmt::format("{}, {}", ex.name, to_string(mode)));
      int allocator_calls = 0;
      ExternalMemoryAllocator allocator = [&](const AllocationRequest& r) {
        ++allocator_calls;
        EXPECT_EQ(r.device, Device::cuda);
        EXPECT_GE(r.alignment, 256u);
        void* block = std::aligned_alloc(r.alignment, (r.bytes + r.alignment - 1) / r.alignment * r.alignment);
        emulator_.add_device(block, r.bytes);
        return Workspace{block, r.bytes, Device::cuda, [this, block] {
                           emulator_.remove_device(block);
                           std::free(block);
                         }};
      };
      EmulatedProgram p = make(ex.program, mode, mode == TransientMemoryMode::external ? allocator : nullptr);
      const examples::ExampleSize size{67, 9, 13, ex.unstructured};
      auto ref = ex.make_instance(size, Layout::horizontal_fastest, 5);
      auto dev = ex.make_instance(size, Layout::horizontal_fastest, 5);
      run_reference(ex.program, ref.arguments());
      run_reference(ex.program, ref.arguments());  // two calls, as below: in/out fields (masked_update) change
      EmulatedDeviceFields d(emulator_, dev);
      const bool has_transients = !p.program->memory_plan(size_symbols(ex.program, d.args)).transients.empty();
      testing::EventLog log;
      (*p.program)(d.args);
      (*p.program)(d.args);
      d.copy_back(dev);
      for (auto& [field, f] : ref.fields) EXPECT_TRUE(same_bits(f, dev.fields.at(field), field));
      std::size_t sys = 0, stream = 0;
      for (const MemoryEvent& e : log.events())
        if (e.device == Device::cuda && e.label == ex.program.name) {
          sys += e.kind == K::system_allocate;
          stream += e.kind == K::stream_allocate;
        }
      if (!has_transients) {
        EXPECT_EQ(sys + stream, 0u);
        continue;
      }
      switch (mode) {
        case TransientMemoryMode::scoped: EXPECT_EQ(sys, 2u) << "cudaMalloc once per call"; break;
        case TransientMemoryMode::persistent: EXPECT_EQ(sys, 1u) << "cudaMalloc once per instance"; break;
        case TransientMemoryMode::pool:
          EXPECT_EQ(stream, 2u) << "from fieldflow's pool, stream-ordered, per call";
          EXPECT_EQ(sys, 0u);
          break;
        case TransientMemoryMode::external:
          EXPECT_EQ(sys + stream, 0u) << "never allocates";
          EXPECT_EQ(allocator_calls, 1) << "the allocator once per instance";
          break;
      }
    }
}

// Pool mode takes each program's transients from the pool of its own release threshold
// (CompileOptions::cuda_pool_release_threshold), two programs in one process included: until
// now the first program's threshold was every program's.
TEST_F(EmulatedRunner, EachProgramsPoolAllocationsAskForItsReleaseThreshold) {
  const auto& ex = examples::example("vadv");  // transients on the device (hdiff's are inlined)
  const examples::ExampleSize size{20, 9, 4, ex.unstructured};
  for (const std::uint64_t threshold : {std::uint64_t{0}, std::uint64_t{1} << 30, UINT64_MAX}) {
    SCOPED_TRACE(threshold);
    CompileOptions o;
    o.memory.mode = TransientMemoryMode::pool;
    o.cuda_pool_release_threshold = threshold;
    EmulatedProgram p = testing_support::compile_with_emulated_runtime(emulator_, ex.program, o);
    auto dev = ex.make_instance(size, Layout::horizontal_fastest, 5);
    EmulatedDeviceFields d(emulator_, dev);
    ASSERT_FALSE(p.program->memory_plan(size_symbols(ex.program, d.args)).transients.empty());
    const int before = memory_.async_allocates;
    (*p.program)(d.args);
    EXPECT_EQ(memory_.async_allocates, before + 1);
    EXPECT_EQ(memory_.last_release_threshold.load(), threshold);
  }
}

TEST_F(EmulatedRunner, AFailedCallRestoresDeviceOutputsAndTheNextClearsTheErrorFlag) {
  const std::int64_t n = 300, levels = 5;
  const Dimension I = horizontal_dim("I"), K = vertical_dim("K");
  auto field = [&](DType t) { return Field({I, K}, t, {n, levels}, {}, Layout::horizontal_fastest); };
  Field a = field(DType::float64), off = field(DType::int32), o = field(DType::float64);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t k = 0; k < levels; ++k) {
      a.at<double>({i, k}) = 0.25 * static_cast<double>(i * i) - static_cast<double>(k);
      off.at<std::int32_t>({i, k}) = i + 2 < n ? 2 : -static_cast<std::int32_t>(i % 3);
    }
  o.fill(7.0);
  Field want = o.clone();
  CompileOptions cpu;
  cpu.layout = Layout::horizontal_fastest;
  const ir::Program program = gather_program();
  auto arguments = [&](Field& fa, Field& foff, Field& fo) {
    Arguments args;
    args.field("a", fa).field("off", foff).field("o", fo).scalar("ni", static_cast<std::int32_t>(n));
    return args.scalar("nk", static_cast<std::int32_t>(levels));
  };
  compile(program, cpu)(arguments(a, off, want));

  // The fields in "device memory".
  std::vector<double> ma(static_cast<std::size_t>(n * levels)), mo(ma.size(), 7.0);
  std::vector<std::int32_t> moff(ma.size());
  std::memcpy(ma.data(), a.data(), a.bytes());
  std::memcpy(moff.data(), off.data(), off.bytes());
  for (const void* p : {static_cast<const void*>(ma.data()), static_cast<const void*>(mo.data())})
    emulator_.add_device(p, ma.size() * sizeof(double));
  emulator_.add_device(moff.data(), moff.size() * sizeof(std::int32_t));
  auto view = [&](void* p, DType t) { return Field::view(p, {I, K}, t, {n, levels}, {1, n}, {}, Device::cuda); };
  Field da = view(ma.data(), DType::float64), doff = view(moff.data(), DType::int32), dout = view(mo.data(), DType::float64);

  EmulatedProgram p = make(program, TransientMemoryMode::persistent);  // transients at fixed addresses
  moff[static_cast<std::size_t>(n * levels - 1)] = 1000;  // the last point reads outside a
  EXPECT_THROW((*p.program)(arguments(da, doff, dout)), DomainError);
  EXPECT_EQ(mo, std::vector<double>(mo.size(), 7.0)) << "the output is restored";
  moff[static_cast<std::size_t>(n * levels - 1)] = off.at<std::int32_t>({n - 1, levels - 1});
  emulator_.forget_calls();
  (*p.program)(arguments(da, doff, dout));
  EXPECT_EQ(std::count_if(emulator_.copies.begin(), emulator_.copies.end(),
                          [](const auto& c) { return !c.from_device && c.to_device && c.bytes == sizeof(std::int32_t); }),
            1)
      << "after a failed call the error flag is cleared";
  EXPECT_EQ(emulator_.syncs, 1) << "the error flag is read, nothing is copied back";
  EXPECT_EQ(std::memcmp(mo.data(), want.data(), want.bytes()), 0);
  emulator_.forget_calls();
  (*p.program)(arguments(da, doff, dout));
  ASSERT_EQ(emulator_.copies.size(), 2u) << "the output saved before the launches, the error flag read after";
  EXPECT_TRUE(emulator_.copies[0].from_device && emulator_.copies[0].to_device);
  EXPECT_EQ(emulator_.copies[1].bytes, sizeof(std::int32_t));
  for (const void* q : {static_cast<const void*>(ma.data()), static_cast<const void*>(mo.data()),
                        static_cast<const void*>(moff.data())})
    emulator_.remove_device(q);
}

TEST_F(EmulatedRunner, MemoryElsewhereThanTheFieldSaysIsRefusedBeforeAnythingRuns) {
  const auto& ex = examples::example("laplacian");
  EmulatedProgram p = make(ex.program);
  auto inst = ex.make_instance({20, 10, 4}, Layout::horizontal_fastest, 2);
  EmulatedDeviceFields d(emulator_, inst);
  const Field& out = d.views.at("out");
  // A Device::cuda view over host memory.
  Field host_as_device = Field::view(inst.fields.at("out").data(), out.dims(), out.dtype(), out.shape(), out.strides(),
                                     out.origin(), Device::cuda);
  // A host field over device memory.
  Field device_as_host = Field::view(d.views.at("out").data(), out.dims(), out.dtype(), out.shape(), out.strides(),
                                     out.origin());
  for (Field* wrong : {&host_as_device, &device_as_host}) {
    Arguments args;
    for (const auto& e : d.args.entries()) {
      if (e.kind == Arguments::Entry::Kind::field) args.field(e.name, e.name == "out" ? *wrong : *e.field);
      if (e.kind == Arguments::Entry::Kind::scalar) args.scalar(e.name, e.scalar);
    }
    emulator_.forget_calls();
    try {
      (*p.program)(args);
      ADD_FAILURE() << "memory elsewhere than the field says was accepted";
    } catch (const ArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find("field 'out'"), std::string::npos) << e.what();
    }
    EXPECT_TRUE(emulator_.launch_streams.empty()) << "nothing ran";
  }
  (*p.program)(d.args);
}

// Views that interleave in one array without sharing an element (the components of an array of
// structures, here (K, component, I)) may be outputs of one call, in device memory and in host
// memory alike. In device memory the kernels write only their elements. A host output comes back
// from its device copy element by element: copied back over its whole span, u's copy would write
// v's old values over v's rows between u's (and v's over u's), and the fourth component, which the
// call does not name, would be written too. The first call sizes the host staging; the second is
// checked again.
// A failed call undoes its device outputs element by element, as the CPU runtime does: the bytes
// between a strided output's elements may be another field's, which another stream may write
// while the call runs, and they keep what it wrote (a copy of the output's span put back their
// values from before the call). Three components in one array in device memory: a, the output
// o, and w, which the call does not name and "another stream" writes during the launches; the
// components interleave by rows of I (o's runs are rows: one plain copy each) or by points
// (Layout::any; o's runs are columns of K, 3 points apart: one strided copy each).
TEST_F(EmulatedRunner, AFailedCallRestoresOnlyTheElementsOfAStridedDeviceOutput) {
  const Dimension I = horizontal_dim("I"), K = vertical_dim("K");
  const std::int64_t n = 300, levels = 3, components = 3;
  for (const bool by_points : {false, true}) {
    SCOPED_TRACE(by_points ? "components interleaved by points" : "components interleaved by rows");
    const std::int64_t point_stride = by_points ? components : 1, row_stride = components * n;
    std::vector<double> aos(static_cast<std::size_t>(components * n * levels));
    const auto element = [&](int c) { return by_points ? c : c * n; };
    const auto at = [&](int c, std::int64_t i, std::int64_t k) -> double& {
      return aos[static_cast<std::size_t>(k * row_stride + i * point_stride + element(c))];
    };
    std::vector<std::int32_t> off(static_cast<std::size_t>(n * levels));
    const auto offset = [&](std::int64_t i, std::int64_t k) -> std::int32_t& { return off[static_cast<std::size_t>(k * n + i)]; };
    for (std::int64_t k = 0; k < levels; ++k)
      for (std::int64_t i = 0; i < n; ++i) {
        at(0, i, k) = 0.5 * static_cast<double>(i * i % 37) - static_cast<double>(k);
        at(1, i, k) = 7.0;
        at(2, i, k) = -7.0;
        offset(i, k) = i + 1 < n ? 1 : 0;
      }
    emulator_.add_device(aos.data(), aos.size() * sizeof(double));
    emulator_.add_device(off.data(), off.size() * sizeof(std::int32_t));
    auto component = [&](int c) {
      return Field::view(aos.data() + element(c), {I, K}, DType::float64, {n, levels}, {point_stride, row_stride}, {},
                         Device::cuda);
    };
    Field da = component(0), dout = component(1);
    Field doff = Field::view(off.data(), {I, K}, DType::int32, {n, levels}, {1, n}, {}, Device::cuda);
    Arguments args;
    args.field("a", da).field("off", doff).field("o", dout).scalar("ni", static_cast<std::int32_t>(n));
    args.scalar("nk", static_cast<std::int32_t>(levels));
    CompileOptions o;
    o.memory.mode = TransientMemoryMode::persistent;
    if (by_points) o.layout = Layout::any;
    EmulatedProgram p = testing_support::compile_with_emulated_runtime(emulator_, gather_program(), o);

    offset(n - 1, levels - 1) = 1000;  // the last point reads outside a
    emulator_.during_launch = [&] {
      for (std::int64_t k = 0; k < levels; ++k)
        for (std::int64_t i = 0; i < n; ++i) at(2, i, k) = 42.0;
    };
    emulator_.forget_calls();
    EXPECT_THROW((*p.program)(args), DomainError);
    for (std::int64_t k = 0; k < levels; ++k)
      for (std::int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(at(1, i, k), 7.0) << "the output is restored at " << i << ", " << k;
        ASSERT_EQ(at(2, i, k), 42.0) << "what another stream wrote between its elements stays, at " << i << ", " << k;
      }
    EXPECT_EQ(emulator_.copies_2d, by_points ? n : 0) << "one strided copy per column of o";
    if (by_points) {
      // A strided copy CUDA refuses is a CudaError naming it; the next call starts afresh.
      emulator_.copy_2d_result = cudaErrorInvalidValue;
      const std::string error = testing_support::error_of<CudaError>([&] { (*p.program)(args); });
      EXPECT_NE(error.find("cudaMemcpy2DAsync"), std::string::npos) << error;
      emulator_.copy_2d_result = cudaSuccess;
    }

    offset(n - 1, levels - 1) = 0;
    emulator_.during_launch = {};
    (*p.program)(args);
    for (std::int64_t k = 0; k < levels; ++k)
      for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t j = i + offset(i, k);
        ASSERT_EQ(at(1, i, k), at(0, j, k) - at(0, i, k)) << "o at " << i << ", " << k;
        ASSERT_EQ(at(2, i, k), 42.0) << "w at " << i << ", " << k;
      }
    emulator_.remove_device(aos.data());
    emulator_.remove_device(off.data());
  }
}

TEST_F(EmulatedRunner, InterleavedOutputsRunInDeviceAndHostMemory) {
  const Dimension I = horizontal_dim("I"), K = vertical_dim("K");
  EmulatedProgram p = make(testing_support::components_program(), TransientMemoryMode::pool);
  const std::int64_t ni = 300, nk = 3, components = 4;  // rows longer than one block of threads
  std::vector<double> aos(static_cast<std::size_t>(components * ni * nk));
  const auto at = [&](int c, std::int64_t i, std::int64_t k) -> double& {
    return aos[static_cast<std::size_t>(k * components * ni + c * ni + i)];
  };
  const auto reset = [&] {
    std::fill(aos.begin(), aos.end(), -7.0);
    for (std::int64_t k = 0; k < nk; ++k)
      for (std::int64_t i = 0; i < ni; ++i) at(0, i, k) = static_cast<double>(i * 7 % 23) + 0.5 * static_cast<double>(k);
  };
  std::vector<Field> views;
  const auto arguments = [&](Device d) {
    views.clear();
    for (int c = 0; c < 3; ++c)
      views.push_back(Field::view(aos.data() + c * ni, {I, K}, DType::float64, {ni, nk}, {1, components * ni}, {}, d));
    Arguments args;
    args.field("a", views[0]).field("u", views[1]).field("v", views[2]).scalar("n", ni).scalar("nk", nk);
    return args;
  };
  const auto check = [&](const std::string& what) {
    for (std::int64_t k = 0; k < nk; ++k)
      for (std::int64_t i = 0; i < ni; ++i) {
        ASSERT_EQ(at(0, i, k), static_cast<double>(i * 7 % 23) + 0.5 * static_cast<double>(k)) << what << ": a";
        const double u_expected = i == 0 || i == ni - 1 ? -7.0 : (at(0, i + 1, k) + at(0, i - 1, k)) * 0.5;
        ASSERT_EQ(at(1, i, k), u_expected) << what << ": u at " << i << ", " << k;
        ASSERT_EQ(at(2, i, k), at(0, i, k) * 2.0) << what << ": v at " << i << ", " << k;
        ASSERT_EQ(at(3, i, k), -7.0) << what << ": the component the call does not name";
      }
  };
  for (int call = 0; call < 2; ++call) {
    reset();
    (*p.program)(arguments(Device::cpu));
    check(fmt::format("host memory, call {}", call));
  }
  reset();
  emulator_.add_device(aos.data(), aos.size() * sizeof(double));
  (*p.program)(arguments(Device::cuda));
  emulator_.remove_device(aos.data());
  check("device memory");
}

// A time loop that moves one view to other memory: only that field's memory is asked about
// again; moved to host memory, it is refused before anything runs. Memory of another device is
// refused too, and a failing CUDA call is a CudaError naming the call, the program and CUDA's error.
TEST_F(EmulatedRunner, MovedViewsAreCheckedAgainAndCudaFailuresAreTypedErrors) {
  const auto& ex = examples::example("laplacian");
  EmulatedProgram p = make(ex.program);
  auto inst = ex.make_instance({20, 10, 4}, Layout::horizontal_fastest, 2);
  EmulatedDeviceFields d(emulator_, inst);
  (*p.program)(d.args);
  emulator_.forget_calls();
  (*p.program)(d.args);
  EXPECT_EQ(emulator_.pointer_queries, 0) << "nothing moved";
  Field& out = d.views.at("out");
  void* const home = out.data();
  std::vector<std::byte> other(inst.fields.at("out").span_bytes() + 64);
  void* const elsewhere = other.data() + (64 - reinterpret_cast<std::uintptr_t>(other.data()) % 64) % 64;
  emulator_.add_device(elsewhere, inst.fields.at("out").span_bytes());
  out.set_view_data(elsewhere);
  emulator_.forget_calls();
  (*p.program)(d.args);
  EXPECT_EQ(emulator_.pointer_queries, 1) << "only the field that moved";
  out.set_view_data(inst.fields.at("out").data());  // host memory
  emulator_.forget_calls();
  try {
    (*p.program)(d.args);
    ADD_FAILURE() << "a Device::cuda view over host memory ran";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("field 'out' is a view over cuda memory"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(emulator_.launch_streams.empty()) << "nothing ran";
  emulator_.remove_device(elsewhere);
  out.set_view_data(home);
  emulator_.device_of_memory = 1;
  try {
    (*p.program)(d.args);
    ADD_FAILURE() << "memory of another device was accepted";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("field 'out' is memory of cuda device 1, but the program runs on device 0"),
              std::string::npos)
        << e.what();
  }
  emulator_.device_of_memory = 0;
  emulator_.launch_result = cudaErrorLaunchFailure;
  try {
    (*p.program)(d.args);
    ADD_FAILURE() << "a failed launch went unnoticed";
  } catch (const CudaError& e) {
    EXPECT_NE(std::string(e.what()).find("cudaLaunchKernel failed for program 'laplacian' kernel 'ff_kernel_0_i32'"),
              std::string::npos)
        << e.what() << ": names the entry point it launched";
    EXPECT_NE(std::string(e.what()).find("cudaErrorLaunchFailure"), std::string::npos) << e.what();
  }
  emulator_.launch_result = cudaSuccess;
  (*p.program)(d.args);  // and the instance runs again
}

// The image is made resident when the program is created (CUDA loads it lazily, at the first
// launch, otherwise): an image the device cannot run, or a kernel whose launch has more threads
// per block than the compiled kernel allows, or an image without one of the entry points, is
// refused then, naming the call and the kernel, and nothing is left loaded.
TEST_F(EmulatedRunner, AnImageTheDeviceCannotRunIsRefusedWhenTheProgramIsCreated) {
  const auto& ex = examples::example("laplacian");
  emulator_.attributes_result = cudaErrorNoKernelImageForDevice;
  try {
    make(ex.program);
    ADD_FAILURE() << "an image the device cannot run was accepted";
  } catch (const CudaError& e) {
    EXPECT_NE(std::string(e.what()).find("cudaFuncGetAttributes failed for program 'laplacian' kernel 'ff_kernel_0'"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("cudaErrorNoKernelImageForDevice"), std::string::npos) << e.what();
  }
  EXPECT_EQ(emulator_.libraries, 0) << "the library of a program that failed to start was not unloaded";
  emulator_.attributes_result = cudaSuccess;
  emulator_.max_threads_per_block = 32;
  try {
    make(ex.program);
    ADD_FAILURE() << "a launch larger than the kernel allows was accepted";
  } catch (const CudaError& e) {
    EXPECT_NE(std::string(e.what()).find("kernel 'ff_kernel_0' runs at most 32 threads per block"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(emulator_.libraries, 0);
  emulator_.max_threads_per_block = 1024;
  // An image without a kernel's 32-bit entry point (one made before ABI 7) is refused, naming it.
  emulator_.missing_symbol = "ff_kernel_0_i32";
  const std::string missing = testing_support::error_of<CudaError>([&] { make(ex.program); });
  EXPECT_NE(missing.find("cudaLibraryGetKernel failed for program 'laplacian' kernel 'ff_kernel_0_i32'"),
            std::string::npos)
      << missing;
  EXPECT_NE(missing.find("cudaErrorSymbolNotFound"), std::string::npos) << missing;
  EXPECT_EQ(emulator_.libraries, 0);
  emulator_.missing_symbol.clear();
  EmulatedProgram p = make(ex.program);
  EXPECT_EQ(emulator_.libraries, 1);
  p.program.reset();
  EXPECT_EQ(emulator_.libraries, 0);
}

// The runner sizes the call's boxes by the schedule's kernels, not its launches (a
// consumer fused into a scan has no launch, but its box is read): options that leave the count
// out are refused before anything is loaded.
TEST_F(EmulatedRunner, OptionsWithoutTheKernelCountAreRefused) {
  const auto& ex = examples::example("vadv");
  const driver::CudaBuild built = driver::build_cuda_source(ex.program, CompileOptions{});
  ASSERT_LT(built.source.launches.size(), built.schedule.kernels.size()) << "vadv's update runs in its sweep";
  runtime::cuda::CudaRunnerOptions ro;
  ro.program = "vadv";
  ro.cubin = "emulated";
  ro.launches = built.source.launches;
  ro.buffers = ex.program.params.size() + built.schedule.transients.size();
  ro.api = &testing_support::emulated_api;
  testing_support::emulator = &emulator_;
  emulator_.symbols = driver::emulation_entry_points(built.source);
  try {
    runtime::cuda::make_cuda_runner(ro);
    ADD_FAILURE() << "a runner without its kernel count was made";
  } catch (const InternalError& e) {
    EXPECT_NE(std::string(e.what()).find("launch 'ff_kernel_0' runs kernel 0 of the 0 the options count"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(emulator_.libraries, 0);
  ro.kernels = built.schedule.kernels.size();
  EXPECT_NE(runtime::cuda::make_cuda_runner(ro), nullptr);
}

// A program belongs to the device that was current when it was created (its module, stream and
// memory are there): a call from a thread whose current device is another is refused before
// anything runs or is allocated (vadv in scoped mode allocates its transients on every call), and
// the program runs again once its device is current.
TEST_F(EmulatedRunner, ACallFromAnotherCurrentDeviceIsRefused) {
  const auto& ex = examples::example("vadv");
  EmulatedProgram p = make(ex.program, TransientMemoryMode::scoped);
  auto inst = ex.make_instance({20, 10, 4}, Layout::horizontal_fastest, 2);
  EmulatedDeviceFields d(emulator_, inst);
  (*p.program)(d.args);
  EmulatedProgram persistent = make(ex.program, TransientMemoryMode::persistent);
  emulator_.current_device = 1;
  emulator_.forget_calls();
  testing::EventLog log;
  try {
    (*p.program)(d.args);
    ADD_FAILURE() << "a call with device 1 current ran a program created on device 0";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("program 'vadv' was created on cuda device 0, but the calling thread's "
                                         "current device is 1"),
              std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(emulator_.launch_streams.empty()) << "nothing ran";
  EXPECT_TRUE(emulator_.copies.empty()) << "nothing was copied";
  EXPECT_TRUE(log.events().empty()) << "memory was obtained for a refused call";
  // Memory obtained ahead of the calls (prepare) would be memory of the other device too.
  EXPECT_THROW(persistent.program->prepare(size_symbols(ex.program, d.args)), ArgumentError);
  EXPECT_TRUE(log.events().empty()) << "memory was obtained on the wrong device";
  emulator_.current_device = 0;
  persistent.program->prepare(size_symbols(ex.program, d.args));
  EXPECT_FALSE(log.events().empty());
  (*p.program)(d.args);
  EXPECT_FALSE(emulator_.launch_streams.empty());
}

TEST_F(EmulatedRunner, APerCallStreamCarriesTheCallsWork) {
  const auto& ex = examples::example("hdiff");
  EmulatedProgram p = make(ex.program, TransientMemoryMode::pool);
  auto inst = ex.make_instance({30, 8, 5}, Layout::horizontal_fastest, 2);
  const Arguments args = inst.arguments();  // host fields: copies as well as launches
  const auto given = reinterpret_cast<cudaStream_t>(std::uintptr_t{0x7777});
  emulator_.forget_calls();
  (*p.program)(args, CallOptions{given});
  ASSERT_FALSE(emulator_.launch_streams.empty());
  for (cudaStream_t s : emulator_.launch_streams) EXPECT_EQ(s, given);
  for (cudaStream_t s : emulator_.copy_streams) EXPECT_EQ(s, given);
  emulator_.forget_calls();
  (*p.program)(args);
  for (cudaStream_t s : emulator_.launch_streams) EXPECT_EQ(s, owned_stream);
}

// Caller memory for the device's transients that is not memory of the program's device (host
// memory, another GPU's) is refused before anything runs, naming what it is: a kernel given host
// memory faults, and on a GPU that fault is sticky (every later CUDA call of the process fails).
// A workspace is asked about once per address; a rejected allocator block is handed back.
TEST_F(EmulatedRunner, CallerMemoryThatIsNotTheDevicesIsRefusedBeforeAnythingRuns) {
  using testing_support::error_of;
  const auto& ex = examples::example("vadv");  // transients on the device
  auto inst = ex.make_instance({20, 9, 4}, Layout::horizontal_fastest, 2);
  EmulatedDeviceFields d(emulator_, inst);
  EmulatedProgram probe = make(ex.program, TransientMemoryMode::pool);
  const std::size_t need = probe.program->memory_plan(size_symbols(ex.program, d.args)).bytes_on(Device::cuda);
  ASSERT_GT(need, 0u);
  const std::size_t rounded = (need + 255) / 256 * 256;
  std::unique_ptr<void, decltype(&std::free)> host(std::aligned_alloc(256, rounded), &std::free);

  CompileOptions o;
  o.memory.mode = TransientMemoryMode::external;
  o.memory.external_workspace[Device::cuda] = Workspace{host.get(), rounded, Device::cuda, {}};
  EmulatedProgram p = testing_support::compile_with_emulated_runtime(emulator_, ex.program, o);
  emulator_.forget_calls();
  std::string msg = error_of<WorkspaceError>([&] { (*p.program)(d.args); });
  EXPECT_NE(msg.find("program 'vadv': the external workspace for device cuda at"), std::string::npos) << msg;
  EXPECT_NE(msg.find("is host memory, where the program's kernels run on cuda device 0 and need its memory"),
            std::string::npos) << msg;
  EXPECT_TRUE(emulator_.launch_streams.empty()) << "nothing ran";

  // Another GPU's memory.
  emulator_.add_device(host.get(), rounded);
  emulator_.device_of_memory = 1;
  msg = error_of<WorkspaceError>([&] { (*p.program)(d.args); });
  EXPECT_NE(msg.find("is memory of cuda device 1, where the program's kernels run on cuda device 0"), std::string::npos)
      << msg;
  EXPECT_TRUE(emulator_.launch_streams.empty()) << "nothing ran";

  // The device's own: the call runs, equal to the reference; the next asks nothing about it.
  emulator_.device_of_memory = 0;
  auto ref = ex.make_instance({20, 9, 4}, Layout::horizontal_fastest, 2);
  run_reference(ex.program, ref.arguments());
  (*p.program)(d.args);
  d.copy_back(inst);
  for (auto& [name, f] : ref.fields) EXPECT_TRUE(same_bits(f, inst.fields.at(name), name));
  const int queries = emulator_.pointer_queries;
  (*p.program)(d.args);
  EXPECT_EQ(emulator_.pointer_queries, queries) << "the workspace was asked about again";
  emulator_.remove_device(host.get());

  // An allocator's block in host memory: refused, and handed back through its release action.
  int releases = 0;
  EmulatedProgram a = make(ex.program, TransientMemoryMode::external, [&](const AllocationRequest& r) {
    return Workspace{host.get(), std::max(r.bytes, rounded), Device::cuda, [&releases] { ++releases; }};
  });
  emulator_.forget_calls();
  msg = error_of<WorkspaceError>([&] { (*a.program)(d.args); });
  EXPECT_NE(msg.find("the block returned by external_memory_allocator for device cuda at"), std::string::npos) << msg;
  EXPECT_NE(msg.find("is host memory"), std::string::npos) << msg;
  EXPECT_EQ(releases, 1) << "the rejected block was not handed back";
  EXPECT_EQ(a.program->memory_stats().workspace_installs, 0u);
  EXPECT_TRUE(emulator_.launch_streams.empty()) << "nothing ran";
}

// The device tests of transient memory (tests/cuda/test_cuda_device.cpp: allocator, workspaces,
// pools, streams) run vadv because its GPU schedule keeps transients; hdiff's are inlined. Checked
// here, without a device, so that a pipeline change that inlines vadv's too is noticed before a
// GPU session spends its minutes on tests that lost their subject.
TEST(DeviceTestSubjects, VadvKeepsTransientsOnTheGpu) {
  for (const Layout layout : {Layout::horizontal_fastest, Layout::vertical_fastest})
    for (const TransientMemoryMode mode : {TransientMemoryMode::pool, TransientMemoryMode::external}) {
      SCOPED_TRACE(fmt::format("{}, {}", to_string(layout), to_string(mode)));
      CompileOptions o;
      o.backend = Backend::cuda;
      o.layout = layout;
      o.memory.mode = mode;
      if (mode == TransientMemoryMode::external)
        o.memory.external_memory_allocator = [](const AllocationRequest&) -> Workspace { return {}; };
      EXPECT_FALSE(driver::build_cuda_source(examples::example("vadv").program, o).schedule.transients.empty());
    }
}

// A stream of another device, given per call or per instance, is refused before anything runs,
// naming both devices; a per-call stream is asked about only when it changes.
TEST_F(EmulatedRunner, AStreamOfAnotherDeviceIsRefused) {
  const auto& ex = examples::example("hdiff");
  auto inst = ex.make_instance({30, 8, 5}, Layout::horizontal_fastest, 2);
  const auto given = reinterpret_cast<cudaStream_t>(std::uintptr_t{0x7779});
  EmulatedProgram p = make(ex.program);
  (*p.program)(inst.arguments(), CallOptions{given});
  emulator_.device_of_streams = 1;
  (*p.program)(inst.arguments(), CallOptions{given});  // checked already: not asked again
  const auto other = reinterpret_cast<cudaStream_t>(std::uintptr_t{0x777a});
  emulator_.forget_calls();
  try {
    (*p.program)(inst.arguments(), CallOptions{other});
    ADD_FAILURE() << "a stream of device 1 was used by a program of device 0";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("program 'hdiff' runs on cuda device 0, but the call's stream "
                                         "(CallOptions::cuda_stream) belongs to device 1"),
              std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(emulator_.launch_streams.empty() && emulator_.copies.empty()) << "nothing ran";
  CompileOptions o;
  o.cuda_stream = other;
  try {
    testing_support::compile_with_emulated_runtime(emulator_, ex.program, o);
    ADD_FAILURE() << "an instance stream of device 1 was accepted";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("but the instance's stream (CompileOptions::cuda_stream) belongs to device 1"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(emulator_.libraries, 1) << "the refused program's image was unloaded";
  emulator_.device_of_streams = 0;
}

// Every call ends with its stream synchronised, so a program going away waits only on the stream
// it owns: a stream the host lent it (CompileOptions::cuda_stream), perhaps destroyed first, is not
// touched.
TEST_F(EmulatedRunner, AProgramGoingAwayLeavesALentStreamAlone) {
  const auto& ex = examples::example("hdiff");
  auto inst = ex.make_instance({30, 8, 5}, Layout::horizontal_fastest, 2);
  const auto lent = reinterpret_cast<cudaStream_t>(std::uintptr_t{0x7778});
  for (const bool lend : {true, false}) {
    SCOPED_TRACE(lend ? "a lent stream" : "its own stream");
    CompileOptions o;
    o.cuda_stream = lend ? lent : nullptr;
    std::optional<EmulatedProgram> p(testing_support::compile_with_emulated_runtime(emulator_, ex.program, o));
    (*p->program)(inst.arguments());
    emulator_.forget_calls();
    p.reset();
    EXPECT_EQ(emulator_.synced_streams, lend ? std::vector<cudaStream_t>{} : std::vector<cudaStream_t>{owned_stream});
  }
}

// A call that fails after enqueuing work (here a launch CUDA refuses, after the copies in) waits
// for that work before it returns, so the caller may free or hand on its memory, and trusts
// nothing it left: the next call copies the tables again and clears the error flag, and equals
// the reference.
TEST_F(EmulatedRunner, ACallThatFailsMidwayWaitsForItsWorkAndTheNextTrustsNothingItLeft) {
  auto count_copies = [&](std::size_t bytes) {
    return std::count_if(emulator_.copies.begin(), emulator_.copies.end(),
                         [&](const auto& c) { return !c.from_device && c.to_device && c.bytes == bytes; });
  };
  // Returns the copies of `bytes` into the device of a call in steady state (before the failure).
  auto fail_once = [&](const std::function<void()>& call, std::size_t bytes) {
    call();
    emulator_.forget_calls();
    call();
    const auto steady = count_copies(bytes);
    emulator_.forget_calls();
    emulator_.launch_result = cudaErrorLaunchFailure;
    EXPECT_THROW(call(), CudaError);
    EXPECT_GE(emulator_.syncs, 1) << "the failed call waited for what it had enqueued";
    emulator_.launch_result = cudaSuccess;
    emulator_.forget_calls();
    call();
    return steady;
  };
  {  // tables
    EmulatedProgram p = make(testing_support::edge_mean_program(), TransientMemoryMode::pool);
    const Dimension Vertex = horizontal_dim("Vertex"), Edge = horizontal_dim("Edge");
    std::int32_t e2v[6] = {0, 1, 1, 2, 2, 0};
    std::vector<double> v = {10, 20, 40}, e(3, -1.0);
    Field fvv = Field::view(v.data(), {Vertex}, DType::float64, {3}, {1});
    Field fev = Field::view(e.data(), {Edge}, DType::float64, {3}, {1});
    const NeighborTable table = NeighborTable::view("E2V", "Edge", "Vertex", 3, 3, 2, e2v, 2, 1);
    // The fields fv and fe, host memory, are copied in on every call; they have the table's bytes.
    const auto steady = fail_once(
        [&] { (*p.program)(Arguments().field("fv", fvv).field("fe", fev).connectivity("E2V", table).scalar("ne", 3)); },
        sizeof e2v);
    EXPECT_EQ(count_copies(sizeof e2v), steady + 1) << "the table is copied again";
    EXPECT_EQ(e, (std::vector<double>{15, 30, 25}));
  }
  {  // the error flag
    const std::int64_t n = 40, levels = 3;
    const Dimension I = horizontal_dim("I"), K = vertical_dim("K");
    auto field = [&](DType t) { return Field({I, K}, t, {n, levels}, {}, Layout::horizontal_fastest); };
    Field a = field(DType::float64), off = field(DType::int32), o = field(DType::float64);
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t k = 0; k < levels; ++k) {
        a.at<double>({i, k}) = static_cast<double>(3 * i - k);
        off.at<std::int32_t>({i, k}) = i + 1 < n ? 1 : 0;
      }
    o.fill(0.0);
    Field want = o.clone();
    const ir::Program program = gather_program();
    auto arguments = [&](Field& fo) {
      Arguments args;
      args.field("a", a).field("off", off).field("o", fo).scalar("ni", static_cast<std::int32_t>(n));
      return args.scalar("nk", static_cast<std::int32_t>(levels));
    };
    run_reference(program, arguments(want));
    EmulatedProgram p = make(program, TransientMemoryMode::pool);
    EXPECT_EQ(fail_once([&] { (*p.program)(arguments(o)); }, sizeof(std::int32_t)), 0);
    EXPECT_EQ(count_copies(sizeof(std::int32_t)), 1) << "the error flag is cleared";
    EXPECT_TRUE(same_bits(want, o, "o"));
  }
}

// The device keeps a copy of each neighbour table, made again only when a call gives another
// table. "Another table" is another NeighborTable object (docs/cuda.md), also when it views the
// same, rewritten entries, or lands where a freed table lived: the fuzzer found a stale copy when
// a new mesh's tables reused the old mesh's memory (same address and size, other entries).
TEST_F(EmulatedRunner, ANewTableObjectIsCopiedAgainWhereverItLives) {
  const Dimension Vertex = horizontal_dim("Vertex"), Edge = horizontal_dim("Edge");
  EmulatedProgram p = make(testing_support::edge_mean_program(), TransientMemoryMode::pool);
  std::int32_t e2v[6] = {0, 1, 1, 2, 2, 0};  // C order: edge i joins e2v[2i], e2v[2i + 1]
  std::vector<double> v = {10, 20, 40}, e(3, -1.0);
  Field fvv = Field::view(v.data(), {Vertex}, DType::float64, {3}, {1});
  Field fev = Field::view(e.data(), {Edge}, DType::float64, {3}, {1});
  auto call = [&](const NeighborTable& t) {
    (*p.program)(Arguments().field("fv", fvv).field("fe", fev).connectivity("E2V", t).scalar("ne", 3));
  };
  std::optional<NeighborTable> table;
  table.emplace(NeighborTable::view("E2V", "Edge", "Vertex", 3, 3, 2, e2v, 2, 1));
  call(*table);
  EXPECT_EQ(e, (std::vector<double>{15, 30, 25}));
  // Another table object over the same, rewritten entries.
  std::swap(e2v[0], e2v[1]);
  e2v[1] = 2;  // edge 0 joins vertices 1 and 2
  const NeighborTable other = NeighborTable::view("E2V", "Edge", "Vertex", 3, 3, 2, e2v, 2, 1);
  call(other);
  EXPECT_EQ(e, (std::vector<double>{30, 30, 25}));
  // A new table object in the freed one's place: same object address, same entries address.
  table.reset();
  e2v[2] = 0;  // edge 1 joins vertices 0 and 2
  table.emplace(NeighborTable::view("E2V", "Edge", "Vertex", 3, 3, 2, e2v, 2, 1));
  call(*table);
  EXPECT_EQ(e, (std::vector<double>{30, 25, 25}));
}

}  // namespace
}  // namespace fieldflow
