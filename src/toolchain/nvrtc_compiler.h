#pragma once
// Compiling generated CUDA C++ in-process with NVRTC (no nvcc process per program) into a CUDA
// binary for one architecture. Built only when fieldflow is configured with CUDA
// (FIELDFLOW_WITH_CUDA); needs the CUDA toolkit's NVRTC, not a device.
#include <cstdint>
#include <string>
#include <vector>

#include "toolchain/module_cache.h"

namespace fieldflow::toolchain {

// The architecture generated code is compiled for when neither an option nor a device says
// otherwise (H100/H200).
inline constexpr const char* default_cuda_arch = "sm_90";

// NVRTC's options for generated code: the architecture (a real one, "sm_90", so the result is a
// cubin), C++17, no FMA contraction (like the CPU's -ffp-contract=off: the reference computes
// a * b + c with two roundings), IEEE division and square root, and the folder of fieldflow/abi.h.
std::vector<std::string> nvrtc_options(const std::string& arch);

// "NVRTC <major>.<minor>": part of every CUDA cache key.
std::string nvrtc_identity();

// The real architectures this NVRTC makes machine code for ("sm_75", "sm_80", ...; from
// nvrtcGetSupportedArchs), and whether `arch` is one of them (its number; the suffixes a and f
// are NVRTC's to refuse). A CUDA 13 NVRTC no longer compiles for Volta (sm_70), and an older
// one does not know the newest devices.
std::vector<std::string> nvrtc_architectures();
bool nvrtc_compiles_for(const std::string& arch);

// Compiles `source` to a cubin. An architecture this NVRTC does not compile for is an
// OptionError naming the ones it does. Throws CompileError with NVRTC's log, naming the program.
std::string nvrtc_compile(const std::string& program_name, const std::string& source, const std::string& arch);

// What ptxas gives one kernel for the architecture: registers per thread, and the local memory
// of its stack frame and of the registers it spills. A spill turns register traffic into memory
// traffic, the one resource a bandwidth-bound kernel has none of to spare; the registers bound
// how many threads an SM keeps in flight. Both are known without a device.
struct KernelResources {
  std::string symbol;
  int registers = 0;
  std::int64_t stack_bytes = 0, spill_store_bytes = 0, spill_load_bytes = 0;
  bool spills() const { return spill_store_bytes > 0 || spill_load_bytes > 0; }
};

// A cubin with what ptxas gave each kernel (__global__ function) in it, in the order ptxas
// reports them: compiled as nvrtc_compile does, with ptxas's verbose report (--ptxas-options=-v)
// in NVRTC's log, read by parse_ptxas_report. Throws CompileError as nvrtc_compile does, and as
// parse_ptxas_report does.
struct ReportedCubin {
  std::string cubin;
  std::vector<KernelResources> kernels;
};
ReportedCubin nvrtc_compile_reporting(const std::string& program_name, const std::string& source, const std::string& arch);

// The kernels of ptxas's verbose report, in its order. Throws CompileError naming the program and
// the kernel when a kernel's report lacks its registers or its local memory (a format this parser
// does not know).
std::vector<KernelResources> parse_ptxas_report(const std::string& program_name, const std::string& log);

// The cache's in-process build for one program and architecture.
InProcessBuild nvrtc_build(const std::string& program_name, const std::string& arch);

}  // namespace fieldflow::toolchain
