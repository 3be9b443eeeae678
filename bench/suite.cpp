// Registration of the benchmark suite (see suite.h).
//
// Google Benchmark calls a case's function once per repetition (and a few more times while it
// picks the iteration count), so everything expensive -- building an instance (the 200k-cell
// mesh takes seconds), compiling, the first call that installs transient memory -- happens once
// and is cached here. Cases are registered grouped by configuration and run in registration
// order, so only the current configuration's instance is kept alive.
#include "suite.h"

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <random>

#include "baselines.h"
#include "fieldflow/compile.h"
#include "fieldflow/errors.h"

namespace fieldflow::bench {

namespace {

const TransientMemoryMode all_modes[] = {TransientMemoryMode::scoped, TransientMemoryMode::persistent,
                                         TransientMemoryMode::pool, TransientMemoryMode::external};

// The host side of `external` mode: an allocator callback handing out aligned heap blocks,
// called once per compiled-program instance.
Workspace external_allocate(const AllocationRequest& r) {
  const std::size_t align = std::max<std::size_t>(r.alignment, 64);
  const std::size_t bytes = std::max<std::size_t>((r.bytes + align - 1) / align * align, align);
  void* p = std::aligned_alloc(align, bytes);
  if (!p) throw std::bad_alloc();
  return {p, r.bytes, r.device, [p] { std::free(p); }};
}

CompileOptions options_for(TransientMemoryMode mode, Layout layout, const std::string& cache_dir = {}) {
  CompileOptions o;
  o.backend = Backend::cpu;
  o.layout = layout;
  o.memory.mode = mode;
  if (mode == TransientMemoryMode::external) o.memory.external_memory_allocator = external_allocate;
  o.cache_dir = cache_dir;
  return o;
}

// --- state cached across invocations of a case's function ----------------------------------

// One configuration's data: the instance, its arguments, the compiled programs by mode and
// the bound baseline. Members are destroyed in reverse order, so programs and the baseline go
// before the instance whose fields they were bound to.
struct ConfigState {
  std::unique_ptr<examples::ExampleInstance> instance;
  Arguments args;
  std::map<std::string, std::unique_ptr<CompiledProgram>> programs;  // by mode
  std::function<void()> baseline;
};

struct State {
  // Keep every configuration alive (the cases' repetitions are interleaved) or only the
  // current one (cases run in registration order).
  bool keep_all = false;
  std::map<std::string, std::unique_ptr<ConfigState>> configs;  // kernels and call-overhead programs
  std::vector<double> copy_in, copy_out;
  std::string warm_cache_dir;
};

State& state() {
  static State s;
  return s;
}

ConfigState& config_state(const std::string& key, const std::string& program, const examples::ExampleSize& size,
                          Layout layout) {
  State& s = state();
  auto it = s.configs.find(key);
  if (it != s.configs.end()) return *it->second;
  if (!s.keep_all) s.configs.clear();
  auto cs = std::make_unique<ConfigState>();
  cs->instance = std::make_unique<examples::ExampleInstance>(examples::example(program).make_instance(size, layout, 1));
  cs->args = cs->instance->arguments();
  return *s.configs.emplace(key, std::move(cs)).first->second;
}

ConfigState& config_state(const KernelConfig& c) {
  return config_state(fmt::format("{}/{}/{}", c.program, to_string(c.layout), c.size_text()), c.program, c.size,
                      c.layout);
}

CompiledProgram& program_for(ConfigState& cs, const std::string& program, TransientMemoryMode mode, Layout layout,
                             CaseInfo* info) {
  auto& slot = cs.programs[std::string(to_string(mode))];
  if (!slot) {
    const auto& ex = examples::example(program);
    slot = std::make_unique<CompiledProgram>(compile(ex.program, options_for(mode, layout)));
    if (info && !info->plan) info->plan = slot->memory_plan(size_symbols(ex.program, cs.args));
    (*slot)(cs.args);  // installs persistent / external memory, warms the pool
  }
  return *slot;
}

void set_bytes(benchmark::State& st, double bytes) {
  st.SetBytesProcessed(static_cast<std::int64_t>(bytes) * st.iterations());
}

// --- case bodies -----------------------------------------------------------------------------

void run_copy(benchmark::State& st, std::int64_t n) {
  State& s = state();
  if (static_cast<std::int64_t>(s.copy_in.size()) != n) {
    s.copy_in.assign(n, 1.0);
    s.copy_out.assign(n, 0.0);
    copy_kernel(s.copy_in.data(), s.copy_out.data(), n);  // first touch of both arrays
  }
  for (auto _ : st) {
    copy_kernel(s.copy_in.data(), s.copy_out.data(), n);
    benchmark::ClobberMemory();
  }
  set_bytes(st, 2.0 * 8 * static_cast<double>(n));
}

void run_kernel_fieldflow(benchmark::State& st, const KernelConfig& c, TransientMemoryMode mode,
                          const std::string& name) {
  CaseInfo* info = find_case(name);
  try {
    ConfigState& cs = config_state(c);
    CompiledProgram& prog = program_for(cs, c.program, mode, c.layout, info);
    for (auto _ : st) prog(cs.args);
  } catch (const std::exception& e) {
    st.SkipWithError(e.what());
    return;
  }
  set_bytes(st, info->compulsory_bytes);
}

void run_kernel_handwritten(benchmark::State& st, const KernelConfig& c, const std::string& name) {
  CaseInfo* info = find_case(name);
  ConfigState& cs = config_state(c);
  if (!cs.baseline) {
    cs.baseline = bind_baseline(c.program, *cs.instance);
    cs.baseline();
  }
  for (auto _ : st) cs.baseline();
  set_bytes(st, info->compulsory_bytes);
}

void run_call_overhead(benchmark::State& st, const std::string& program, TransientMemoryMode mode) {
  try {
    ConfigState& cs = config_state("tiny/" + program, program, {1, 1, 1}, Layout::vertical_fastest);
    CompiledProgram& prog = program_for(cs, program, mode, Layout::vertical_fastest, nullptr);
    for (auto _ : st) prog(cs.args);
  } catch (const std::exception& e) {
    st.SkipWithError(e.what());
  }
}

std::filesystem::path fresh_dir(const std::string& tag) {
  static std::mt19937_64 rng(std::random_device{}());
  for (int attempt = 0; attempt < 100; ++attempt) {
    auto p = std::filesystem::temp_directory_path() / fmt::format("fieldflow-bench-{}-{:016x}", tag, rng());
    if (std::filesystem::create_directory(p)) return p;
  }
  throw Error("fieldflow bench: cannot create a temporary cache directory");
}

// Cold: a fresh, empty cache directory per compile (lowering, codegen, the C++ compiler, load).
void run_compile_cold(benchmark::State& st, const std::string& program) {
  const auto& ex = examples::example(program);
  for (auto _ : st) {
    const auto dir = fresh_dir("cold");
    try {
      const auto t0 = std::chrono::steady_clock::now();
      CompiledProgram p = compile(ex.program, options_for(TransientMemoryMode::pool, Layout::vertical_fastest,
                                                          dir.string()));
      st.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      if (p.cache_hit()) st.SkipWithError("cold compile hit the cache");
    } catch (const std::exception& e) {
      st.SkipWithError(e.what());
    }
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
}

// Warm: the same program again from a populated cache (lowering, codegen, hashing, load).
void run_compile_warm(benchmark::State& st, const std::string& program) {
  const auto& ex = examples::example(program);
  State& s = state();
  try {
    if (s.warm_cache_dir.empty()) s.warm_cache_dir = fresh_dir("warm").string();
    const auto opt = options_for(TransientMemoryMode::pool, Layout::vertical_fastest, s.warm_cache_dir);
    { CompiledProgram populate = compile(ex.program, opt); }
    for (auto _ : st) {
      CompiledProgram p = compile(ex.program, opt);
      if (!p.cache_hit()) {
        st.SkipWithError("warm compile missed the cache");
        break;
      }
      benchmark::DoNotOptimize(p);
    }
  } catch (const std::exception& e) {
    st.SkipWithError(e.what());
  }
}

double min_of(const std::vector<double>& v) { return v.empty() ? 0.0 : *std::min_element(v.begin(), v.end()); }

benchmark::internal::Benchmark* common(benchmark::internal::Benchmark* b, const SuiteOptions& o) {
  b->Repetitions(o.repetitions)->UseRealTime();
  if (o.aggregates_only) b->ReportAggregatesOnly(true);
  b->ComputeStatistics("min", min_of);
  return b;
}

CaseInfo& add_case(CaseInfo info) {
  auto& reg = case_registry();
  if (find_case(info.name)) throw Error("fieldflow bench: duplicate case " + info.name);
  reg.push_back(std::move(info));
  return reg.back();
}

}  // namespace

SuiteOptions SuiteOptions::quick_defaults() {
  SuiteOptions o;
  o.quick = true;
  o.repetitions = 2;
  o.min_time = 0.01;
  o.compile_repetitions = 1;
  return o;
}

std::string KernelConfig::size_text() const {
  const auto& ex = examples::example(program);
  return ex.unstructured ? fmt::format("torus{}x{}x{}", size.nx, size.ny, size.nk)
                         : fmt::format("{}x{}x{}", size.nx, size.ny, size.nk);
}

std::vector<CaseInfo>& case_registry() {
  static std::vector<CaseInfo> reg;
  return reg;
}

CaseInfo* find_case(const std::string& name) {
  for (auto& c : case_registry())
    if (c.name == name) return &c;
  return nullptr;
}

std::vector<KernelConfig> kernel_configs(bool quick) {
  const examples::ExampleSize cart = quick ? examples::ExampleSize{32, 32, 16} : examples::ExampleSize{256, 256, 80};
  // Torus meshes: 2 nx ny cells -> 20,000 and 199,712 cells.
  const examples::ExampleSize small_mesh = quick ? examples::ExampleSize{12, 12, 16} : examples::ExampleSize{100, 100, 80};
  const examples::ExampleSize large_mesh = quick ? examples::ExampleSize{20, 20, 16} : examples::ExampleSize{316, 316, 80};
  const Layout vf = Layout::vertical_fastest, hf = Layout::horizontal_fastest;
  std::vector<KernelConfig> v = {
      {"laplacian", vf, cart},      {"laplacian", hf, cart}, {"lap_of_lap", vf, cart},
      {"hdiff", vf, cart},          {"hdiff", hf, cart},     {"vadv", vf, cart},
      {"vadv", hf, cart},           {"vertical_interp", vf, cart}, {"masked_update", vf, cart},
  };
  for (const char* p : {"fvm_nabla", "nabla4", "c2e2co_sum", "diffusion_chain"})
    for (const auto& s : {small_mesh, large_mesh}) v.push_back({p, vf, s});
  return v;
}

std::size_t register_suite(const SuiteOptions& o) {
  std::size_t count = 0;
  state().keep_all = o.interleave;
  const double min_time = o.min_time;

  // The bandwidth probe (one array of the size of one 256x256x80 float64 field, copied), at the
  // start and again after the kernels: the report takes the faster, so one disturbed probe on a
  // shared machine does not inflate every vs_copy.
  auto add_copy = [&](const char* when) {
    const std::int64_t n = o.quick ? (1 << 20) : std::int64_t{256} * 256 * 80;
    CaseInfo c;
    c.name = fmt::format("copy/{}MiB/{}", (n * 8) >> 20, when);
    c.kind = CaseKind::copy;
    c.program = "copy";
    c.variant = "handwritten";
    c.mode = "none";
    c.size = fmt::format("{} doubles", n);
    c.compulsory_bytes = 2.0 * 8 * static_cast<double>(n);
    add_case(c);
    common(benchmark::RegisterBenchmark(c.name.c_str(), [n](benchmark::State& st) { run_copy(st, n); }), o)
        ->Unit(benchmark::kMillisecond)
        ->MinTime(min_time);
    ++count;
  };
  add_copy("start");

  for (const KernelConfig& kc : kernel_configs(o.quick)) {
    const auto& ex = examples::example(kc.program);
    const std::string base = fmt::format("{}/{{}}/{{}}/{}/{}", kc.program, to_string(kc.layout), kc.size_text());
    auto describe = [&](const std::string& variant, const std::string& mode) {
      CaseInfo c;
      c.name = fmt::format(fmt::runtime(base), variant, mode);
      c.kind = CaseKind::kernel;
      c.program = kc.program;
      c.variant = variant;
      c.mode = mode;
      c.layout = std::string(to_string(kc.layout));
      c.size = kc.size_text();
      c.compulsory_bytes = ex.compulsory_bytes(kc.size);
      return c;
    };
    if (has_baseline(kc.program, kc.layout)) {
      const CaseInfo& c = add_case(describe("handwritten", "none"));
      const std::string name = c.name;
      common(benchmark::RegisterBenchmark(name.c_str(),
                                          [kc, name](benchmark::State& st) { run_kernel_handwritten(st, kc, name); }),
             o)
          ->Unit(benchmark::kMillisecond)
          ->MinTime(min_time);
      ++count;
    }
    for (TransientMemoryMode mode : all_modes) {
      const CaseInfo& c = add_case(describe("fieldflow", std::string(to_string(mode))));
      const std::string name = c.name;
      common(benchmark::RegisterBenchmark(
                 name.c_str(), [kc, mode, name](benchmark::State& st) { run_kernel_fieldflow(st, kc, mode, name); }),
             o)
          ->Unit(benchmark::kMillisecond)
          ->MinTime(min_time);
      ++count;
    }
  }

  add_copy("end");

  // Call overhead: one point, so the time is binding, checks, transient memory and the
  // kernels' fork/join. laplacian has no transients; hdiff has two, so the modes differ.
  for (const char* program : {"laplacian", "hdiff"})
    for (TransientMemoryMode mode : all_modes) {
      CaseInfo c;
      c.name = fmt::format("call_overhead/{}/{}", program, to_string(mode));
      c.kind = CaseKind::call_overhead;
      c.program = program;
      c.variant = "fieldflow";
      c.mode = std::string(to_string(mode));
      c.layout = "vertical_fastest";
      c.size = "1x1x1";
      add_case(c);
      const std::string name = c.name, prog = program;
      common(benchmark::RegisterBenchmark(name.c_str(),
                                          [prog, mode](benchmark::State& st) { run_call_overhead(st, prog, mode); }),
             o)
          ->Unit(benchmark::kMicrosecond)
          ->MinTime(o.quick ? 0.01 : 0.1);
      ++count;
    }

  for (const auto& ex : examples::all_examples()) {
    CaseInfo cold;
    cold.name = "compile_cold/" + ex.name;
    cold.kind = CaseKind::compile_cold;
    cold.program = ex.name;
    cold.variant = "fieldflow";
    cold.mode = "pool";
    cold.layout = "vertical_fastest";
    add_case(cold);
    const std::string program = ex.name;
    auto* b = benchmark::RegisterBenchmark(cold.name.c_str(),
                                           [program](benchmark::State& st) { run_compile_cold(st, program); });
    b->Repetitions(o.compile_repetitions)->Iterations(1)->UseManualTime()->Unit(benchmark::kMillisecond);
    if (o.aggregates_only) b->ReportAggregatesOnly(true);
    b->ComputeStatistics("min", min_of);
    ++count;

    CaseInfo warm = cold;
    warm.name = "compile_warm/" + ex.name;
    warm.kind = CaseKind::compile_warm;
    add_case(warm);
    common(benchmark::RegisterBenchmark(warm.name.c_str(),
                                        [program](benchmark::State& st) { run_compile_warm(st, program); }),
           o)
        ->Unit(benchmark::kMillisecond)
        ->MinTime(o.quick ? 0.01 : 0.1);
    ++count;
  }
  return count;
}

void release_suite_state() {
  State& s = state();
  s.configs.clear();
  s.copy_in = {};
  s.copy_out = {};
  if (!s.warm_cache_dir.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(s.warm_cache_dir, ec);
    s.warm_cache_dir.clear();
  }
}

}  // namespace fieldflow::bench
