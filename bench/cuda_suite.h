#pragma once
// The GPU half of the benchmark suite (`fieldflow bench --device cuda`, docs/performance.md, GPU):
// the device's copy probe, and per configuration (hdiff and vadv 256x256x80; nabla4 and
// c2e2co_sum on the 40,328-cell torus x 80 levels; all in the GPU's layout, horizontal_fastest)
// a device copy of exactly its compulsory bytes, the hand-written CUDA kernel (bench/cuda/) and
// fieldflow in each transient-memory mode, on fields that live in device memory (what a model
// that keeps its state on the GPU passes). Every timed call, fieldflow's and the others, ends with
// its stream synchronised, as a fieldflow call does.
#include <cstddef>
#include <nlohmann/json.hpp>

#include "suite.h"

namespace fieldflow::bench {

// Registers the GPU cases and returns how many. Throws BackendUnavailableError when this build
// has no CUDA or the machine no device (the message says which).
std::size_t register_cuda_suite(const SuiteOptions& options);

// Frees the device memory, programs and kernels the cases kept.
void release_cuda_suite_state();

// The device for the report's machine.gpu: name, compute capability, HBM peak in GB/s (memory
// clock x bus width x 2, from the device's attributes); an empty object without a device.
nlohmann::json cuda_device_info();

// The GPU configurations (full or quick sizes).
std::vector<KernelConfig> cuda_kernel_configs(bool quick);

}  // namespace fieldflow::bench
