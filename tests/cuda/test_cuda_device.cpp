// Backend::cuda on a device (scripts/gpu-check.sh runs this on a GPU machine; without a device
// every test skips with the reason). Every built-in program equals the reference bit for bit in
// all four transient-memory modes; each mode uses the allocation API it promises, counted through
// the allocation route; the allocator is asked once per instance for device cuda with alignment
// >= 256; a throwing allocator's error and bad caller workspaces reach the caller as typed errors.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include "driver/cuda_build.h"
#include "fieldflow/device_errors.h"
#include "fieldflow/examples.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/memory_test_support.h"
#include "support/backend_harness.h"

namespace fieldflow {
namespace {

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
  const auto& ex = examples::example("hdiff");
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
  const auto& ex = examples::example("hdiff");
  CompileOptions o = cuda_options(TransientMemoryMode::external);
  o.memory.external_memory_allocator = [](const AllocationRequest&) -> Workspace {
    throw std::runtime_error("host allocator refused");
  };
  CompiledProgram prog = compile(ex.program, o);
  auto inst = ex.make_instance({32, 32, 8}, Layout::horizontal_fastest, 1);
  EXPECT_THROW(
      try { prog(inst.arguments()); } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("host allocator refused"), std::string::npos);
        throw;
      },
      std::runtime_error);
}

TEST(CudaDeviceMemory, BadCallerWorkspacesAreRefusedBeforeRunning) {
  REQUIRE_DEVICE();
  const auto& ex = examples::example("hdiff");
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
    const auto& ex = examples::example("hdiff");
    CompileOptions o = cuda_options(TransientMemoryMode::pool);
    o.cuda_stream = s;
    CompiledProgram prog = compile(ex.program, o);
    auto ref = ex.make_instance({40, 40, 10}, Layout::horizontal_fastest, 2);
    auto gpu = ex.make_instance({40, 40, 10}, Layout::horizontal_fastest, 2);
    run_reference(ex.program, ref.arguments());
    prog(gpu.arguments());
    for (auto& [name, field] : ref.fields) EXPECT_TRUE(same_bits(field, gpu.fields.at(name), name));
    EXPECT_GE(prog.memory_stats().stream_allocations, 1u);
  }
  cudaStreamDestroy(s);
}

// An in-kernel failure (a dynamic offset leaving a field) is read back and raised like on the CPU,
// with every argument unchanged.
TEST(CudaDevice, InKernelFailureIsRaisedAndChangesNothing) {
  REQUIRE_DEVICE();
  const auto& ex = examples::example("vertical_interp");
  CompiledProgram prog = compile(ex.program, cuda_options(TransientMemoryMode::pool));
  auto inst = ex.make_instance({16, 16, 8}, Layout::horizontal_fastest, 3);
  // Offsets far outside the column make every read leave the field.
  for (auto& [name, field] : inst.fields)
    if (field.dtype() == DType::int32) field.fill(1000);
  std::map<std::string, Field> before;
  for (auto& [name, field] : inst.fields) before.emplace(name, field.clone());
  CompileOptions cpu;
  cpu.layout = Layout::horizontal_fastest;
  bool cpu_throws = false;
  try {
    auto copy = ex.make_instance({16, 16, 8}, Layout::horizontal_fastest, 3);
    for (auto& [name, field] : copy.fields)
      if (field.dtype() == DType::int32) field.fill(1000);
    compile(ex.program, cpu)(copy.arguments());
  } catch (const DomainError&) {
    cpu_throws = true;
  }
  if (!cpu_throws) GTEST_SKIP() << "vertical_interp has no dynamic offset to push out of range";
  EXPECT_THROW(prog(inst.arguments()), DomainError);
  for (auto& [name, field] : inst.fields) EXPECT_TRUE(same_bits(before.at(name), field, name));
}

}  // namespace
}  // namespace fieldflow
