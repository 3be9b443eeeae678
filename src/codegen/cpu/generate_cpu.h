#pragma once
// C++/OpenMP code generation for the CPU backend: one source file per schedule.
#include <string>

#include "ir/schedule.h"

namespace fieldflow::codegen {

// Generates the module source: one function per kernel (OpenMP-parallel outer loops, a
// unit-stride `omp simd` inner loop, scans as sequential sweeps), and the exported ff_run.
// Sizes, strides and domain bounds are read from ff_call at run time, so one module serves
// every grid size; the layout (which dimension is unit-stride) is compiled in.
std::string generate_cpu_source(const ir::Schedule& s);

}  // namespace fieldflow::codegen
