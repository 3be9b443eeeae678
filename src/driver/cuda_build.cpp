// The CUDA side of the compile driver; see cuda_build.h.
#include "driver/cuda_build.h"

#include <algorithm>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <stdexcept>

#include "driver/cpu_build.h"
#include "fieldflow/abi.h"
#include "fieldflow/device_errors.h"
#include "passes/pipeline.h"
#include "runtime/compiled_program.h"
#include "toolchain/compiler.h"
#include "toolchain/module_cache.h"
#ifdef FIELDFLOW_WITH_CUDA
#include "runtime/cuda/cuda_device.h"
#include "runtime/cuda/cuda_runner.h"
#include "toolchain/nvrtc_compiler.h"
#endif

namespace fieldflow::driver {

namespace {

toolchain::ModuleCache cache_at(const std::string& dir) {
  return toolchain::ModuleCache(dir.empty() ? std::filesystem::path{} : std::filesystem::path(dir));
}

// CUDA keywords defined away, the launch-grid variables as globals the launcher sets, the device
// intrinsics generated code uses as their host equivalents, and the race check.
//
// The race check: the emulation runs a launch's threads one after the other, so a kernel whose
// threads communicate through global memory (one writes an element another reads or writes, in
// the same launch) may well give the reference's values here, and race on a GPU. Kernels are
// generated with every buffer access through ff_checked (codegen's race_check), which records,
// per element address, the threads of the current launch that wrote and read it; a second
// thread's access that conflicts with a write is reported when the launch ends, as a
// std::logic_error naming the kernel, the buffer, the element and both threads. Elements are
// keyed by address, so transients packed over one another are checked together.
constexpr const char* emulation_prelude = R"prelude(// Host emulation of a fieldflow CUDA module (tests without a device).
#include <cmath>
#include <math.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#define __global__
#define __host__
#define __device__
#define __launch_bounds__(n)
#define __forceinline__ inline
#define __restrict__ __restrict
namespace {
struct ff_dim3 { unsigned x = 0, y = 0, z = 0; };
ff_dim3 blockIdx, threadIdx, blockDim, gridDim;
template <class T> inline T __ldg(const T* p) { return *p; }
inline unsigned atomicOr(unsigned* p, unsigned v) { const unsigned old = *p; *p = old | v; return old; }
inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, sizeof f); return f; }
inline double __longlong_as_double(long long i) { double d; std::memcpy(&d, &i, sizeof d); return d; }

// Threads are 1 + their index in the launch's grid (blocks x fastest, then threads); 0 is none.
// The shadow is an open-addressing table keyed by element address, plain C: the emulation is
// compiled once per program, and <string> or <unordered_map> would double that time.
std::uint64_t ff_thread = 0;
struct ff_accesses {
  const void* p;
  int buffer;
  std::int64_t element;
  std::uint64_t writer, reader, other_reader;  // other_reader: a second reading thread
};
ff_accesses* ff_shadow = nullptr;
std::size_t ff_shadow_bits = 0, ff_shadow_used = 0;
struct ff_shadow_owner { ~ff_shadow_owner() { std::free(ff_shadow); } } ff_shadow_freed_on_unload;
char ff_race[640];  // the launch's first conflict, empty if none
void (*ff_race_handler)(const char*) = nullptr;  // the driver's: throws

ff_accesses* ff_find(ff_accesses* table, std::size_t bits, const void* p) {
  const std::size_t mask = (std::size_t(1) << bits) - 1;
  std::size_t i = (reinterpret_cast<std::uintptr_t>(p) * 0x9E3779B97F4A7C15ull) >> (64 - bits);
  while (table[i].p && table[i].p != p) i = (i + 1) & mask;
  return &table[i];
}

ff_accesses& ff_slot(const void* p) {
  if (2 * (ff_shadow_used + 1) > (std::size_t(1) << ff_shadow_bits)) {
    const std::size_t bits = ff_shadow_bits ? ff_shadow_bits + 1 : 12;
    ff_accesses* table = static_cast<ff_accesses*>(std::calloc(std::size_t(1) << bits, sizeof(ff_accesses)));
    if (!table) std::abort();
    for (std::size_t i = 0; ff_shadow && i < (std::size_t(1) << ff_shadow_bits); ++i)
      if (ff_shadow[i].p) *ff_find(table, bits, ff_shadow[i].p) = ff_shadow[i];
    std::free(ff_shadow);
    ff_shadow = table;
    ff_shadow_bits = bits;
  }
  ff_accesses* a = ff_find(ff_shadow, ff_shadow_bits, p);
  if (!a->p) a->p = p, ++ff_shadow_used;
  return *a;
}

void ff_new_launch() {
  if (ff_shadow) std::memset(ff_shadow, 0, (std::size_t(1) << ff_shadow_bits) * sizeof(ff_accesses));
  ff_shadow_used = 0;
  ff_race[0] = '\0';
  ff_thread = 0;
}

void ff_thread_name(std::uint64_t t, char* out, std::size_t n) {
  const std::uint64_t i = t - 1, tx = i % blockDim.x, b = i / blockDim.x;
  std::snprintf(out, n, "(block (%llu, %llu, %llu), thread %llu)", (unsigned long long)(b % gridDim.x),
                (unsigned long long)(b / gridDim.x % gridDim.y), (unsigned long long)(b / gridDim.x / gridDim.y),
                (unsigned long long)tx);
}
const char* ff_buffer_name(int b);  // after the kernels

void ff_touch(const void* p, int buffer, std::int64_t element, bool write) {
  ff_accesses& a = ff_slot(p);
  if (!a.writer && !a.reader) a.buffer = buffer, a.element = element;
  // Any access conflicts with another thread's write; a write also with another thread's read.
  std::uint64_t other = a.writer != ff_thread ? a.writer : 0;
  const char* what = "writes";
  if (!other && write) {
    other = a.reader != ff_thread ? a.reader : a.other_reader;
    what = "reads";
  }
  if (other && !ff_race[0]) {
    char me[96], them[96], also[200] = "";
    ff_thread_name(ff_thread, me, sizeof me);
    ff_thread_name(other, them, sizeof them);
    if (a.buffer != buffer)
      std::snprintf(also, sizeof also, " (also element %lld of buffer %d '%s')", (long long)a.element, a.buffer,
                    ff_buffer_name(a.buffer));
    std::snprintf(ff_race, sizeof ff_race, "thread %s %s element %lld of buffer %d '%s'%s, which thread %s %s in the same launch",
                  me, write ? "writes" : "reads", (long long)element, buffer, ff_buffer_name(buffer), also, them, what);
  }
  if (write) a.writer = ff_thread;
  else if (!a.reader) a.reader = ff_thread;
  else if (a.reader != ff_thread && !a.other_reader) a.other_reader = ff_thread;
}

// A buffer's pointer, every element access recorded.
template <class T> struct ff_checked {
  T* data;
  int buffer;
  struct element {
    T* p;
    int buffer;
    std::int64_t i;
    operator T() const { ff_touch(p, buffer, i, false); return *p; }
    const element& operator=(T v) const { ff_touch(p, buffer, i, true); *p = v; return *this; }
  };
  element operator[](std::int64_t i) const { return {data + i, buffer, i}; }
};
}
)prelude";

// The emulation's race handler: the report reaches the caller of the program, or the test.
[[noreturn]] void throw_race(const char* report) { throw std::logic_error(report); }

std::string emulation_launcher(const codegen::CudaSource& cuda, const std::vector<std::string>& buffer_names,
                               std::size_t kernels, int max_grid_yz, EmulatedIndexing indexing) {
  std::string s = fmt::format(R"(
namespace {{
// An entry point, taking its parameter words (what a launch's argument points to).
typedef void (*ff_kernel)(const void*, std::int64_t, std::int64_t);

// Every block and thread of one launch in turn (y0, z0: the first rows of the launch's piece);
// a race between two of them is thrown at the end.
void ff_emulate_grid(ff_kernel kernel, const char* symbol, const void* params, ff_dim3 grid, unsigned block_x,
                     std::int64_t y0, std::int64_t z0) {{
  gridDim = grid;
  blockDim = {{block_x, 1, 1}};
  ff_new_launch();
  for (unsigned bz = 0; bz < grid.z; ++bz)
    for (unsigned by = 0; by < grid.y; ++by)
      for (unsigned bx = 0; bx < grid.x; ++bx)
        for (unsigned tx = 0; tx < block_x; ++tx) {{
          blockIdx = {{bx, by, bz}};
          threadIdx = {{tx, 0, 0}};
          ++ff_thread;
          kernel(params, y0, z0);
        }}
  if (ff_race[0]) {{
    char report[768];
    std::snprintf(report, sizeof report, "data race in emulated CUDA kernel %s: %s", symbol, ff_race);
    if (!ff_race_handler) {{
      std::fprintf(stderr, "%s\n", report);
      std::abort();
    }}
    ff_race_handler(report);
  }}
}}

// One kernel's launches: the grid of codegen::cuda_grid in pieces of at most {0} rows along y
// and z (codegen::for_each_cuda_piece), so that small tests take the pieces' path.
void ff_emulate(ff_kernel kernel, const char* symbol, const ff_call* call, const void* params, int k, int block_x,
                int x_axis, int y_axis, int rows_per_thread, const int* z_axes, int n_z, int loop_dims) {{
  const std::int64_t* dom = call->domains + k * 2 * FF_MAX_DIMS;
  for (int a = 0; a < loop_dims; ++a)
    if (dom[2 * a + 1] <= dom[2 * a]) return;
  std::int64_t z = 1;
  for (int i = 0; i < n_z; ++i) z *= dom[2 * z_axes[i] + 1] - dom[2 * z_axes[i]];
  const std::int64_t x = x_axis < 0 ? 1 : dom[2 * x_axis + 1] - dom[2 * x_axis];
  const std::int64_t y = y_axis < 0 ? 1 : (dom[2 * y_axis + 1] - dom[2 * y_axis] + rows_per_thread - 1) / rows_per_thread;
  const std::int64_t cap = {0};
  for (std::int64_t z0 = 0; z0 < z; z0 += cap)
    for (std::int64_t y0 = 0; y0 < y; y0 += cap)
      ff_emulate_grid(kernel, symbol, params,
                      {{static_cast<unsigned>((x + block_x - 1) / block_x), static_cast<unsigned>(y - y0 < cap ? y - y0 : cap),
                       static_cast<unsigned>(z - z0 < cap ? z - z0 : cap)}},
                      static_cast<unsigned>(block_x), y0, z0);
}}
}}  // namespace

extern "C" std::int32_t ff_abi_version(void) {{ return FF_ABI_VERSION; }}
// What a race found at the end of a launch calls (it does not return); without one, abort.
extern "C" void ff_emulate_set_race_handler(void (*handler)(const char*)) {{ ff_race_handler = handler; }}
)", max_grid_yz);
  // The buffers' names, for the race check's report.
  std::string names;
  for (const auto& b : buffer_names) names += fmt::format("\"{}\", ", b);
  s += fmt::format(R"(namespace {{
const char* ff_buffer_name(int b) {{
  static const char* const names[] = {{{}nullptr}};
  return names[b];
}}
}}  // namespace
)", names);
  std::int64_t max_shift = 0;
  for (const auto& l : cuda.launches) max_shift = std::max(max_shift, l.max_shift);
  // One launch with a grid given by the caller (the emulated CUDA runtime of the runner's tests),
  // `entry` counting each launch's entry points, 64-bit then 32-bit indexing (emulation_entry_points).
  // Each entry point behind an ff_kernel: its words from the launch's argument.
  std::string thunks = "namespace {\n", table, symbols;
  for (const auto& l : cuda.launches)
    for (const std::string& symbol : {l.symbol, l.narrow_symbol})
      thunks += fmt::format("void ff_thunk_{0}(const void* p, std::int64_t y0, std::int64_t z0) {{ {0}(*static_cast<const "
                            "{1}_params*>(p), y0, z0); }}\n",
                            symbol, l.symbol);
  s += thunks + "}  // namespace\n";
  for (const std::string& symbol : emulation_entry_points(cuda))
    table += "ff_thunk_" + symbol + ", ", symbols += fmt::format("\"{}\", ", symbol);
  s += fmt::format(R"(extern "C" void ff_emulate_launch(int entry, unsigned grid_x, unsigned grid_y, unsigned grid_z,
                                  unsigned block_x, const void* params, std::int64_t y0, std::int64_t z0) {{
  static const ff_kernel kernels[] = {{{}nullptr}};
  static const char* const symbols[] = {{{}nullptr}};
  ff_emulate_grid(kernels[entry], symbols[entry], params, {{grid_x, grid_y, grid_z}}, block_x, y0, z0);
}}

// Each launch's 32-bit entry point when the call fits it, as the CUDA runner chooses{}.
extern "C" std::int32_t ff_run(const ff_call* call) {{
  const bool narrow = {};
)", table, symbols, indexing == EmulatedIndexing::always_64_bit ? " (not in this emulation: always 64-bit)" : "",
                   indexing == EmulatedIndexing::always_64_bit
                       ? std::string("false")
                       : fmt::format("fieldflow::abi::ff_fits_32bit_indexing(call, {}, {}, {})", buffer_names.size(),
                                     kernels, max_shift));
  for (const auto& l : cuda.launches) {
    std::string zs, words;
    for (int a : l.z_axes) zs += fmt::format("{}, ", a);
    // The launch's words from the call, as the runner fills them from its own.
    for (std::size_t w = 0; w < l.params.size(); ++w)
      words += codegen::word_member(l.params[w]) == 'p'
                   ? fmt::format("    p.w[{}].p = const_cast<void*>(static_cast<const void*>({}));\n", w,
                                 codegen::call_word_source(l.params[w]))
                   : fmt::format("    p.w[{}].{} = {};\n", w, codegen::word_member(l.params[w]),
                                 codegen::call_word_source(l.params[w]));
    s += fmt::format("  {{\n    static const int z_axes[] = {{{0}-1}};\n    {10}_params p{{}};\n{11}"
                     "    ff_emulate(narrow ? ff_thunk_{1} : ff_thunk_{2}, narrow ? \"{1}\" : \"{2}\", "
                     "call, &p, {3}, {4}, {5}, {6}, {7}, z_axes, {8}, {9});\n  }}\n",
                     zs, l.narrow_symbol, l.symbol, l.kernel, l.block_x, l.x_axis, l.y_axis, l.rows_per_thread,
                     l.z_axes.size(), l.loop_dims, l.symbol, words);
    s += "  if (*call->error) return *call->error;\n";
  }
  return s + "  return *call->error;\n}\n";
}

}  // namespace

std::vector<std::string> emulation_entry_points(const codegen::CudaSource& cuda) {
  std::vector<std::string> out;
  for (const auto& l : cuda.launches) out.push_back(l.symbol), out.push_back(l.narrow_symbol);
  return out;
}

std::string cuda_emulation_source(const ir::Schedule& schedule, int max_grid_yz, EmulatedIndexing indexing) {
  codegen::CudaCodegenOptions co;
  co.race_check = true;
  const codegen::CudaSource cuda = codegen::generate_cuda_source(schedule, co);
  std::vector<std::string> names;
  for (const auto& p : schedule.program.params) names.push_back(p.name);
  for (const auto& t : schedule.transients) names.push_back(t.name);
  return std::string(emulation_prelude) + codegen::cuda_preamble() + cuda.body +
         emulation_launcher(cuda, names, schedule.kernels.size(), max_grid_yz, indexing);
}

// Without a layout, CUDA code is built for the GPU's default whatever options.backend says (the
// emulation builds CUDA code to run on the host).
Layout cuda_layout(const CompileOptions& options) { return options.layout.value_or(default_layout(Backend::cuda)); }

CudaBuild build_cuda_source(const ir::Program& program, const CompileOptions& options, const std::string& symbol_prefix) {
  CudaBuild out;
  CompileOptions for_cuda = options;
  for_cuda.layout = cuda_layout(options);
  out.schedule = lower_for(program, for_cuda, Device::cuda);
  codegen::CudaCodegenOptions co;
  co.symbol_prefix = symbol_prefix;
  out.source = codegen::generate_cuda_source(out.schedule, co);
  return out;
}

bool cuda_built() {
#ifdef FIELDFLOW_WITH_CUDA
  return true;
#else
  return false;
#endif
}

namespace {

#ifndef FIELDFLOW_WITH_CUDA
[[noreturn]] void throw_not_built(const std::string& program) {
  throw BackendUnavailableError(fmt::format(
      "program '{}': backend cuda is not built into this fieldflow (configured without the CUDA toolkit, "
      "FIELDFLOW_WITH_CUDA=OFF)", program));
}
#else
void require_device(const std::string& program) {
  std::string why;
  if (runtime::cuda::device_count(&why) == 0)
    throw BackendUnavailableError(fmt::format("program '{}': backend cuda needs a CUDA device, and this machine has "
                                              "none usable ({})", program, why));
}
#endif

}  // namespace

CudaBinary compile_cuda_binary(const std::string& name, const std::string& source, const std::string& arch,
                               const std::string& cache_dir) {
#ifdef FIELDFLOW_WITH_CUDA
  CudaBinary out;
  out.arch = arch.empty() ? runtime::cuda::device_arch_or(toolchain::default_cuda_arch) : arch;
  // The device's architecture, not an option the host set: what is missing is a toolkit for it.
  if (arch.empty() && !toolchain::nvrtc_compiles_for(out.arch))
    throw BackendUnavailableError(fmt::format(
        "program '{}': the cuda device is {}, which {} does not compile for (it compiles for {}); use a CUDA toolkit "
        "that supports the device", name, out.arch, toolchain::nvrtc_identity(),
        fmt::join(toolchain::nvrtc_architectures(), ", ")));
  toolchain::ModuleCache cache = cache_at(cache_dir);
  const toolchain::CacheEntry entry = cache.get_or_build(
      name, source, toolchain::nvrtc_build(name, out.arch),
      fmt::format("{}abi{}cuda", passes::pipeline_description(), FF_ABI_VERSION));
  out.path = entry.path.string();
  out.cache_hit = entry.was_hit;
  out.compile_seconds = entry.was_hit ? 0 : entry.compile_seconds;
  return out;
#else
  (void)source;
  (void)arch;
  (void)cache_dir;
  throw_not_built(name);
#endif
}

std::vector<LaunchResources> cuda_kernel_resources(const std::string& name, const codegen::CudaSource& cuda,
                                                   const std::string& arch) {
#ifdef FIELDFLOW_WITH_CUDA
  const std::vector<toolchain::KernelResources> reported =
      toolchain::nvrtc_compile_reporting(name, cuda.source, arch.empty() ? toolchain::default_cuda_arch : arch).kernels;
  const auto of = [&](const std::string& symbol) {
    const auto r = std::find_if(reported.begin(), reported.end(),
                                [&](const toolchain::KernelResources& k) { return k.symbol == symbol; });
    FIELDFLOW_ASSERT(r != reported.end(), "ptxas reported no kernel '" + symbol + "' of program '" + name + "'");
    return *r;
  };
  std::vector<LaunchResources> out;
  for (const auto& launch : cuda.launches) out.push_back({of(launch.narrow_symbol), of(launch.symbol)});
  return out;
#else
  (void)cuda;
  (void)arch;
  throw_not_built(name);
#endif
}

CompiledProgram compile_cuda(const ir::Program& program, const CompileOptions& options) {
  check_options(program, options);  // option errors first, on any machine
#ifdef FIELDFLOW_WITH_CUDA
  require_device(program.name);  // before spending NVRTC's time
  CudaBuild built = build_cuda_source(program, options);
  const CudaBinary binary = compile_cuda_binary(program.name, built.source.source, options.cuda_arch, options.cache_dir);
  std::string cubin = toolchain::ModuleCache::read_artifact({"", binary.path, binary.cache_hit, 0, ""});
  return cuda_program(program, options, std::move(built), std::move(cubin), binary.compile_seconds, binary.cache_hit);
#else
  throw_not_built(program.name);
#endif
}

CompiledProgram cuda_program(const ir::Program& program, const CompileOptions& options, CudaBuild built,
                             std::string cubin, double compile_seconds, bool cache_hit) {
#ifdef FIELDFLOW_WITH_CUDA
  require_device(program.name);
  runtime::cuda::register_memory_backend();
  CompiledProgram::Impl::Image image;
  image.program = program;
  image.options = options;
  image.options.layout = cuda_layout(options);
  runtime::cuda::CudaRunnerOptions ro;
  ro.program = program.name;
  ro.cubin = std::move(cubin);
  ro.launches = built.source.launches;
  ro.buffers = program.params.size() + built.schedule.transients.size();
  ro.kernels = built.schedule.kernels.size();
  ro.stream = options.cuda_stream;
  image.device = runtime::cuda::make_cuda_runner(std::move(ro));
  image.schedule = std::move(built.schedule);
  image.source = std::move(built.source.source);
  image.compile_seconds = compile_seconds;
  image.cache_hit = cache_hit;
  return CompiledProgram(std::make_unique<CompiledProgram::Impl>(std::move(image)));
#else
  (void)options, (void)built, (void)cubin, (void)compile_seconds, (void)cache_hit;
  throw_not_built(program.name);
#endif
}

EmulatedCuda load_cuda_emulation(const ir::Program& program, const CompileOptions& options, int max_grid_yz,
                                 EmulatedIndexing indexing) {
  return load_cuda_emulation(build_cuda_source(program, options), options, max_grid_yz, indexing);
}

EmulatedCuda load_cuda_emulation(CudaBuild built, const CompileOptions& options, int max_grid_yz,
                                 EmulatedIndexing indexing) {
  FIELDFLOW_ASSERT(max_grid_yz >= 1, "the emulated grid needs at least one block along y and z");
  EmulatedCuda out{std::move(built), {}, std::nullopt, {}};
  const ir::Program& program = out.built.schedule.program;
  const std::string static_key = check_options(program, options);
  out.source = cuda_emulation_source(out.built.schedule, max_grid_yz, indexing);
  toolchain::ModuleCache cache = cache_at(options.cache_dir);
  auto loaded = cache.get_or_load(program.name, out.source, toolchain::default_compiler_config(false),
                                  fmt::format("{}abi{}cuda-emulation static:{}", passes::pipeline_description(),
                                              FF_ABI_VERSION, static_key));
  out.module.emplace(std::move(loaded.module));
  out.entry = loaded.entry;
  reinterpret_cast<void (*)(void (*)(const char*))>(out.module->symbol("ff_emulate_set_race_handler"))(&throw_race);
  return out;
}

CompiledProgram compile_cuda_emulated(const ir::Program& program, const CompileOptions& options, int max_grid_yz,
                                      EmulatedIndexing indexing) {
  return compile_cuda_emulated(build_cuda_source(program, options), options, max_grid_yz, indexing);
}

CompiledProgram compile_cuda_emulated(CudaBuild built, const CompileOptions& options, int max_grid_yz,
                                      EmulatedIndexing indexing) {
  EmulatedCuda e = load_cuda_emulation(std::move(built), options, max_grid_yz, indexing);
  CompiledProgram::Impl::Image image;
  image.program = e.built.schedule.program;
  image.options = options;
  image.options.layout = cuda_layout(options);
  image.options.backend = Backend::cpu;  // the CPU runtime runs the emulated module
  image.schedule = std::move(e.built.schedule);
  // The GPU's transients live on the host here: same sizes, offsets and live ranges.
  for (auto& t : image.schedule.transients) t.storage = Storage::host_heap;
  image.source = std::move(e.source);
  image.module.emplace(std::move(*e.module));
  image.entry = reinterpret_cast<std::int32_t (*)(const ff_call*)>(image.module->symbol("ff_run"));
  image.compile_seconds = e.entry.was_hit ? 0 : e.entry.compile_seconds;
  image.cache_hit = e.entry.was_hit;
  return CompiledProgram(std::make_unique<CompiledProgram::Impl>(std::move(image)));
}

}  // namespace fieldflow::driver
