#pragma once
// The GPU's compiler over the fuzzer's programs. The emulated CUDA paths (differential.h) run the
// generated kernels compiled by the host's C++ compiler, which accepts code NVRTC refuses (a host
// function called from a kernel, a type or builtin device code lacks): such a program would pass
// every comparison here and fail to compile on a GPU machine. So each case's generated CUDA is
// also compiled by NVRTC for sm_90, which needs the CUDA toolkit, not a device. Cases are
// compiled in batches (one NVRTC start-up for many programs); a failing batch is compiled again
// case by case to name the failing ones.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "fuzz/differential.h"

namespace fieldflow::fuzz {

inline constexpr const char* nvrtc_failure_kind = "CUDA does not compile (NVRTC)";

struct NvrtcStats {
  std::uint64_t programs = 0;  // cases whose CUDA NVRTC compiled
  std::uint64_t kernels = 0;   // entry points ptxas reported for them
  std::uint64_t batches = 0;   // NVRTC translation units that held several cases
};

// Whether this fieldflow was built with the CUDA toolkit (else every case "compiles").
bool nvrtc_available();

// The generated CUDA of `c` as Backend::cuda builds it for each layout the case runs and for
// Layout::any (the views' instance), symbols prefixed with `prefix`. A program the CUDA lowering
// refuses contributes nothing here: the differential check owns that verdict.
std::vector<std::string> cuda_bodies(const FuzzCase& c, const std::string& prefix);

// One entry per case: nullopt when its CUDA compiles (or this build has no CUDA toolkit), else a
// failure of kind nvrtc_failure_kind whose detail holds NVRTC's first errors. `bodies` makes each
// case's CUDA (tests give one that breaks a case).
using CudaBodies = std::function<std::vector<std::string>(const FuzzCase&, const std::string& prefix)>;
std::vector<std::optional<Failure>> check_cuda_compiles(const std::vector<const FuzzCase*>& cases, NvrtcStats& stats,
                                                        const CudaBodies& bodies = cuda_bodies);

}  // namespace fieldflow::fuzz
