#pragma once
// The CUDA side of the compile driver: lowering for the GPU and generating CUDA C++ (always
// available: it only writes text), compiling it with NVRTC into the cache (builds with
// FIELDFLOW_WITH_CUDA), and the host emulation of a CUDA module that the CPU-only tests run.
#include <optional>
#include <string>

#include "codegen/cuda/generate_cuda.h"
#include "fieldflow/compile.h"
#include "ir/schedule.h"
#include "toolchain/module_cache.h"
#include "toolchain/nvrtc_compiler.h"

namespace fieldflow::driver {

struct CudaBuild {
  ir::Schedule schedule;  // lowered for Device::cuda: transients in gpu_global, no column groups
  codegen::CudaSource source;
};
CudaBuild build_cuda_source(const ir::Program& program, const CompileOptions& options,
                            const std::string& symbol_prefix = "ff_");

// Whether this fieldflow was built with the CUDA toolkit (NVRTC and the CUDA runtime).
bool cuda_built();

// Compiles a CUDA translation unit with NVRTC through the module cache of `cache_dir` (empty: the
// default) for `arch` (empty: the device's, else sm_90) and returns the cache entry's path and
// whether it was a hit. Throws BackendUnavailableError without CUDA support, CompileError with
// NVRTC's log.
struct CudaBinary {
  std::string path;
  std::string arch;
  bool cache_hit = false;
  double compile_seconds = 0;
};
CudaBinary compile_cuda_binary(const std::string& name, const std::string& source, const std::string& arch,
                               const std::string& cache_dir);

// What ptxas gives each launch's kernels of `cuda` for `arch` (empty: sm_90), in the order of
// cuda.launches: registers per thread and bytes spilled to local memory, of the entry point with
// 32-bit indexing (what calls that fit run) and of the one with 64-bit indexing. Known without a
// device (`fieldflow inspect --backend cuda` prints it). Throws BackendUnavailableError without
// CUDA support, CompileError as NVRTC does.
struct LaunchResources {
  toolchain::KernelResources narrow, wide;
};
std::vector<LaunchResources> cuda_kernel_resources(const std::string& name, const codegen::CudaSource& cuda,
                                                   const std::string& arch);

// Backend::cuda: throws BackendUnavailableError naming the reason when this build has no CUDA or
// the machine no device.
CompiledProgram compile_cuda(const ir::Program& program, const CompileOptions& options);

// A program whose kernels are the CUDA image `cubin` of `built` (JIT: from the cache; AOT: embedded
// in the host's library): loads it on the device and runs it on the program's stream. Throws
// BackendUnavailableError as compile_cuda does, CudaError when the image does not load.
CompiledProgram cuda_program(const ir::Program& program, const CompileOptions& options, CudaBuild built,
                             std::string cubin, double compile_seconds, bool cache_hit);

// The generated kernels run on the host: the CUDA source is compiled by the system C++ compiler
// after a prelude that defines the CUDA keywords away and provides blockIdx / threadIdx /
// blockDim / gridDim, and a generated ff_run launches every kernel by looping over its grid and
// blocks, one thread after the other. The schedule is the one the GPU gets, with its transients
// in host memory, so the CPU runtime binds, checks and runs it as it runs a CPU module: the
// generated indexing (the thread-to-point mapping, partial blocks, the launches in pieces along
// y and z, scans' columns) is executed and compared with the reference without a device.
// `max_grid_yz` is the most rows of a piece along y and z (the GPU's limit is 65535), so that
// small tests take the pieces' path too. Every buffer access is checked for races between the
// threads of a launch (see cuda_emulation_source): complete for the pieces it runs, and with the
// runner's limit (65535) for any grid up to it.
// Like the CUDA runner, ff_run launches each kernel's 32-bit entry point when the call fits it
// (ff_fits_32bit_indexing), unless `indexing` says always_64_bit (tests of the 64-bit kernels at
// sizes a test can hold). The choice is part of the module's source, so two emulations of one
// program that differ in it never share a loaded module.
enum class EmulatedIndexing { as_the_runtime_chooses, always_64_bit };
CompiledProgram compile_cuda_emulated(const ir::Program& program, const CompileOptions& options, int max_grid_yz = 3,
                                      EmulatedIndexing indexing = EmulatedIndexing::as_the_runtime_chooses);
// The same of a build given as it is (tests give it schedules the pipeline would not make).
CompiledProgram compile_cuda_emulated(CudaBuild built, const CompileOptions& options, int max_grid_yz = 3,
                                      EmulatedIndexing indexing = EmulatedIndexing::as_the_runtime_chooses);

// The host-compiled module behind compile_cuda_emulated (the module cache's entry for
// cuda_emulation_source), with the CUDA build it came from: also what the emulated CUDA runtime of
// the tests loads, whose cudaLaunchKernel calls the module's ff_emulate_launch.
struct EmulatedCuda {
  CudaBuild built;
  std::string source;
  std::optional<toolchain::LoadedModule> module;
  toolchain::CacheEntry entry;
};
EmulatedCuda load_cuda_emulation(const ir::Program& program, const CompileOptions& options, int max_grid_yz = 3,
                                 EmulatedIndexing indexing = EmulatedIndexing::as_the_runtime_chooses);
EmulatedCuda load_cuda_emulation(CudaBuild built, const CompileOptions& options, int max_grid_yz = 3,
                                 EmulatedIndexing indexing = EmulatedIndexing::as_the_runtime_chooses);

// The host source of that emulation: the kernels of `schedule` (generated with
// CudaCodegenOptions::race_check: a launch whose threads touch one element where one of them
// writes it throws std::logic_error naming the kernel, the buffer, the element and the threads),
// ff_run (every launch, its grid from codegen::cuda_grid in pieces of at most max_grid_yz rows
// along y and z, each launch's parameter words filled from the call as the runner fills them) and
// ff_emulate_launch(entry, grid_x, grid_y, grid_z, block_x, params, y0, z0), one launch of an entry
// point (by its index in emulation_entry_points) with its words, a grid and first rows the caller
// gives (what an emulated cudaLaunchKernel calls).
std::string cuda_emulation_source(const ir::Schedule& schedule, int max_grid_yz,
                                  EmulatedIndexing indexing = EmulatedIndexing::as_the_runtime_chooses);
// The kernels' entry points in the emulation's order: each launch's 64-bit one, then its 32-bit one.
std::vector<std::string> emulation_entry_points(const codegen::CudaSource& cuda);

}  // namespace fieldflow::driver
