#pragma once
// The DeviceRunner of Backend::cuda: a cubin loaded with cudaLibraryLoadData, one kernel handle per
// launch and indexing width, a stream (the caller's or one it owns: never the legacy default
// stream), device copies of the call's fields and tables, and an error flag in device memory. The
// kernels take what they read of the call (ff_call) as parameter words, by value.
// All device memory comes from the allocation route (memory_route.h).
#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <vector>

#include "codegen/cuda/generate_cuda.h"
#include "runtime/device_runner.h"

namespace fieldflow::runtime::cuda {

// The CUDA runtime calls a runner makes. By default the runtime's own; tests give a host emulation
// (tests/cuda/test_cuda_runner_emulated.cpp) so the runner's copies, checks, parameter words and
// synchronisation run without a device.
struct CudaApi {
  cudaError_t (*library_load)(cudaLibrary_t* library, const std::string& image);
  cudaError_t (*library_unload)(cudaLibrary_t library);
  cudaError_t (*get_kernel)(cudaKernel_t* kernel, cudaLibrary_t library, const char* symbol);
  cudaError_t (*stream_create)(cudaStream_t* stream);  // blocking: ordered with the legacy default stream
  cudaError_t (*stream_destroy)(cudaStream_t stream);
  cudaError_t (*stream_synchronize)(cudaStream_t stream);
  cudaError_t (*stream_device)(cudaStream_t stream, int* device);  // cudaStreamGetDevice
  cudaError_t (*memcpy_async)(void* to, const void* from, std::size_t bytes, cudaStream_t stream);  // cudaMemcpyDefault
  cudaError_t (*launch)(cudaKernel_t kernel, dim3 grid, dim3 block, void** args, cudaStream_t stream);
  cudaError_t (*get_device)(int* device);
  cudaError_t (*pointer_attributes)(cudaPointerAttributes* attributes, const void* pointer);
  // cudaFuncGetAttributes on a kernel: also loads the library's image onto the device now (it is
  // loaded lazily otherwise), so an image the device cannot run fails here, not at the first call.
  cudaError_t (*kernel_attributes)(cudaFuncAttributes* attributes, cudaKernel_t kernel);
  // cudaMemcpy2DAsync (cudaMemcpyDefault): `height` rows of `width` bytes, each pitch apart.
  cudaError_t (*memcpy_2d_async)(void* to, std::size_t to_pitch, const void* from, std::size_t from_pitch,
                                 std::size_t width, std::size_t height, cudaStream_t stream);
};
const CudaApi& cuda_runtime_api();

struct CudaRunnerOptions {
  std::string program;
  std::string cubin;                          // the module's bytes
  std::vector<codegen::CudaLaunch> launches;  // in execution order
  std::size_t buffers = 0;                    // ff_call::buffers entries: parameters, then transients
  std::size_t kernels = 0;                    // ff_call::domains entries: one per schedule kernel (some
                                              // run inside another's launch: fuse_scan_consumers)
  void* stream = nullptr;                     // nullptr: the runner creates and owns a (blocking) stream
  const CudaApi* api = nullptr;               // nullptr: cuda_runtime_api()
};

// Throws CudaError naming the failed call (module load, kernel lookup, stream creation).
std::shared_ptr<DeviceRunner> make_cuda_runner(CudaRunnerOptions options);

}  // namespace fieldflow::runtime::cuda
