#pragma once
// The host side of the hand-written CUDA baselines (baselines.cu): which programs have
// one, the kernel's launch and its parameters for an instance. Nothing here needs CUDA: the same
// plan is launched on a device by the GPU benchmark (bench/cuda/cuda_suite.cpp) and executed on the host by
// the tests' emulation of the launch grid (tests/bench/test_cuda_baselines.cpp).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "fieldflow/examples.h"

namespace fieldflow::bench {

// The text of bench/cuda/baselines.cu (embedded by the build; NVRTC compiles it).
extern const char* const cuda_baselines_source;

// Programs with a hand-written CUDA version: hdiff, vadv, nabla4, c2e2co_sum.
bool has_cuda_baseline(const std::string& program);

// Where the kernel finds its data: each field's memory (the address of its first stored element,
// like Field::data()) and each table's entries (row-major, as NeighborTable::data), on the device
// or, under emulation, on the host; and scratch of cuda_baseline_scratch_bytes.
struct CudaBaselineMemory {
  std::function<void*(const std::string& field)> field;
  std::function<const std::int32_t*(const std::string& table)> table;
  void* scratch = nullptr;
};

// One launch: the kernel's symbol, grid and block, and its one argument (a parameter struct of
// baselines.cu) by value.
struct CudaBaselineLaunch {
  std::string kernel;
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  std::vector<unsigned char> params;
};

// Device scratch the program's kernel needs (vadv: c' of every point; 0 for the others).
std::size_t cuda_baseline_scratch_bytes(const std::string& program, const examples::ExampleInstance& inst);

// The launch for `inst` (its shapes, strides, origins and scalars; the data at `memory`). Throws
// ArgumentError for a program without a CUDA baseline, fields not in the GPU's layout
// (horizontal_fastest), a table that is not four neighbours wide, or fields too large for the
// kernels' 32-bit indexing.
CudaBaselineLaunch plan_cuda_baseline(const std::string& program, const examples::ExampleInstance& inst,
                                      const CudaBaselineMemory& memory);

}  // namespace fieldflow::bench
