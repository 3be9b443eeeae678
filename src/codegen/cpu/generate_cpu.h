#pragma once
// C++/OpenMP code generation for the CPU backend: one source file per schedule.
#include <string>

#include "ir/schedule.h"

namespace fieldflow::codegen {

struct CpuCodegenOptions {
  // Prefix of the two exported functions, `<prefix>run` and `<prefix>abi_version`. A JIT module is
  // one program per shared object and keeps the ABI's names (ff_run); an ahead-of-time library
  // holds many programs, so each gets its own prefix (and the kernels stay file-local).
  std::string symbol_prefix = "ff_";
};

// Generates the module source: one function per kernel (OpenMP-parallel outer loops, a
// unit-stride `omp simd` inner loop, scans as sequential sweeps), and the exported run function.
// Sizes, strides and domain bounds are read from ff_call at run time, so one module serves
// every grid size; the layout (which dimension is unit-stride) is compiled in.
std::string generate_cpu_source(const ir::Schedule& s, const CpuCodegenOptions& options = {});

// Whether a source generate_cpu_source returned has loops in both forms (ff_call::loop_form picks
// one), so that timing the two forms can tell them apart.
bool has_loop_forms(const std::string& source);

}  // namespace fieldflow::codegen
