// Backend::cuda on a device (scripts/gpu-check.sh runs this on a GPU machine; without a device
// every test skips with the reason). Every built-in program equals the reference bit for bit in
// all four transient-memory modes; each mode uses the allocation API it promises, counted through
// the allocation route; the allocator is asked once per instance for device cuda with alignment
// >= 256; a throwing allocator's error and bad caller workspaces reach the caller as typed errors;
// fields in device memory are used in place (no copies), memory that is not where a field says is
// refused, an in-kernel failure restores device outputs; per-call streams; the default layout.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "driver/cuda_build.h"
#include "fieldflow/device_errors.h"
#include "fieldflow/aot.h"
#include "fieldflow/dsl.h"
#include "fieldflow/examples.h"
#include "fieldflow/fieldflow.h"
#include "fieldflow_aot_aot_test_cuda_fvm_nabla.h"
#include "fieldflow_aot_aot_test_cuda_hdiff.h"
#include "cuda_kernels.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/memory_test_support.h"
#include "support/backend_harness.h"
#include "support/cuda_harness.h"

namespace fieldflow {
namespace {

using testing_support::gather_program;

using testing_support::same_bits;
using K = MemoryEvent::Kind;

#define REQUIRE_DEVICE()                                                          \
  do {                                                                            \
    std::string why;                                                              \
    if (runtime::cuda::device_count(&why) == 0) GTEST_SKIP() << "no CUDA device: " << why; \
  } while (0)

// Device memory for a caller-owned workspace (cudaMalloc is 256-byte aligned).
struct DeviceBuffer {
  void* p = nullptr;
  std::size_t bytes = 0;
  explicit DeviceBuffer(std::size_t n) : bytes(n) { EXPECT_EQ(cudaMalloc(&p, n), cudaSuccess); }
  ~DeviceBuffer() { cudaFree(p); }
};

CompileOptions cuda_options(TransientMemoryMode mode, Layout layout = Layout::horizontal_fastest) {
  CompileOptions o;
  o.backend = Backend::cuda;
  o.layout = layout;
  o.memory.mode = mode;
  return o;
}

// Transients of a program on the device for a size (0: none).
std::size_t device_bytes(const CompiledProgram& p, const SizeMap& sizes) {
  for (const auto& r : p.workspace_requirements(sizes))
    if (r.device == Device::cuda) return r.bytes;
  return 0;
}

struct Case {
  std::string name;
  TransientMemoryMode mode;
};
class CudaDevicePrograms : public ::testing::TestWithParam<Case> {};

TEST_P(CudaDevicePrograms, EqualReferenceBitwiseAndUseTheModesAllocationApi) {
  REQUIRE_DEVICE();
  const auto& ex = examples::example(GetParam().name);
  const TransientMemoryMode mode = GetParam().mode;
  for (Layout layout : {Layout::horizontal_fastest, Layout::vertical_fastest}) {
    CompileOptions o = cuda_options(mode, layout);
    std::vector<DeviceBuffer> owned;
    int allocator_calls = 0;
    if (mode == TransientMemoryMode::external) {
      o.memory.external_memory_allocator = [&](const AllocationRequest& r) {
        ++allocator_calls;
        EXPECT_EQ(r.device, Device::cuda);
        EXPECT_GE(r.alignment, 256u);
        void* p = nullptr;
        EXPECT_EQ(cudaMalloc(&p, r.bytes), cudaSuccess);
        return Workspace{p, r.bytes, Device::cuda, [p] { cudaFree(p); }};
      };
    }
    CompiledProgram prog = compile(ex.program, o);
    const std::string& src = prog.generated_source();
    EXPECT_EQ(src.find("cudaMalloc"), std::string::npos) << "generated code never allocates transients";
    EXPECT_EQ(src.find("cudaFree"), std::string::npos);
    EXPECT_NE(src.find("__global__"), std::string::npos);
    for (const examples::ExampleSize size : {examples::ExampleSize{67, 45, 13}, examples::ExampleSize{130, 9, 80}}) {
      auto ref = ex.make_instance(size, layout, 5);
      auto gpu = ex.make_instance(size, layout, 5);
      run_reference(ex.program, ref.arguments());
      run_reference(ex.program, ref.arguments());  // two calls, as below: in/out fields (masked_update) change
      const Arguments args = gpu.arguments();
      const std::size_t need = device_bytes(prog, size_symbols(ex.program, args));
      testing::EventLog log;
      prog(args);
      prog(args);  // the second call: steady state
      for (auto& [name, field] : ref.fields)
        EXPECT_TRUE(same_bits(field, gpu.fields.at(name), ex.name + "." + name)) << to_string(mode);
      // What the route saw for the transients (labelled with the program's name only).
      std::size_t sys = 0, stream = 0;
      for (const MemoryEvent& e : log.events())
        if (e.device == Device::cuda && e.label == ex.program.name) {
          sys += e.kind == K::system_allocate;
          stream += e.kind == K::stream_allocate;
        }
      if (need == 0) continue;
      switch (mode) {
        case TransientMemoryMode::scoped: EXPECT_EQ(sys, 2u) << "cudaMalloc once per call"; break;
        case TransientMemoryMode::persistent: EXPECT_LE(sys, 1u) << "cudaMalloc once per instance"; break;
        case TransientMemoryMode::pool:
          EXPECT_EQ(stream, 2u) << "cudaMallocAsync from fieldflow's pool per call";
          EXPECT_EQ(sys, 0u);
          break;
        case TransientMemoryMode::external: EXPECT_EQ(sys + stream, 0u) << "never allocates"; break;
      }
    }
    if (mode == TransientMemoryMode::external) {
      EXPECT_LE(allocator_calls, 2) << "once per instance (again only to grow)";
    }
  }
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (const auto& ex : examples::all_examples())
    for (auto m : {TransientMemoryMode::scoped, TransientMemoryMode::persistent, TransientMemoryMode::pool,
                   TransientMemoryMode::external})
      cases.push_back({ex.name, m});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(All, CudaDevicePrograms, ::testing::ValuesIn(all_cases()), [](const auto& info) {
  return info.param.name + "_" + std::string(to_string(info.param.mode));
});

// The allocator is asked once per instance, for device cuda, alignment >= 256, over many calls.
TEST(CudaDeviceMemory, AllocatorCalledOncePerInstanceForCuda) {
  REQUIRE_DEVICE();
  const auto& ex = examples::example("vadv");  // transients on the device (hdiff has none)
  std::vector<AllocationRequest> requests;
  CompileOptions o = cuda_options(TransientMemoryMode::external);
  o.memory.external_memory_allocator = [&](const AllocationRequest& r) {
    requests.push_back(r);
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, r.bytes), cudaSuccess);
    return Workspace{p, r.bytes, Device::cuda, [p] { cudaFree(p); }};
  };
  {
    CompiledProgram prog = compile(ex.program, o);
    auto inst = ex.make_instance({64, 64, 16}, Layout::horizontal_fastest, 1);
    for (int i = 0; i < 10; ++i) prog(inst.arguments());
    EXPECT_EQ(prog.memory_stats().allocator_calls, 1u);
  }
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].device, Device::cuda);
  EXPECT_GE(requests[0].alignment, 256u);
  EXPECT_GT(requests[0].bytes, 0u);
}

TEST(CudaDeviceMemory, ThrowingAllocatorReachesTheCaller) {
  REQUIRE_DEVICE();
  const auto& ex = examples::example("vadv");  // transients on the device (hdiff has none)
  CompileOptions o = cuda_options(TransientMemoryMode::external);
  o.memory.external_memory_allocator = [](const AllocationRequest&) -> Workspace {
    throw std::runtime_error("host allocator refused");
  };
  CompiledProgram prog = compile(ex.program, o);
  auto inst = ex.make_instance({32, 32, 8}, Layout::horizontal_fastest, 1);
  ASSERT_GT(device_bytes(prog, size_symbols(ex.program, inst.arguments())), 0u);
  EXPECT_THROW(
      try { prog(inst.arguments()); } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("host allocator refused"), std::string::npos);
        throw;
      },
      std::runtime_error);
}

TEST(CudaDeviceMemory, BadCallerWorkspacesAreRefusedBeforeRunning) {
  REQUIRE_DEVICE();
  const auto& ex = examples::example("vadv");  // transients on the device (hdiff has none)
  auto inst = ex.make_instance({48, 48, 8}, Layout::horizontal_fastest, 1);
  const Arguments args = inst.arguments();
  CompiledProgram probe = compile(ex.program, cuda_options(TransientMemoryMode::pool));
  const std::size_t need = device_bytes(probe, size_symbols(ex.program, args));
  ASSERT_GT(need, 0u);
  DeviceBuffer buffer(need + 512);
  auto with = [&](Workspace ws) {
    CompileOptions o = cuda_options(TransientMemoryMode::external);
    o.memory.external_workspace[Device::cuda] = std::move(ws);
    return compile(ex.program, o);
  };
  {  // too small: names required and given bytes
    CompiledProgram p = with({buffer.p, need - 1, Device::cuda, {}});
    try {
      p(args);
      ADD_FAILURE() << "a too-small workspace was accepted";
    } catch (const WorkspaceError& e) {
      EXPECT_NE(std::string(e.what()).find(std::to_string(need)), std::string::npos) << e.what();
    }
  }
  {  // misaligned
    CompiledProgram p = with({static_cast<char*>(buffer.p) + 64, need, Device::cuda, {}});
    EXPECT_THROW(p(args), WorkspaceError);
  }
  {  // host memory described as cuda memory, pageable or pinned: refused before a kernel faults on it
    const std::size_t rounded = (need + 255) / 256 * 256;
    std::unique_ptr<void, decltype(&std::free)> pageable(std::aligned_alloc(256, rounded), &std::free);
    void* pinned = nullptr;
    ASSERT_EQ(cudaMallocHost(&pinned, rounded), cudaSuccess);
    for (void* host : {pageable.get(), pinned}) {
      CompiledProgram p = with({host, rounded, Device::cuda, {}});
      try {
        p(args);
        ADD_FAILURE() << "host memory was accepted as a cuda workspace";
      } catch (const WorkspaceError& e) {
        EXPECT_NE(std::string(e.what()).find(host == pinned ? "is pinned host memory" : "is host memory"),
                  std::string::npos) << e.what();
      }
    }
    cudaFreeHost(pinned);
  }
  {  // wrong device: a host buffer given for cuda
    std::vector<std::byte> host(need + 256);
    CompileOptions o = cuda_options(TransientMemoryMode::external);
    o.memory.external_workspace[Device::cpu] = Workspace{host.data(), host.size(), Device::cpu, {}};
    CompiledProgram p = compile(ex.program, o);
    try {
      p(args);
      ADD_FAILURE() << "a workspace for the wrong device was accepted";
    } catch (const WorkspaceError& e) {
      EXPECT_NE(std::string(e.what()).find("cuda"), std::string::npos) << e.what();
    }
  }
  {  // right: the identical buffer used across calls
    CompiledProgram p = with({buffer.p, buffer.bytes, Device::cuda, {}});
    p(args);
    p(args);
    EXPECT_EQ(p.memory_stats().workspace_installs, 1u);
  }
}

// A stream given per instance is the one every stream-ordered allocation uses.
TEST(CudaDeviceMemory, PoolAllocationsUseTheInstancesStream) {
  REQUIRE_DEVICE();
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  {
    const auto& ex = examples::example("vadv");  // transients on the device (hdiff has none)
    CompileOptions o = cuda_options(TransientMemoryMode::pool);
    o.cuda_stream = s;
    CompiledProgram prog = compile(ex.program, o);
    auto ref = ex.make_instance({40, 40, 10}, Layout::horizontal_fastest, 2);
    auto gpu = ex.make_instance({40, 40, 10}, Layout::horizontal_fastest, 2);
    ASSERT_GT(device_bytes(prog, size_symbols(ex.program, gpu.arguments())), 0u);
    run_reference(ex.program, ref.arguments());
    prog(gpu.arguments());
    for (auto& [name, field] : ref.fields) EXPECT_TRUE(same_bits(field, gpu.fields.at(name), name));
    EXPECT_GE(prog.memory_stats().stream_allocations, 1u);
  }
  cudaStreamDestroy(s);
}

// Each release threshold is its own pool, created with it: a program whose pool keeps nothing
// (threshold 0) has returned its transients' memory to the driver at the next synchronisation,
// while one with the default (keep everything) still holds them, whichever ran first.
TEST(CudaDeviceMemory, EachReleaseThresholdIsItsOwnPool) {
  REQUIRE_DEVICE();
  const auto& ex = examples::example("vadv");  // transients on the device (hdiff's are inlined)
  const auto reserved = [](void* pool) {
    std::uint64_t bytes = 0;
    EXPECT_EQ(cudaMemPoolGetAttribute(static_cast<cudaMemPool_t>(pool), cudaMemPoolAttrReservedMemCurrent, &bytes),
              cudaSuccess);
    return bytes;
  };
  for (const bool keeping_first : {true, false}) {
    SCOPED_TRACE(keeping_first ? "the keeping program first" : "the releasing program first");
    CompileOptions keep = cuda_options(TransientMemoryMode::pool), release = keep;
    release.cuda_pool_release_threshold = 0;
    CompiledProgram a = compile(ex.program, keeping_first ? keep : release);
    CompiledProgram b = compile(ex.program, keeping_first ? release : keep);
    auto inst = ex.make_instance({64, 64, 16}, Layout::horizontal_fastest, 2);
    ASSERT_GT(device_bytes(a, size_symbols(ex.program, inst.arguments())), 0u);
    a(inst.arguments());
    b(inst.arguments());
    // The calls' frees are stream-ordered after their synchronisation; a pool over its threshold
    // releases at a synchronisation after that (CUDA: "on the next call to stream, event or context
    // synchronize"), which may be the one that completes the frees or the one after it.
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    void* kept = runtime::cuda::owned_pool(UINT64_MAX);
    void* released = runtime::cuda::owned_pool(0);
    ASSERT_NE(kept, released);
    for (const auto& [pool, threshold] : {std::pair{kept, UINT64_MAX}, std::pair{released, std::uint64_t{0}}}) {
      std::uint64_t t = 1;
      ASSERT_EQ(cudaMemPoolGetAttribute(static_cast<cudaMemPool_t>(pool), cudaMemPoolAttrReleaseThreshold, &t), cudaSuccess);
      EXPECT_EQ(t, threshold);
    }
    EXPECT_GT(reserved(kept), 0u) << "the default pool keeps its memory for the next call";
    EXPECT_EQ(reserved(released), 0u) << "a pool with threshold 0 returns its memory when the call synchronises";
  }
}

// Its host fields: three blocks of 128 along I, the last one partial; offsets 3 where in range.
struct GatherFields {
  static constexpr std::int64_t n = 300, levels = 7;
  Field a, off, o;
  GatherFields()
      : a({horizontal_dim("I"), vertical_dim("K")}, DType::float64, {n, levels}, {}, Layout::horizontal_fastest),
        off({horizontal_dim("I"), vertical_dim("K")}, DType::int32, {n, levels}, {}, Layout::horizontal_fastest),
        o({horizontal_dim("I"), vertical_dim("K")}, DType::float64, {n, levels}, {}, Layout::horizontal_fastest) {
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t k = 0; k < levels; ++k) {
        a.at<double>({i, k}) = 0.5 * static_cast<double>(i * i) + static_cast<double>(k);
        off.at<std::int32_t>({i, k}) = i + 3 < n ? 3 : 0;
      }
    o.fill(7.0);
  }
  Arguments arguments(Field& fa, Field& foff, Field& fo) const {
    Arguments args;
    args.field("a", fa).field("off", foff).field("o", fo).scalar("ni", static_cast<std::int32_t>(n));
    return args.scalar("nk", static_cast<std::int32_t>(levels));
  }
};

// An in-kernel failure (a dynamic offset leaving a field) is read back and raised like on the CPU,
// with every host argument unchanged.
TEST(CudaDevice, InKernelFailureIsRaisedAndChangesNothing) {
  REQUIRE_DEVICE();
  GatherFields g;
  g.off.at<std::int32_t>({g.n - 1, g.levels - 1}) = 1000;  // one point reads outside a
  CompiledProgram prog = compile(gather_program(), cuda_options(TransientMemoryMode::pool));
  EXPECT_THROW(prog(g.arguments(g.a, g.off, g.o)), DomainError);
  for (std::int64_t i = 0; i < g.n; ++i)
    for (std::int64_t k = 0; k < g.levels; ++k) ASSERT_EQ(g.o.at<double>({i, k}), 7.0) << i << "," << k;
}

// Device copies of an instance's fields as views over device memory (what a model that keeps its
// state on the GPU passes), and Arguments over them; tables and scalars as the instance has them.
struct DeviceFields {
  std::map<std::string, std::unique_ptr<DeviceBuffer>> buffers;
  std::map<std::string, Field> views;
  Arguments args;
  explicit DeviceFields(examples::ExampleInstance& inst) {
    for (auto& [name, f] : inst.fields) {
      auto& b = buffers[name] = std::make_unique<DeviceBuffer>(std::max<std::size_t>(f.span_bytes(), 256));
      EXPECT_EQ(cudaMemcpy(b->p, f.data(), f.span_bytes(), cudaMemcpyHostToDevice), cudaSuccess);
      views.emplace(name, Field::view(b->p, f.dims(), f.dtype(), f.shape(), f.strides(), f.origin(), Device::cuda));
    }
    // cudaMemcpy from pageable memory may return before its DMA ends, and the streams some tests
    // give are non-blocking (not ordered after the legacy default stream): wait for the uploads.
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const Arguments host_args = inst.arguments();
    for (const auto& e : host_args.entries()) {
      if (e.kind == Arguments::Entry::Kind::field) args.field(e.name, views.at(e.name));
      if (e.kind == Arguments::Entry::Kind::scalar) args.scalar(e.name, e.scalar);
      if (e.kind == Arguments::Entry::Kind::connectivity) args.connectivity(e.name, *e.table);
    }
  }
  void copy_back(examples::ExampleInstance& inst) const {
    for (auto& [name, f] : inst.fields)
      EXPECT_EQ(cudaMemcpy(f.data(), buffers.at(name)->p, f.span_bytes(), cudaMemcpyDeviceToHost), cudaSuccess);
  }
};

// Fields in device memory are read and written in place: every built-in program equals the
// reference bit for bit, and no call allocates (or copies through) a device copy of a field.
TEST(CudaDeviceFields, DeviceResidentFieldsEqualTheReferenceWithoutCopies) {
  REQUIRE_DEVICE();
  for (const auto& ex : examples::all_examples()) {
    SCOPED_TRACE(ex.name);
    CompiledProgram prog = compile(ex.program, cuda_options(TransientMemoryMode::pool));
    const examples::ExampleSize size{67, 45, 13};
    auto ref = ex.make_instance(size, Layout::horizontal_fastest, 5);
    auto gpu = ex.make_instance(size, Layout::horizontal_fastest, 5);
    run_reference(ex.program, ref.arguments());
    run_reference(ex.program, ref.arguments());  // two calls, as below
    DeviceFields device(gpu);
    testing::EventLog log;
    prog(device.args);
    prog(device.args);
    device.copy_back(gpu);
    for (auto& [name, field] : ref.fields) EXPECT_TRUE(same_bits(field, gpu.fields.at(name), ex.name + "." + name));
    for (const MemoryEvent& e : log.events())
      EXPECT_EQ(e.label.find("(field "), std::string::npos) << "a device copy of a field: " << e.label;
  }
}

// A field whose memory is not where it says is refused before anything runs, naming the field.
TEST(CudaDeviceFields, MemoryElsewhereThanTheFieldSaysIsRefused) {
  REQUIRE_DEVICE();
  const auto& ex = examples::example("hdiff");
  CompiledProgram prog = compile(ex.program, cuda_options(TransientMemoryMode::pool));
  auto inst = ex.make_instance({32, 32, 8}, Layout::horizontal_fastest, 1);
  {
    DeviceFields device(inst);
    Field& out = device.views.at(inst.outputs.front());
    Field host_claims_device = Field::view(inst.fields.at(inst.outputs.front()).data(), out.dims(), out.dtype(),
                                           out.shape(), out.strides(), out.origin(), Device::cuda);
    Arguments args;
    for (const auto& e : device.args.entries()) {
      if (e.kind == Arguments::Entry::Kind::field)
        args.field(e.name, e.name == inst.outputs.front() ? host_claims_device : *e.field);
      if (e.kind == Arguments::Entry::Kind::scalar) args.scalar(e.name, e.scalar);
    }
    try {
      prog(args);
      ADD_FAILURE() << "host memory was accepted as device memory";
    } catch (const ArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find("is a view over cuda memory"), std::string::npos) << e.what();
    }
  }
  {
    DeviceFields device(inst);
    const std::string& name = inst.outputs.front();
    const Field& f = inst.fields.at(name);
    Field device_claims_host = Field::view(device.buffers.at(name)->p, f.dims(), f.dtype(), f.shape(), f.strides(),
                                           f.origin());
    Arguments args;
    for (const auto& e : device.args.entries()) {
      if (e.kind == Arguments::Entry::Kind::field) args.field(e.name, e.name == name ? device_claims_host : *e.field);
      if (e.kind == Arguments::Entry::Kind::scalar) args.scalar(e.name, e.scalar);
    }
    try {
      prog(args);
      ADD_FAILURE() << "device memory was accepted as a host field";
    } catch (const ArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find("create the view with Device::cuda"), std::string::npos) << e.what();
    }
    prog(device.args);  // the instance still runs on right arguments
  }
}

// A device copy of a host field, as a view over device memory.
struct DeviceCopy {
  DeviceBuffer buffer;
  Field view;
  explicit DeviceCopy(const Field& f)
      : buffer(std::max<std::size_t>(f.span_bytes(), 256)),
        view(Field::view(buffer.p, f.dims(), f.dtype(), f.shape(), f.strides(), f.origin(), Device::cuda)) {
    EXPECT_EQ(cudaMemcpy(buffer.p, f.data(), f.span_bytes(), cudaMemcpyHostToDevice), cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the upload is done before a non-blocking stream reads it
  }
  void copy_back(Field& f) const {
    EXPECT_EQ(cudaMemcpy(f.data(), buffer.p, f.span_bytes(), cudaMemcpyDeviceToHost), cudaSuccess);
  }
};

// An in-kernel failure with the output in device memory: raised as a DomainError, and the output
// restored; with offsets in range again, the cpu backend's values.
TEST(CudaDeviceFields, InKernelFailureRestoresDeviceOutputs) {
  REQUIRE_DEVICE();
  GatherFields g;
  g.off.at<std::int32_t>({g.n - 1, g.levels - 1}) = 1000;  // one point reads outside a
  DeviceCopy da(g.a), doff(g.off), dout(g.o);
  CompiledProgram prog = compile(gather_program(), cuda_options(TransientMemoryMode::pool));
  EXPECT_THROW(prog(g.arguments(da.view, doff.view, dout.view)), DomainError);
  Field after = g.o.clone();
  after.fill(0.0);
  dout.copy_back(after);
  for (std::int64_t i = 0; i < g.n; ++i)
    for (std::int64_t k = 0; k < g.levels; ++k) ASSERT_EQ(after.at<double>({i, k}), 7.0) << i << "," << k;
  // The error flag is cleared after the failed call.
  g.off.at<std::int32_t>({g.n - 1, g.levels - 1}) = 0;
  DeviceCopy doff_ok(g.off);
  prog(g.arguments(da.view, doff_ok.view, dout.view));
  prog(g.arguments(da.view, doff_ok.view, dout.view));
  CompileOptions cpu;
  cpu.layout = Layout::horizontal_fastest;
  compile(gather_program(), cpu)(g.arguments(g.a, g.off, g.o));
  dout.copy_back(after);
  EXPECT_TRUE(same_bits(g.o, after, "o"));
}

// The same with the output one component of an array of structures in device memory (a, o and w
// per point, Layout::any): the restore puts o back with strided copies (cudaMemcpy2DAsync, one
// per column) and leaves a and w as they are. (That another stream's writes to w during the
// call survive is tested on the emulated runtime:
// EmulatedRunner.AFailedCallRestoresOnlyTheElementsOfAStridedDeviceOutput.)
TEST(CudaDeviceFields, InKernelFailureRestoresAStridedDeviceOutputElementByElement) {
  REQUIRE_DEVICE();
  GatherFields g;
  const std::int64_t n = g.n, levels = g.levels, components = 3;
  std::vector<double> aos(static_cast<std::size_t>(components * n * levels));
  const auto at = [&](int c, std::int64_t i, std::int64_t k) -> double& {
    return aos[static_cast<std::size_t>(k * components * n + i * components + c)];
  };
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t k = 0; k < levels; ++k) {
      at(0, i, k) = g.a.at<double>({i, k});
      at(1, i, k) = 7.0;
      at(2, i, k) = -1.0 - static_cast<double>(i + k);
    }
  const std::vector<double> before = aos;
  DeviceBuffer memory(aos.size() * sizeof(double));
  ASSERT_EQ(cudaMemcpy(memory.p, aos.data(), memory.bytes, cudaMemcpyHostToDevice), cudaSuccess);
  auto component = [&](int c) {
    return Field::view(static_cast<double*>(memory.p) + c, g.a.dims(), DType::float64, {n, levels},
                       {components, components * n}, {}, Device::cuda);
  };
  Field da = component(0), dout = component(1);
  g.off.at<std::int32_t>({n - 1, levels - 1}) = 1000;  // one point reads outside a
  DeviceCopy doff(g.off);
  CompiledProgram prog = compile(gather_program(), cuda_options(TransientMemoryMode::pool, Layout::any));
  EXPECT_THROW(prog(g.arguments(da, doff.view, dout)), DomainError);
  ASSERT_EQ(cudaMemcpy(aos.data(), memory.p, memory.bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(aos, before) << "a failed call changes nothing";
  g.off.at<std::int32_t>({n - 1, levels - 1}) = 0;
  DeviceCopy doff_ok(g.off);
  prog(g.arguments(da, doff_ok.view, dout));
  CompileOptions cpu;
  cpu.layout = Layout::horizontal_fastest;
  compile(gather_program(), cpu)(g.arguments(g.a, g.off, g.o));
  ASSERT_EQ(cudaMemcpy(aos.data(), memory.p, memory.bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t k = 0; k < levels; ++k) {
      ASSERT_EQ(at(1, i, k), g.o.at<double>({i, k})) << "o at " << i << ", " << k;
      ASSERT_EQ(at(2, i, k), -1.0 - static_cast<double>(i + k)) << "w at " << i << ", " << k;
    }
}

// A stream given per call carries that call's work; calls on two streams give the reference.
// The GPU benchmark's yardstick (bench/cuda/baselines.cu, compiled by NVRTC for this device)
// computes what the programs compute, bit for bit, on device fields: sizes with partial blocks,
// one level, runs of levels with a remainder, the bounded mesh's missing neighbours. (The same
// kernels run on the host under an emulated grid in tests/bench/test_cuda_baselines.cpp.)
TEST(CudaDevice, HandWrittenBaselinesEqualTheReference) {
  REQUIRE_DEVICE();
  const bench::CudaBaselineKernels kernels;
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  for (const auto& [program, size] :
       {std::pair<const char*, examples::ExampleSize>{"hdiff", {37, 11, 3}}, {"hdiff", {70, 9, 1}},
        {"vadv", {70, 3, 5}}, {"vadv", {33, 4, 1}}, {"nabla4", {9, 7, 19, true}}, {"nabla4", {12, 10, 17}},
        {"c2e2co_sum", {9, 7, 19, true}}, {"c2e2co_sum", {12, 10, 17}}}) {
    SCOPED_TRACE(program);
    const auto& ex = examples::example(program);
    auto ref = ex.make_instance(size, Layout::horizontal_fastest, 5);
    auto gpu = ex.make_instance(size, Layout::horizontal_fastest, 5);
    run_reference(ex.program, ref.arguments());
    DeviceFields device(gpu);
    std::map<std::string, std::unique_ptr<DeviceBuffer>> tables;
    for (const auto& t : gpu.connectivities) {
      const auto& data = gpu.mesh->table(t).data;
      auto& b = tables[t] = std::make_unique<DeviceBuffer>(data.size() * sizeof(std::int32_t));
      ASSERT_EQ(cudaMemcpy(b->p, data.data(), data.size() * sizeof(std::int32_t), cudaMemcpyHostToDevice), cudaSuccess);
    }
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // uploads done before the kernels' stream reads them
    DeviceBuffer scratch(std::max<std::size_t>(bench::cuda_baseline_scratch_bytes(program, gpu), 256));
    bench::CudaBaselineMemory memory;
    memory.field = [&](const std::string& name) { return device.buffers.at(name)->p; };
    memory.table = [&](const std::string& name) { return static_cast<const std::int32_t*>(tables.at(name)->p); };
    memory.scratch = scratch.p;
    const bench::CudaBaselineLaunch launch = bench::plan_cuda_baseline(program, gpu, memory);
    kernels.launch(launch, stream);
    kernels.launch(launch, stream);  // the second call over the same memory gives the same result
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    device.copy_back(gpu);
    for (auto& [name, field] : ref.fields) EXPECT_TRUE(same_bits(field, gpu.fields.at(name), ex.name + "." + name));
  }
  cudaStreamDestroy(stream);
}

// A box with more rows than CUDA allows blocks along y or z runs in pieces (as
// EmulatedRunner.ABoxWithMoreRowsThanCudaHasBlocksIsLaunchedInPieces checks without a device).
TEST(CudaDevice, ABoxWithMoreRowsThanBlocksRunsInPieces) {
  REQUIRE_DEVICE();
  for (const bool along_z : {false, true}) {
    SCOPED_TRACE(along_z ? "levels along z" : "rows along y");
    testing_support::TallBox box = testing_support::tall_box(along_z);
    const testing_support::ReferenceOutcome ref = testing_support::run_reference_on_copies(box.program, box.args);
    ASSERT_EQ(ref.error, nullptr);
    compile(box.program, cuda_options(TransientMemoryMode::pool, Layout::horizontal_fastest))(box.args);
    for (const auto& [mine, theirs] : ref.pairs) EXPECT_TRUE(same_bits(*theirs, *mine, "a field"));
  }
}

// A field whose offsets pass 2^31 (levels 2^29 float32 elements apart: 10 GiB of address space
// reserved without memory, copied to the device) runs the 64-bit kernels and equals the
// reference, as CudaIndexing.FieldsWhoseOffsetsPass32BitsEqualTheReference checks under emulation;
// at the fit check's bound the 32-bit ones run and equal it too.
TEST(CudaDevice, FieldsWhoseOffsetsPass32BitsEqualTheReference) {
  REQUIRE_DEVICE();
  for (const std::int64_t stride : {std::int64_t{1} << 29, std::int64_t{306'783'377}}) {
    SCOPED_TRACE(stride);
    const auto far = testing_support::far_apart_levels(stride);
    const testing_support::ReferenceOutcome ref = testing_support::run_reference_on_copies(far->program, far->args);
    ASSERT_EQ(ref.error, nullptr);
    compile(far->program, cuda_options(TransientMemoryMode::pool, Layout::horizontal_fastest))(far->args);
    for (const auto& [mine, theirs] : ref.pairs) {
      if (mine == &far->o) {
        EXPECT_TRUE(same_bits(*theirs, *mine, "o"));  // a is strided: same_bits compares bytes
      }
    }
  }
}

// A program's own stream is ordered after the work issued on the legacy default stream (what
// cudaMemcpy, CuPy's and PyTorch's default streams and DLPack's stream=None order by): inputs
// overwritten there, behind a long memset, are read as overwritten by a call issued at once.
TEST(CudaDevice, AProgramsOwnStreamIsOrderedAfterTheLegacyDefaultStream) {
  REQUIRE_DEVICE();
  const auto& ex = examples::example("laplacian");
  CompiledProgram prog = compile(ex.program, cuda_options(TransientMemoryMode::pool));
  auto ref = ex.make_instance({512, 512, 64}, Layout::horizontal_fastest, 3);
  auto gpu = ex.make_instance({512, 512, 64}, Layout::horizontal_fastest, 3);
  DeviceFields device(gpu);
  const auto is_output = [&](const std::string& name) {
    return std::find(ref.outputs.begin(), ref.outputs.end(), name) != ref.outputs.end();
  };
  DeviceBuffer busy(std::size_t{1} << 31);  // about a millisecond of the legacy stream's time
  for (int repeat = 0; repeat < 4; ++repeat) {
    ASSERT_EQ(cudaMemsetAsync(busy.p, repeat, busy.bytes, cudaStreamLegacy), cudaSuccess);
    for (auto& [name, f] : ref.fields)
      if (!is_output(name)) {
        std::memset(f.data(), 0, f.span_bytes());
        ASSERT_EQ(cudaMemsetAsync(device.buffers.at(name)->p, 0, f.span_bytes(), cudaStreamLegacy), cudaSuccess);
      }
    prog(device.args);  // no synchronisation in between
  }
  run_reference(ex.program, ref.arguments());
  device.copy_back(gpu);
  for (auto& [name, field] : ref.fields) EXPECT_TRUE(same_bits(field, gpu.fields.at(name), name));
}

TEST(CudaDevice, PerCallStreams) {
  REQUIRE_DEVICE();
  cudaStream_t s[2] = {nullptr, nullptr};
  for (auto& x : s) ASSERT_EQ(cudaStreamCreateWithFlags(&x, cudaStreamNonBlocking), cudaSuccess);
  {
    const auto& ex = examples::example("vadv");  // transients on the device (hdiff has none)
    CompiledProgram prog = compile(ex.program, cuda_options(TransientMemoryMode::pool));
    auto ref = ex.make_instance({40, 40, 10}, Layout::horizontal_fastest, 2);
    run_reference(ex.program, ref.arguments());
    for (int i = 0; i < 4; ++i) {
      auto gpu = ex.make_instance({40, 40, 10}, Layout::horizontal_fastest, 2);
      DeviceFields device(gpu);
      prog(device.args, CallOptions{s[i % 2]});
      // The call synchronised its stream before returning (only the stream-ordered free of its
      // transients may follow): copy_back's cudaMemcpy, on the legacy stream, which does not wait
      // for a non-blocking one, reads the results.
      device.copy_back(gpu);
      for (auto& [name, field] : ref.fields) EXPECT_TRUE(same_bits(field, gpu.fields.at(name), name));
    }
    EXPECT_GE(prog.memory_stats().stream_allocations, 4u);
  }
  for (auto& x : s) cudaStreamDestroy(x);
}

// The C API's cuda handles take device pointers (what CUDA Fortran or OpenACC hands over), run on
// the stream set for them, and equal the reference.
TEST(CudaDevice, CApiHandlesTakeDeviceMemory) {
  REQUIRE_DEVICE();
  const auto& ex = examples::example("laplacian");
  ff_options o;
  ASSERT_EQ(ff_options_init(&o), FF_OK);
  o.backend = FF_BACKEND_CUDA;
  o.memory_mode = FF_MEMORY_POOL;
  ff_program* h = nullptr;
  ASSERT_EQ(ff_program_create("laplacian", &o, &h), FF_OK) << ff_last_error();
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  EXPECT_EQ(ff_program_set_cuda_stream(h, stream), FF_OK) << ff_last_error();
  auto ref = ex.make_instance({37, 29, 11}, Layout::horizontal_fastest, 4);
  auto gpu = ex.make_instance({37, 29, 11}, Layout::horizontal_fastest, 4);
  run_reference(ex.program, ref.arguments());
  DeviceFields device(gpu);
  for (auto& [name, f] : device.views)
    EXPECT_EQ(ff_program_set_field(h, name.c_str(), static_cast<int>(f.dtype()), f.data(), static_cast<int>(f.dims().size()),
                                   f.shape().data(), f.strides().data(), f.origin().data()),
              FF_OK)
        << ff_last_error();
  for (const auto& [name, v] : gpu.scalars)
    EXPECT_EQ(is_floating(v.dtype()) ? ff_program_set_real(h, name.c_str(), v.as_double())
                                     : ff_program_set_int(h, name.c_str(), v.as_int()),
              FF_OK)
        << ff_last_error();
  EXPECT_EQ(ff_program_run(h), FF_OK) << ff_last_error();
  EXPECT_EQ(ff_program_run(h), FF_OK) << ff_last_error();
  device.copy_back(gpu);
  for (auto& [name, field] : ref.fields) EXPECT_TRUE(same_bits(field, gpu.fields.at(name), name));
  EXPECT_EQ(ff_program_destroy(h), FF_OK);
  cudaStreamDestroy(stream);
}

// Programs of an ahead-of-time cuda library (tests/aot): the embedded kernels equal the reference,
// from C++ and through the C API.
TEST(CudaDevice, AheadOfTimeProgramsEqualTheReference) {
  REQUIRE_DEVICE();
  for (const ff_aot_program* d : {fieldflow_aot_aot_test_cuda_hdiff(), fieldflow_aot_aot_test_cuda_fvm_nabla()}) {
    const std::string name = aot_program_info(d).name;
    SCOPED_TRACE(name);
    const auto& ex = examples::example(name);
    CompiledProgram prog = load_aot(d, cuda_options(TransientMemoryMode::pool));
    const examples::ExampleSize size{29, 23, 9};
    auto ref = ex.make_instance(size, Layout::horizontal_fastest, 6);
    auto gpu = ex.make_instance(size, Layout::horizontal_fastest, 6);
    run_reference(ex.program, ref.arguments());
    DeviceFields device(gpu);
    prog(device.args);
    device.copy_back(gpu);
    for (auto& [field_name, field] : ref.fields) EXPECT_TRUE(same_bits(field, gpu.fields.at(field_name), field_name));
  }
  ff_options o;
  ASSERT_EQ(ff_options_init(&o), FF_OK);
  o.backend = FF_BACKEND_CUDA;
  ff_program* h = nullptr;
  EXPECT_EQ(ff_program_create_aot(fieldflow_aot_aot_test_cuda_hdiff(), &o, &h), FF_OK) << ff_last_error();
  EXPECT_EQ(ff_program_destroy(h), FF_OK);
}

// Without a layout, a cuda program is compiled for horizontal_fastest.
TEST(CudaDevice, TheDefaultLayoutIsHorizontalFastest) {
  REQUIRE_DEVICE();
  CompileOptions o;
  o.backend = Backend::cuda;
  EXPECT_EQ(compile(examples::example("laplacian").program, o).layout(), Layout::horizontal_fastest);
}

}  // namespace
}  // namespace fieldflow
