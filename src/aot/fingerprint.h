#pragma once
// The fingerprint that ties an AOT library to the fieldflow that loads it: written into each
// program's descriptor by the generator, recomputed by load_aot from the program it rebuilds.
#include <string>

#include "driver/cpu_build.h"
#include "driver/cuda_build.h"

namespace fieldflow::aot {

// XXH3-128 (32 hex digits) of everything the runtime and the generated code must agree on: the
// generated source, the schedule (transient and kernel order, which the runtime's ff_call follows)
// the pass pipeline's description and FF_ABI_VERSION.
std::string fingerprint(const driver::CpuBuild& build);
// A cuda program's: the same over its CUDA source, and the architecture its image was built for.
std::string fingerprint(const driver::CudaBuild& build, const std::string& cuda_arch);

}  // namespace fieldflow::aot
