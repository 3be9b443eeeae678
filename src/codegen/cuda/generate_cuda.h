#pragma once
// CUDA C++ code generation for the cuda backend: one device-only source per schedule (NVRTC
// compiles it in-process), plus the launch configuration of each kernel.
#include <cstdint>
#include <string>
#include <vector>

#include "codegen/common/point_emitter.h"
#include "ir/schedule.h"

namespace fieldflow::codegen {

// How the runtime launches one kernel. Threads along x cover the kernel's unit-stride loop
// dimension (coalesced loads and stores), blocks along y the next one (J of a Cartesian grid, the
// levels of a mesh), blocks along z the others, flattened. One block per row along y and z, so a
// thread finds its point without dividing (64-bit division is a long instruction sequence on a
// GPU) and without looping; a box with more rows than CUDA allows blocks (65,535 along y and z)
// is launched in pieces (cuda_grid). A scan's own dimension is not in the grid: each thread
// sweeps its column with the carry in registers.
struct CudaLaunch {
  std::string symbol;          // extern "C" __global__ function, 64-bit indexing
  std::string narrow_symbol;   // the same kernel with 32-bit indexing: what a call whose boxes and
                               // buffers fit runs (fieldflow/abi.h, ff_fits_32bit_indexing)
  int kernel = 0;              // index into Schedule::kernels (its box is in ff_call::domains)
  int block_x = 128;           // threads per block (block y and z are 1)
  int x_axis = -1;             // position in ir::kernel_loop_dims of the dimension along x; -1: one thread
  int y_axis = -1;             // position of the dimension along y; -1: none
  std::vector<int> z_axes;     // positions of the dimensions flattened along z, slowest first
  int rows_per_thread = 1;     // rows along y each thread computes, one after the other (a mesh
                               // kernel's run of levels: cuda_levels_per_thread)
  int loop_dims = 0;           // the kernel's loop dimensions (a scan's own one is not in the grid)
  bool raises_errors = false;  // checks reads while running: may set ff_call::error
  std::int64_t max_shift = 0;  // the largest constant offset of its accesses (ff_fits_32bit_indexing)
  std::vector<CallWord> params;  // the kernel's parameter words (ff_word), in order: what it reads of
                                 // the call, which the runtime copies from its ff_call
};

// What CUDA passes to a kernel (since CUDA 12.1 on Volta and later; 4,096 bytes before): a
// kernel's words and its two row offsets must fit, or generate_cuda_source throws CompileError.
inline constexpr std::size_t cuda_max_parameter_bytes = 32764;

// Levels in a mesh kernel's run: what does not change with the level (the neighbour-table
// row, the weights) is loaded once per run. 8, as in the hand-written kernels of bench/cuda.
inline constexpr int cuda_levels_per_thread = 8;

struct CudaCodegenOptions {
  // Prefix of the kernels' symbols (`<prefix>kernel_<k>`): several programs can share one
  // translation unit (an AOT library, or a batch compiled at once to check many programs).
  std::string symbol_prefix = "ff_";
  // Every load and store of a buffer through `ff_checked`, which the host emulation defines to
  // find two threads of one launch touching one element (driver::cuda_emulation_source). The
  // source is then for the emulation only: NVRTC does not know ff_checked.
  bool race_check = false;
};

struct CudaSource {
  std::string source;                // the translation unit NVRTC compiles: include, preamble, body
  std::string body;                  // the kernels alone
  std::vector<CudaLaunch> launches;  // in execution order
};

// Sizes, strides and boxes are kernel parameters (CudaLaunch::params, filled by the runtime from
// its ff_call each call), so one module serves every grid size, as on the CPU. Kernels take
// `(const <symbol>_params words, int64_t y0, int64_t z0)`, y0 and z0 the first row along y and z
// of the launch's piece, and report failed in-kernel checks with atomicOr into the error flag
// (a word). Each has two entry points, CudaLaunch::symbol (64-bit indexing) and narrow_symbol
// (32-bit), around one body templated over its index types.
CudaSource generate_cuda_source(const ir::Schedule& s, const CudaCodegenOptions& options = {});

// What every CUDA translation unit has before the kernels (once, however many programs follow):
// fieldflow/abi.h and ff_limits, the numeric_limits of device code (NVRTC has no <limits>).
std::string cuda_preamble();

// Launch grid of one kernel for a call's loop boxes (ff_call::domains): blocks along x, and the
// rows along y (a block per run of rows_per_thread) and z (a block each); all 0 when the box is
// empty (the launch is skipped, like the CPU kernel's early return).
struct CudaGrid {
  std::int64_t x = 0, y = 0, z = 0;
};
CudaGrid cuda_grid(const CudaLaunch& launch, const std::int64_t* kernel_domain);
inline constexpr std::int64_t cuda_max_grid_yz = 65535;  // CUDA's limit of gridDim.y and gridDim.z

// The launches of `grid`: pieces of at most `max_yz` rows along y and along z, each launched as
// launch(x, y, z, y0, z0) with its blocks and its first rows. Usually one; none when empty.
template <class Launch>
void for_each_cuda_piece(const CudaGrid& grid, std::int64_t max_yz, Launch&& launch) {
  if (grid.x <= 0) return;
  for (std::int64_t z0 = 0; z0 < grid.z; z0 += max_yz)
    for (std::int64_t y0 = 0; y0 < grid.y; y0 += max_yz)
      launch(grid.x, grid.y - y0 < max_yz ? grid.y - y0 : max_yz, grid.z - z0 < max_yz ? grid.z - z0 : max_yz, y0, z0);
}

}  // namespace fieldflow::codegen
