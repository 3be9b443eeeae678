#pragma once
// The CUDA runtime as fieldflow uses it: device discovery, errors, the device memory backend of
// the allocation route, modules and launches. Built only with FIELDFLOW_WITH_CUDA; nothing here
// is reached on the CPU path, and a machine without a device (cudaGetDeviceCount failing) only
// makes Backend::cuda unavailable.
#include <cstddef>
#include <cstdint>
#include <string>

namespace fieldflow::runtime::cuda {

// Devices usable now; 0 when there is none or no driver, with CUDA's reason in *why.
int device_count(std::string* why = nullptr);

// "sm_<major><minor>" of the current device, or `fallback` when there is no device.
std::string device_arch_or(const std::string& fallback);

// Throws CudaError "<call> failed for program '<program>': <CUDA's name>: <CUDA's message>" when
// `status` (a cudaError_t) is not cudaSuccess. Out of memory (cudaErrorMemoryAllocation) from an
// allocation throws OutOfMemoryError with the required bytes instead (see check_allocation).
void check(int status, const char* call, const std::string& program);
[[noreturn]] void throw_cuda_error(int status, const char* call, const std::string& program);

// Registers cudaMalloc/cudaFree and cudaMallocAsync/cudaFreeAsync from memory pools fieldflow
// creates and owns (never the device's default pool) as the allocation route's CUDA backend: the
// pool of an allocation is the one of the program's release threshold
// (CompileOptions::cuda_pool_release_threshold). Idempotent.
void register_memory_backend();

// The pool (a cudaMemPool_t) that pool mode allocates from on the current device for
// `release_threshold`, created with that threshold on first use. Throws CudaError as check does.
void* owned_pool(std::uint64_t release_threshold);

}  // namespace fieldflow::runtime::cuda
