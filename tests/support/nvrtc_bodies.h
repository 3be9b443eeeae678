#pragma once
// Generated CUDA of many programs compiled by NVRTC as one translation unit (one NVRTC start-up
// for all of them): the check that code the host emulation ran also compiles for a GPU. Used by
// the language suite's batch (support/cuda_harness.h) and by the differential fuzzer. Needs the
// CUDA toolkit, not a device; without it every batch "compiles".
#include <algorithm>
#include <string>
#include <vector>

#include "codegen/cuda/generate_cuda.h"
#include "fieldflow/errors.h"
#include "toolchain/nvrtc_compiler.h"  // its types; its functions are called with FIELDFLOW_WITH_CUDA only

namespace fieldflow::testing_support {

struct NvrtcBodiesResult {
  std::string error;  // "" when NVRTC made an ELF cubin of every body; else NVRTC's log (or why not)
  std::vector<toolchain::KernelResources> kernels;  // what ptxas reported of each entry point
  int most_registers() const {
    int most = 0;
    for (const auto& k : kernels) most = std::max(most, k.registers);
    return most;
  }
};

// `bodies` are codegen::CudaSource::body texts whose symbols do not clash (each generated with its
// own symbol prefix); they follow one codegen::cuda_preamble().
// `name` names the translation unit in NVRTC's messages.
inline NvrtcBodiesResult compile_cuda_bodies(const std::vector<std::string>& bodies, const std::string& arch = "sm_90",
                                             const std::string& name = "batch") {
  NvrtcBodiesResult r;
#ifdef FIELDFLOW_WITH_CUDA
  std::string tu = codegen::cuda_preamble();
  for (const std::string& b : bodies) tu += b;
  try {
    const toolchain::ReportedCubin built = toolchain::nvrtc_compile_reporting(name, tu, arch);
    if (built.cubin.size() < 64 || built.cubin.compare(1, 3, "ELF") != 0) {
      r.error = "NVRTC returned no ELF cubin";
      return r;
    }
    r.kernels = built.kernels;
  } catch (const Error& e) {
    r.error = e.what();
  }
#else
  (void)bodies;
  (void)arch;
  (void)name;
#endif
  return r;
}

}  // namespace fieldflow::testing_support
