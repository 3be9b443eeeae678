// The differential harness. For every layout and size set of a case:
//  1. the reference executor runs on fresh copies of the inputs (and of a variant with one field
//     one point short, when the case asks for it): the expected fields, or the expected error type;
//  2. compiled instances run the same calls: `external` with a workspace of exactly the
//     reported size, fenced by canary bytes and refilled with NaN bytes before each call (so a
//     transient read before it is written shows up as a wrong value), plus `pool`, `scoped` and
//     `persistent` instances that live across the size sets (memory reuse and regrowth), and one
//     compiled for Layout::any that runs on views over padded caller arrays in C, Fortran and
//     scrambled stride orders (nothing but the views' elements may change);
//     and the CUDA backend's generated kernels run on the host under an emulated launch grid
//     (driver::compile_cuda_emulated), in `external` on an exact fenced workspace and for
//     Layout::any on views: the GPU schedule's indexing and transient offsets, without a device;
//  3. each call must agree with the reference: same acceptance, same error type, outputs
//     untouched after a rejected call, every field (inputs too) equal bit for bit, where any NaN
//     equals any NaN (a NaN's sign and payload depend on operand order, which is not semantics).
// The call order short, short, good, good catches state left behind by a rejected call.
#include "fuzz/differential.h"
#include "support/guarded_workspace.h"
#include "support/host_arrays.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "fieldflow/compile.h"
#include "fieldflow/errors.h"
#include "fieldflow/reference.h"
#include "driver/cuda_build.h"

namespace fieldflow::fuzz {

namespace {


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

bool same_value(const Field& a, const Field& b, std::int64_t i) {
  const std::size_t w = size_of(a.dtype());
  const auto* pa = static_cast<const char*>(a.data()) + i * w;
  const auto* pb = static_cast<const char*>(b.data()) + i * w;
  if (std::memcmp(pa, pb, w) == 0) return true;
  return is_floating(a.dtype()) && std::isnan(a.get_as_double(i)) && std::isnan(b.get_as_double(i));
}

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
    return o;
  }

  struct Instance {
    TransientMemoryMode mode;
    int threads;
    std::unique_ptr<CompiledProgram> program;
    std::unique_ptr<testing_support::GuardedWorkspace> fence;  // external only
    bool views = false;  // compiled for Layout::any, called on views over padded host arrays
    bool cuda = false;   // the generated CUDA kernels under host emulation of the launch grid
  };

  // How an instance is compiled: the CPU backend, or the CUDA backend's kernels emulated on the
  // host (driver::compile_cuda_emulated: the GPU's schedule, its transients in host memory).
  CompiledProgram compile_for(const CompileOptions& o, bool cuda) const {
    return cuda ? driver::compile_cuda_emulated(c_.program, o) : compile(c_.program, o);
  }

  std::optional<Failure> run_layout() {
    // Instances of the non-external modes live across size sets; each uses one thread count.
    std::vector<Instance> kept;
    std::size_t rotate = static_cast<std::size_t>(layout_);
    for (TransientMemoryMode mode : config_.modes) {
      if (mode == TransientMemoryMode::external || !config_.cpu_backend) continue;
      std::vector<int> ts = config_.threads;
      if (!config_.every_thread_count_in_every_mode) ts = {config_.threads[rotate++ % config_.threads.size()]};
      for (int t : ts) {
        kept.push_back({mode, t, std::make_unique<CompiledProgram>(compile(c_.program, options(mode, t))), nullptr});
        ++stats_.compiles;
      }
    }
    bool external = false;
    for (TransientMemoryMode m : config_.modes) external |= m == TransientMemoryMode::external;
    if (layout_ == c_.layouts.front())  // once per case: the stride order is the views' business
      for (bool cuda : {false, true}) {
        if (!(cuda ? config_.cuda_emulation : config_.cpu_backend)) continue;
        CompileOptions o = options(TransientMemoryMode::pool, cuda ? 1 : config_.threads.back());
        o.layout = Layout::any;
        kept.push_back({TransientMemoryMode::pool, o.num_threads, std::make_unique<CompiledProgram>(compile_for(o, cuda)),
                        nullptr, true, cuda});
        ++stats_.compiles;
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
      if (external && config_.cpu_backend) {
        std::vector<int> ts = config_.threads;
        if (!config_.every_thread_count_in_every_mode && c_.sizes.size() > 1 && ts.size() > 2)
          ts = {ts[si % ts.size()], ts[(si + 2) % ts.size()]};
        for (int t : ts)
          if (auto f = make_external(t, false, variants[0].data, fresh)) return f;
      }
      if (external && config_.cuda_emulation)
        if (auto f = make_external(1, true, variants[0].data, fresh)) return f;
      for (auto* list : {&fresh, &kept})
        for (Instance& inst : *list)
          for (std::size_t call = 0; call < sequence.size(); ++call)
            if (auto f = check_call(inst, *sequence[call], call)) return f;
    }
    return std::nullopt;
  }

  // An external-mode instance whose workspace is exactly what workspace_requirements reports.
  std::optional<Failure> make_external(int threads, bool cuda, const CallData& data, std::vector<Instance>& out) {
    CompiledProgram probe = compile_for(options(TransientMemoryMode::pool, threads), cuda);
    ++stats_.compiles;
    std::map<std::string, Field> fs = data.clone_fields();
    SizeMap sizes;
    try {
      sizes = size_symbols(c_.program, data.arguments(fs));
    } catch (const Error&) {
      return std::nullopt;  // the good call itself is malformed: nothing to size
    }
    std::size_t bytes = 0;
    try {
      for (const WorkspaceRequirement& r : probe.workspace_requirements(sizes))
        if (r.device == Device::cpu) bytes = r.bytes;
    } catch (const Error&) {
      // No plan at these sizes (e.g. a scan read outside its swept range): the calls of the other
      // modes raise the same error, and are compared with the reference's rejection.
      return std::nullopt;
    }
    auto fence = std::make_unique<testing_support::GuardedWorkspace>(bytes);
    CompileOptions o = options(TransientMemoryMode::external, threads);
    o.memory.external_workspace[Device::cpu] = fence->workspace();
    out.push_back({TransientMemoryMode::external, threads, std::make_unique<CompiledProgram>(compile_for(o, cuda)),
                   std::move(fence), false, cuda});
    ++stats_.compiles;
    return std::nullopt;
  }

  std::optional<Failure> check_call(Instance& inst, Variant& v, std::size_t call_index) {
    if (inst.fence) inst.fence->poison();
    refill(v.work, v.data.fields);
    Outcome got;
    // Views: the fields copied into padded host arrays, each in its own stride order.
    std::map<std::string, std::unique_ptr<testing_support::HostArray>> arrays;
    std::map<std::string, Field> views;
    if (inst.views) {
      int n = 0;
      for (const auto& [name, f] : v.work) {
        const auto order = static_cast<testing_support::AxisOrder>(n % 3);
        auto& a = arrays[name] = std::make_unique<testing_support::HostArray>(
            f, testing_support::axis_order(f.dims(), order), 1 + n % 3);
        ++n;
        const Field& w = a->view();
        views.emplace(name, Field::view(const_cast<void*>(w.data()), w.dims(), w.dtype(), w.shape(), w.strides(), w.origin()));
      }
    }
    try {
      (*inst.program)(v.data.arguments(inst.views ? views : v.work));
    } catch (const std::exception& e) {
      got.error = error_kind(e);
      got.message = e.what();
    }
    ++stats_.compiled_calls;
    if (inst.cuda) ++stats_.emulated_cuda_calls;
    std::string outside_views;
    for (const auto& [name, a] : arrays) {
      v.work.at(name).copy_values_from(a->view());
      if (!a->padding_untouched()) outside_views += (outside_views.empty() ? "" : ", ") + name;
    }
    auto fail = [&](std::string kind, std::string what) {
      Failure f;
      f.kind = std::move(kind);
      f.mode = inst.mode;
      f.threads = inst.threads;
      f.layout = layout_;
      f.cuda = inst.cuda;
      f.detail = fmt::format("{}{} layout, {}, mode {}, {} thread(s), call #{} ({}): {}", inst.cuda ? "emulated CUDA, " : "",
                             inst.views ? "views in any" : to_string(layout_), size_label_, to_string(inst.mode),
                             inst.threads, call_index + 1, v.label, what);
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
};

}  // namespace

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
