// compile() and the compiled program from Python. A call turns each array argument into a
// fieldflow::Field view over the array's own memory (no copy; strides, dtype and layout checked by
// the C++ runtime exactly as for C++ hosts) and runs with the GIL released. Views are kept per
// parameter between calls and only re-pointed when an argument has the shape and strides of the
// previous call, so a time loop in Python allocates nothing in C++ per call.
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "fieldflow/compile.h"
#include "fieldflow/errors.h"
#include "fieldflow/mesh.h"

namespace fieldflow::python {
namespace {

constexpr int kMaxRank = 8;  // FF_MAX_DIMS of fieldflow/abi.h

// A reference to a Python object that may be dropped by a thread without the GIL (a release
// action run by the C++ runtime inside a call, which holds no GIL).
class GilObject {
 public:
  explicit GilObject(nb::object o) : object_(o.release().ptr()) {}
  GilObject(const GilObject&) = delete;
  GilObject& operator=(const GilObject&) = delete;
  ~GilObject() { clear(); }
  nb::handle get() const { return object_; }
  void clear() {
    if (object_ == nullptr || !Py_IsInitialized()) return;
    nb::gil_scoped_acquire gil;
    Py_CLEAR(object_);
  }

 private:
  PyObject* object_;
};

nb::object as_numpy_array(nb::handle obj) { return nb::module_::import_("numpy").attr("asarray")(obj); }

// An array argument as an ndarray (no copy, no conversion): objects with the buffer protocol or
// DLPack directly, those with only __array_interface__ through numpy.asarray (still a view).
template <class... Flags>
bool array_of(nb::handle obj, nb::ndarray<Flags...>& out, nb::object& holder) {
  if (nb::try_cast(obj, out, false)) return true;
  if (!nb::hasattr(obj, "__array_interface__")) return false;
  holder = as_numpy_array(obj);
  return nb::try_cast(holder, out, false);
}

std::optional<DType> dtype_of(const nb::dlpack::dtype& t) {
  using Code = nb::dlpack::dtype_code;
  if (t.lanes != 1) return std::nullopt;
  if (t.code == static_cast<std::uint8_t>(Code::Bool) && t.bits == 8) return DType::boolean;
  if (t.code == static_cast<std::uint8_t>(Code::Int) && t.bits == 32) return DType::int32;
  if (t.code == static_cast<std::uint8_t>(Code::Int) && t.bits == 64) return DType::int64;
  if (t.code == static_cast<std::uint8_t>(Code::Float) && t.bits == 32) return DType::float32;
  if (t.code == static_cast<std::uint8_t>(Code::Float) && t.bits == 64) return DType::float64;
  return std::nullopt;
}

std::string describe_dtype(const nb::dlpack::dtype& t) {
  if (std::optional<DType> d = dtype_of(t)) return std::string(to_string(*d));
  const char* kinds[] = {"int", "uint", "float", "opaque", "bfloat", "complex", "bool"};
  return fmt::format("{}{}", t.code < 7 ? kinds[t.code] : "?", t.bits);
}

// What a call needs of an array argument. Read through the buffer protocol where the object
// has it (numpy arrays: the cheapest route, which also tells whether the memory is read-only),
// else through nanobind's ndarray (DLPack; __array_interface__ through numpy.asarray).
struct ArrayInfo {
  void* data = nullptr;
  std::size_t ndim = 0;
  std::int64_t shape[kMaxRank] = {}, strides[kMaxRank] = {};  // strides in elements
  std::optional<DType> dtype;
  std::string dtype_text;           // for messages when dtype is not one of fieldflow's
  std::optional<bool> read_only;    // unknown for DLPack objects
  bool host = true;
  int device_type = nb::device::cpu::value;
};

std::optional<DType> dtype_of_format(const char* format, Py_ssize_t itemsize) {
  if (format == nullptr) return std::nullopt;
  if (*format == '@' || *format == '=' || *format == '<') ++format;  // native order on a little-endian host
  if (format[0] == '\0' || format[1] != '\0') return std::nullopt;
  switch (format[0]) {
    case '?': return DType::boolean;
    case 'i': case 'l': case 'q':
      if (itemsize == 4) return DType::int32;
      if (itemsize == 8) return DType::int64;
      return std::nullopt;
    case 'f': return itemsize == 4 ? std::optional(DType::float32) : std::nullopt;
    case 'd': return itemsize == 8 ? std::optional(DType::float64) : std::nullopt;
    default: return std::nullopt;
  }
}

bool buffer_info(nb::handle obj, ArrayInfo& info) {
  if (!PyObject_CheckBuffer(obj.ptr())) return false;
  Py_buffer b;
  if (PyObject_GetBuffer(obj.ptr(), &b, PyBUF_RECORDS_RO) != 0) {
    PyErr_Clear();
    return false;
  }
  // The memory stays valid after the release: it belongs to obj, which the caller holds.
  struct Release {
    Py_buffer* b;
    ~Release() { PyBuffer_Release(b); }
  } release{&b};
  if (b.ndim > kMaxRank || b.itemsize <= 0) return false;
  info.data = b.buf;
  info.ndim = static_cast<std::size_t>(b.ndim);
  for (int d = 0; d < b.ndim; ++d) {
    info.shape[d] = b.shape[d];
    if (b.strides[d] % b.itemsize != 0) return false;  // not a whole number of elements: the slow path says so
    info.strides[d] = b.strides[d] / b.itemsize;
  }
  info.dtype = dtype_of_format(b.format, b.itemsize);
  if (!info.dtype) info.dtype_text = fmt::format("buffer format '{}' ({} bytes)", b.format ? b.format : "B", b.itemsize);
  info.read_only = b.readonly != 0;
  return true;
}

bool array_info(nb::handle obj, ArrayInfo& info, nb::object& holder) {
  if (buffer_info(obj, info)) return true;
  nb::ndarray<nb::ro> a;
  if (!array_of(obj, a, holder) || a.ndim() > kMaxRank) return false;
  info.data = const_cast<void*>(a.data());
  info.ndim = a.ndim();
  for (std::size_t d = 0; d < a.ndim(); ++d) {
    info.shape[d] = static_cast<std::int64_t>(a.shape(d));
    info.strides[d] = a.stride(d);
  }
  info.dtype = dtype_of(a.dtype());
  if (!info.dtype) info.dtype_text = describe_dtype(a.dtype());
  info.device_type = a.device_type();
  info.host = a.device_type() == nb::device::cpu::value;
  return true;
}

// Memory handed over as a workspace: a writable CPU array (buffer protocol, DLPack,
// __array_interface__) or a CUDA array exposing __cuda_array_interface__ (cupy). Its bytes are
// what the array covers; it must be contiguous, since the runtime uses [pointer, pointer + bytes).
Workspace workspace_from(nb::handle obj, const std::string& what) {
  if (obj.is_none()) return Workspace{};  // the runtime's checks name the null pointer
  if (nb::hasattr(obj, "__cuda_array_interface__")) {
    nb::dict cai = nb::borrow<nb::dict>(obj.attr("__cuda_array_interface__"));
    if (cai.contains("strides") && !cai["strides"].is_none())
      throw WorkspaceError(fmt::format("{}: a CUDA array with strides was given; it must be contiguous", what));
    std::size_t bytes = nb::cast<std::size_t>(nb::module_::import_("numpy").attr("dtype")(cai["typestr"]).attr("itemsize"));
    for (nb::handle n : nb::borrow<nb::tuple>(cai["shape"])) bytes *= nb::cast<std::size_t>(n);
    void* pointer = reinterpret_cast<void*>(nb::cast<std::uintptr_t>(nb::borrow<nb::tuple>(cai["data"])[0]));
    return Workspace{pointer, bytes, Device::cuda, {}};
  }
  nb::ndarray<> a;
  nb::object holder;
  if (!array_of(obj, a, holder))
    throw WorkspaceError(fmt::format("{}: expected a writable array (buffer protocol, __array_interface__, DLPack or "
                                     "__cuda_array_interface__), given an object of type {}", what, python_type_name(obj)));
  std::int64_t expected_stride = 1;
  for (int i = static_cast<int>(a.ndim()) - 1; i >= 0; --i) {
    if (a.shape(i) > 1 && a.stride(i) != expected_stride)
      throw WorkspaceError(fmt::format("{}: the array must be C-contiguous (its memory is used as one block)", what));
    expected_stride *= static_cast<std::int64_t>(a.shape(i));
  }
  const bool cuda = a.device_type() == nb::device::cuda::value;
  return Workspace{a.data(), a.nbytes(), cuda ? Device::cuda : Device::cpu, {}};
}

// The Python allocator as the C++ runtime's ExternalMemoryAllocator. `callable` is borrowed: the
// Python CompiledProgram owns it (and shows it to the garbage collector: an allocator referring
// back to its program is a collectable cycle) and outlives the C++ program. The array it returns
// is kept alive until the runtime runs the workspace's release action (the program is released,
// or asks again for a larger block).
ExternalMemoryAllocator python_allocator(PyObject* callable) {
  return [callable](const AllocationRequest& request) {
    nb::gil_scoped_acquire gil;
    // A Python exception reaches the caller unchanged (as nb::python_error through the runtime).
    nb::object block = nb::handle(callable)(request);
    Workspace ws = workspace_from(block, "the block returned by external_memory_allocator");
    auto keep = std::make_shared<GilObject>(std::move(block));
    ws.release = [keep] { keep->clear(); };
    return ws;
  };
}

template <class Enum>
Enum enum_or_name(nb::handle value, Enum (*parse)(std::string_view)) {
  if (nb::isinstance<nb::str>(value)) return parse(nb::cast<std::string>(value));
  return nb::cast<Enum>(value);
}

SizeMap to_sizes(nb::handle sizes, const nb::kwargs& more) {
  SizeMap out;
  if (!sizes.is_none())
    for (auto [k, v] : nb::borrow<nb::dict>(sizes)) out[nb::cast<std::string>(k)] = nb::cast<std::int64_t>(v);
  for (auto [k, v] : more) out[nb::cast<std::string>(k)] = nb::cast<std::int64_t>(v);
  return out;
}

// A program parameter as Python sees it: a tuple parameter "t" is one argument standing for the
// program's field parameters "t.0", "t.1", ...
struct Argument {
  std::string name;
  ir::ParamKind kind;
  std::vector<int> params;  // indices into Program::params
  bool tuple = false;
};

std::vector<Argument> arguments_of(const ir::Program& p) {
  std::vector<Argument> out;
  for (int i = 0; i < static_cast<int>(p.params.size()); ++i) {
    const ir::Param& prm = p.params[static_cast<std::size_t>(i)];
    const auto dot = prm.name.rfind('.');
    if (prm.kind == ir::ParamKind::field && dot != std::string::npos && !out.empty() && out.back().tuple &&
        out.back().name == prm.name.substr(0, dot)) {
      out.back().params.push_back(i);
      continue;
    }
    if (prm.kind == ir::ParamKind::field && dot != std::string::npos && prm.name.substr(dot + 1) == "0") {
      out.push_back({prm.name.substr(0, dot), prm.kind, {i}, true});
      continue;
    }
    out.push_back({prm.name, prm.kind, {i}, false});
  }
  return out;
}

class PyProgram {
 public:
  PyProgram(CompiledProgram program, nb::object allocator, std::map<Device, nb::object> workspaces)
      : allocator_(std::move(allocator)), workspaces_(std::move(workspaces)), program_(std::move(program)) {
    const ir::Program& p = program_->program();
    arguments_ = arguments_of(p);
    const std::size_t n = p.params.size();
    fields_.resize(n);
    tables_.resize(n);
    table_keys_.resize(n);
    scalars_.resize(n);
    output_.assign(n, false);
    for (const auto& s : p.stmts)
      for (const auto& o : s.outputs) output_[static_cast<std::size_t>(p.index_of(o))] = true;
  }

  void call(const nb::args& args, const nb::kwargs& kwargs) {
    std::unique_lock<std::mutex> lock = locked();
    bind(args, kwargs);
    nb::gil_scoped_release release;
    program_->operator()(args_);
  }

  // The benchmark's baseline (python/bench/overhead.py): the arguments bound once, then `repeats`
  // calls made from C++ exactly as a C++ host makes them; the seconds of each call.
  std::vector<double> time_calls_from_cpp(int repeats, const nb::args& args, const nb::kwargs& kwargs) {
    std::unique_lock<std::mutex> lock = locked();
    bind(args, kwargs);
    std::vector<double> seconds;
    seconds.reserve(static_cast<std::size_t>(repeats));
    nb::gil_scoped_release release;
    for (int r = 0; r < repeats; ++r) {
      const auto start = std::chrono::steady_clock::now();
      program_->operator()(args_);
      seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    return seconds;
  }

  CompiledProgram& live() {
    if (!program_) throw ProgramError("this compiled program was released (release() was called)");
    return *program_;
  }

  // Destroys the C++ program now: its persistent memory is freed and the arrays an allocator
  // returned are dropped (the runtime runs their release actions).
  void release() {
    std::unique_lock<std::mutex> lock = locked();
    program_.reset();
    workspaces_.clear();
    allocator_ = nb::object();
  }

  // For the garbage collector (tp_traverse): the Python objects this program holds.
  int traverse(visitproc visit, void* arg) const {
    Py_VISIT(allocator_.ptr());
    for (const auto& [device, array] : workspaces_) Py_VISIT(array.ptr());
    return 0;
  }

  void set_external_workspace(Device device, nb::object array) {
    std::unique_lock<std::mutex> lock = locked();
    live().set_external_workspace(device, workspace_from(array, fmt::format("external_workspace[{}]", to_string(device))));
    workspaces_[device] = std::move(array);
  }

  std::vector<std::string> argument_names() const {
    std::vector<std::string> names;
    for (const auto& a : arguments_) names.push_back(a.name);
    return names;
  }

 private:
  std::unique_lock<std::mutex> locked() {
    std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
    if (!lock.owns_lock()) {
      // Another thread runs this program: wait without the GIL, which that thread needs to return.
      nb::gil_scoped_release release;
      lock.lock();
    }
    return lock;
  }

  // Every argument of one call bound to the views, tables and scalars args_ refers to.
  void bind(const nb::args& args, const nb::kwargs& kwargs) {
    const ir::Program& p = live().program();
    std::vector<nb::handle> given(arguments_.size());
    nb::handle offset_provider;
    gather(p, args, kwargs, given, offset_provider);

    // Arrays made from __array_interface__ objects: views of memory the argument objects own (the
    // caller holds those for the call), needed only while the views are made.
    std::vector<nb::object> holders;
    for (std::size_t a = 0; a < arguments_.size(); ++a) {
      const Argument& arg = arguments_[a];
      if (arg.kind == ir::ParamKind::scalar) bind_scalar(p, arg.params[0], given[a]);
      if (arg.kind != ir::ParamKind::field) continue;
      if (!arg.tuple) {
        bind_field(p, arg.params[0], given[a], holders);
        continue;
      }
      if (!nb::isinstance<nb::tuple>(given[a]) && !nb::isinstance<nb::list>(given[a]))
        throw ArgumentError(fmt::format("program '{}': '{}' is a tuple of {} fields, given {}", p.name, arg.name,
                                        arg.params.size(), python_type_name(given[a])));
      if (nb::len(given[a]) != arg.params.size())
        throw ArgumentError(fmt::format("program '{}': '{}' is a tuple of {} fields, given {} arrays", p.name,
                                        arg.name, arg.params.size(), nb::len(given[a])));
      for (std::size_t e = 0; e < arg.params.size(); ++e) bind_field(p, arg.params[e], given[a][e], holders);
    }
    // Tables last: a table's target size is read from the fields over that location.
    for (std::size_t a = 0; a < arguments_.size(); ++a)
      if (arguments_[a].kind == ir::ParamKind::connectivity) bind_table(p, arguments_[a].params[0], given[a], holders);
    if (!args_built_) build_arguments(p);
  }

  void gather(const ir::Program& p, const nb::args& args, const nb::kwargs& kwargs, std::vector<nb::handle>& given,
              nb::handle& offset_provider) {
    std::size_t next = 0;  // positional arguments fill the non-connectivity parameters in order
    for (nb::handle v : args) {
      while (next < arguments_.size() && arguments_[next].kind == ir::ParamKind::connectivity) ++next;
      if (next == arguments_.size())
        throw ArgumentError(fmt::format("program '{}' takes {} positional arguments ({}), given {}", p.name,
                                        positional_count(), fmt::join(argument_names(), ", "), args.size()));
      given[next++] = v;
    }
    for (auto [key, value] : kwargs) {
      const char* name = nb::cast<const char*>(key);
      if (std::strcmp(name, "offset_provider") == 0) {
        offset_provider = value;
        continue;
      }
      given[find_argument(p, name)] = set_once(p, given[find_argument(p, name)], value, name);
    }
    if (offset_provider.is_valid()) {
      for (auto [key, value] : nb::borrow<nb::dict>(offset_provider)) {
        const std::string name = nb::cast<std::string>(key);
        const std::size_t a = find_argument(p, name.c_str());
        if (arguments_[a].kind != ir::ParamKind::connectivity)
          throw ArgumentError(fmt::format("program '{}': offset_provider names '{}', which is not a connectivity",
                                          p.name, name));
        given[a] = set_once(p, given[a], value, name.c_str());
      }
    }
    std::vector<std::string> missing;
    for (std::size_t a = 0; a < arguments_.size(); ++a)
      if (!given[a].is_valid()) missing.push_back(arguments_[a].name);
    if (!missing.empty())
      throw ArgumentError(fmt::format("program '{}': missing arguments: {} (it takes {})", p.name,
                                      fmt::join(missing, ", "), fmt::join(argument_names(), ", ")));
  }

  std::size_t positional_count() const {
    std::size_t n = 0;
    for (const auto& a : arguments_) n += a.kind != ir::ParamKind::connectivity;
    return n;
  }

  std::size_t find_argument(const ir::Program& p, const char* name) const {
    for (std::size_t a = 0; a < arguments_.size(); ++a)
      if (arguments_[a].name == name) return a;
    throw ArgumentError(fmt::format("program '{}' has no parameter '{}'; its parameters are: {}", p.name, name,
                                    fmt::join(argument_names(), ", ")));
  }

  static nb::handle set_once(const ir::Program& p, nb::handle have, nb::handle value, const char* name) {
    if (have.is_valid())
      throw ArgumentError(fmt::format("program '{}': argument '{}' given twice", p.name, name));
    return value;
  }

  void bind_scalar(const ir::Program& p, int index, nb::handle value) {
    const ir::Param& prm = p.params[static_cast<std::size_t>(index)];
    const DType want = prm.type.dtype;
    Scalar v;
    // Python's numeric tower: an int is a valid real; the C++ binding converts integer widths.
    if (is_floating(want) && (PyFloat_Check(value.ptr()) || (PyLong_Check(value.ptr()) && !PyBool_Check(value.ptr())))) {
      const double d = PyFloat_Check(value.ptr()) ? PyFloat_AS_DOUBLE(value.ptr()) : nb::cast<double>(value);
      v = want == DType::float32 ? Scalar(static_cast<float>(d)) : Scalar(d);
    } else {
      try {
        v = to_scalar(value);  // Python and numpy numbers, 0-dimensional arrays
      } catch (const DTypeError& e) {
        throw ArgumentError(fmt::format("program '{}': scalar '{}' expects {}: {}", p.name, prm.name, to_string(want),
                                        e.what()));
      }
    }
    scalars_[static_cast<std::size_t>(index)] = v;
    if (args_built_) args_.set_scalar(static_cast<std::size_t>(index), v);
  }

  void bind_field(const ir::Program& p, int index, nb::handle obj, std::vector<nb::object>& holders) {
    const ir::Param& prm = p.params[static_cast<std::size_t>(index)];
    const std::size_t i = static_cast<std::size_t>(index);
    ArrayInfo a;
    nb::object holder;
    if (!array_info(obj, a, holder))
      throw ArgumentError(fmt::format("program '{}': field '{}' expects an array (buffer protocol, "
                                      "__array_interface__ or DLPack), given an object of type {}",
                                      p.name, prm.name, python_type_name(obj)));
    if (holder.is_valid()) holders.push_back(holder);
    if (output_[i]) {
      nb::ndarray<> writable;
      nb::object unused;
      if (a.read_only ? *a.read_only : !array_of(obj, writable, unused))
        throw ArgumentError(fmt::format("program '{}': field '{}' is written, given a read-only array", p.name, prm.name));
    }
    const bool host = program_->backend() == Backend::reference || program_->backend() == Backend::cpu;
    if (a.host != host)
      throw ArgumentError(fmt::format("program '{}': field '{}' expects {} memory (backend {}), given an array on "
                                      "DLPack device type {}", p.name, prm.name, host ? "host" : "device",
                                      to_string(program_->backend()), a.device_type));
    if (a.dtype != prm.type.dtype)
      throw DTypeError(fmt::format("program '{}': field '{}' is {}, given an array of {}", p.name, prm.name,
                                   to_string(prm.type.dtype), a.dtype ? std::string(to_string(*a.dtype)) : a.dtype_text));
    const std::size_t rank = prm.type.dims.size();
    if (a.ndim != rank) {
      std::vector<std::string> dims;
      for (const auto& d : prm.type.dims) dims.push_back(d.name);
      throw ArgumentError(fmt::format("program '{}': field '{}' has {} dimensions ({}), given an array of {}",
                                      p.name, prm.name, rank, fmt::join(dims, ", "), a.ndim));
    }
    const std::int64_t* shape = a.shape;
    const std::int64_t* strides = a.strides;
    std::int64_t origin[kMaxRank] = {};
    read_origin(p, prm, obj, rank, origin);
    std::optional<Field>& slot = fields_[i];
    void* data = a.data;
    // Field::view's messages (negative strides, misaligned data) name no parameter: add it.
    try {
      if (slot && same(slot->shape(), shape, rank) && same(slot->strides(), strides, rank) &&
          same(slot->origin(), origin, rank)) {
        if (slot->data() != data) slot->set_view_data(data);  // the same view over other memory: no allocation
        return;
      }
      slot = Field::view(data, prm.type.dims, prm.type.dtype, {shape, shape + rank}, {strides, strides + rank},
                         {origin, origin + rank}, a.host ? Device::cpu : Device::cuda);
    } catch (const ArgumentError& e) {
      throw ArgumentError(fmt::format("program '{}': field '{}': {}", p.name, prm.name, e.what()));
    }
  }

  // Arrays made by fieldflow.as_field / zeros / empty with an origin carry it (a halo starting
  // below 0); other arrays start at index 0 in every dimension.
  static void read_origin(const ir::Program& p, const ir::Param& prm, nb::handle obj, std::size_t rank,
                          std::int64_t* origin) {
    // Plain numpy arrays (the common case) are recognised by their exact type, without a lookup.
    static PyObject* const numpy_ndarray = nb::object(nb::module_::import_("numpy").attr("ndarray")).release().ptr();
    if (Py_IS_TYPE(obj.ptr(), reinterpret_cast<PyTypeObject*>(numpy_ndarray)) || !nb::hasattr(obj, "__fieldflow_origin__"))
      return;
    nb::object o = obj.attr("__fieldflow_origin__");
    if (o.is_none()) return;
    if (nb::len(o) != rank)
      throw ArgumentError(fmt::format("program '{}': field '{}' has {} dimensions, given an origin of {}", p.name,
                                      prm.name, rank, nb::len(o)));
    for (std::size_t d = 0; d < rank; ++d) origin[d] = nb::cast<std::int64_t>(o[d]);
  }

  static bool same(const std::vector<std::int64_t>& have, const std::int64_t* given, std::size_t n) {
    return have.size() == n && std::equal(have.begin(), have.end(), given);
  }

  // The number of elements of a location (a table's target), from the fields of this call over
  // it, else from a table whose source it is.
  std::optional<std::int64_t> location_size(const ir::Program& p, const Dimension& location) const {
    std::optional<std::int64_t> size;
    for (std::size_t i = 0; i < p.params.size(); ++i) {
      if (!fields_[i]) continue;
      const int axis = fields_[i]->axis_of(location);
      if (axis < 0) continue;
      const std::int64_t end = fields_[i]->origin()[static_cast<std::size_t>(axis)] + fields_[i]->shape()[static_cast<std::size_t>(axis)];
      size = std::max(size.value_or(0), end);
    }
    if (size) return size;
    for (std::size_t i = 0; i < p.params.size(); ++i)
      if (p.params[i].kind == ir::ParamKind::connectivity && p.params[i].conn.source == location && tables_[i])
        return tables_[i]->n_source;
    return std::nullopt;
  }

  void bind_table(const ir::Program& p, int index, nb::handle given, std::vector<nb::object>& holders) {
    const ir::Param& prm = p.params[static_cast<std::size_t>(index)];
    const std::size_t i = static_cast<std::size_t>(index);
    // (table, n_target) names the target location's size where no field of the call tells it.
    nb::handle obj = given;
    std::optional<std::int64_t> n_target;
    if (nb::isinstance<nb::tuple>(given) && nb::len(given) == 2) {
      obj = given[0];
      n_target = nb::cast<std::int64_t>(given[1]);
    }
    ArrayInfo a;
    nb::object holder;
    const bool is_array = array_info(obj, a, holder);
    if (!is_array || a.ndim != 2 || a.dtype != DType::int32)
      throw ConnectivityError(fmt::format(
          "program '{}': connectivity '{}' expects a 2-D int32 array [{}][{}], given {}", p.name, prm.name,
          prm.conn.source.name, prm.conn.max_neighbors,
          is_array ? fmt::format("a {}-D array of {}", a.ndim, a.dtype ? std::string(to_string(*a.dtype)) : a.dtype_text)
                   : "an object of type " + python_type_name(obj)));
    // The runtime reads a table's entries on the host (its checks, and the copy a cuda program
    // makes for the device), whatever the backend: device memory here would fault the process.
    // Pinned and managed memory are host-readable.
    if (!a.host && a.device_type != nb::device::cuda_host::value && a.device_type != nb::device::cuda_managed::value)
      throw ConnectivityError(fmt::format(
          "program '{}': connectivity '{}' must be in host memory (its entries are read and checked on the host, "
          "and copied to the device by a cuda program), given an array on DLPack device type {}; pass a numpy "
          "array (cupy.asnumpy(t), t.cpu().numpy())", p.name, prm.name, a.device_type));
    if (holder.is_valid()) holders.push_back(holder);
    if (!n_target) n_target = location_size(p, prm.conn.target);
    if (!n_target)
      throw ConnectivityError(fmt::format(
          "program '{}': the size of '{}' (the targets of connectivity '{}') is not known from the call's fields; "
          "pass {}=(table, number_of_{})", p.name, prm.conn.target.name, prm.name, prm.name, prm.conn.target.name));
    const TableKey key{a.data, a.shape[0], *n_target, a.shape[1], a.strides[0], a.strides[1]};
    // The same table again: nothing to do, and its entries are not scanned again (see docs/host.md).
    if (tables_[i] && table_keys_[i] == key) return;
    tables_[i] = NeighborTable::view(prm.conn.name, prm.conn.source.name, prm.conn.target.name, key.n_source,
                                     key.n_target, static_cast<int>(key.width), static_cast<const std::int32_t*>(key.data),
                                     key.source_stride, key.neighbor_stride);
    table_keys_[i] = key;
  }

  // Built once, after the first call that bound every parameter; entry i is parameter i, and it
  // borrows fields_[i] / tables_[i], whose addresses never change.
  void build_arguments(const ir::Program& p) {
    Arguments args;
    for (std::size_t i = 0; i < p.params.size(); ++i) {
      switch (p.params[i].kind) {
        case ir::ParamKind::field: args.field(p.params[i].name, *fields_[i]); break;
        case ir::ParamKind::scalar: args.scalar(p.params[i].name, *scalars_[i]); break;
        case ir::ParamKind::connectivity: args.connectivity(p.params[i].name, *tables_[i]); break;
      }
    }
    args_ = std::move(args);
    args_built_ = true;
  }

  struct TableKey {
    const void* data = nullptr;
    std::int64_t n_source = 0, n_target = 0, width = 0, source_stride = 0, neighbor_stride = 0;
    bool operator==(const TableKey&) const = default;
  };

  std::mutex mutex_;  // one call at a time per instance; also guards the views below
  // The allocator and the caller-owned workspaces (external_workspace), alive as long as the
  // program may use them: declared before program_, so destroyed after it.
  nb::object allocator_;
  std::map<Device, nb::object> workspaces_;
  std::optional<CompiledProgram> program_;
  std::vector<Argument> arguments_;
  std::vector<std::optional<Field>> fields_;
  std::vector<std::optional<NeighborTable>> tables_;
  std::vector<TableKey> table_keys_;
  std::vector<std::optional<Scalar>> scalars_;
  std::vector<bool> output_;
  Arguments args_;
  bool args_built_ = false;
};

PyProgram* compile_program(const ir::Program& program, nb::handle backend, nb::handle layout, nb::handle mode,
                           nb::handle allocator, nb::handle workspace, int num_threads, std::int64_t parallel_threshold,
                           const std::string& cache_dir, nb::handle static_scalars, nb::handle loop_form) {
  CompileOptions options;
  options.backend = enum_or_name<Backend>(backend, &parse_backend);
  if (!layout.is_none()) options.layout = enum_or_name<Layout>(layout, &parse_layout);  // None: the backend's
  if (!mode.is_none()) options.memory.mode = enum_or_name<TransientMemoryMode>(mode, &parse_transient_memory_mode);
  if (!allocator.is_none()) {
    if (!PyCallable_Check(allocator.ptr()))
      throw OptionError(fmt::format("external_memory_allocator must be callable, given an object of type {}",
                                    python_type_name(allocator)));
    options.memory.external_memory_allocator = python_allocator(allocator.ptr());
  }
  std::map<Device, nb::object> workspaces;
  if (!workspace.is_none()) {
    if (!nb::isinstance<nb::dict>(workspace))
      throw OptionError(fmt::format("external_workspace must be a dict {{Device: array}}, given an object of type {}",
                                    python_type_name(workspace)));
    for (auto [key, value] : nb::borrow<nb::dict>(workspace)) {
      const Device d = enum_or_name<Device>(key, &parse_device);
      options.memory.external_workspace[d] =
          workspace_from(value, fmt::format("external_workspace[{}]", to_string(d)));
      workspaces[d] = nb::borrow(value);
    }
  }
  options.num_threads = num_threads;
  options.parallel_threshold = parallel_threshold;
  options.cache_dir = cache_dir;
  options.loop_form = enum_or_name<LoopForm>(loop_form, &parse_loop_form);
  if (!static_scalars.is_none())
    for (auto [k, v] : nb::borrow<nb::dict>(static_scalars)) options.static_scalars[nb::cast<std::string>(k)] = to_scalar(v);
  std::optional<CompiledProgram> compiled;
  {
    nb::gil_scoped_release release;  // g++ may take seconds; other Python threads go on meanwhile
    compiled.emplace(compile(program, options));
  }
  return new PyProgram(std::move(*compiled), allocator.is_none() ? nb::object() : nb::borrow(allocator),
                       std::move(workspaces));
}

template <class T>
nb::ndarray<nb::numpy, T> to_numpy(const std::vector<T>& values, std::vector<std::size_t> shape) {
  auto* copy = new std::vector<T>(values);
  nb::capsule owner(copy, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return nb::ndarray<nb::numpy, T>(copy->data(), shape.size(), shape.data(), owner);
}

nb::dict mesh_to_python(const Mesh& mesh) {
  nb::dict tables;
  for (const auto& [name, t] : mesh.tables)
    tables[name.c_str()] = to_numpy(t.data, {static_cast<std::size_t>(t.n_source), static_cast<std::size_t>(t.max_neighbors)});
  nb::dict out;
  out["name"] = mesh.name;
  out["n_vertices"] = mesh.n_vertices;
  out["n_edges"] = mesh.n_edges;
  out["n_cells"] = mesh.n_cells;
  out["tables"] = tables;
  out["edge_length"] = to_numpy(mesh.edge_length, {mesh.edge_length.size()});
  out["dual_area"] = to_numpy(mesh.dual_area, {mesh.dual_area.size()});
  out["cell_area"] = to_numpy(mesh.cell_area, {mesh.cell_area.size()});
  out["edge_orientation_v2e"] = to_numpy(mesh.edge_orientation_v2e, {static_cast<std::size_t>(mesh.n_vertices), 6});
  return out;
}

int program_traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));
  if (!nb::inst_ready(self)) return 0;
  return nb::inst_ptr<PyProgram>(self)->traverse(visit, arg);
}

int program_clear(PyObject* self) {
  if (nb::inst_ready(self)) nb::inst_ptr<PyProgram>(self)->release();
  return 0;
}

PyType_Slot program_slots[] = {{Py_tp_traverse, reinterpret_cast<void*>(program_traverse)},
                               {Py_tp_clear, reinterpret_cast<void*>(program_clear)},
                               {0, nullptr}};

}  // namespace

void bind_runtime(nb::module_& m) {
  nb::enum_<Backend> backend(m, "Backend");
  backend.value("reference", Backend::reference).value("cpu", Backend::cpu);
  // A backend this build of the library knows beyond these (cuda, when built for it).
  try {
    const Backend cuda = parse_backend("cuda");
    backend.value("cuda", cuda);
  } catch (const Error&) {
  }
  nb::enum_<Layout>(m, "Layout")
      .value("vertical_fastest", Layout::vertical_fastest)
      .value("horizontal_fastest", Layout::horizontal_fastest)
      .value("any", Layout::any);
  nb::enum_<LoopForm>(m, "LoopForm")
      .value("tuned", LoopForm::tuned)
      .value("scalar", LoopForm::scalar)
      .value("vector", LoopForm::vector);
  nb::enum_<Device>(m, "Device").value("CPU", Device::cpu).value("CUDA", Device::cuda);
  nb::enum_<TransientMemoryMode>(m, "TransientMemoryMode")
      .value("scoped", TransientMemoryMode::scoped)
      .value("persistent", TransientMemoryMode::persistent)
      .value("pool", TransientMemoryMode::pool)
      .value("external", TransientMemoryMode::external);

  nb::class_<AllocationRequest>(m, "AllocationRequest")
      .def_ro("bytes", &AllocationRequest::bytes)
      .def_ro("device", &AllocationRequest::device)
      .def_ro("alignment", &AllocationRequest::alignment)
      .def_ro("program", &AllocationRequest::program)
      .def("__repr__", [](const AllocationRequest& r) {
        return fmt::format("AllocationRequest(bytes={}, device={}, alignment={}, program='{}')", r.bytes,
                           to_string(r.device), r.alignment, r.program);
      });
  nb::class_<WorkspaceRequirement>(m, "WorkspaceRequirement")
      .def_ro("device", &WorkspaceRequirement::device)
      .def_ro("bytes", &WorkspaceRequirement::bytes)
      .def_ro("alignment", &WorkspaceRequirement::alignment)
      .def("__repr__", [](const WorkspaceRequirement& r) {
        return fmt::format("WorkspaceRequirement(device={}, bytes={}, alignment={})", to_string(r.device), r.bytes,
                           r.alignment);
      });
  nb::class_<PlannedTransient>(m, "PlannedTransient")
      .def_ro("name", &PlannedTransient::name)
      .def_ro("dtype", &PlannedTransient::dtype)
      .def_ro("device", &PlannedTransient::device)
      .def_ro("bytes", &PlannedTransient::bytes)
      .def_ro("first_kernel", &PlannedTransient::first_kernel)
      .def_ro("last_kernel", &PlannedTransient::last_kernel)
      .def_ro("offset", &PlannedTransient::offset)
      .def("__repr__", [](const PlannedTransient& t) {
        return fmt::format("PlannedTransient('{}', {} bytes at offset {}, kernels {}..{})", t.name, t.bytes, t.offset,
                           t.first_kernel, t.last_kernel);
      });
  nb::class_<MemoryPlan>(m, "MemoryPlan")
      .def_ro("transients", &MemoryPlan::transients)
      .def_ro("naive_sum_bytes", &MemoryPlan::naive_sum_bytes)
      .def_ro("packed_bytes", &MemoryPlan::packed_bytes)
      .def_ro("lower_bound_bytes", &MemoryPlan::lower_bound_bytes)
      .def("bytes_on", &MemoryPlan::bytes_on)
      .def("requirements", &MemoryPlan::requirements);
  nb::class_<MemoryStats>(m, "MemoryStats")
      .def_ro("calls", &MemoryStats::calls)
      .def_ro("allocator_calls", &MemoryStats::allocator_calls)
      .def_ro("workspace_installs", &MemoryStats::workspace_installs)
      .def_ro("system_allocations", &MemoryStats::system_allocations)
      .def_ro("system_frees", &MemoryStats::system_frees)
      .def_ro("pool_hits", &MemoryStats::pool_hits)
      .def_ro("pool_misses", &MemoryStats::pool_misses)
      .def_ro("stream_allocations", &MemoryStats::stream_allocations)
      .def_ro("stream_frees", &MemoryStats::stream_frees)
      .def_ro("release_actions", &MemoryStats::release_actions)
      .def_ro("bytes_installed", &MemoryStats::bytes_installed)
      .def_ro("last_call_system_allocations", &MemoryStats::last_call_system_allocations);
  m.def("max_requirements", &max_requirements, nb::arg("per_program"));
  m.def("trim_host_pool", &trim_host_pool);

  nb::class_<PyProgram>(m, "CompiledProgram", nb::type_slots(program_slots))
      .def("__call__", &PyProgram::call)
      .def("release", &PyProgram::release)
      .def("_time_calls_from_cpp", &PyProgram::time_calls_from_cpp, nb::arg("repeats"), nb::arg("args"), nb::arg("kwargs"))
      .def("set_external_workspace", &PyProgram::set_external_workspace, nb::arg("device"), nb::arg("array"))
      .def("workspace_requirements", [](PyProgram& p, nb::handle sizes, const nb::kwargs& kw) {
        return p.live().workspace_requirements(to_sizes(sizes, kw));
      }, nb::arg("sizes") = nb::none(), nb::arg("kwargs"))
      .def("memory_plan", [](PyProgram& p, nb::handle sizes, const nb::kwargs& kw) {
        return p.live().memory_plan(to_sizes(sizes, kw));
      }, nb::arg("sizes") = nb::none(), nb::arg("kwargs"))
      .def("prepare", [](PyProgram& p, nb::handle sizes, const nb::kwargs& kw) {
        SizeMap s = to_sizes(sizes, kw);
        nb::gil_scoped_release release;  // an allocator may be called: it takes the GIL itself
        p.live().prepare(s);
      }, nb::arg("sizes") = nb::none(), nb::arg("kwargs"))
      .def("memory_stats", [](PyProgram& p) { return p.live().memory_stats(); })
      .def_prop_ro("program", [](PyProgram& p) { return p.live().program(); })
      .def_prop_ro("argument_names", &PyProgram::argument_names)
      .def_prop_ro("backend", [](PyProgram& p) { return p.live().backend(); })
      .def_prop_ro("layout", [](PyProgram& p) { return p.live().layout(); })
      .def_prop_ro("memory_mode", [](PyProgram& p) { return p.live().memory_mode(); })
      .def_prop_ro("generated_source", [](PyProgram& p) { return p.live().generated_source(); })
      .def_prop_ro("schedule_text", [](PyProgram& p) { return p.live().schedule_text(); })
      .def_prop_ro("compile_seconds", [](PyProgram& p) { return p.live().compile_seconds(); })
      .def_prop_ro("cache_hit", [](PyProgram& p) { return p.live().cache_hit(); })
      // Setting pins a form, or (tuned) times both afresh, e.g. after the sizes changed.
      .def_prop_rw(
          "loop_form", [](PyProgram& p) { return p.live().loop_form(); },
          [](PyProgram& p, nb::handle form) {
            const LoopForm f = enum_or_name<LoopForm>(form, &parse_loop_form);
            CompiledProgram& program = p.live();
            nb::gil_scoped_release release;  // waits for a call in progress, whose allocator may need the GIL
            program.set_loop_form(f);
          });

  m.def("compile", &compile_program, nb::arg("program"), nb::kw_only(), nb::arg("backend") = "cpu",
        nb::arg("layout") = nb::none(), nb::arg("transient_memory_mode") = nb::none(),
        nb::arg("external_memory_allocator") = nb::none(), nb::arg("external_workspace") = nb::none(),
        nb::arg("num_threads") = 0, nb::arg("parallel_threshold") = 16384, nb::arg("cache_dir") = "",
        nb::arg("static_scalars") = nb::none(), nb::arg("loop_form") = "tuned", nb::rv_policy::take_ownership);

  m.def("torus_mesh", [](int nx, int ny) { return mesh_to_python(make_torus_mesh(nx, ny)); }, nb::arg("nx"), nb::arg("ny"));
  m.def("bounded_mesh", [](int nx, int ny) { return mesh_to_python(make_bounded_mesh(nx, ny)); }, nb::arg("nx"), nb::arg("ny"));
}

}  // namespace fieldflow::python
