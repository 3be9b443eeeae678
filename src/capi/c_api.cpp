// The C API (include/fieldflow/fieldflow.h) over the C++ one: every entry point runs its body
// inside guarded(), which turns every exception into a status code and a thread-local message,
// so nothing is ever thrown across the C boundary.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <set>
#include <stdexcept>

#include "capi/handle.h"
#include "capi/status.h"
#include "fieldflow/aot.h"
#include "fieldflow/capi_interop.h"
#include "fieldflow/errors.h"
#include "fieldflow/examples.h"
#include "fieldflow/fieldflow.h"
#include "ir/schedule.h"

namespace fieldflow::capi {

// ---- handles ---------------------------------------------------------------------------------

namespace {

// Handle ids carry this tag in their top 16 bits: no user-space pointer has them set on the
// platforms fieldflow supports, so a stale or garbage pointer is never mistaken for a handle.
constexpr std::uint64_t handle_tag = 0xff5eULL << 48;

std::uint64_t id_of(const ff_program* p) { return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(p)); }

std::string describe_handle(const ff_program* p) {
  if (p == nullptr) return "NULL";
  return fmt::format("{}", static_cast<const void*>(p));
}

}  // namespace

Handle::Handle(CompiledProgram p) : program(std::move(p)) {
  const std::size_t n = program.program().params.size();
  fields.resize(n);
  tables.resize(n);
  table_views.resize(n);
  scalars.resize(n);
  entry_of_param.assign(n, -1);
}

ff_program* Registry::add(std::shared_ptr<Handle> h) {
  std::lock_guard lock(mutex_);
  const std::uint64_t id = handle_tag | next_++;
  live_.emplace(id, std::move(h));
  return reinterpret_cast<ff_program*>(static_cast<std::uintptr_t>(id));
}

std::shared_ptr<Handle> Registry::find(const ff_program* p) const {
  {
    std::lock_guard lock(mutex_);
    if (auto it = live_.find(id_of(p)); it != live_.end()) return it->second;
  }
  throw InvalidHandle(fmt::format("ff_program handle {} is not a live program: {}", describe_handle(p),
                                  p == nullptr ? "it is NULL (creation failed or never happened?)"
                                               : "it was destroyed, or never created by ff_program_create"));
}

std::shared_ptr<Handle> Registry::remove(ff_program* p) {
  std::shared_ptr<Handle> h = find(p);
  std::lock_guard lock(mutex_);
  live_.erase(id_of(p));
  return h;
}

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: handles may be destroyed during exit
  return *r;
}

ff_program* wrap(CompiledProgram program) { return registry().add(std::make_shared<Handle>(std::move(program))); }

namespace {

template <class T>
T& out_param(T* p, const char* function, const char* name) {
  if (p == nullptr) throw InvalidValue(fmt::format("{}: output pointer '{}' is NULL", function, name));
  return *p;
}

std::string c_string(const char* s, const char* function, const char* what) {
  if (s == nullptr) throw InvalidValue(fmt::format("{}: {} is NULL", function, what));
  return s;
}

// ---- conversions -----------------------------------------------------------------------------

DType dtype_from_c(int d, const char* function) {
  switch (d) {
    case FF_DTYPE_BOOL: return DType::boolean;
    case FF_DTYPE_INT32: return DType::int32;
    case FF_DTYPE_INT64: return DType::int64;
    case FF_DTYPE_FLOAT32: return DType::float32;
    case FF_DTYPE_FLOAT64: return DType::float64;
  }
  throw InvalidValue(fmt::format("{}: dtype {} is not an FF_DTYPE_* value (expected 0..4: bool, int32, int64, "
                                 "float32, float64)", function, d));
}

int dtype_to_c(DType d) {
  switch (d) {
    case DType::boolean: return FF_DTYPE_BOOL;
    case DType::int32: return FF_DTYPE_INT32;
    case DType::int64: return FF_DTYPE_INT64;
    case DType::float32: return FF_DTYPE_FLOAT32;
    case DType::float64: return FF_DTYPE_FLOAT64;
  }
  FIELDFLOW_UNREACHABLE("unknown dtype");
}

Device device_from_c(int d, const char* function) {
  if (d == FF_DEVICE_CPU) return Device::cpu;
  if (d == FF_DEVICE_CUDA) return Device::cuda;
  throw InvalidValue(fmt::format("{}: device {} is not an FF_DEVICE_* value (expected 0: cpu or 1: cuda)", function, d));
}

int device_to_c(Device d) { return d == Device::cpu ? FF_DEVICE_CPU : FF_DEVICE_CUDA; }

CompileOptions compile_options(const ff_options& o) {
  CompileOptions c;
  switch (o.backend) {
    case FF_BACKEND_CPU: c.backend = Backend::cpu; break;
    case FF_BACKEND_REFERENCE: c.backend = Backend::reference; break;
    case FF_BACKEND_CUDA: c.backend = Backend::cuda; break;
    default:
      throw OptionError(fmt::format("ff_options.backend is {}: expected FF_BACKEND_CPU (0), FF_BACKEND_REFERENCE (1) "
                                    "or FF_BACKEND_CUDA (2)", o.backend));
  }
  switch (o.layout) {
    case FF_LAYOUT_DEFAULT: break;
    case FF_LAYOUT_VERTICAL_FASTEST: c.layout = Layout::vertical_fastest; break;
    case FF_LAYOUT_HORIZONTAL_FASTEST: c.layout = Layout::horizontal_fastest; break;
    case FF_LAYOUT_ANY: c.layout = Layout::any; break;
    default:
      throw OptionError(fmt::format("ff_options.layout is {}: expected FF_LAYOUT_DEFAULT (-1), FF_LAYOUT_VERTICAL_FASTEST (0), "
                                    "FF_LAYOUT_HORIZONTAL_FASTEST (1) or FF_LAYOUT_ANY (2)", o.layout));
  }
  if (o.memory_mode < FF_MEMORY_DEFAULT || o.memory_mode > FF_MEMORY_EXTERNAL)
    throw OptionError(fmt::format("ff_options.memory_mode is {}: expected FF_MEMORY_DEFAULT (-1), SCOPED (0), "
                                  "PERSISTENT (1), POOL (2) or EXTERNAL (3)", o.memory_mode));
  if (o.memory_mode != FF_MEMORY_DEFAULT) c.memory.mode = static_cast<TransientMemoryMode>(o.memory_mode);
  c.num_threads = o.num_threads;
  c.parallel_threshold = o.parallel_threshold;
  if (o.cache_dir) c.cache_dir = o.cache_dir;
  if (o.release && !o.allocate)
    throw OptionError("ff_options.release is set but ff_options.allocate is NULL: a release callback needs an allocator");
  if (o.allocate) {
    // The C allocator behind the C++ one. The rejected-block path (misaligned) and the release of
    // installed blocks both go through Workspace::release, so the host sees every block back.
    c.memory.external_memory_allocator = [allocate = o.allocate, release = o.release,
                                          user = o.allocator_user_data](const AllocationRequest& r) {
      const int device = device_to_c(r.device);
      void* p = allocate(user, device, r.bytes, r.alignment, r.program.c_str());
      if (p == nullptr)
        throw WorkspaceError(fmt::format("program '{}': the allocator (ff_options.allocate) returned NULL for {} "
                                         "bytes on device {}; nothing was run", r.program, r.bytes,
                                         to_string(r.device)));
      Workspace ws{p, r.bytes, r.device, {}};
      if (release) ws.release = [release, user, device, p, bytes = r.bytes] { release(user, device, p, bytes); };
      return ws;
    };
  } else if (o.memory_mode == FF_MEMORY_EXTERNAL) {
    // The workspace is sized after creation (ff_program_workspace_query needs the compiled
    // program), so the program is compiled with an empty placeholder that
    // ff_program_set_workspace replaces; a run before that fails validation (null pointer).
    const Device d = c.backend == Backend::cuda ? Device::cuda : Device::cpu;
    c.memory.external_workspace[d] = Workspace{nullptr, 0, d, {}};
  }
  return c;
}

// ---- parameters ------------------------------------------------------------------------------

const ir::Param& param_at(const Handle& h, int index, const char* function) {
  const auto& params = h.program.program().params;
  if (index < 0 || static_cast<std::size_t>(index) >= params.size())
    throw InvalidValue(fmt::format("{}: program '{}' has {} parameters (indices 0..{}), given index {}", function,
                                   h.program.program().name, params.size(), static_cast<int>(params.size()) - 1,
                                   index));
  return params[static_cast<std::size_t>(index)];
}

int index_of(const Handle& h, const char* name, const char* function) {
  const ir::Program& p = h.program.program();
  const std::string n = c_string(name, function, "the parameter name");
  const int i = p.index_of(n);
  if (i >= 0) return i;
  std::vector<std::string> names;
  for (const auto& prm : p.params) names.push_back(prm.name);
  throw ArgumentError(fmt::format("program '{}' has no parameter '{}'; its parameters are: {}", p.name, n,
                                  fmt::join(names, ", ")));
}

std::string_view kind_name(ir::ParamKind k) {
  switch (k) {
    case ir::ParamKind::field: return "a field";
    case ir::ParamKind::scalar: return "a scalar";
    case ir::ParamKind::connectivity: return "a connectivity";
  }
  return "?";
}

void expect_kind(const Handle& h, const ir::Param& prm, ir::ParamKind want, const char* function) {
  if (prm.kind != want)
    throw ArgumentError(fmt::format("{}: parameter '{}' of program '{}' is {}, not {}", function, prm.name,
                                    h.program.program().name, kind_name(prm.kind), kind_name(want)));
}

bool is_output(const ir::Program& p, const std::string& name) {
  for (const auto& st : p.stmts)
    if (std::find(st.outputs.begin(), st.outputs.end(), name) != st.outputs.end()) return true;
  return false;
}

// Refuses a call on a handle from inside one of its own runs on the same thread (a callback):
// the handle's mutex would wait for itself.
std::unique_lock<std::mutex> lock_handle(Handle& h, const char* function) {
  if (h.running.load(std::memory_order_relaxed) == std::this_thread::get_id())
    throw ConcurrencyError(fmt::format("{}: program '{}' was used from inside one of its own runs on the same thread "
                                       "(from an allocator or release callback); calls on one handle cannot nest",
                                       function, h.program.program().name));
  return std::unique_lock<std::mutex>(h.mutex);
}

// The args entry of a parameter, writable. Arguments offers no setter, so a scalar's new value
// is written into the entry Arguments keeps (the object itself is not const): rebuilding the
// Arguments for each new value would allocate on every run of a time loop whose dt changes.
void set_scalar(Handle& h, int index, Scalar value) {
  h.scalars[index] = value;
  if (h.args_built) h.args.set_scalar(static_cast<std::size_t>(h.entry_of_param[index]), value);
}

void set_int(Handle& h, int index, std::int64_t v, const char* function) {
  const ir::Param& prm = param_at(h, index, function);
  expect_kind(h, prm, ir::ParamKind::scalar, function);
  const DType t = prm.type.dtype;
  if (t == DType::int32) {
    if (v < INT32_MIN || v > INT32_MAX)
      throw ArgumentError(fmt::format("{}: scalar '{}' of program '{}' is int32, given {}, which does not fit", function,
                                      prm.name, h.program.program().name, v));
    set_scalar(h, index, Scalar(static_cast<std::int32_t>(v)));
  } else if (t == DType::int64) {
    set_scalar(h, index, Scalar(v));
  } else {
    throw ArgumentError(fmt::format("{}: scalar '{}' of program '{}' is {}, given an integer (use ff_program_set_{})",
                                    function, prm.name, h.program.program().name, to_string(t),
                                    t == DType::boolean ? "bool" : "real"));
  }
}

void set_real(Handle& h, int index, double v, const char* function) {
  const ir::Param& prm = param_at(h, index, function);
  expect_kind(h, prm, ir::ParamKind::scalar, function);
  const DType t = prm.type.dtype;
  if (t == DType::float64) set_scalar(h, index, Scalar(v));
  else if (t == DType::float32) set_scalar(h, index, Scalar(static_cast<float>(v)));
  else
    throw ArgumentError(fmt::format("{}: scalar '{}' of program '{}' is {}, given a real (use ff_program_set_{})",
                                    function, prm.name, h.program.program().name, to_string(t),
                                    t == DType::boolean ? "bool" : "int"));
}

void set_bool(Handle& h, int index, int v, const char* function) {
  const ir::Param& prm = param_at(h, index, function);
  expect_kind(h, prm, ir::ParamKind::scalar, function);
  if (prm.type.dtype != DType::boolean)
    throw ArgumentError(fmt::format("{}: scalar '{}' of program '{}' is {}, given a bool (use ff_program_set_{})",
                                    function, prm.name, h.program.program().name, to_string(prm.type.dtype),
                                    is_floating(prm.type.dtype) ? "real" : "int"));
  set_scalar(h, index, Scalar(v != 0));
}

template <class T>
bool same_values(const std::vector<T>& have, const T* given, int n) {
  return have.size() == static_cast<std::size_t>(n) && (n == 0 || std::equal(have.begin(), have.end(), given));
}

void set_field(Handle& h, int index, int dtype, void* data, int rank, const std::int64_t* shape,
               const std::int64_t* strides, const std::int64_t* origin, const char* function) {
  const ir::Param& prm = param_at(h, index, function);
  expect_kind(h, prm, ir::ParamKind::field, function);
  const DType t = dtype_from_c(dtype, function);
  const std::string& program = h.program.program().name;
  if (t != prm.type.dtype)
    throw DTypeError(fmt::format("{}: field '{}' of program '{}' is {}, given a {} view", function, prm.name, program,
                                 to_string(prm.type.dtype), to_string(t)));
  const auto& dims = prm.type.dims;
  if (rank != static_cast<int>(dims.size())) {
    std::vector<std::string> names;
    for (const auto& d : dims) names.push_back(d.name);
    throw ArgumentError(fmt::format("{}: field '{}' of program '{}' has rank {} ({}), given rank {}", function,
                                    prm.name, program, dims.size(), fmt::join(names, ", "), rank));
  }
  if (rank > 0 && (shape == nullptr || strides == nullptr))
    throw InvalidValue(fmt::format("{}: field '{}': shape and strides must not be NULL for rank {}", function,
                                   prm.name, rank));
  std::optional<Field>& slot = h.fields[static_cast<std::size_t>(index)];
  // Fields have at most FF_MAX_DIMS (8) dimensions (fieldflow/abi.h), so this covers every rank.
  static const std::int64_t zeros[8] = {};
  if (origin == nullptr) origin = zeros;
  // Field::view's messages name no parameter; a host setting many fields must learn which one.
  try {
    if (slot && slot->is_view() && same_values(slot->shape(), shape, rank) &&
        same_values(slot->strides(), strides, rank) && same_values(slot->origin(), origin, rank)) {
      // The same view over other memory (a time loop swapping buffers): no allocation.
      if (slot->data() != data) slot->set_view_data(data);
      return;
    }
    // Built aside, then swapped in: a rejected view leaves the previous one in place.
    // A cuda handle's fields are device memory (fieldflow.h, FF_BACKEND_CUDA).
    Field view = Field::view(data, dims, t, std::vector<std::int64_t>(shape, shape + rank),
                             std::vector<std::int64_t>(strides, strides + rank),
                             std::vector<std::int64_t>(origin, origin + rank),
                             h.program.backend() == Backend::cuda ? Device::cuda : Device::cpu);
    const bool first = !slot.has_value();
    slot = std::move(view);
    if (first) h.args_built = false;
  } catch (const ArgumentError& e) {
    throw ArgumentError(fmt::format("{}: field '{}' of program '{}': {}", function, prm.name, program, e.what()));
  }
}

void set_table(Handle& h, int index, const std::int32_t* data, std::int64_t n_source, std::int64_t n_target,
               int max_neighbors, std::int64_t source_stride, std::int64_t neighbor_stride, const char* function) {
  const ir::Param& prm = param_at(h, index, function);
  expect_kind(h, prm, ir::ParamKind::connectivity, function);
  std::optional<NeighborTable>& slot = h.tables[static_cast<std::size_t>(index)];
  const Handle::TableView given{data, n_source, n_target, max_neighbors, source_stride, neighbor_stride};
  // The same table again (a time loop setting every argument each step): nothing to do, and its
  // entries are not checked again (tables are the model's static mesh; see fieldflow.h).
  if (slot && h.table_views[static_cast<std::size_t>(index)] == given) return;
  const Connectivity& c = prm.conn;
  NeighborTable table = NeighborTable::view(c.name, c.source.name, c.target.name, n_source, n_target, max_neighbors,
                                            data, source_stride, neighbor_stride);
  const bool first = !slot.has_value();
  slot = std::move(table);
  h.table_views[static_cast<std::size_t>(index)] = given;
  if (first) h.args_built = false;
}

// Builds the Arguments the runs use, once every parameter has a value (and again only when a
// parameter gets its first value).
void build_arguments(Handle& h) {
  const ir::Program& p = h.program.program();
  std::vector<std::string> missing;
  for (std::size_t i = 0; i < p.params.size(); ++i) {
    const bool set = h.fields[i] || h.tables[i] || h.scalars[i];
    if (!set) missing.push_back(fmt::format("{} ({})", p.params[i].name, kind_name(p.params[i].kind)));
  }
  if (!missing.empty())
    throw ArgumentError(fmt::format("program '{}': arguments not set: {} (set them with ff_program_set_field, "
                                    "ff_program_set_table, ff_program_set_int/real/bool)", p.name,
                                    fmt::join(missing, ", ")));
  Arguments args;
  std::vector<int> entry(p.params.size(), -1);
  for (std::size_t i = 0; i < p.params.size(); ++i) {
    entry[i] = static_cast<int>(i);
    switch (p.params[i].kind) {
      case ir::ParamKind::field: args.field(p.params[i].name, *h.fields[i]); break;
      case ir::ParamKind::scalar: args.scalar(p.params[i].name, *h.scalars[i]); break;
      case ir::ParamKind::connectivity: args.connectivity(p.params[i].name, *h.tables[i]); break;
    }
  }
  h.args = std::move(args);
  h.entry_of_param = std::move(entry);
  h.args_built = true;
}

SizeMap sizes_from(const Handle& h, int count, const char* const* names, const std::int64_t* values,
                   const char* function) {
  const ir::Program& p = h.program.program();
  std::set<std::string> expected;
  for (const auto& prm : p.params) {
    if (prm.kind == ir::ParamKind::scalar && is_integral(prm.type.dtype)) expected.insert(prm.name);
    if (prm.kind == ir::ParamKind::connectivity) {
      expected.insert(ir::location_size_symbol(prm.conn.source));
      expected.insert(ir::location_size_symbol(prm.conn.target));
    }
  }
  if (count < 0) throw InvalidValue(fmt::format("{}: count is {}", function, count));
  if (count > 0 && (names == nullptr || values == nullptr))
    throw InvalidValue(fmt::format("{}: names and values must not be NULL when count is {}", function, count));
  SizeMap sizes;
  for (int i = 0; i < count; ++i) {
    const std::string n = c_string(names[i], function, "a size name");
    if (!expected.count(n))
      throw ArgumentError(fmt::format("{}: program '{}' has no size symbol '{}'; its size symbols are: {}", function,
                                      p.name, n, fmt::join(expected, ", ")));
    if (!sizes.emplace(n, values[i]).second)
      throw ArgumentError(fmt::format("{}: size '{}' given twice", function, n));
  }
  std::vector<std::string> missing;
  for (const auto& n : expected)
    if (!sizes.count(n)) missing.push_back(n);
  if (!missing.empty())
    throw ArgumentError(fmt::format("{}: program '{}' needs the sizes {}; missing: {}", function, p.name,
                                    fmt::join(expected, ", "), fmt::join(missing, ", ")));
  return sizes;
}

void requirement_on(const std::vector<WorkspaceRequirement>& reqs, Device d, std::size_t& bytes,
                    std::size_t& alignment) {
  bytes = 0;
  alignment = transient_alignment;
  for (const auto& r : reqs)
    if (r.device == d) {
      bytes = r.bytes;
      alignment = r.alignment;
    }
}

void run(Handle& h) {
  auto lock = lock_handle(h, "ff_program_run");
  if (!h.args_built) build_arguments(h);
  h.running.store(std::this_thread::get_id(), std::memory_order_relaxed);
  struct ClearRunning {
    std::atomic<std::thread::id>& id;
    ~ClearRunning() { id.store(std::thread::id(), std::memory_order_relaxed); }
  } clear{h.running};
  try {
    h.program(h.args, h.call_options);
  } catch (const WorkspaceError& e) {
    const int device = h.program.backend() == Backend::cuda ? FF_DEVICE_CUDA : FF_DEVICE_CPU;
    if (!h.awaits_workspace || h.workspace_set[device]) throw;
    throw WorkspaceError(fmt::format("{} (no workspace was set: in FF_MEMORY_EXTERNAL mode without an allocator, call "
                                     "ff_program_set_workspace with at least the bytes ff_program_workspace_query "
                                     "reports before the first run)", e.what()));
  }
}

}  // namespace
}  // namespace fieldflow::capi

// ---- the C entry points ----------------------------------------------------------------------

using namespace fieldflow;
using namespace fieldflow::capi;

extern "C" {

const char* ff_status_name(ff_status s) {
  switch (s) {
    case FF_OK: return "FF_OK";
    case FF_ERROR_INVALID_HANDLE: return "FF_ERROR_INVALID_HANDLE";
    case FF_ERROR_INVALID_VALUE: return "FF_ERROR_INVALID_VALUE";
    case FF_ERROR_DIMENSION: return "FF_ERROR_DIMENSION";
    case FF_ERROR_DTYPE: return "FF_ERROR_DTYPE";
    case FF_ERROR_PROGRAM: return "FF_ERROR_PROGRAM";
    case FF_ERROR_ARGUMENT: return "FF_ERROR_ARGUMENT";
    case FF_ERROR_DOMAIN: return "FF_ERROR_DOMAIN";
    case FF_ERROR_CONNECTIVITY: return "FF_ERROR_CONNECTIVITY";
    case FF_ERROR_LAYOUT: return "FF_ERROR_LAYOUT";
    case FF_ERROR_OPTION: return "FF_ERROR_OPTION";
    case FF_ERROR_COMPILE: return "FF_ERROR_COMPILE";
    case FF_ERROR_CACHE: return "FF_ERROR_CACHE";
    case FF_ERROR_STORAGE: return "FF_ERROR_STORAGE";
    case FF_ERROR_WORKSPACE: return "FF_ERROR_WORKSPACE";
    case FF_ERROR_ALLOCATION: return "FF_ERROR_ALLOCATION";
    case FF_ERROR_CONCURRENCY: return "FF_ERROR_CONCURRENCY";
    case FF_ERROR_INTERNAL: return "FF_ERROR_INTERNAL";
    case FF_ERROR_OUT_OF_MEMORY: return "FF_ERROR_OUT_OF_MEMORY";
    case FF_ERROR_UNKNOWN: return "FF_ERROR_UNKNOWN";
    case FF_ERROR_BACKEND_UNAVAILABLE: return "FF_ERROR_BACKEND_UNAVAILABLE";
    case FF_ERROR_CUDA: return "FF_ERROR_CUDA";
  }
  return "FF_UNKNOWN_STATUS";
}

ff_status ff_options_init(ff_options* options) {
  return guarded([&] {
    ff_options& o = out_param(options, "ff_options_init", "options");
    const CompileOptions defaults;
    o = ff_options{};
    o.backend = FF_BACKEND_CPU;
    o.layout = FF_LAYOUT_DEFAULT;
    o.memory_mode = FF_MEMORY_DEFAULT;
    o.num_threads = defaults.num_threads;
    o.parallel_threshold = defaults.parallel_threshold;
  });
}

ff_status ff_program_create(const char* example_name, const ff_options* options, ff_program** program) {
  return guarded([&] {
    ff_program*& out = out_param(program, "ff_program_create", "program");
    out = nullptr;
    const std::string name = c_string(example_name, "ff_program_create", "the example name");
    ff_options o;
    ff_options_init(&o);
    if (options) o = *options;
    const CompileOptions c = compile_options(o);
    auto h = std::make_shared<Handle>(compile(examples::example(name).program, c));
    h->awaits_workspace = !o.allocate && o.memory_mode == FF_MEMORY_EXTERNAL;
    out = registry().add(std::move(h));
  });
}

ff_status ff_program_create_aot(const struct ff_aot_program* aot, const ff_options* options, ff_program** program) {
  return guarded([&] {
    ff_program*& out = out_param(program, "ff_program_create_aot", "program");
    out = nullptr;
    ff_options o;
    ff_options_init(&o);
    if (options) o = *options;
    auto h = std::make_shared<Handle>(load_aot(aot, compile_options(o)));
    h->awaits_workspace = !o.allocate && o.memory_mode == FF_MEMORY_EXTERNAL;
    out = registry().add(std::move(h));
  });
}

ff_status ff_program_destroy(ff_program* program) {
  if (program == nullptr) return FF_OK;
  return guarded([&] {
    if (registry().find(program)->running.load(std::memory_order_relaxed) == std::this_thread::get_id())
      throw ConcurrencyError("ff_program_destroy: a program cannot be destroyed from inside its own run (from an "
                             "allocator or release callback)");
    std::shared_ptr<Handle> h = registry().remove(program);
    // Dropping the last reference runs the release actions; a run in progress on another thread
    // holds its own reference, so the program goes when that run returns.
  });
}

ff_status ff_example_count(int* count) {
  return guarded([&] { out_param(count, "ff_example_count", "count") = static_cast<int>(examples::all_examples().size()); });
}

ff_status ff_example_name(int index, const char** name) {
  return guarded([&] {
    const char*& out = out_param(name, "ff_example_name", "name");
    const auto& all = examples::all_examples();
    if (index < 0 || static_cast<std::size_t>(index) >= all.size())
      throw InvalidValue(fmt::format("ff_example_name: there are {} examples (indices 0..{}), given index {}",
                                     all.size(), static_cast<int>(all.size()) - 1, index));
    out = all[static_cast<std::size_t>(index)].name.c_str();
  });
}

ff_status ff_program_name(const ff_program* program, const char** name) {
  return guarded([&] {
    const char*& out = out_param(name, "ff_program_name", "name");
    out = registry().find(program)->program.program().name.c_str();
  });
}

ff_status ff_program_param_count(const ff_program* program, int* count) {
  return guarded([&] {
    int& out = out_param(count, "ff_program_param_count", "count");
    out = static_cast<int>(registry().find(program)->program.program().params.size());
  });
}

ff_status ff_program_param_index(const ff_program* program, const char* name, int* index) {
  return guarded([&] {
    int& out = out_param(index, "ff_program_param_index", "index");
    out = index_of(*registry().find(program), name, "ff_program_param_index");
  });
}

ff_status ff_program_param_info(const ff_program* program, int index, ff_param_info* info) {
  return guarded([&] {
    ff_param_info& out = out_param(info, "ff_program_param_info", "info");
    const auto h = registry().find(program);
    const ir::Param& prm = param_at(*h, index, "ff_program_param_info");
    ff_param_info i{};
    i.name = prm.name.c_str();
    switch (prm.kind) {
      case ir::ParamKind::field:
        i.kind = FF_PARAM_FIELD;
        i.dtype = dtype_to_c(prm.type.dtype);
        i.rank = static_cast<std::int32_t>(prm.type.dims.size());
        i.is_output = is_output(h->program.program(), prm.name);
        break;
      case ir::ParamKind::scalar:
        i.kind = FF_PARAM_SCALAR;
        i.dtype = dtype_to_c(prm.type.dtype);
        break;
      case ir::ParamKind::connectivity:
        i.kind = FF_PARAM_CONNECTIVITY;
        i.dtype = FF_DTYPE_INT32;
        i.rank = 2;
        break;
    }
    out = i;
  });
}

ff_status ff_program_param_dim(const ff_program* program, int index, int axis, const char** name, int* kind) {
  return guarded([&] {
    const char*& out_name = out_param(name, "ff_program_param_dim", "name");
    int& out_kind = out_param(kind, "ff_program_param_dim", "kind");
    const auto h = registry().find(program);
    const ir::Param& prm = param_at(*h, index, "ff_program_param_dim");
    const Dimension* d = nullptr;
    int rank = 0;
    if (prm.kind == ir::ParamKind::field) {
      rank = static_cast<int>(prm.type.dims.size());
      if (axis >= 0 && axis < rank) d = &prm.type.dims[static_cast<std::size_t>(axis)];
    } else if (prm.kind == ir::ParamKind::connectivity) {
      rank = 2;
      if (axis == 0) d = &prm.conn.source;
      if (axis == 1) d = &prm.conn.local;
    }
    if (d == nullptr)
      throw InvalidValue(fmt::format("ff_program_param_dim: parameter '{}' of program '{}' has {} dimensions, given "
                                     "axis {}", prm.name, h->program.program().name, rank, axis));
    out_name = d->name.c_str();
    out_kind = d->kind == DimKind::horizontal ? FF_DIM_HORIZONTAL : d->kind == DimKind::vertical ? FF_DIM_VERTICAL
                                                                                                  : FF_DIM_LOCAL;
  });
}

ff_status ff_program_set_field(ff_program* program, const char* name, int dtype, void* data, int rank,
                               const int64_t* shape, const int64_t* strides, const int64_t* origin) {
  return guarded([&] {
    const auto h = registry().find(program);
    auto lock = lock_handle(*h, "ff_program_set_field");
    set_field(*h, index_of(*h, name, "ff_program_set_field"), dtype, data, rank, shape, strides, origin,
              "ff_program_set_field");
  });
}

ff_status ff_program_set_field_at(ff_program* program, int index, int dtype, void* data, int rank,
                                  const int64_t* shape, const int64_t* strides, const int64_t* origin) {
  return guarded([&] {
    const auto h = registry().find(program);
    auto lock = lock_handle(*h, "ff_program_set_field_at");
    set_field(*h, index, dtype, data, rank, shape, strides, origin, "ff_program_set_field_at");
  });
}

ff_status ff_program_set_int(ff_program* program, const char* name, int64_t value) {
  return guarded([&] {
    const auto h = registry().find(program);
    auto lock = lock_handle(*h, "ff_program_set_int");
    set_int(*h, index_of(*h, name, "ff_program_set_int"), value, "ff_program_set_int");
  });
}

ff_status ff_program_set_int_at(ff_program* program, int index, int64_t value) {
  return guarded([&] {
    const auto h = registry().find(program);
    auto lock = lock_handle(*h, "ff_program_set_int_at");
    set_int(*h, index, value, "ff_program_set_int_at");
  });
}

ff_status ff_program_set_real(ff_program* program, const char* name, double value) {
  return guarded([&] {
    const auto h = registry().find(program);
    auto lock = lock_handle(*h, "ff_program_set_real");
    set_real(*h, index_of(*h, name, "ff_program_set_real"), value, "ff_program_set_real");
  });
}

ff_status ff_program_set_real_at(ff_program* program, int index, double value) {
  return guarded([&] {
    const auto h = registry().find(program);
    auto lock = lock_handle(*h, "ff_program_set_real_at");
    set_real(*h, index, value, "ff_program_set_real_at");
  });
}

ff_status ff_program_set_bool(ff_program* program, const char* name, int value) {
  return guarded([&] {
    const auto h = registry().find(program);
    auto lock = lock_handle(*h, "ff_program_set_bool");
    set_bool(*h, index_of(*h, name, "ff_program_set_bool"), value, "ff_program_set_bool");
  });
}

ff_status ff_program_set_bool_at(ff_program* program, int index, int value) {
  return guarded([&] {
    const auto h = registry().find(program);
    auto lock = lock_handle(*h, "ff_program_set_bool_at");
    set_bool(*h, index, value, "ff_program_set_bool_at");
  });
}

ff_status ff_program_set_table(ff_program* program, const char* name, const int32_t* data, int64_t n_source,
                               int64_t n_target, int max_neighbors, int64_t source_stride, int64_t neighbor_stride) {
  return guarded([&] {
    const auto h = registry().find(program);
    auto lock = lock_handle(*h, "ff_program_set_table");
    set_table(*h, index_of(*h, name, "ff_program_set_table"), data, n_source, n_target, max_neighbors, source_stride,
              neighbor_stride, "ff_program_set_table");
  });
}

ff_status ff_program_set_table_at(ff_program* program, int index, const int32_t* data, int64_t n_source,
                                  int64_t n_target, int max_neighbors, int64_t source_stride,
                                  int64_t neighbor_stride) {
  return guarded([&] {
    const auto h = registry().find(program);
    auto lock = lock_handle(*h, "ff_program_set_table_at");
    set_table(*h, index, data, n_source, n_target, max_neighbors, source_stride, neighbor_stride,
              "ff_program_set_table_at");
  });
}

ff_status ff_program_workspace_query(const ff_program* program, int device, int count, const char* const* names,
                                     const int64_t* values, size_t* bytes, size_t* alignment) {
  return guarded([&] {
    std::size_t& out_bytes = out_param(bytes, "ff_program_workspace_query", "bytes");
    std::size_t& out_alignment = out_param(alignment, "ff_program_workspace_query", "alignment");
    const Device d = device_from_c(device, "ff_program_workspace_query");
    const auto h = registry().find(program);
    const SizeMap sizes = sizes_from(*h, count, names, values, "ff_program_workspace_query");
    requirement_on(h->program.workspace_requirements(sizes), d, out_bytes, out_alignment);
  });
}

ff_status ff_program_workspace_for_arguments(const ff_program* program, int device, size_t* bytes,
                                             size_t* alignment) {
  return guarded([&] {
    std::size_t& out_bytes = out_param(bytes, "ff_program_workspace_for_arguments", "bytes");
    std::size_t& out_alignment = out_param(alignment, "ff_program_workspace_for_arguments", "alignment");
    const Device d = device_from_c(device, "ff_program_workspace_for_arguments");
    const auto h = registry().find(program);
    auto lock = lock_handle(*h, "ff_program_workspace_for_arguments");
    if (!h->args_built) build_arguments(*h);
    const SizeMap sizes = size_symbols(h->program.program(), h->args);
    requirement_on(h->program.workspace_requirements(sizes), d, out_bytes, out_alignment);
  });
}

ff_status ff_program_set_workspace(ff_program* program, int device, void* pointer, size_t bytes) {
  return guarded([&] {
    const Device d = device_from_c(device, "ff_program_set_workspace");
    const auto h = registry().find(program);
    auto lock = lock_handle(*h, "ff_program_set_workspace");
    h->program.set_external_workspace(d, Workspace{pointer, bytes, d, {}});
    h->workspace_set[device_to_c(d)] = true;
  });
}

ff_status ff_program_memory_stats(const ff_program* program, ff_memory_stats* stats) {
  return guarded([&] {
    ff_memory_stats& out = out_param(stats, "ff_program_memory_stats", "stats");
    const MemoryStats s = registry().find(program)->program.memory_stats();
    out = ff_memory_stats{s.calls,       s.allocator_calls, s.workspace_installs, s.system_allocations,
                          s.system_frees, s.pool_hits,       s.pool_misses,        s.release_actions,
                          s.bytes_installed, s.last_call_system_allocations};
  });
}

ff_status ff_program_run(ff_program* program) {
  return guarded([&] { run(*registry().find(program)); });
}

ff_status ff_program_set_cuda_stream(ff_program* program, void* stream) {
  return guarded([&] {
    const auto h = registry().find(program);
    auto lock = lock_handle(*h, "ff_program_set_cuda_stream");
    if (stream && h->program.backend() != Backend::cuda)
      throw OptionError(fmt::format("ff_program_set_cuda_stream: program '{}' was created for backend {}; a stream "
                                    "is for FF_BACKEND_CUDA handles", h->program.program().name,
                                    to_string(h->program.backend())));
    h->call_options.cuda_stream = stream;
  });
}

static_assert(FF_LOOP_FORM_TUNED == static_cast<int>(LoopForm::tuned) &&
              FF_LOOP_FORM_SCALAR == static_cast<int>(LoopForm::scalar) &&
              FF_LOOP_FORM_VECTOR == static_cast<int>(LoopForm::vector), "the C values are LoopForm's");

ff_status ff_program_set_loop_form(ff_program* program, int form) {
  return guarded([&] {
    const auto h = registry().find(program);
    auto lock = lock_handle(*h, "ff_program_set_loop_form");
    // Checked as an int: a cast to LoopForm first would wrap 256 into TUNED.
    if (form < FF_LOOP_FORM_TUNED || form > FF_LOOP_FORM_VECTOR)
      throw OptionError(fmt::format("ff_program_set_loop_form: program '{}': form {} is not an FF_LOOP_FORM_* value: "
                                    "expected FF_LOOP_FORM_TUNED (0), FF_LOOP_FORM_SCALAR (1) or FF_LOOP_FORM_VECTOR (2)",
                                    h->program.program().name, form));
    h->program.set_loop_form(static_cast<LoopForm>(form));
  });
}

ff_status ff_program_loop_form(const ff_program* program, int* form) {
  return guarded([&] {
    int& out = out_param(form, "ff_program_loop_form", "form");
    out = static_cast<int>(registry().find(program)->program.loop_form());
  });
}

}  // extern "C"
