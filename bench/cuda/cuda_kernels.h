#pragma once
// The hand-written CUDA baselines on a device: baselines.cu compiled by NVRTC with fieldflow's own
// options, loaded as a library, its planned launches (cuda_baselines.h) issued on a stream. Built
// only with CUDA (FIELDFLOW_WITH_CUDA); the caller links a CUDA runtime (the benchmark the static
// one, the device tests the shared one).
#include <cuda_runtime.h>

#include <map>
#include <string>

#include "cuda_baselines.h"

namespace fieldflow::bench {

class CudaBaselineKernels {
 public:
  // Compiles baselines.cu for `arch` ("sm_90"; empty: the current device's) and loads it. Throws
  // CompileError with NVRTC's log, CudaError naming the failed call.
  explicit CudaBaselineKernels(const std::string& arch = "");
  ~CudaBaselineKernels();
  CudaBaselineKernels(const CudaBaselineKernels&) = delete;
  CudaBaselineKernels& operator=(const CudaBaselineKernels&) = delete;

  // Issues the launch on `stream` (no synchronisation). Throws CudaError.
  void launch(const CudaBaselineLaunch& l, cudaStream_t stream) const;

 private:
  cudaLibrary_t library_ = nullptr;
  std::map<std::string, cudaKernel_t> kernels_;
};

// Throws CudaError "<call> failed for <what>: <CUDA's name>: <CUDA's message>" unless cudaSuccess.
void check_cuda(cudaError_t status, const char* call, const std::string& what);

}  // namespace fieldflow::bench
