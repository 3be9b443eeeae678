#pragma once
// A host emulation of the CUDA runtime calls the runner makes (runtime::cuda::CudaApi), so that a
// Backend::cuda program's runner, binding and memory run without a device: device memory is host
// memory the emulator knows by address (the allocation route's, and whatever a test registers),
// and cudaLaunchKernel runs the program's generated kernels, compiled for the host, over the grid
// the runner computed. One emulated program runs at a time. Used by tests/cuda's runner test and
// by the language suite (cuda_harness.h). Builds with FIELDFLOW_WITH_CUDA (the runtime's types).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <map>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "driver/cuda_build.h"
#include "fieldflow/examples.h"
#include "runtime/compiled_program.h"
#include "runtime/cuda/cuda_runner.h"
#include "runtime/memory_route.h"
#include "runtime/memory_test_support.h"
#include "toolchain/module_cache.h"

namespace fieldflow::testing_support {

// What the emulated runtime saw.
struct Emulator {
  using Launch = void (*)(int, unsigned, unsigned, unsigned, unsigned, const void*, std::int64_t, std::int64_t);
  Launch launch = nullptr;
  std::vector<std::string> symbols;                 // the kernels a library has, by launch index
  std::vector<std::pair<std::uintptr_t, std::size_t>> device;  // address ranges that are device memory
  struct Copy {
    std::size_t bytes;
    bool from_device, to_device;
  };
  std::vector<Copy> copies;
  std::vector<cudaStream_t> launch_streams, copy_streams, synced_streams;
  struct Piece {
    unsigned grid_y, grid_z;
    std::int64_t y0, z0;
  };
  std::vector<Piece> launch_pieces;  // each launch's blocks along y and z and its first rows
  std::vector<std::string> launched;  // each launch's kernel symbol
  // Whether copies and launches are written down above (not in a count of the runner's own
  // heap allocations: the vectors would allocate).
  bool record = true;
  int syncs = 0;
  int pointer_queries = 0;           // cudaPointerGetAttributes calls
  int device_of_memory = 0;          // the device its device memory says it belongs to
  int device_of_streams = 0;         // what cudaStreamGetDevice answers
  cudaError_t launch_result = cudaSuccess;  // what cudaLaunchKernel answers (without running)
  cudaError_t attributes_result = cudaSuccess;  // what cudaFuncGetAttributes answers (an image it cannot load)
  int max_threads_per_block = 1024;  // what cudaFuncGetAttributes says a kernel allows
  int current_device = 0;            // what cudaGetDevice answers
  int libraries = 0;                 // loaded and not unloaded
  std::string missing_symbol;        // a kernel cudaLibraryGetKernel does not find (an image without it)
  // Runs after each launch's kernel: what another stream might write while a call runs.
  std::function<void()> during_launch;
  int copies_2d = 0;                 // cudaMemcpy2DAsync calls
  cudaError_t copy_2d_result = cudaSuccess;  // what cudaMemcpy2DAsync answers (without copying)
  std::mutex mutex;

  bool is_device(const void* p) {
    std::lock_guard lock(mutex);
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    return std::any_of(device.begin(), device.end(), [&](const auto& r) { return a >= r.first && a < r.first + r.second; });
  }
  void add_device(const void* p, std::size_t bytes) {
    std::lock_guard lock(mutex);
    device.emplace_back(reinterpret_cast<std::uintptr_t>(p), bytes);
  }
  void remove_device(const void* p) {
    std::lock_guard lock(mutex);
    std::erase_if(device, [&](const auto& r) { return r.first == reinterpret_cast<std::uintptr_t>(p); });
  }
  void forget_calls() {
    copies.clear();
    launch_streams.clear();
    launch_pieces.clear();
    launched.clear();
    copy_streams.clear();
    synced_streams.clear();
    syncs = 0;
    copies_2d = 0;
    pointer_queries = 0;
  }
};
inline Emulator* emulator = nullptr;  // the one in use

inline cudaStream_t const owned_stream = reinterpret_cast<cudaStream_t>(std::uintptr_t{0x5151});

inline const runtime::cuda::CudaApi emulated_api{
    [](cudaLibrary_t* l, const std::string&) {
      *l = reinterpret_cast<cudaLibrary_t>(emulator);
      ++emulator->libraries;
      return cudaSuccess;
    },
    [](cudaLibrary_t) {
      --emulator->libraries;
      return cudaSuccess;
    },
    [](cudaKernel_t* k, cudaLibrary_t, const char* symbol) {
      const auto& s = emulator->symbols;
      const auto it = std::find(s.begin(), s.end(), symbol);
      if (it == s.end() || *it == emulator->missing_symbol) return cudaErrorSymbolNotFound;
      *k = reinterpret_cast<cudaKernel_t>(static_cast<std::uintptr_t>(it - s.begin() + 1));
      return cudaSuccess;
    },
    [](cudaStream_t* s) {
      *s = owned_stream;
      return cudaSuccess;
    },
    [](cudaStream_t) { return cudaSuccess; },
    [](cudaStream_t s) {
      ++emulator->syncs;
      if (emulator->record) emulator->synced_streams.push_back(s);
      return cudaSuccess;
    },
    [](cudaStream_t, int* device) {
      *device = emulator->device_of_streams;
      return cudaSuccess;
    },
    [](void* to, const void* from, std::size_t bytes, cudaStream_t s) {
      std::memcpy(to, from, bytes);
      if (emulator->record) {
        emulator->copies.push_back({bytes, emulator->is_device(from), emulator->is_device(to)});
        emulator->copy_streams.push_back(s);
      }
      return cudaSuccess;
    },
    [](cudaKernel_t k, dim3 grid, dim3 block, void** args, cudaStream_t s) {
      if (emulator->launch_result != cudaSuccess) return emulator->launch_result;
      // CUDA's limits, as a device checks them.
      if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.y > 65535 || grid.z > 65535 || block.x == 0)
        return cudaErrorInvalidConfiguration;
      const std::int64_t y0 = *static_cast<const std::int64_t*>(args[1]), z0 = *static_cast<const std::int64_t*>(args[2]);
      if (emulator->record) {
        emulator->launch_streams.push_back(s);
        emulator->launch_pieces.push_back({grid.y, grid.z, y0, z0});
      }
      const int index = static_cast<int>(reinterpret_cast<std::uintptr_t>(k)) - 1;
      if (emulator->record) emulator->launched.push_back(emulator->symbols[index]);
      emulator->launch(index, grid.x, grid.y, grid.z, block.x, args[0], y0, z0);  // args[0]: the kernel's words
      if (emulator->during_launch) emulator->during_launch();
      return cudaSuccess;
    },
    [](int* device) {
      *device = emulator->current_device;
      return cudaSuccess;
    },
    [](cudaPointerAttributes* a, const void* p) {
      *a = cudaPointerAttributes{};
      a->type = emulator->is_device(p) ? cudaMemoryTypeDevice : cudaMemoryTypeUnregistered;
      ++emulator->pointer_queries;
      a->device = emulator->device_of_memory;
      return cudaSuccess;
    },
    [](cudaFuncAttributes* a, cudaKernel_t) {
      *a = cudaFuncAttributes{};
      a->maxThreadsPerBlock = emulator->max_threads_per_block;
      return emulator->attributes_result;
    },
    [](void* to, std::size_t to_pitch, const void* from, std::size_t from_pitch, std::size_t width, std::size_t height,
       cudaStream_t s) {
      if (emulator->copy_2d_result != cudaSuccess) return emulator->copy_2d_result;
      // CUDA's rule: each pitch holds a row.
      if (height > 1 && (to_pitch < width || from_pitch < width)) return cudaErrorInvalidPitchValue;
      for (std::size_t r = 0; r < height; ++r)
        std::memcpy(static_cast<std::byte*>(to) + r * to_pitch, static_cast<const std::byte*>(from) + r * from_pitch, width);
      ++emulator->copies_2d;
      if (emulator->record) emulator->copy_streams.push_back(s);
      return cudaSuccess;
    },
};

// The route's device memory: host memory the emulator knows as device memory.
class EmulatedDeviceMemory : public testing::FakeCudaBackend {
 public:
  explicit EmulatedDeviceMemory(Emulator& e)
      : FakeCudaBackend([&e](void* p, std::size_t bytes) { e.add_device(p, bytes); },
                        [&e](void* p) { e.remove_device(p); }) {}
};

// An external-mode allocator of memory the emulator calls device memory.
inline ExternalMemoryAllocator emulated_device_allocator(Emulator& e) {
  return [&e](const AllocationRequest& r) {
    void* block = std::aligned_alloc(r.alignment, (r.bytes + r.alignment - 1) / r.alignment * r.alignment);
    e.add_device(block, r.bytes);
    return Workspace{block, r.bytes, Device::cuda, [&e, block] {
                       e.remove_device(block);
                       std::free(block);
                     }};
  };
}

// An instance's fields copied into memory the emulator calls device memory, as Device::cuda views.
struct EmulatedDeviceFields {
  Emulator& e;
  std::map<std::string, std::vector<std::byte>> memory;
  std::map<std::string, Field> views;
  Arguments args;
  EmulatedDeviceFields(Emulator& em, examples::ExampleInstance& inst) : e(em) {
    for (auto& [name, f] : inst.fields) {
      auto& m = memory[name];
      m.resize(f.span_bytes() + 64);
      std::byte* p = m.data() + (64 - reinterpret_cast<std::uintptr_t>(m.data()) % 64) % 64;
      std::memcpy(p, f.data(), f.span_bytes());
      e.add_device(p, f.span_bytes());
      views.emplace(name, Field::view(p, f.dims(), f.dtype(), f.shape(), f.strides(), f.origin(), Device::cuda));
    }
    const Arguments host = inst.arguments();
    for (const auto& en : host.entries()) {
      if (en.kind == Arguments::Entry::Kind::field) args.field(en.name, views.at(en.name));
      if (en.kind == Arguments::Entry::Kind::scalar) args.scalar(en.name, en.scalar);
      if (en.kind == Arguments::Entry::Kind::connectivity) args.connectivity(en.name, *en.table);
    }
  }
  ~EmulatedDeviceFields() {
    for (auto& [name, v] : views) e.remove_device(v.data());
  }
  void copy_back(examples::ExampleInstance& inst) {
    for (auto& [name, f] : inst.fields) std::memcpy(f.data(), views.at(name).data(), f.span_bytes());
  }
};

// A cuda program whose runner talks to the emulated runtime; the module of host-compiled kernels
// stays loaded with it.
struct EmulatedProgram {
  std::optional<toolchain::LoadedModule> module;
  std::optional<CompiledProgram> program;
};

// Compiles `program` for Backend::cuda (options.backend is set) with `e` as its runtime; `e`
// becomes the emulator in use.
// The module is compile_cuda_emulated's (one compile serves both; the runner launches through
// its ff_emulate_launch with the grid the runner computed).
inline EmulatedProgram compile_with_emulated_runtime(Emulator& e, const ir::Program& program, CompileOptions o) {
  emulator = &e;
  o.backend = Backend::cuda;
  if (!o.layout) o.layout = default_layout(Backend::cuda);
  driver::EmulatedCuda emulation = driver::load_cuda_emulation(program, o);
  driver::CudaBuild& built = emulation.built;
  EmulatedProgram out;
  out.module.emplace(std::move(*emulation.module));
  e.launch = reinterpret_cast<Emulator::Launch>(out.module->symbol("ff_emulate_launch"));
  e.symbols = driver::emulation_entry_points(built.source);
  CompiledProgram::Impl::Image image;
  image.program = program;
  image.options = o;
  runtime::cuda::CudaRunnerOptions ro;
  ro.program = program.name;
  ro.cubin = "emulated";
  ro.launches = built.source.launches;
  ro.buffers = program.params.size() + built.schedule.transients.size();
  ro.kernels = built.schedule.kernels.size();
  ro.stream = o.cuda_stream;
  ro.api = &emulated_api;
  image.device = runtime::cuda::make_cuda_runner(std::move(ro));
  image.schedule = std::move(built.schedule);
  image.source = std::move(built.source.source);
  out.program.emplace(std::make_unique<CompiledProgram::Impl>(std::move(image)));
  return out;
}

}  // namespace fieldflow::testing_support
