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
#include <regex>
#include <tuple>

#include "baselines.h"
#include "cuda_suite.h"
#include "registration.h"
#include "fieldflow/compile.h"
#include "fieldflow/errors.h"
#include "quiet.h"

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

// The forms SuiteOptions asks for (register_suite sets them).
LoopForm asked_loop_form = LoopForm::tuned;
BaselineForm asked_baseline_form = BaselineForm::tuned;

CompileOptions options_for(TransientMemoryMode mode, Layout layout, const std::string& cache_dir = {}) {
  CompileOptions o;
  o.backend = Backend::cpu;
  o.layout = layout;
  o.memory.mode = mode;
  if (mode == TransientMemoryMode::external) o.memory.external_memory_allocator = external_allocate;
  o.cache_dir = cache_dir;
  o.loop_form = asked_loop_form;
  return o;
}

// --- state cached across invocations of a case's function ----------------------------------

// The two arrays of a copy, 64-byte aligned like fields (a std::vector's 16-byte alignment
// splits vector loads across cache lines and flatters nothing but the kernels).
struct CopyBuffers {
  struct Free {
    void operator()(double* p) const { std::free(p); }
  };
  std::unique_ptr<double, Free> in, out;
  std::int64_t n = 0;

  explicit CopyBuffers(std::int64_t count) : n(count) {
    const std::size_t bytes = (static_cast<std::size_t>(std::max<std::int64_t>(n, 1)) * 8 + 63) / 64 * 64;
    in.reset(static_cast<double*>(std::aligned_alloc(64, bytes)));
    out.reset(static_cast<double*>(std::aligned_alloc(64, bytes)));
    if (!in || !out) throw std::bad_alloc();
    std::fill(in.get(), in.get() + n, 1.0);
    copy_kernel(in.get(), out.get(), n);  // first touch of the output by the copying threads
  }
};

// One configuration's data: the instance, its arguments, the compiled programs by mode and
// the bound baseline. Members are destroyed in reverse order, so programs and the baseline go
// before the instance whose fields they were bound to.
struct ConfigState {
  std::unique_ptr<examples::ExampleInstance> instance;
  Arguments args;
  std::map<std::string, std::unique_ptr<CompiledProgram>> programs;  // by mode
  std::function<void()> baseline;
  std::unique_ptr<CopyBuffers> copy;  // the configuration's same-bytes copy
};

struct State {
  // Keep every configuration alive (the cases' repetitions are interleaved) or only the
  // current one (cases run in registration order).
  bool keep_all = false;
  std::map<std::string, std::unique_ptr<ConfigState>> configs;  // kernels and call-overhead programs
  std::unique_ptr<CopyBuffers> dram_copy;  // the machine's copy probe
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
    // A program with two loop forms times them on its first calls (LoopForm::tuned): those calls
    // come before the timed ones, and the report says which form was kept.
    if (slot->loop_form() == LoopForm::tuned) {
      while (slot->loop_form() == LoopForm::tuned) (*slot)(cs.args);
      if (info) info->loop_form = std::string(to_string(slot->loop_form()));
    }
  }
  return *slot;
}

// --- case bodies -----------------------------------------------------------------------------

void timed_copy(benchmark::State& st, const CopyBuffers& b) {
  RepetitionProbe probe;
  probe.start();
  for (auto _ : st) {
    copy_kernel(b.in.get(), b.out.get(), b.n);
    benchmark::ClobberMemory();
  }
  probe.stop(st);
  set_bytes(st, 2.0 * 8 * static_cast<double>(b.n));
}

void run_dram_copy(benchmark::State& st, std::int64_t n) {
  State& s = state();
  if (!s.dram_copy || s.dram_copy->n != n) s.dram_copy = std::make_unique<CopyBuffers>(n);
  timed_copy(st, *s.dram_copy);
}

// The yardstick of one configuration: a copy of its compulsory bytes, half read and half
// written, on buffers kept with the configuration (so it sits in the same level of the memory
// hierarchy as the kernel's data: L3 for the 20,000-cell meshes, DRAM for the rest).
void run_case_copy(benchmark::State& st, const KernelConfig& c, double compulsory_bytes) {
  ConfigState& cs = config_state(c);
  if (!cs.copy) cs.copy = std::make_unique<CopyBuffers>(static_cast<std::int64_t>(compulsory_bytes / 16));
  timed_copy(st, *cs.copy);
}

void run_kernel_fieldflow(benchmark::State& st, const KernelConfig& c, TransientMemoryMode mode,
                          const std::string& name) {
  CaseInfo* info = find_case(name);
  try {
    ConfigState& cs = config_state(c);
    CompiledProgram& prog = program_for(cs, c.program, mode, c.layout, info);
    RepetitionProbe probe;
    probe.start();
    for (auto _ : st) prog(cs.args);
    probe.stop(st);
  } catch (const std::exception& e) {
    st.SkipWithError(e.what());
    return;
  }
  set_bytes(st, info->compulsory_bytes);
}

// The configuration's hand-written code, bound (and its form tuned) on first use.
const std::function<void()>& baseline_for(ConfigState& cs, const KernelConfig& c) {
  if (!cs.baseline) {
    cs.baseline = bind_baseline(c.program, *cs.instance, asked_baseline_form);
    cs.baseline();
  }
  return cs.baseline;
}

void run_kernel_handwritten(benchmark::State& st, const KernelConfig& c, const std::string& name) {
  CaseInfo* info = find_case(name);
  ConfigState& cs = config_state(c);
  const auto& baseline = baseline_for(cs, c);
  RepetitionProbe probe;
  probe.start();
  for (auto _ : st) baseline();
  probe.stop(st);
  set_bytes(st, info->compulsory_bytes);
}

// Hand-written and fieldflow in turn, each call timed: a repetition's two means saw the same
// load, frequency and neighbours, so their ratio does not carry the drift between repetitions
// that the separate cases' medians do. Which side goes first alternates (each call then
// follows the other side's call as often as its own), and both bind the same fields.
// `fieldflow_case` names the pool case, whose report entry gets the loop form tuning kept.
void run_kernel_paired(benchmark::State& st, const KernelConfig& c, const std::string& fieldflow_case) {
  try {
    ConfigState& cs = config_state(c);
    CompiledProgram& prog = program_for(cs, c.program, TransientMemoryMode::pool, c.layout, find_case(fieldflow_case));
    const auto& baseline = baseline_for(cs, c);
    auto seconds = [](auto&& call) {
      const auto t0 = std::chrono::steady_clock::now();
      call();
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    double handwritten = 0, fieldflow = 0;
    std::int64_t pairs = 0;
    RepetitionProbe probe;
    probe.start();
    for (auto _ : st) {
      if (pairs++ % 2 == 0) {
        handwritten += seconds(baseline);
        fieldflow += seconds([&] { prog(cs.args); });
      } else {
        fieldflow += seconds([&] { prog(cs.args); });
        handwritten += seconds(baseline);
      }
    }
    probe.stop(st);
    st.counters[paired_handwritten_counter] = benchmark::Counter(handwritten / static_cast<double>(pairs));
    st.counters[paired_fieldflow_counter] = benchmark::Counter(fieldflow / static_cast<double>(pairs));
  } catch (const std::exception& e) {
    st.SkipWithError(e.what());
  }
}

void run_call_overhead(benchmark::State& st, const std::string& program, TransientMemoryMode mode) {
  try {
    ConfigState& cs = config_state("tiny/" + program, program, {1, 1, 1}, Layout::vertical_fastest);
    CompiledProgram& prog = program_for(cs, program, mode, Layout::vertical_fastest, nullptr);
    RepetitionProbe probe;
    probe.start();
    for (auto _ : st) prog(cs.args);
    probe.stop(st);
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
  RepetitionProbe probe;
  probe.start();
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
  probe.stop(st);
}

// Warm: the same program again from a populated cache (lowering, the source read back through the
// cache's index instead of generated, hashing, checks, load).
void run_compile_warm(benchmark::State& st, const std::string& program) {
  const auto& ex = examples::example(program);
  State& s = state();
  try {
    if (s.warm_cache_dir.empty()) s.warm_cache_dir = fresh_dir("warm").string();
    const auto opt = options_for(TransientMemoryMode::pool, Layout::vertical_fastest, s.warm_cache_dir);
    { CompiledProgram populate = compile(ex.program, opt); }
    RepetitionProbe probe;
    probe.start();
    for (auto _ : st) {
      CompiledProgram p = compile(ex.program, opt);
      if (!p.cache_hit()) {
        st.SkipWithError("warm compile missed the cache");
        break;
      }
      benchmark::DoNotOptimize(p);
    }
    probe.stop(st);
  } catch (const std::exception& e) {
    st.SkipWithError(e.what());
  }
}

}  // namespace

// Whether the program keeps intermediate fields between kernels in this layout on this backend
// (which kernels and transients a program has does not depend on sizes, only their bytes do):
// learnt from its memory plan on a small instance. Without transients all four modes run the same
// module.
bool has_transients(const std::string& program, Layout layout, Backend backend) {
  static std::map<std::tuple<std::string, Layout, Backend>, bool> known;
  auto it = known.find({program, layout, backend});
  if (it != known.end()) return it->second;
  const auto& ex = examples::example(program);
  auto inst = ex.make_instance(ex.unstructured ? examples::ExampleSize{4, 4, 3} : examples::ExampleSize{6, 6, 3},
                               layout, 1);
  CompileOptions o = options_for(TransientMemoryMode::pool, layout);
  o.backend = backend;
  const CompiledProgram p = compile(ex.program, o);
  const bool any = !p.memory_plan(size_symbols(ex.program, inst.arguments())).transients.empty();
  return known[{program, layout, backend}] = any;
}

std::vector<CaseInfo> configuration_cases(const KernelConfig& kc, Backend backend, bool handwritten,
                                          const std::function<bool(const std::string&)>& selected) {
  const auto& ex = examples::example(kc.program);
  const std::string device(to_string(backend));
  auto describe = [&](CaseKind kind, const std::string& variant, const std::string& mode) {
    CaseInfo c;
    c.name = fmt::format("{}{}/{}/{}/{}/{}", backend == Backend::cpu ? "" : device + "/", kc.program, variant, mode,
                         to_string(kc.layout), kc.size_text());
    c.kind = kind;
    c.program = kc.program;
    c.variant = variant;
    c.mode = mode;
    c.device = device;
    c.layout = std::string(to_string(kc.layout));
    c.size = kc.size_text();
    c.compulsory_bytes = ex.compulsory_bytes(kc.size);
    return c;
  };
  std::vector<CaseInfo> cases;
  if (handwritten) cases.push_back(describe(CaseKind::kernel, "handwritten", "none"));
  for (TransientMemoryMode mode : all_modes)
    cases.push_back(describe(CaseKind::kernel, "fieldflow", std::string(to_string(mode))));
  if (std::none_of(cases.begin(), cases.end(), [&](const CaseInfo& c) { return selected(c.name); })) return {};
  const bool transients = has_transients(kc.program, kc.layout, backend);
  for (CaseInfo& c : cases) c.mode_independent = c.variant == "fieldflow" && !transients;
  std::erase_if(cases, [&](const CaseInfo& c) { return (c.mode_independent && c.mode != "pool") || !selected(c.name); });
  cases.insert(cases.begin(), describe(CaseKind::case_copy, "copy", "none"));
  return cases;
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

void set_bytes(benchmark::State& st, double bytes) {
  st.SetBytesProcessed(static_cast<std::int64_t>(bytes) * st.iterations());
}

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
  return ex.unstructured ? fmt::format("{}{}x{}x{}", size.bounded ? "bounded" : "torus", size.nx, size.ny, size.nk)
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
  // A mesh with a boundary (make_bounded_mesh: rows with skip values) in both layouts, beside the
  // torus in horizontal_fastest: what the guards for missing neighbours cost, where rows without
  // them run the unguarded copy of the loop and the others the general one.
  examples::ExampleSize bounded_mesh = small_mesh;
  bounded_mesh.bounded = true;
  for (const char* p : {"fvm_nabla", "nabla4", "c2e2co_sum", "diffusion_chain"}) {
    v.push_back({p, hf, small_mesh});
    v.push_back({p, vf, bounded_mesh});
    v.push_back({p, hf, bounded_mesh});
  }
  return v;
}

std::size_t register_suite(const SuiteOptions& o) {
  if (o.device == Device::cuda) return register_cuda_suite(o);
  std::size_t count = 0;
  state().keep_all = o.interleave;
  asked_loop_form = o.loop_form;
  asked_baseline_form = o.baseline_form;
  const double min_time = o.min_time;
  const std::regex filter(o.filter.empty() ? std::string(".") : o.filter);
  auto selected = [&](const std::string& name) { return std::regex_search(name, filter); };

  // The machine's bandwidth (one array of the size of one 256x256x80 float64 field, copied: it
  // does not fit in any cache), at the start and again after the kernels: the report takes the
  // faster, so one disturbed probe on a shared machine does not skew machine.copy_gbps.
  auto add_copy = [&](const char* when) {
    const std::int64_t n = o.quick ? (1 << 20) : std::int64_t{256} * 256 * 80;
    CaseInfo c;
    c.name = fmt::format("copy/{}MiB/{}", (n * 8) >> 20, when);
    c.kind = CaseKind::copy;
    c.program = "copy";
    c.variant = "copy";
    c.mode = "none";
    c.size = fmt::format("{} doubles", n);
    c.compulsory_bytes = 2.0 * 8 * static_cast<double>(n);
    add_case(c);
    common(benchmark::RegisterBenchmark(c.name.c_str(), [n](benchmark::State& st) { run_dram_copy(st, n); }), o)
        ->Unit(benchmark::kMillisecond)
        ->MinTime(min_time);
    ++count;
  };
  add_copy("start");

  auto add_kernel_case = [&](const CaseInfo& c, std::function<void(benchmark::State&)> body) {
    add_case(c);
    common(benchmark::RegisterBenchmark(c.name.c_str(), std::move(body)), o)
        ->Unit(benchmark::kMillisecond)
        ->MinTime(min_time);
    ++count;
  };
  for (const KernelConfig& kc : kernel_configs(o.quick)) {
    const std::vector<CaseInfo> cases = configuration_cases(kc, Backend::cpu, has_baseline(kc.program, kc.layout), selected);
    for (const CaseInfo& c : cases) {
      const std::string name = c.name;
      if (c.kind == CaseKind::case_copy)
        add_kernel_case(c, [kc, bytes = c.compulsory_bytes](benchmark::State& st) { run_case_copy(st, kc, bytes); });
      else if (c.variant == "handwritten")
        add_kernel_case(c, [kc, name](benchmark::State& st) { run_kernel_handwritten(st, kc, name); });
      else
        add_kernel_case(c, [kc, mode = parse_transient_memory_mode(c.mode), name](benchmark::State& st) {
          run_kernel_fieldflow(st, kc, mode, name);
        });
    }
    // Where both the hand-written code and the pool case were selected, the two in turn too.
    auto find = [&](const std::string& variant, const std::string& mode) {
      return std::find_if(cases.begin(), cases.end(),
                          [&](const CaseInfo& c) { return c.variant == variant && c.mode == mode; });
    };
    const auto hw = find("handwritten", "none"), pool = find("fieldflow", "pool");
    if (hw != cases.end() && pool != cases.end()) {
      CaseInfo paired = *pool;
      paired.kind = CaseKind::paired;
      paired.variant = "paired";
      paired.name = fmt::format("{}/paired/pool/{}/{}", kc.program, to_string(kc.layout), kc.size_text());
      add_kernel_case(paired, [kc, pool_name = pool->name](benchmark::State& st) { run_kernel_paired(st, kc, pool_name); });
    }
  }

  add_copy("end");

  // Call overhead: one point, so the time is binding, checks, transient memory and the
  // kernels' fork/join; in every mode (the runtime's call path differs by mode even without
  // transients).
  for (const char* program : {"laplacian", "hdiff"})
    for (TransientMemoryMode mode : all_modes) {
      CaseInfo c;
      c.name = fmt::format("call_overhead/{}/{}", program, to_string(mode));
      if (!selected(c.name)) continue;
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
    const std::string program = ex.name;
    if (selected(cold.name)) {
      add_case(cold);
      auto* b = benchmark::RegisterBenchmark(cold.name.c_str(),
                                             [program](benchmark::State& st) { run_compile_cold(st, program); });
      b->Repetitions(o.compile_repetitions)->Iterations(1)->UseManualTime()->Unit(benchmark::kMillisecond);
      if (o.aggregates_only) b->ReportAggregatesOnly(true);
      b->ComputeStatistics("min", min_of);
      ++count;
    }
    CaseInfo warm = cold;
    warm.name = "compile_warm/" + ex.name;
    warm.kind = CaseKind::compile_warm;
    if (selected(warm.name)) {
      add_case(warm);
      common(benchmark::RegisterBenchmark(warm.name.c_str(),
                                          [program](benchmark::State& st) { run_compile_warm(st, program); }),
             o)
          ->Unit(benchmark::kMillisecond)
          ->MinTime(o.quick ? 0.01 : 0.1);
      ++count;
    }
  }
  return count;
}

void release_suite_state() {
  release_cuda_suite_state();
  State& s = state();
  s.configs.clear();
  s.dram_copy.reset();
  if (!s.warm_cache_dir.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(s.warm_cache_dir, ec);
    s.warm_cache_dir.clear();
  }
}

}  // namespace fieldflow::bench
