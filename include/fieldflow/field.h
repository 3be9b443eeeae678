#pragma once
// Dimensions, connectivities, host fields, scalars and call arguments: what a host application
// creates and passes to a program. Light on purpose: generated code never includes this header.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "fieldflow/device.h"
#include "fieldflow/dtype.h"

namespace fieldflow {

struct NeighborTable;  // fieldflow/mesh.h

enum class DimKind : std::uint8_t { horizontal, vertical, local };
std::string_view to_string(DimKind k);

// A named axis. Equality is by name and kind: two Dimension objects called "K" are the same axis.
struct Dimension {
  std::string name;
  DimKind kind = DimKind::horizontal;
  friend bool operator==(const Dimension& a, const Dimension& b) {
    return a.name == b.name && a.kind == b.kind;
  }
};
Dimension horizontal_dim(std::string name);
Dimension vertical_dim(std::string name);

struct NeighborOffset;

// A neighbour relation: each `source` element has up to `max_neighbors` `target` elements,
// enumerated along the local dimension `local` (named "<name>Dim"). Tables are given per call.
struct Connectivity {
  std::string name;
  Dimension source, target, local;
  int max_neighbors = 0;
  NeighborOffset operator[](int i) const;  // E2V[0]: the first neighbour, as a shift
  friend bool operator==(const Connectivity& a, const Connectivity& b) {
    return a.name == b.name && a.source == b.source && a.target == b.target &&
           a.max_neighbors == b.max_neighbors;
  }
};
struct NeighborOffset {
  Connectivity conn;
  int index = 0;  // which neighbour; -1 = all of them (a local field)
};
inline NeighborOffset Connectivity::operator[](int i) const { return {*this, i}; }

Connectivity make_connectivity(std::string name, Dimension source, Dimension target, int max_neighbors);

// Which dimension is unit-stride. Part of a compiled variant and checked at call time.
//  vertical_fastest:   horizontal dims slowest (declaration order), then local, then vertical.
//  horizontal_fastest: vertical slowest, then local, then horizontal dims, the first one fastest.
//  any:                compiled programs only: every stride is read at run time, so fields of any
//                      stride order are accepted (slower: no unit-stride vector loads). A Field
//                      itself always has a concrete layout.
enum class Layout : std::uint8_t { vertical_fastest, horizontal_fastest, any };
std::string_view to_string(Layout l);
Layout parse_layout(std::string_view name);

// A host field: a box [origin, origin + shape) per dimension. Either owned (dense, 64-byte aligned,
// zero-initialised) or a view over the caller's memory (Field::view). Indices given to at() are
// absolute (origin included), in `dims` order.
class Field {
 public:
  Field(std::vector<Dimension> dims, DType dtype, std::vector<std::int64_t> shape,
        std::vector<std::int64_t> origin = {}, Layout layout = Layout::vertical_fastest);
  // A view over caller memory: no copy, no ownership; the caller keeps `data` alive while the view
  // is used. `strides` are in elements, one per dim in `dims` order, >= 0, in any order and with
  // any padding (C row-major, Fortran column-major, padded rows); a stride 0 repeats an input
  // along that dimension (outputs must not overlap themselves: checked per call). Throws
  // ArgumentError for null data with a non-empty shape, data misaligned for the dtype, negative
  // strides, or counts that do not match `dims`. bool fields are 1-byte host booleans.
  // `device` says where the memory is: Device::cuda for device memory (cudaMalloc, a cupy array,
  // CUDA Fortran `device` arrays), which a Backend::cuda program reads and writes in place with
  // no copy; host programs and the host accessors below refuse such a field (ArgumentError).
  static Field view(void* data, std::vector<Dimension> dims, DType dtype, std::vector<std::int64_t> shape,
                    std::vector<std::int64_t> strides, std::vector<std::int64_t> origin = {},
                    Device device = Device::cpu);
  bool is_view() const { return view_; }
  Device device() const { return device_; }
  // Views only: the same view over other memory (a model's next time level), allocating nothing.
  // Same checks as view(); throws ArgumentError for an owning field.
  void set_view_data(void* data);
  Field(Field&&) noexcept = default;
  Field& operator=(Field&&) noexcept = default;
  Field(const Field&) = delete;
  Field& operator=(const Field&) = delete;
  Field clone() const;

  const std::vector<Dimension>& dims() const { return dims_; }
  DType dtype() const { return dtype_; }
  const std::vector<std::int64_t>& shape() const { return shape_; }
  const std::vector<std::int64_t>& origin() const { return origin_; }
  const std::vector<std::int64_t>& strides() const { return strides_; }  // in elements
  Layout layout() const { return layout_; }
  std::int64_t size() const { return size_; }  // number of elements
  std::size_t bytes() const { return static_cast<std::size_t>(size_) * size_of(dtype_); }
  // Bytes from data() to the end of the last element: bytes() for a dense field, more for a view
  // with padding, less with stride-0 dimensions. 0 for an empty field.
  std::size_t span_bytes() const;
  // True if no two indices of the box share an element (what an output needs). Exact, but false
  // also where strides of no regular structure make the bounded search give up; no allocation for
  // fields of at most FF_MAX_DIMS dimensions.
  bool elements_distinct() const;
  void* data() { return data_.get(); }
  const void* data() const { return data_.get(); }
  int axis_of(const Dimension& d) const;  // -1 if absent

  // Linear element offset of an absolute index; throws DomainError when outside the box.
  std::int64_t offset_of(std::initializer_list<std::int64_t> index) const;
  std::int64_t offset_of(const std::vector<std::int64_t>& index) const;
  // Element access on the host: throw ArgumentError for a field in device memory.
  template <class T> T& at(std::initializer_list<std::int64_t> index) {
    check_type(dtype_of_v<T>);
    check_host("at");
    return static_cast<T*>(data())[offset_of(index)];
  }
  template <class T> const T& at(std::initializer_list<std::int64_t> index) const {
    check_type(dtype_of_v<T>);
    check_host("at");
    return static_cast<const T*>(data())[offset_of(index)];
  }
  template <class T> T* data_as() { check_type(dtype_of_v<T>); return static_cast<T*>(data()); }
  template <class T> const T* data_as() const { check_type(dtype_of_v<T>); return static_cast<const T*>(data()); }

  // Element as double / set from double (any dtype), by element offset from data() (offset_of).
  double get_as_double(std::int64_t linear) const;
  void set_from_double(std::int64_t linear, double v);
  void fill(double v);  // every element of the box (a view's padding is left alone)
  // Element-wise copy from a field with the same dims, dtype and box (any strides, views too).
  void copy_values_from(const Field& other);
  // Calls visit with every absolute index of the box, the last dimension fastest.
  void for_each_index(const std::function<void(const std::vector<std::int64_t>&)>& visit) const;
  std::string describe() const;  // e.g. "float64[I=0..10, J=0..10, K=0..5]", "... on cuda" for device memory

 private:
  Field() = default;
  void check_type(DType requested) const;
  void check_host(const char* access) const {
    if (device_ != Device::cpu) refuse_host_access(access);
  }
  [[noreturn]] void refuse_host_access(const char* access) const;
  void check_shape_and_origin();
  void check_view_data(void* data) const;
  std::vector<Dimension> dims_;
  DType dtype_ = DType::float64;
  std::vector<std::int64_t> shape_, origin_, strides_;
  Layout layout_ = Layout::vertical_fastest;
  std::int64_t size_ = 0;
  bool view_ = false;
  Device device_ = Device::cpu;  // only a view can be elsewhere
  std::shared_ptr<std::byte> data_;  // a view holds no owner (aliasing constructor: no allocation)
};

// A typed scalar value (scalar program parameters, literals, scan init values).
class Scalar {
 public:
  Scalar() = default;
  Scalar(bool v) : dtype_(DType::boolean), i_(v) {}
  Scalar(std::int32_t v) : dtype_(DType::int32), i_(v) {}
  Scalar(std::int64_t v) : dtype_(DType::int64), i_(v) {}
  Scalar(float v) : dtype_(DType::float32), f_(v) {}
  Scalar(double v) : dtype_(DType::float64), f_(v) {}
  DType dtype() const { return dtype_; }
  double as_double() const { return is_floating(dtype_) ? f_ : static_cast<double>(i_); }
  std::int64_t as_int() const { return is_floating(dtype_) ? static_cast<std::int64_t>(f_) : i_; }
  Scalar cast(DType to) const;
  std::string to_string() const;
  friend bool operator==(const Scalar& a, const Scalar& b) {
    return a.dtype_ == b.dtype_ && a.i_ == b.i_ && a.f_ == b.f_;
  }

 private:
  DType dtype_ = DType::float64;
  std::int64_t i_ = 0;
  double f_ = 0;
};

// Arguments of one call, by parameter name. Fields are borrowed (the caller keeps them alive);
// inputs are read and outputs written in place. Naming an argument twice throws ArgumentError.
class Arguments {
 public:
  struct Entry {
    enum class Kind : std::uint8_t { field, scalar, connectivity } kind;
    std::string name;
    Field* field = nullptr;
    Scalar scalar;
    const NeighborTable* table = nullptr;
  };
  Arguments& field(const std::string& name, Field& f);
  Arguments& scalar(const std::string& name, Scalar v);
  Arguments& connectivity(const std::string& name, const NeighborTable& t);
  // A tuple parameter (ProgramBuilder::tuple_field): one field per element, in order; the
  // elements are the parameters "name.0", "name.1", ...
  Arguments& tuple(const std::string& name, const std::vector<Field*>& elements);
  const std::vector<Entry>& entries() const { return entries_; }
  // A new value for the scalar entries()[entry], in place: a host that keeps one Arguments across
  // the calls of its time loop changes a scalar without rebuilding it (which would allocate).
  // Throws ArgumentError if there is no such entry or it is not a scalar.
  void set_scalar(std::size_t entry, Scalar v);
  const Entry* find(const std::string& name) const;

 private:
  void add(Entry e);
  std::vector<Entry> entries_;
};

}  // namespace fieldflow
