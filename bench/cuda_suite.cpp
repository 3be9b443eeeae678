// The GPU half of the benchmark suite (see cuda_suite.h).
#include "cuda_suite.h"

#include <fmt/format.h>

#include "fieldflow/device_errors.h"
#include "fieldflow/errors.h"

#ifdef FIELDFLOW_WITH_CUDA
#include <cuda_runtime.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <regex>

#include "cuda_kernels.h"
#include "fieldflow/compile.h"
#include "quiet.h"
#include "registration.h"
#include "runtime/cuda/cuda_device.h"
#endif

namespace fieldflow::bench {

std::vector<KernelConfig> cuda_kernel_configs(bool quick) {
  const examples::ExampleSize cart = quick ? examples::ExampleSize{64, 32, 16} : examples::ExampleSize{256, 256, 80};
  // 2 x 142 x 142 = 40,328 cells (60,492 edges): the issue's ~40,000-cell mesh.
  const examples::ExampleSize mesh = quick ? examples::ExampleSize{20, 20, 16} : examples::ExampleSize{142, 142, 80};
  const Layout hf = Layout::horizontal_fastest;
  return {{"hdiff", hf, cart}, {"vadv", hf, cart}, {"nabla4", hf, mesh}, {"c2e2co_sum", hf, mesh}};
}

#ifndef FIELDFLOW_WITH_CUDA

std::size_t register_cuda_suite(const SuiteOptions&) {
  throw BackendUnavailableError("fieldflow bench --device cuda: this fieldflow was built without the CUDA toolkit "
                                "(FIELDFLOW_WITH_CUDA=OFF)");
}
void release_cuda_suite_state() {}
nlohmann::json cuda_device_info() { return nlohmann::json::object(); }

#else

namespace {

// Device memory owned by the suite (cudaMalloc: 256-byte aligned).
struct DeviceBuffer {
  void* p = nullptr;
  std::size_t bytes = 0;
  explicit DeviceBuffer(std::size_t n, const std::string& what) : bytes(std::max<std::size_t>(n, 256)) {
    check_cuda(cudaMalloc(&p, bytes), "cudaMalloc", what);
  }
  ~DeviceBuffer() { cudaFree(p); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

// `external` mode on the GPU: device memory from the host's allocator, once per instance.
Workspace external_allocate(const AllocationRequest& r) {
  void* p = nullptr;
  if (cudaMalloc(&p, std::max<std::size_t>(r.bytes, 1)) != cudaSuccess) {
    cudaGetLastError();
    throw std::bad_alloc();
  }
  return {p, r.bytes, Device::cuda, [p] { cudaFree(p); }};
}

CompileOptions cuda_options(TransientMemoryMode mode) {
  CompileOptions o;
  o.backend = Backend::cuda;  // layout: the GPU's default, horizontal_fastest
  o.memory.mode = mode;
  if (mode == TransientMemoryMode::external) o.memory.external_memory_allocator = external_allocate;
  return o;
}

// One configuration on the device: the host instance (shapes, scalars, the mesh), a device copy of
// every field and views over them, the compiled programs by mode, the baseline's launch and
// scratch, the same-bytes copy's two buffers. Members are destroyed in reverse order: programs
// before the memory they were bound to.
struct GpuConfig {
  examples::ExampleInstance host;
  std::map<std::string, std::unique_ptr<DeviceBuffer>> buffers, tables;
  std::map<std::string, Field> views;
  Arguments args;
  std::unique_ptr<DeviceBuffer> scratch;
  std::optional<CudaBaselineLaunch> baseline;
  std::unique_ptr<DeviceBuffer> copy_in, copy_out;
  std::map<std::string, std::unique_ptr<CompiledProgram>> programs;
};

struct GpuState {
  cudaStream_t stream = nullptr;  // the baselines' and copies' (fieldflow programs use their own)
  std::unique_ptr<CudaBaselineKernels> kernels;
  std::map<std::string, std::unique_ptr<GpuConfig>> configs;
  std::unique_ptr<DeviceBuffer> probe_in, probe_out;
  bool keep_all = false;

  ~GpuState() { release(); }
  void release() {
    configs.clear();
    probe_in.reset();
    probe_out.reset();
    kernels.reset();
    if (stream) cudaStreamDestroy(stream);
    stream = nullptr;
  }
};

GpuState& gpu() {
  static GpuState s;
  return s;
}

cudaStream_t bench_stream() {
  GpuState& s = gpu();
  if (!s.stream) check_cuda(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking), "cudaStreamCreate", "bench");
  return s.stream;
}

std::string config_name(const KernelConfig& c) {
  return fmt::format("{}/{}/{}", c.program, to_string(c.layout), c.size_text());
}

GpuConfig& gpu_config(const KernelConfig& c) {
  GpuState& s = gpu();
  const std::string key = config_name(c);
  auto it = s.configs.find(key);
  if (it != s.configs.end()) return *it->second;
  if (!s.keep_all) s.configs.clear();
  auto g = std::make_unique<GpuConfig>();
  g->host = examples::example(c.program).make_instance(c.size, c.layout, 1);
  for (auto& [name, f] : g->host.fields) {
    auto& b = g->buffers[name] = std::make_unique<DeviceBuffer>(f.span_bytes(), "field " + name);
    check_cuda(cudaMemcpy(b->p, f.data(), f.span_bytes(), cudaMemcpyHostToDevice), "cudaMemcpy", "field " + name);
    g->views.emplace(name, Field::view(b->p, f.dims(), f.dtype(), f.shape(), f.strides(), f.origin(), Device::cuda));
  }
  for (const auto& t : g->host.connectivities) {
    const NeighborTable& table = g->host.mesh->table(t);  // row-major (plan_cuda_baseline checks)
    const std::size_t bytes = static_cast<std::size_t>(table.n_source) * table.max_neighbors * sizeof(std::int32_t);
    auto& b = g->tables[t] = std::make_unique<DeviceBuffer>(bytes, "table " + t);
    check_cuda(cudaMemcpy(b->p, table.entries(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy", "table " + t);
  }
  // cudaMemcpy from pageable memory may return before its DMA ends, and every timed stream is
  // non-blocking (not ordered after the legacy default stream): the uploads end here.
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize", "uploads");
  const Arguments host_args = g->host.arguments();
  for (const auto& e : host_args.entries()) {
    if (e.kind == Arguments::Entry::Kind::field) g->args.field(e.name, g->views.at(e.name));
    if (e.kind == Arguments::Entry::Kind::scalar) g->args.scalar(e.name, e.scalar);
    if (e.kind == Arguments::Entry::Kind::connectivity) g->args.connectivity(e.name, *e.table);  // host tables
  }
  return *s.configs.emplace(key, std::move(g)).first->second;
}

// The timed loop, with the quiet-run protocol's probe (a repetition during which other processes
// kept the host's CPUs busy is rejected: launches and synchronisation run on the host).
void timed(benchmark::State& st, const std::function<void()>& call, double bytes) {
  RepetitionProbe probe;
  probe.start();
  for (auto _ : st) call();
  probe.stop(st);
  set_bytes(st, bytes);
}

// A device-to-device copy of `bytes` (read once, written once), synchronised.
void device_copy(const DeviceBuffer& in, const DeviceBuffer& out, std::size_t bytes) {
  cudaStream_t s = bench_stream();
  check_cuda(cudaMemcpyAsync(out.p, in.p, bytes, cudaMemcpyDeviceToDevice, s), "cudaMemcpyAsync", "copy");
  check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize", "copy");
}

void run_probe(benchmark::State& st, std::size_t bytes) {
  try {
    GpuState& s = gpu();
    if (!s.probe_in || s.probe_in->bytes < bytes) {
      s.probe_in = std::make_unique<DeviceBuffer>(bytes, "copy probe");
      s.probe_out = std::make_unique<DeviceBuffer>(bytes, "copy probe");
      check_cuda(cudaMemsetAsync(s.probe_in->p, 0, bytes, bench_stream()), "cudaMemsetAsync", "copy probe");
    }
    timed(st, [&] { device_copy(*s.probe_in, *s.probe_out, bytes); }, 2.0 * static_cast<double>(bytes));
  } catch (const std::exception& e) {
    st.SkipWithError(e.what());
  }
}

void run_case_copy(benchmark::State& st, const KernelConfig& c, double compulsory_bytes) {
  try {
    GpuConfig& g = gpu_config(c);
    const auto half = static_cast<std::size_t>(compulsory_bytes / 2);
    if (!g.copy_in) {
      g.copy_in = std::make_unique<DeviceBuffer>(half, "same-bytes copy");
      g.copy_out = std::make_unique<DeviceBuffer>(half, "same-bytes copy");
      check_cuda(cudaMemsetAsync(g.copy_in->p, 0, half, bench_stream()), "cudaMemsetAsync", "same-bytes copy");
    }
    timed(st, [&] { device_copy(*g.copy_in, *g.copy_out, half); }, compulsory_bytes);
  } catch (const std::exception& e) {
    st.SkipWithError(e.what());
  }
}

void run_handwritten(benchmark::State& st, const KernelConfig& c, double bytes) {
  try {
    GpuState& s = gpu();
    GpuConfig& g = gpu_config(c);
    if (!s.kernels) s.kernels = std::make_unique<CudaBaselineKernels>();
    if (!g.baseline) {
      const std::size_t scratch = cuda_baseline_scratch_bytes(c.program, g.host);
      if (scratch) g.scratch = std::make_unique<DeviceBuffer>(scratch, "baseline scratch");
      CudaBaselineMemory m;
      m.field = [&g](const std::string& name) { return g.buffers.at(name)->p; };
      m.table = [&g](const std::string& name) { return static_cast<const std::int32_t*>(g.tables.at(name)->p); };
      m.scratch = g.scratch ? g.scratch->p : nullptr;
      g.baseline = plan_cuda_baseline(c.program, g.host, m);
    }
    cudaStream_t stream = bench_stream();
    auto call = [&] {
      s.kernels->launch(*g.baseline, stream);
      check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize", "baseline " + c.program);
    };
    call();
    timed(st, call, bytes);
  } catch (const std::exception& e) {
    st.SkipWithError(e.what());
  }
}

void run_fieldflow(benchmark::State& st, const KernelConfig& c, TransientMemoryMode mode, const std::string& name) {
  CaseInfo* info = find_case(name);
  try {
    GpuConfig& g = gpu_config(c);
    auto& slot = g.programs[std::string(to_string(mode))];
    if (!slot) {
      const auto& ex = examples::example(c.program);
      slot = std::make_unique<CompiledProgram>(compile(ex.program, cuda_options(mode)));
      if (info && !info->plan) info->plan = slot->memory_plan(size_symbols(ex.program, g.args));
      (*slot)(g.args);  // loads the module, copies the tables, installs persistent / external memory
    }
    CompiledProgram& prog = *slot;
    timed(st, [&] { prog(g.args); }, info->compulsory_bytes);
  } catch (const std::exception& e) {
    st.SkipWithError(e.what());
  }
}

}  // namespace

nlohmann::json cuda_device_info() {
  if (runtime::cuda::device_count() == 0) return nlohmann::json::object();
  int device = 0, clock_khz = 0, bus_bits = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&device) != cudaSuccess || cudaGetDeviceProperties(&prop, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device) != cudaSuccess) {
    cudaGetLastError();
    return nlohmann::json::object();
  }
  // Double data rate: two transfers per clock over bus_bits / 8 bytes.
  const double peak_gbps = 2.0 * clock_khz * 1e3 * (bus_bits / 8.0) / 1e9;
  return nlohmann::json{{"name", prop.name},
                        {"arch", fmt::format("sm_{}{}", prop.major, prop.minor)},
                        {"memory_gib", static_cast<double>(prop.totalGlobalMem) / (1u << 30)},
                        {"memory_clock_khz", clock_khz},
                        {"bus_width_bits", bus_bits},
                        {"hbm_peak_gbps", peak_gbps}};
}

std::size_t register_cuda_suite(const SuiteOptions& o) {
  std::string why;
  if (runtime::cuda::device_count(&why) == 0)
    throw BackendUnavailableError("fieldflow bench --device cuda: no CUDA device: " + why);
  gpu().keep_all = o.interleave;
  std::size_t count = 0;
  const std::regex filter(o.filter.empty() ? std::string(".") : o.filter);
  auto selected = [&](const std::string& name) { return std::regex_search(name, filter); };
  auto add = [&](const CaseInfo& c, std::function<void(benchmark::State&)> body) {
    add_case(c);
    common(benchmark::RegisterBenchmark(c.name.c_str(), std::move(body)), o)
        ->Unit(benchmark::kMillisecond)
        ->MinTime(o.min_time);
    ++count;
  };

  // The device's bandwidth: a copy far larger than L2 (1 GiB each way; 64 MiB quick), at the
  // start and at the end (the report takes the faster).
  auto add_probe = [&](const char* when) {
    const std::size_t bytes = o.quick ? std::size_t{64} << 20 : std::size_t{1} << 30;
    CaseInfo c;
    c.name = fmt::format("cuda/copy/{}MiB/{}", bytes >> 20, when);
    c.kind = CaseKind::copy;
    c.program = "copy";
    c.variant = "copy";
    c.mode = "none";
    c.device = "cuda";
    c.size = fmt::format("{} bytes", bytes);
    c.compulsory_bytes = 2.0 * static_cast<double>(bytes);
    add(c, [bytes](benchmark::State& st) { run_probe(st, bytes); });
  };
  add_probe("start");

  for (const KernelConfig& kc : cuda_kernel_configs(o.quick))
    for (const CaseInfo& c : configuration_cases(kc, Backend::cuda, has_cuda_baseline(kc.program), selected)) {
      const std::string name = c.name;
      if (c.kind == CaseKind::case_copy)
        add(c, [kc, bytes = c.compulsory_bytes](benchmark::State& st) { run_case_copy(st, kc, bytes); });
      else if (c.variant == "handwritten")
        add(c, [kc, bytes = c.compulsory_bytes](benchmark::State& st) { run_handwritten(st, kc, bytes); });
      else
        add(c, [kc, mode = parse_transient_memory_mode(c.mode), name](benchmark::State& st) {
          run_fieldflow(st, kc, mode, name);
        });
    }
  add_probe("end");
  return count;
}

void release_cuda_suite_state() { gpu().release(); }

#endif

}  // namespace fieldflow::bench
