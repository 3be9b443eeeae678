// The differential harness. For every layout and size set of a case:
//  1. the reference executor runs on fresh copies of the inputs (and of a variant with one field
//     one point short, when the case asks for it): the expected fields, or the expected error type;
//  2. compiled instances run the same calls: `external` with a workspace of exactly the
//     reported size, fenced by canary bytes and refilled with NaN bytes before each call (so a
//     transient read before it is written shows up as a wrong value), plus `pool`, `scoped` and
//     `persistent` instances that live across the size sets (memory reuse and regrowth), and one
//     compiled for Layout::any that runs on views over padded caller arrays in C, Fortran and
//     scrambled stride orders (nothing but the views' elements may change). Three paths run
//     them (Path): the CPU backend in all of these; the CUDA backend's kernels under an
//     emulated launch grid in `external` and on views (the GPU schedule's indexing and
//     transient offsets); and the CUDA runner on an emulated runtime in all of them, its
//     workspace and transients in emulated device memory, with device-resident fields (pool,
//     persistent, views) or host fields it copies in and back (scoped, external); once per
//     case, a CPU instance with every scalar folded in at compile time (static_scalars); and per
//     layout a CPU instance called through the C API (ff_program_set_*_at, ff_program_run);
//  3. each call must agree with the reference: same acceptance, same error type, outputs
//     untouched after a rejected call, every field (inputs too) equal bit for bit, where any NaN
//     equals any NaN (a NaN's sign and payload depend on operand order, which is not semantics).
//     The static-scalar instance is a specialised program: a good call the reference refuses
//     only for what a folded branch reads, it accepts, as the reference backend given the same
//     static scalars does (class 29).
// The call order short, short, good, good catches state left behind by a rejected call.
#include "fuzz/differential.h"
#include "support/capi_codes.h"
#include "support/guarded_workspace.h"
#include "support/host_arrays.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>

#include "fieldflow/capi_interop.h"
#include "fieldflow/compile.h"
#include "fieldflow/errors.h"
#include "fieldflow/reference.h"
#include "driver/cuda_build.h"
#ifdef FIELDFLOW_WITH_CUDA
#include "support/cuda_emulator.h"
#endif

namespace fieldflow::fuzz {

// The most derived fieldflow error kind of an exception, by name.
std::string error_kind(const std::exception& e) {
#define FIELDFLOW_KIND(Name) \
  if (dynamic_cast<const Name*>(&e)) return #Name;
  FIELDFLOW_KIND(DimensionError) FIELDFLOW_KIND(DTypeError) FIELDFLOW_KIND(ProgramError)
  FIELDFLOW_KIND(ArgumentError) FIELDFLOW_KIND(DomainError) FIELDFLOW_KIND(ConnectivityError)
  FIELDFLOW_KIND(LayoutError) FIELDFLOW_KIND(OptionError) FIELDFLOW_KIND(CompileError)
  FIELDFLOW_KIND(CacheError) FIELDFLOW_KIND(StorageError) FIELDFLOW_KIND(WorkspaceError)
  FIELDFLOW_KIND(AllocationError) FIELDFLOW_KIND(ConcurrencyError) FIELDFLOW_KIND(InternalError)
  FIELDFLOW_KIND(Error)
#undef FIELDFLOW_KIND
  return "non-fieldflow exception";
}

bool same_element(const Field& a, std::int64_t ia, const Field& b, std::int64_t ib) {
  const std::size_t w = size_of(a.dtype());
  const auto* pa = static_cast<const char*>(a.data()) + ia * w;
  const auto* pb = static_cast<const char*>(b.data()) + ib * w;
  if (std::memcmp(pa, pb, w) == 0) return true;
  return is_floating(a.dtype()) && std::isnan(a.get_as_double(ia)) && std::isnan(b.get_as_double(ib));
}

namespace {


// What one call did: accepted (fields hold the results) or rejected with an error kind.
struct Outcome {
  std::string error;  // empty: accepted
  std::string message;
  std::map<std::string, Field> fields;
};

template <class Fn> Outcome run_call(const CallData& data, Fn&& call) {
  Outcome o;
  o.fields = data.clone_fields();
  Arguments args = data.arguments(o.fields);
  try {
    call(args);
  } catch (const std::exception& e) {
    o.error = error_kind(e);
    o.message = e.what();
  }
  return o;
}

bool same_value(const Field& a, const Field& b, std::int64_t i) { return same_element(a, i, b, i); }

// The first difference between the expected and the actual fields, or "".
std::string compare_fields(const std::map<std::string, Field>& want, const std::map<std::string, Field>& got) {
  for (const auto& [name, a] : want) {
    const Field& b = got.at(name);
    if (std::memcmp(a.data(), b.data(), a.bytes()) == 0) continue;
    std::int64_t count = 0, first = -1;
    for (std::int64_t i = 0; i < a.size(); ++i)
      if (!same_value(a, b, i)) {
        ++count;
        if (first < 0) first = i;
      }
    if (count == 0) continue;
    return fmt::format("field '{}' ({}): {} of {} elements differ; first at linear offset {}: expected {} got {}",
                       name, a.describe(), count, a.size(), first, a.get_as_double(first), b.get_as_double(first));
  }
  return {};
}


struct Variant {
  std::string label;  // "good" / "short 'name'"
  CallData data;
  Outcome expected;
  // The fields every compiled call of this variant binds: the same objects (same pointers) each
  // time, refilled from `data` before each call, as a host's time loop passes its arrays. Fresh
  // copies per call would hide state a program keeps about the fields it was last called with.
  std::map<std::string, Field> work;
};

void refill(std::map<std::string, Field>& work, const std::map<std::string, Field>& from) {
  for (auto& [name, f] : work) std::memcpy(f.data(), from.at(name).data(), f.bytes());
}

class CaseRunner {
 public:
  CaseRunner(const FuzzCase& c, const RunConfig& config, RunStats& stats) : c_(c), config_(config), stats_(stats) {}

  std::optional<Failure> run() {
#ifdef FIELDFLOW_WITH_CUDA
    // The runner's device memory (transients, field and table copies) is host memory the
    // emulator knows as device memory; one emulated runtime for every runner of the case.
    if (config_.runs(Path::cuda_runner)) device_memory_.emplace(emulator_);
#endif
    for (Layout layout : c_.layouts) {
      layout_ = layout;
      if (auto f = run_layout()) return f;
    }
    return std::nullopt;
  }

 private:
  CompileOptions options(TransientMemoryMode mode, int threads) const {
    CompileOptions o;
    o.backend = Backend::cpu;
    o.layout = layout_;
    o.num_threads = threads;
    o.parallel_threshold = 0;  // the OpenMP path even for the small sizes the fuzzer uses
    o.cache_dir = config_.cache_dir;
    o.memory.mode = mode;
    // The loop forms of horizontal-fastest mesh blocks, pinned or tuned (whose calls alternate
    // them), spread over the instances a case makes.
    o.loop_form = static_cast<LoopForm>((static_cast<int>(mode) + threads) % 3);
    return o;
  }

  struct Instance {
    Path path = Path::cpu;
    TransientMemoryMode mode = TransientMemoryMode::pool;
    int threads = 1;
    bool views = false;          // compiled for Layout::any, called on views over padded host arrays
    bool device_fields = false;  // cuda_runner: fields are Device::cuda views (else host fields, copied)
    bool static_scalars = false;  // compiled with every scalar's value folded in (CompileOptions::static_scalars)
    LoopForm loop_form = LoopForm::tuned;  // as asked: tuned calls take the forms in turn, vector first
    std::unique_ptr<testing_support::GuardedWorkspace> fence;  // external only
#ifdef FIELDFLOW_WITH_CUDA
    // cuda_runner, external: the fence's workspace is device memory for the emulator until the
    // instance dies (before the fence: a later host allocation at that address is host memory).
    std::unique_ptr<const void, std::function<void(const void*)>> device_workspace;
    testing_support::EmulatedProgram runner;  // cuda_runner: the program and its kernels' module
    testing_support::Emulator::Launch launch = nullptr;
#endif
    std::unique_ptr<CompiledProgram> program;  // cpu, cuda_kernels
    std::unique_ptr<ff_program, ff_status (*)(ff_program*)> handle{nullptr, ff_program_destroy};  // c_api

    CompiledProgram& compiled() {
#ifdef FIELDFLOW_WITH_CUDA
      if (path == Path::cuda_runner) return *runner.program;
#endif
      return *program;
    }
  };

  Instance make(Path path, const CompileOptions& o, bool views = false, bool device_fields = false,
                std::unique_ptr<testing_support::GuardedWorkspace> fence = nullptr) {
    ++stats_.compiles;
    Instance inst;
    inst.path = path;
    inst.mode = *o.memory.mode;
    inst.threads = o.num_threads;
    inst.views = views;
    inst.device_fields = device_fields;
    inst.static_scalars = !o.static_scalars.empty();
    inst.loop_form = o.loop_form;
    inst.fence = std::move(fence);
    switch (path) {
      case Path::cpu: inst.program = std::make_unique<CompiledProgram>(compile(c_.program, o)); break;
      case Path::c_api: inst.handle.reset(capi::wrap(compile(c_.program, o))); break;
      case Path::cuda_kernels:
        // The fuzzer's sizes fit 32-bit indexing; the kernels on views take the 64-bit entry
        // points instead, so each case runs both.
        inst.program = std::make_unique<CompiledProgram>(driver::compile_cuda_emulated(
            c_.program, o, 3, views ? driver::EmulatedIndexing::always_64_bit : driver::EmulatedIndexing::as_the_runtime_chooses));
        break;
      case Path::cuda_runner:
#ifdef FIELDFLOW_WITH_CUDA
        inst.runner = testing_support::compile_with_emulated_runtime(emulator_, c_.program, o);
        inst.launch = emulator_.launch;
        break;
#else
        FIELDFLOW_ASSERT(false, "the cuda_runner path needs FIELDFLOW_WITH_CUDA");
#endif
    }
    return inst;
  }

  std::optional<Failure> run_layout() {
    // Instances of the non-external modes live across size sets (memory reuse and regrowth).
    std::vector<Instance> kept;
    std::size_t rotate = static_cast<std::size_t>(layout_);
    bool external = false;
    for (TransientMemoryMode mode : config_.modes) {
      if (mode == TransientMemoryMode::external) {
        external = true;
        continue;
      }
      // CPU: one thread count each, rotating (or all of them).
      std::vector<int> ts = config_.threads;
      if (!config_.every_thread_count_in_every_mode) ts = {config_.threads[rotate++ % config_.threads.size()]};
      if (config_.runs(Path::cpu))
        for (int t : ts) kept.push_back(make(Path::cpu, options(mode, t)));
      // The runner: device-resident fields in pool and persistent, host fields (copied in and
      // back) in scoped.
      if (config_.runs(Path::cuda_runner))
        kept.push_back(make(Path::cuda_runner, options(mode, 1), false, mode != TransientMemoryMode::scoped));
    }
    if (config_.runs(Path::c_api))
      kept.push_back(make(Path::c_api, options(TransientMemoryMode::pool, config_.threads[rotate++ % config_.threads.size()])));
    if (layout_ == c_.layouts.front())  // once per case: the stride order is the views' business
      for (Path path : {Path::cpu, Path::cuda_kernels, Path::cuda_runner}) {
        if (!config_.runs(path)) continue;
        CompileOptions o = options(TransientMemoryMode::pool, path == Path::cpu ? config_.threads.back() : 1);
        o.layout = Layout::any;
        kept.push_back(make(path, o, true, path == Path::cuda_runner));
      }

    for (std::size_t si = 0; si < c_.sizes.size(); ++si) {
      size_label_ = c_.sizes[si].to_string(c_.mesh);
      std::vector<Variant> variants;
      variants.push_back({"good call", make_call_data(c_, si, layout_), {}, {}});
      if (c_.short_field_calls) {
        const std::string name = field_to_shorten(c_, si);
        if (!name.empty())
          variants.push_back({fmt::format("call with '{}' one point short", name), make_call_data(c_, si, layout_, name), {}, {}});
      }
      for (Variant& v : variants) {
        v.work = v.data.clone_fields();
        v.expected = run_call(v.data, [&](const Arguments& a) { run_reference(c_.program, a); });
        ++stats_.reference_calls;
        if (!v.expected.error.empty()) ++stats_.rejected_calls;
      }
      // short, short, good, good: the first call at new sizes may be rejected, and a rejected
      // call must leave nothing behind (its checks run again on the next call).
      std::vector<Variant*> sequence = {&variants[0], &variants[0]};
      if (variants.size() > 1) sequence = {&variants[1], &variants[1], &variants[0], &variants[0]};

      std::vector<Instance> fresh;
      if (external) {
        std::vector<int> ts = config_.threads;
        if (!config_.every_thread_count_in_every_mode && c_.sizes.size() > 1 && ts.size() > 2)
          ts = {ts[si % ts.size()], ts[(si + 2) % ts.size()]};
        if (config_.runs(Path::cpu))
          for (int t : ts)
            if (auto f = make_external(Path::cpu, t, variants[0].data, fresh)) return f;
        for (Path path : {Path::cuda_kernels, Path::cuda_runner})
          if (config_.runs(path))
            if (auto f = make_external(path, 1, variants[0].data, fresh)) return f;
      }
      for (auto* list : {&fresh, &kept})
        for (Instance& inst : *list)
          for (std::size_t call = 0; call < sequence.size(); ++call)
            if (auto f = check_call(inst, *sequence[call], call)) return f;
      // Once per case: every scalar folded in at compile time (sizes in domains and concat_where
      // bounds become constants, if_ keeps one branch). Only the good call: a call with other
      // values is refused by design, and the short-field variant draws its own alpha.
      if (si == 0 && layout_ == c_.layouts.front() && config_.runs(Path::cpu)) {
        CompileOptions o = options(TransientMemoryMode::pool, config_.threads[si % config_.threads.size()]);
        o.static_scalars = variants[0].data.scalars;
        Instance folded = make(Path::cpu, o);
        Variant* expect = &variants[0];
        std::optional<Variant> specialised;
        if (!variants[0].expected.error.empty()) {
          // A folded branch takes its requirements with it (docs/language.md, static scalars): a
          // call refused only for what the dead branch reads is the specialised program's to
          // accept. Its expectation is the reference backend's run of the same specialisation;
          // a call the plain reference accepts keeps the plain reference as its yardstick, so a
          // wrong fold (class 28) cannot hide behind a reference that folds the same way.
          if (auto f = expect_specialised(variants[0], o.static_scalars, specialised)) return f;
          expect = &*specialised;
        }
        for (std::size_t call = 0; call < 2; ++call) {
          if (auto f = check_call(folded, *expect, call)) return f;
          if (specialised && specialised->expected.error.empty()) ++stats_.specialised_calls;
        }
      }
    }
    return std::nullopt;
  }

  // The specialised program's own expectation for a call the plain reference refuses: the
  // reference backend compiled with the same static scalars. Folding may only drop requirements,
  // so a refusal there must be the plain reference's refusal, of the same kind.
  std::optional<Failure> expect_specialised(const Variant& plain, const std::map<std::string, Scalar>& statics,
                                            std::optional<Variant>& out) {
    CompileOptions ro;
    ro.backend = Backend::reference;
    ro.static_scalars = statics;
    CompiledProgram reference = compile(c_.program, ro);
    const CallData& d = plain.data;
    out.emplace(Variant{plain.label + ", expectation of the specialised reference",
                        CallData{d.mesh, d.clone_fields(), d.scalars, d.size_values, d.tables}, {}, d.clone_fields()});
    out->expected = run_call(plain.data, [&](const Arguments& a) { reference(a); });
    ++stats_.reference_calls;
    if (out->expected.error.empty() || out->expected.error == plain.expected.error) return std::nullopt;
    Failure f;
    f.kind = "error mismatch";
    f.path = Path::cpu;
    f.layout = layout_;
    f.detail = fmt::format("the reference with static scalars refuses the good call with {} ({}), the plain reference "
                           "with {} ({}): folding added a requirement",
                           out->expected.error, out->expected.message, plain.expected.error, plain.expected.message);
    return f;
  }

  // An external-mode instance whose workspace is exactly what workspace_requirements reports for
  // the device its transients live on (host memory for cpu and cuda_kernels, "device" memory of
  // the emulated runtime for cuda_runner).
  std::optional<Failure> make_external(Path path, int threads, const CallData& data, std::vector<Instance>& out) {
    const Device device = path == Path::cuda_runner ? Device::cuda : Device::cpu;
    Instance probe = make(path, options(TransientMemoryMode::pool, threads));
    std::map<std::string, Field> fs = data.clone_fields();
    SizeMap sizes;
    try {
      sizes = size_symbols(c_.program, data.arguments(fs));
    } catch (const Error&) {
      return std::nullopt;  // the good call itself is malformed: nothing to size
    }
    std::size_t bytes = 0;
    try {
      for (const WorkspaceRequirement& r : probe.compiled().workspace_requirements(sizes))
        if (r.device == device) bytes = r.bytes;
    } catch (const Error&) {
      // No plan at these sizes (e.g. a scan read outside its swept range): the calls of the other
      // modes raise the same error, and are compared with the reference's rejection.
      return std::nullopt;
    }
    auto fence = std::make_unique<testing_support::GuardedWorkspace>(bytes);
    CompileOptions o = options(TransientMemoryMode::external, threads);
    o.memory.external_workspace[device] = fence->workspace(device);
#ifdef FIELDFLOW_WITH_CUDA
    const void* workspace = fence->data();
#endif
    out.push_back(make(path, o, false, false, std::move(fence)));
#ifdef FIELDFLOW_WITH_CUDA
    if (device == Device::cuda) {
      emulator_.add_device(workspace, bytes);
      out.back().device_workspace = {workspace, [this](const void* p) { emulator_.remove_device(p); }};
    }
#endif
    return std::nullopt;
  }

  // Every argument set by index as a view over the harness's arrays, as a C or Fortran host
  // does (the same arrays every call), then one run; a failing status becomes the error kind of
  // the exception behind it, so it is compared with the reference like any other call.
  void call_through_c_api(ff_program* h, Variant& v, Outcome& got) {
    ff_status status = FF_OK;
    for (int i = 0; status == FF_OK && i < static_cast<int>(c_.program.params.size()); ++i) {
      const ir::Param& p = c_.program.params[i];
      if (p.kind == ir::ParamKind::field) {
        Field& f = v.work.at(p.name);
        status = ff_program_set_field_at(h, i, testing_support::ff_dtype_code(f.dtype()), f.data(),
                                         static_cast<int>(f.shape().size()), f.shape().data(), f.strides().data(),
                                         f.origin().data());
      } else if (p.kind == ir::ParamKind::scalar) {
        const Scalar& s = v.data.scalars.at(p.name);
        if (s.dtype() == DType::boolean) status = ff_program_set_bool_at(h, i, s.as_int() != 0);
        else if (is_floating(s.dtype())) status = ff_program_set_real_at(h, i, s.as_double());
        else status = ff_program_set_int_at(h, i, s.as_int());
      } else {
        const NeighborTable& t = v.data.mesh->table(p.name);
        status = ff_program_set_table_at(h, i, t.entries(), t.n_source, t.n_target, t.max_neighbors,
                                         t.source_stride(), t.neighbor_stride());
      }
    }
    if (status == FF_OK) status = ff_program_run(h);
    if (status == FF_OK) return;
    static const char* kinds[] = {"", "", "", "DimensionError", "DTypeError", "ProgramError", "ArgumentError",
                                  "DomainError", "ConnectivityError", "LayoutError", "OptionError", "CompileError",
                                  "CacheError", "StorageError", "WorkspaceError", "AllocationError",
                                  "ConcurrencyError", "InternalError"};
    got.error = status >= 3 && status <= FF_ERROR_INTERNAL ? kinds[status] : "non-fieldflow exception";
    got.message = fmt::format("{}: {}", ff_status_name(status), ff_last_error());
  }

  std::optional<Failure> check_call(Instance& inst, Variant& v, std::size_t call_index) {
    if (inst.fence) inst.fence->poison();
    refill(v.work, v.data.fields);
    Outcome got;
    // Views: the fields copied into padded host arrays, each in its own stride order.
    std::map<std::string, std::unique_ptr<testing_support::HostArray>> arrays;
    std::map<std::string, Field> views;
    const Device where = inst.device_fields ? Device::cuda : Device::cpu;
    if (inst.views) {
      int n = 0;
      for (const auto& [name, f] : v.work) {
        const auto order = static_cast<testing_support::AxisOrder>(n % 3);
        auto& a = arrays[name] = std::make_unique<testing_support::HostArray>(
            f, testing_support::axis_order(f.dims(), order), 1 + n % 3);
        ++n;
        const Field& w = a->view();
        views.emplace(name, Field::view(const_cast<void*>(w.data()), w.dims(), w.dtype(), w.shape(), w.strides(), w.origin(), where));
      }
    } else if (inst.device_fields) {
      for (auto& [name, f] : v.work)
        views.emplace(name, Field::view(f.data(), f.dims(), f.dtype(), f.shape(), f.strides(), f.origin(), where));
    }
#ifdef FIELDFLOW_WITH_CUDA
    // Device fields are device memory for the emulated runtime during this call only.
    std::vector<std::pair<const void*, std::size_t>> device_ranges;
    if (inst.path == Path::cuda_runner) {
      testing_support::emulator = &emulator_;
      emulator_.launch = inst.launch;
      if (inst.device_fields && inst.views)
        for (const auto& [name, a] : arrays) device_ranges.push_back(a->allocation());
      else if (inst.device_fields)
        for (auto& [name, f] : v.work) device_ranges.emplace_back(f.data(), f.bytes());
      for (const auto& [p, bytes] : device_ranges) emulator_.add_device(p, bytes);
    }
#endif
    if (inst.path == Path::c_api) {
      call_through_c_api(inst.handle.get(), v, got);
    } else {
      try {
        inst.compiled()(v.data.arguments(views.empty() ? v.work : views));
      } catch (const std::exception& e) {
        got.error = error_kind(e);
        got.message = e.what();
      }
    }
#ifdef FIELDFLOW_WITH_CUDA
    for (const auto& range : device_ranges) emulator_.remove_device(range.first);
#endif
    ++stats_.compiled_calls;
    if (inst.path == Path::cuda_kernels) ++stats_.cuda_kernel_calls;
    if (inst.path == Path::cuda_runner) ++stats_.cuda_runner_calls;
    if (inst.static_scalars) ++stats_.static_scalar_calls;
    if (inst.path == Path::c_api) ++stats_.c_api_calls;
    std::string outside_views;
    for (const auto& [name, a] : arrays) {
      v.work.at(name).copy_values_from(a->view());
      if (!a->padding_untouched()) outside_views += (outside_views.empty() ? "" : ", ") + name;
    }
    auto fail = [&](std::string kind, std::string what) {
      Failure f;
      f.kind = std::move(kind);
      f.path = inst.path;
      f.mode = inst.mode;
      f.threads = inst.threads;
      f.layout = layout_;
      f.detail = fmt::format("{}{}{}, {} layout, {}, mode {}, {} thread(s), loop form {}, call #{} ({}): {}", to_string(inst.path),
                             inst.path == Path::cuda_runner ? (inst.device_fields ? " (device fields)" : " (host fields)") : "",
                             inst.static_scalars ? " (static scalars)" : "",
                             inst.views ? "views in any" : to_string(layout_), size_label_, to_string(inst.mode),
                             inst.threads, to_string(inst.loop_form), call_index + 1, v.label, what);
      return f;
    };
    if (!outside_views.empty()) return fail("wrote outside a view", "padding or slack changed around " + outside_views);
    if (inst.fence) {
      const std::string damage = inst.fence->damage();
      if (!damage.empty()) return fail("wrote outside the workspace", damage);
    }
    if (got.error == "InternalError" || got.error == "non-fieldflow exception")
      return fail("internal error", got.error + ": " + got.message);
    if (got.error != v.expected.error) {
      auto say = [](const Outcome& o) { return o.error.empty() ? std::string("accepted") : o.error + " (" + o.message + ")"; };
      return fail("error mismatch", fmt::format("reference: {}; compiled: {}", say(v.expected), say(got)));
    }
    // Accepted: the results; rejected: the untouched inputs (compared with what was passed in).
    const std::string diff = got.error.empty() ? compare_fields(v.expected.fields, v.work)
                                               : compare_fields(v.data.fields, v.work);
    if (!diff.empty()) return fail(got.error.empty() ? "values differ" : "rejected call wrote", diff);
    return std::nullopt;
  }

  const FuzzCase& c_;
  const RunConfig& config_;
  RunStats& stats_;
  Layout layout_ = Layout::vertical_fastest;
  std::string size_label_;
#ifdef FIELDFLOW_WITH_CUDA
  // Outlive every instance (locals of run_layout): a runner's destructor still synchronises its
  // stream through the emulator and frees its copies into the route's device memory.
  testing_support::Emulator emulator_;
  std::optional<testing_support::EmulatedDeviceMemory> device_memory_;
#endif
};

}  // namespace

std::string to_string(Path p) {
  switch (p) {
    case Path::cpu: return "cpu";
    case Path::cuda_kernels: return "emulated CUDA kernels";
    case Path::cuda_runner: return "CUDA runner on an emulated runtime";
    case Path::c_api: return "cpu through the C API";
  }
  return "?";
}

bool RunConfig::runs(Path p) const {
#ifndef FIELDFLOW_WITH_CUDA
  if (p == Path::cuda_runner) return false;  // needs the CUDA runtime's types
#endif
  return std::find(paths.begin(), paths.end(), p) != paths.end();
}

std::optional<Failure> check_case(const FuzzCase& c, const RunConfig& config, RunStats& stats) {
  try {
    return CaseRunner(c, config, stats).run();
  } catch (const std::exception& e) {  // compile() failed, or a harness step threw
    Failure f;
    f.kind = "compile failure";
    f.detail = fmt::format("{}: {}", error_kind(e), e.what());
    return f;
  }
}

}  // namespace fieldflow::fuzz
