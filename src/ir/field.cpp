// Host fields, scalars and call arguments.
#include "fieldflow/field.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <functional>

#include "fieldflow/abi.h"
#include "fieldflow/errors.h"
#include "ir/memory_overlap.h"

namespace fieldflow {

std::string_view to_string(DimKind k) {
  switch (k) {
    case DimKind::horizontal: return "horizontal";
    case DimKind::vertical: return "vertical";
    case DimKind::local: return "local";
  }
  return "?";
}

Dimension horizontal_dim(std::string name) { return {std::move(name), DimKind::horizontal}; }
Dimension vertical_dim(std::string name) { return {std::move(name), DimKind::vertical}; }

Connectivity make_connectivity(std::string name, Dimension source, Dimension target, int max_neighbors) {
  if (max_neighbors <= 0)
    throw DimensionError(fmt::format("connectivity '{}': expected max_neighbors > 0, given {}", name,
                                     max_neighbors));
  if (source.kind != DimKind::horizontal || target.kind != DimKind::horizontal)
    throw DimensionError(fmt::format(
        "connectivity '{}': expected horizontal source and target dimensions, given {} ({}) -> {} ({})",
        name, source.name, to_string(source.kind), target.name, to_string(target.kind)));
  Dimension local{name + "Dim", DimKind::local};
  return {std::move(name), std::move(source), std::move(target), std::move(local), max_neighbors};
}

std::string_view to_string(Layout l) {
  switch (l) {
    case Layout::vertical_fastest: return "vertical_fastest";
    case Layout::horizontal_fastest: return "horizontal_fastest";
    case Layout::any: return "any";
  }
  return "?";
}

Layout parse_layout(std::string_view name) {
  if (name == "vertical_fastest") return Layout::vertical_fastest;
  if (name == "horizontal_fastest") return Layout::horizontal_fastest;
  if (name == "any") return Layout::any;
  throw ArgumentError(fmt::format("unknown layout '{}': expected vertical_fastest, horizontal_fastest or any", name));
}

namespace {

// Rank of a dimension in the "slowest to fastest" order of a layout.
int layout_rank(const Dimension& d, int position, int ndims, Layout layout) {
  // Horizontal dims keep their declaration order; local dims come after them, vertical last.
  int group = d.kind == DimKind::horizontal ? 0 : d.kind == DimKind::local ? 1 : 2;
  int rank = group * (ndims + 1) + position;
  return layout == Layout::vertical_fastest ? rank : -rank;
}

}  // namespace

// Counts, spans and index ends of a field are int64 arithmetic everywhere (bindings, generated
// code, the reference): a shape whose element count, bytes or end does not fit 64 bits would wrap
// into a small number (an owned field of 2^40 x 2^40 elements would get 64 bytes), so it is
// refused here, where the shape is given.
void Field::check_shape_and_origin() {
  const int n = static_cast<int>(dims_.size());
  if (static_cast<int>(shape_.size()) != n)
    throw ArgumentError(fmt::format("field: expected {} extents (one per dimension), given {}", n, shape_.size()));
  if (origin_.empty()) origin_.assign(n, 0);
  if (static_cast<int>(origin_.size()) != n)
    throw ArgumentError(fmt::format("field: expected {} origin entries, given {}", n, origin_.size()));
  std::int64_t elements = 1, end = 0;
  bool counted = true;
  for (int a = 0; a < n; ++a) {
    if (shape_[a] < 0)
      throw ArgumentError(fmt::format("field: extent along {} must be >= 0, given {}", dims_[a].name, shape_[a]));
    for (int b = 0; b < a; ++b)
      if (dims_[a].name == dims_[b].name)
        throw DimensionError(fmt::format("field: dimension {} given twice", dims_[a].name));
    if (__builtin_add_overflow(origin_[a], shape_[a], &end))
      throw ArgumentError(fmt::format("field: along {} the origin {} plus the extent {} is past the 64-bit index range",
                                      dims_[a].name, origin_[a], shape_[a]));
    // Zero extents count as 1: an empty field's dense strides are the other extents' products.
    counted = counted && !__builtin_mul_overflow(elements, std::max<std::int64_t>(shape_[a], 1), &elements);
  }
  const auto all = [&] { return fmt::format("{}", fmt::join(shape_, " x ")); };
  if (!counted)
    throw ArgumentError(fmt::format("field: the shape {} holds more elements than a 64-bit count", all()));
  if (std::int64_t bytes = 0; __builtin_mul_overflow(elements, static_cast<std::int64_t>(size_of(dtype_)), &bytes))
    throw ArgumentError(fmt::format("field: the shape {} of {} spans {} elements, more bytes than a 64-bit count",
                                    all(), to_string(dtype_), elements));
}

namespace {

// Index (0, ..., 0) lies sum(origin * stride) elements before the first element: the offset that
// bindings and generated code add to every index. Refused where it does not fit 64 bits (an
// origin near the ends of the index range), like the shape's own limits.
void check_origin_offset(const std::vector<std::int64_t>& origin, const std::vector<std::int64_t>& strides) {
  std::int64_t offset = 0, term = 0;
  for (std::size_t a = 0; a < origin.size(); ++a)
    if (__builtin_mul_overflow(origin[a], strides[a], &term) || __builtin_sub_overflow(offset, term, &offset) ||
        offset == INT64_MIN)
      throw ArgumentError(fmt::format("field: the origin ({}) with strides ({}) puts index 0 more elements from the "
                                      "first than a 64-bit count", fmt::join(origin, ", "), fmt::join(strides, ", ")));
}

}  // namespace

Field::Field(std::vector<Dimension> dims, DType dtype, std::vector<std::int64_t> shape,
             std::vector<std::int64_t> origin, Layout layout)
    : dims_(std::move(dims)), dtype_(dtype), shape_(std::move(shape)), origin_(std::move(origin)),
      layout_(layout) {
  if (layout_ != Layout::vertical_fastest && layout_ != Layout::horizontal_fastest)
    throw ArgumentError(fmt::format("field: expected layout vertical_fastest or horizontal_fastest (a field's memory "
                                    "has one stride order; 'any' is for compiled programs), given {}",
                                    static_cast<unsigned>(layout_)));
  check_shape_and_origin();
  const int n = static_cast<int>(dims_.size());
  // Strides: order axes from fastest to slowest per the layout.
  std::vector<int> order(n);
  for (int a = 0; a < n; ++a) order[a] = a;
  std::sort(order.begin(), order.end(), [&](int x, int y) {
    return layout_rank(dims_[x], x, n, layout_) > layout_rank(dims_[y], y, n, layout_);
  });
  strides_.assign(n, 0);
  std::int64_t stride = 1;
  for (int a : order) {
    strides_[a] = stride;
    stride *= shape_[a];
  }
  size_ = stride;
  check_origin_offset(origin_, strides_);
  // 64-byte alignment keeps vector loads aligned (misalignment alone costs ~1.45x on hdiff).
  const std::size_t alloc = std::max<std::size_t>(64, (bytes() + 63) / 64 * 64);
  auto* p = static_cast<std::byte*>(std::aligned_alloc(64, alloc));
  if (!p) throw AllocationError(fmt::format("cannot allocate {} bytes on cpu for field {}", alloc, describe()));
  std::memset(p, 0, alloc);
  data_ = std::shared_ptr<std::byte>(p, [](std::byte* q) { std::free(q); });
}

Field Field::view(void* data, std::vector<Dimension> dims, DType dtype, std::vector<std::int64_t> shape,
                  std::vector<std::int64_t> strides, std::vector<std::int64_t> origin, Device device) {
  if (device != Device::cpu && device != Device::cuda)
    throw ArgumentError(fmt::format("field view: device must be Device::cpu or Device::cuda, given value {}",
                                    static_cast<int>(device)));
  Field f;
  f.device_ = device;
  f.dims_ = std::move(dims);
  f.dtype_ = dtype;
  f.shape_ = std::move(shape);
  f.origin_ = std::move(origin);
  f.view_ = true;
  f.check_shape_and_origin();
  const std::size_t n = f.dims_.size();
  if (strides.size() != n)
    throw ArgumentError(fmt::format("field view: expected {} strides (one per dimension), given {}", n, strides.size()));
  for (std::size_t a = 0; a < n; ++a)
    if (strides[a] < 0)
      throw ArgumentError(fmt::format("field view: stride along {} must be >= 0 elements, given {}", f.dims_[a].name,
                                      strides[a]));
  f.strides_ = std::move(strides);
  f.size_ = 1;
  for (std::int64_t e : f.shape_) f.size_ *= e;  // fits: check_shape_and_origin
  // The span, from the first element to the end of the last, in bytes (span_bytes()).
  if (!ir::checked_span_bytes(f.shape_, f.strides_, size_of(f.dtype_)))
    throw ArgumentError(fmt::format("field view: the span of shape {} with strides {} (from the first element to the "
                                    "last) is more bytes than a 64-bit count", fmt::join(f.shape_, " x "),
                                    fmt::join(f.strides_, ", ")));
  check_origin_offset(f.origin_, f.strides_);
  // The layout a dense field with these strides would have: vertical_fastest unless a horizontal
  // dimension is the unit-stride one (informational; compiled programs check strides themselves).
  f.layout_ = Layout::vertical_fastest;
  for (std::size_t a = 0; a < n; ++a)
    if (f.dims_[a].kind == DimKind::horizontal && f.strides_[a] == 1 && f.shape_[a] > 1)
      f.layout_ = Layout::horizontal_fastest;
  f.set_view_data(data);
  return f;
}

void Field::check_view_data(void* data) const {
  if (!data && size_ > 0)
    throw ArgumentError(fmt::format("field view {}: data is null but the shape holds {} elements", describe(), size_));
  if (reinterpret_cast<std::uintptr_t>(data) % size_of(dtype_) != 0)
    throw ArgumentError(fmt::format("field view {}: data {} is misaligned for {}: expected a multiple of {} bytes",
                                    describe(), data, to_string(dtype_), size_of(dtype_)));
}

void Field::set_view_data(void* data) {
  if (!view_)
    throw ArgumentError(fmt::format("field {}: set_view_data needs a view (Field::view), this field owns its memory",
                                    describe()));
  check_view_data(data);
  // Aliasing constructor with an empty owner: a non-owning pointer, no control block allocated.
  data_ = std::shared_ptr<std::byte>(std::shared_ptr<std::byte>(), static_cast<std::byte*>(data));
}

std::size_t Field::span_bytes() const {
  return static_cast<std::size_t>(*ir::checked_span_bytes(shape_, strides_, size_of(dtype_)));  // fits: view()
}

bool Field::elements_distinct() const { return ir::internal_overlap(*this) == ir::Overlap::none; }

void Field::refuse_host_access(const char* access) const {
  throw ArgumentError(fmt::format("field {}: {} reads or writes elements on the host, but the field is a view "
                                  "over {} memory; copy it to a host field first", describe(), access,
                                  to_string(device_)));
}

Field Field::clone() const {
  check_host("clone");
  Field f(dims_, dtype_, shape_, origin_, layout_);
  if (!view_) {
    std::memcpy(f.data(), data(), bytes());
    return f;
  }
  for_each_index([&](const std::vector<std::int64_t>& index) {
    std::memcpy(static_cast<std::byte*>(f.data()) + f.offset_of(index) * size_of(dtype_),
                static_cast<const std::byte*>(data()) + offset_of(index) * size_of(dtype_), size_of(dtype_));
  });
  return f;
}

void Field::copy_values_from(const Field& other) {
  if (other.dims_ != dims_ || other.shape_ != shape_ || other.origin_ != origin_ || other.dtype_ != dtype_)
    throw ArgumentError(fmt::format("field {}: cannot copy values from {}, which has another box or dtype", describe(),
                                    other.describe()));
  check_host("copy_values_from");
  other.check_host("copy_values_from");
  if (!view_ && !other.view_ && strides_ == other.strides_) {
    std::memcpy(data(), other.data(), bytes());
    return;
  }
  for_each_index([&](const std::vector<std::int64_t>& index) {
    std::memcpy(static_cast<std::byte*>(data()) + offset_of(index) * size_of(dtype_),
                static_cast<const std::byte*>(other.data()) + other.offset_of(index) * size_of(dtype_),
                size_of(dtype_));
  });
}

void Field::for_each_index(const std::function<void(const std::vector<std::int64_t>&)>& visit) const {
  if (size_ == 0) return;
  std::vector<std::int64_t> index(origin_);
  while (true) {
    visit(index);
    std::size_t a = index.size();
    while (a > 0) {
      --a;
      if (++index[a] < origin_[a] + shape_[a]) break;
      index[a] = origin_[a];
      if (a == 0) return;
    }
    if (index.empty()) return;
  }
}

int Field::axis_of(const Dimension& d) const {
  for (int a = 0; a < static_cast<int>(dims_.size()); ++a)
    if (dims_[a] == d) return a;
  return -1;
}

std::int64_t Field::offset_of(std::initializer_list<std::int64_t> index) const {
  return offset_of(std::vector<std::int64_t>(index));
}

std::int64_t Field::offset_of(const std::vector<std::int64_t>& index) const {
  if (index.size() != dims_.size())
    throw ArgumentError(fmt::format("field {}: expected {} indices, given {}", describe(), dims_.size(), index.size()));
  std::int64_t off = 0;
  for (std::size_t a = 0; a < index.size(); ++a) {
    const std::int64_t rel = index[a] - origin_[a];
    if (rel < 0 || rel >= shape_[a])
      throw DomainError(fmt::format("field {}: index {} along {} is outside [{}, {})", describe(), index[a],
                                    dims_[a].name, origin_[a], origin_[a] + shape_[a]));
    off += rel * strides_[a];
  }
  return off;
}

void Field::check_type(DType requested) const {
  if (requested != dtype_)
    throw DTypeError(fmt::format("field {}: accessed as {}, but its dtype is {}", describe(), to_string(requested),
                                 to_string(dtype_)));
}

double Field::get_as_double(std::int64_t i) const {
  check_host("get_as_double");
  switch (dtype_) {
    case DType::boolean: return static_cast<const bool*>(data())[i];
    case DType::int32: return static_cast<const std::int32_t*>(data())[i];
    case DType::int64: return static_cast<double>(static_cast<const std::int64_t*>(data())[i]);
    case DType::float32: return static_cast<const float*>(data())[i];
    case DType::float64: return static_cast<const double*>(data())[i];
  }
  return 0;
}

void Field::set_from_double(std::int64_t i, double v) {
  check_host("set_from_double");
  switch (dtype_) {
    case DType::boolean: static_cast<bool*>(data())[i] = v != 0; break;
    case DType::int32: static_cast<std::int32_t*>(data())[i] = static_cast<std::int32_t>(v); break;
    case DType::int64: static_cast<std::int64_t*>(data())[i] = static_cast<std::int64_t>(v); break;
    case DType::float32: static_cast<float*>(data())[i] = static_cast<float>(v); break;
    case DType::float64: static_cast<double*>(data())[i] = v; break;
  }
}

void Field::fill(double v) {
  check_host("fill");
  if (!view_) {
    for (std::int64_t i = 0; i < size_; ++i) set_from_double(i, v);
    return;
  }
  for_each_index([&](const std::vector<std::int64_t>& index) { set_from_double(offset_of(index), v); });
}

std::string Field::describe() const {
  std::string s = fmt::format("{}[", to_string(dtype_));
  for (std::size_t a = 0; a < dims_.size(); ++a)
    s += fmt::format("{}{}={}..{}", a ? ", " : "", dims_[a].name, origin_[a], origin_[a] + shape_[a]);
  return s + (device_ == Device::cpu ? "]" : fmt::format("] on {}", to_string(device_)));
}

Scalar Scalar::cast(DType to) const {
  switch (to) {
    case DType::boolean: return Scalar(is_floating(dtype_) ? f_ != 0 : i_ != 0);
    case DType::int32:
      return Scalar(is_floating(dtype_) ? abi::ff_to_int<std::int32_t>(f_) : static_cast<std::int32_t>(i_));
    case DType::int64: return Scalar(is_floating(dtype_) ? abi::ff_to_int<std::int64_t>(f_) : i_);
    case DType::float32: return Scalar(is_floating(dtype_) ? static_cast<float>(f_) : static_cast<float>(i_));
    case DType::float64: return Scalar(is_floating(dtype_) ? f_ : static_cast<double>(i_));
  }
  return *this;
}

std::string Scalar::to_string() const {
  switch (dtype_) {
    case DType::boolean: return i_ ? "true" : "false";
    case DType::int32:
    case DType::int64: return fmt::format("{}", i_);
    case DType::float32: return fmt::format("{}f", static_cast<float>(f_));
    case DType::float64: return fmt::format("{}", f_);
  }
  return "?";
}

void Arguments::add(Entry e) {
  if (find(e.name))
    throw ArgumentError(fmt::format("argument '{}' given twice", e.name));
  entries_.push_back(std::move(e));
}

Arguments& Arguments::field(const std::string& name, Field& f) {
  add({Entry::Kind::field, name, &f, {}, nullptr});
  return *this;
}

Arguments& Arguments::scalar(const std::string& name, Scalar v) {
  add({Entry::Kind::scalar, name, nullptr, v, nullptr});
  return *this;
}

Arguments& Arguments::connectivity(const std::string& name, const NeighborTable& t) {
  add({Entry::Kind::connectivity, name, nullptr, {}, &t});
  return *this;
}

Arguments& Arguments::tuple(const std::string& name, const std::vector<Field*>& elements) {
  for (std::size_t i = 0; i < elements.size(); ++i)
    if (!elements[i]) throw ArgumentError(fmt::format("tuple argument '{}': element {} is null", name, i));
  for (std::size_t i = 0; i < elements.size(); ++i) field(fmt::format("{}.{}", name, i), *elements[i]);
  return *this;
}

void Arguments::set_scalar(std::size_t entry, Scalar v) {
  if (entry >= entries_.size() || entries_[entry].kind != Entry::Kind::scalar)
    throw ArgumentError(fmt::format("arguments: entry {} is not a scalar (there are {} entries)", entry,
                                    entries_.size()));
  entries_[entry].scalar = v;
}

const Arguments::Entry* Arguments::find(const std::string& name) const {
  for (const auto& e : entries_)
    if (e.name == name) return &e;
  return nullptr;
}

}  // namespace fieldflow
