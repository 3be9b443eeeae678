// CUDA runtime helpers; see cuda_device.h. Every CUDA API failure becomes a CudaError naming the
// call, the program and CUDA's error string.
#include "runtime/cuda/cuda_device.h"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <map>
#include <mutex>
#include <utility>

#include "fieldflow/device_errors.h"
#include "runtime/memory_route.h"

namespace fieldflow::runtime::cuda {

int device_count(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();  // clears this runtime's last error (fieldflow's; a host's own runtime keeps its own)
    if (why) *why = fmt::format("cudaGetDeviceCount: {}: {}", cudaGetErrorName(e), cudaGetErrorString(e));
    return 0;
  }
  if (n == 0 && why) *why = "cudaGetDeviceCount found no device";
  return n;
}

std::string device_arch_or(const std::string& fallback) {
  if (device_count() == 0) return fallback;
  int device = 0, major = 0, minor = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess)
    return fallback;
  return fmt::format("sm_{}{}", major, minor);
}

void throw_cuda_error(int status, const char* call, const std::string& program) {
  const auto e = static_cast<cudaError_t>(status);
  throw CudaError(fmt::format("{} failed for program '{}': {}: {}", call, program, cudaGetErrorName(e),
                              cudaGetErrorString(e)));
}

void check(int status, const char* call, const std::string& program) {
  if (status != cudaSuccess) throw_cuda_error(status, call, program);
}

// The pools fieldflow owns: one per device and release threshold (programs whose options ask the
// same threshold share it, so one program's wish never changes another's pool), each created on
// first use while its device is current (a runner refuses calls from another device), its release
// threshold set; never destroyed (frees may come during static destruction). Found under a lock
// on every pool allocation: a map lookup, no host allocation once the pool exists.
void* owned_pool(std::uint64_t release_threshold) {
  static std::mutex mutex;
  static auto& pools = *new std::map<std::pair<int, std::uint64_t>, cudaMemPool_t>;  // outlives frees at exit
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice", "(memory pool)");
  std::lock_guard lock(mutex);
  if (const auto it = pools.find({device, release_threshold}); it != pools.end()) return it->second;
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  cudaMemPool_t p = nullptr;
  check(cudaMemPoolCreate(&p, &props), "cudaMemPoolCreate", "(memory pool)");
  std::uint64_t threshold = release_threshold;
  if (const cudaError_t e = cudaMemPoolSetAttribute(p, cudaMemPoolAttrReleaseThreshold, &threshold); e != cudaSuccess) {
    cudaMemPoolDestroy(p);
    throw_cuda_error(e, "cudaMemPoolSetAttribute", "(memory pool)");
  }
  pools.emplace(std::pair{device, release_threshold}, p);
  return p;
}

namespace {

// The route reports failures in its fixed format; the reason carries CUDA's words, and out of
// memory is its own error with the required bytes.
[[noreturn]] void allocation_failed(cudaError_t e, const char* call, std::size_t bytes) {
  cudaGetLastError();
  const std::string reason = fmt::format("{}: {}: {}", call, cudaGetErrorName(e), cudaGetErrorString(e));
  if (e == cudaErrorMemoryAllocation)
    throw OutOfMemoryError(fmt::format("out of device memory: {} bytes required ({})", bytes, reason), bytes);
  throw CudaError(reason);
}

}  // namespace

void register_memory_backend() {
  static std::once_flag once;
  std::call_once(once, [&] {
    DeviceMemoryBackend b;
    int runtime_version = 0;
    cudaRuntimeGetVersion(&runtime_version);
    b.name = fmt::format("CUDA runtime {}.{}", runtime_version / 1000, runtime_version % 1000 / 10);
    b.allocate = [](std::size_t bytes, std::size_t) -> void* {
      void* p = nullptr;
      if (cudaError_t e = cudaMalloc(&p, bytes); e != cudaSuccess) allocation_failed(e, "cudaMalloc", bytes);
      return p;  // cudaMalloc aligns to at least 256 bytes
    };
    b.free = [](void* p, std::size_t) { cudaFree(p); };
    b.allocate_async = [](std::size_t bytes, void* stream, std::uint64_t release_threshold) -> void* {
      void* p = nullptr;
      if (cudaError_t e = cudaMallocFromPoolAsync(&p, bytes, static_cast<cudaMemPool_t>(owned_pool(release_threshold)),
                                                  static_cast<cudaStream_t>(stream));
          e != cudaSuccess)
        allocation_failed(e, "cudaMallocFromPoolAsync", bytes);
      return p;
    };
    b.free_async = [](void* p, std::size_t, void* stream) { cudaFreeAsync(p, static_cast<cudaStream_t>(stream)); };
    set_device_memory_backend(Device::cuda, std::move(b));
  });
}

}  // namespace fieldflow::runtime::cuda
