// The hand-written CUDA baselines on a device (see cuda_kernels.h).
#include "cuda_kernels.h"

#include <fmt/format.h>

#include "fieldflow/device_errors.h"
#include "runtime/cuda/cuda_device.h"
#include "toolchain/nvrtc_compiler.h"

namespace fieldflow::bench {

void check_cuda(cudaError_t status, const char* call, const std::string& what) {
  if (status == cudaSuccess) return;
  cudaGetLastError();  // not sticky for the next call
  throw CudaError(fmt::format("{} failed for {}: {}: {}", call, what, cudaGetErrorName(status),
                              cudaGetErrorString(status)));
}

CudaBaselineKernels::CudaBaselineKernels(const std::string& arch) {
  const std::string target = arch.empty() ? runtime::cuda::device_arch_or(toolchain::default_cuda_arch) : arch;
  const std::string cubin = toolchain::nvrtc_compile("cuda_baselines", cuda_baselines_source, target);
  check_cuda(cudaLibraryLoadData(&library_, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0),
             "cudaLibraryLoadData", "the hand-written CUDA baselines");
  for (const char* name : {"ff_bl_hdiff", "ff_bl_vadv", "ff_bl_nabla4", "ff_bl_c2e2co_sum"}) {
    cudaKernel_t k = nullptr;
    const cudaError_t e = cudaLibraryGetKernel(&k, library_, name);
    if (e != cudaSuccess) {
      cudaLibraryUnload(library_);
      check_cuda(e, "cudaLibraryGetKernel", fmt::format("baseline kernel '{}'", name));
    }
    kernels_[name] = k;
  }
}

CudaBaselineKernels::~CudaBaselineKernels() {
  if (library_) cudaLibraryUnload(library_);
}

void CudaBaselineKernels::launch(const CudaBaselineLaunch& l, cudaStream_t stream) const {
  auto it = kernels_.find(l.kernel);
  if (it == kernels_.end()) throw ArgumentError(fmt::format("no baseline kernel '{}' in baselines.cu", l.kernel));
  void* args[] = {const_cast<unsigned char*>(l.params.data())};
  check_cuda(cudaLaunchKernel(reinterpret_cast<const void*>(it->second), dim3(l.grid[0], l.grid[1], l.grid[2]),
                              dim3(l.block[0], l.block[1], l.block[2]), args, 0, stream),
             "cudaLaunchKernel", fmt::format("baseline kernel '{}'", l.kernel));
}

}  // namespace fieldflow::bench
