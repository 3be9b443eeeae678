#pragma once
// The DeviceRunner of Backend::cuda: a cubin loaded with cudaLibraryLoadData, one kernel handle per
// launch, a stream (the caller's or one it owns: never the legacy default stream), device copies of
// the call's fields and tables, and the call descriptor (ff_call with its arrays) in device memory.
// All device memory comes from the allocation route (memory_route.h).
#include <memory>
#include <string>
#include <vector>

#include "codegen/cuda/generate_cuda.h"
#include "runtime/device_runner.h"

namespace fieldflow::runtime::cuda {

struct CudaRunnerOptions {
  std::string program;
  std::string cubin;                          // the module's bytes
  std::vector<codegen::CudaLaunch> launches;  // in execution order
  std::size_t buffers = 0;                    // ff_call::buffers entries: parameters, then transients
  void* stream = nullptr;                     // nullptr: the runner creates and owns a non-blocking stream
};

// Throws CudaError naming the failed call (module load, kernel lookup, stream creation).
std::shared_ptr<DeviceRunner> make_cuda_runner(CudaRunnerOptions options);

}  // namespace fieldflow::runtime::cuda
