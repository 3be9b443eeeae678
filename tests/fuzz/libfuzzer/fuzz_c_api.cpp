// libFuzzer target: the C API (include/fieldflow/fieldflow.h) driven as a C or Fortran host drives it.
//
// Each input creates a handle of one built-in program with ff_program_create (pool, or external
// without an allocator, which needs a caller workspace; vertical_fastest or any layout), then
// plays up to 40 operations read from the input on it:
//  - fields set by name or by index, valid or with a mutated dtype or rank code, NULL shape or
//    strides, NULL or misaligned data, a shape, stride or origin entry replaced by an extreme
//    value, another argument's memory, a padded or permuted layout, an unknown name or index;
//  - neighbour tables the same way (widths, lengths, strides, entries out of range, NULL data);
//  - scalars through set_int / set_real / set_bool with values that do and do not fit;
//  - workspace queries and installs (exact, too small, misaligned, NULL, another device);
//  - parameter queries with any index and axis, and calls on NULL and destroyed handles;
//  - runs.
// Every call must return FF_OK or a defined error status with a message, never
// FF_ERROR_INTERNAL or FF_ERROR_UNKNOWN. The harness keeps what the handle accepted, and each run
// must agree with the reference executor over views of the same arguments on a copy of the
// memory: both accept and every byte of every buffer ends equal (a NaN equals any NaN), or both
// reject and the run changed no byte. A failing workspace (external mode) and a stricter layout
// may reject what the reference accepts, again changing nothing. No byte around any buffer the
// handle was given changes; ASan, UBSan and LSan watch the rest.
//
// Geometry the handle could accept (non-negative shapes and strides whose span is computable)
// always gets a buffer that holds its whole span: the C API cannot know how large a caller's
// array is, so a view past the end of one is the caller's fault, not something to refuse.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fuzzer/FuzzedDataProvider.h>

#include "fieldflow/errors.h"
#include "fieldflow/examples.h"
#include "fieldflow/fieldflow.h"
#include "fieldflow/reference.h"
#include "fuzz/libfuzzer/fuzz_support.h"

namespace ff = fieldflow;

namespace {

constexpr std::size_t kGuardBytes = 64;
constexpr unsigned char kGuard = 0xA5;
constexpr std::size_t kMaxBufferBytes = std::size_t(1) << 20;  // geometry needing more is not set
constexpr int kArrayEntries = 16;                               // shape/strides/origin arrays (rank up to 16)

const char* const kPrograms[] = {"lap_of_lap", "vadv", "fvm_nabla", "nabla4", "c2e2co_sum"};

[[noreturn]] void fail(const std::string& message) {
  std::fprintf(stderr, "fuzz_c_api: %s\n", message.c_str());
  std::abort();
}

// Caller memory: buffers with guard bytes on both sides, alive until the input ends (the handle
// keeps pointers into them).
struct Buffer {
  std::unique_ptr<unsigned char[]> bytes;
  std::size_t size = 0;  // between the guards
  unsigned char* data() const { return bytes.get() + kGuardBytes; }
  bool holds(const void* p) const {
    const auto* c = static_cast<const unsigned char*>(p);
    return c >= data() && c <= data() + size;
  }
  bool guards_intact() const {
    for (std::size_t i = 0; i < kGuardBytes; ++i)
      if (bytes[i] != kGuard || bytes[kGuardBytes + size + i] != kGuard) return false;
    return true;
  }
};

class Arena {
 public:
  Buffer& make(std::size_t size) {
    auto b = std::make_unique<Buffer>();
    b->size = size;
    b->bytes.reset(new unsigned char[size + 2 * kGuardBytes]);  // aligned for every dtype: kGuardBytes is 64
    std::memset(b->bytes.get(), kGuard, size + 2 * kGuardBytes);
    std::memset(b->data(), 0, size);
    buffers_.push_back(std::move(b));
    return *buffers_.back();
  }
  const std::vector<std::unique_ptr<Buffer>>& buffers() const { return buffers_; }
  // The buffer holding p (the handle is only ever given pointers into the arena, or NULL).
  const Buffer* find(const void* p) const {
    for (const auto& b : buffers_)
      if (b->holds(p)) return b.get();
    return nullptr;
  }
  std::vector<std::vector<unsigned char>> snapshot() const {
    std::vector<std::vector<unsigned char>> out;
    for (const auto& b : buffers_) out.emplace_back(b->data(), b->data() + b->size);
    return out;
  }

 private:
  std::vector<std::unique_ptr<Buffer>> buffers_;
};

// What the handle accepted for one parameter.
struct FieldSet {
  int dtype = 0;
  void* data = nullptr;
  std::vector<std::int64_t> shape, strides, origin;
};
struct TableSet {
  const std::int32_t* data = nullptr;
  std::int64_t n_source = 0, n_target = 0;
  int width = 0;
  std::int64_t source_stride = 0, neighbor_stride = 0;
};
struct Model {
  std::map<int, FieldSet> fields;
  std::map<int, TableSet> tables;
  std::map<int, ff::Scalar> scalars;
};

int dtype_code(ff::DType d) {
  switch (d) {
    case ff::DType::boolean: return FF_DTYPE_BOOL;
    case ff::DType::int32: return FF_DTYPE_INT32;
    case ff::DType::int64: return FF_DTYPE_INT64;
    case ff::DType::float32: return FF_DTYPE_FLOAT32;
    case ff::DType::float64: return FF_DTYPE_FLOAT64;
  }
  return -1;
}

// The span in elements of a geometry the handle may accept (shape and strides >= 0), or nullopt
// when it cannot be computed in 64 bits (such a view must be refused, and is given a small buffer).
std::optional<std::int64_t> span_elements(const std::vector<std::int64_t>& shape, const std::vector<std::int64_t>& strides) {
  std::int64_t last = 0;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 0 || strides[d] < 0) return std::nullopt;
    if (shape[d] == 0) return 0;
  }
  for (std::size_t d = 0; d < shape.size(); ++d) {
    std::int64_t step = 0;
    if (__builtin_mul_overflow(shape[d] - 1, strides[d], &step) || __builtin_add_overflow(last, step, &last))
      return std::nullopt;
  }
  std::int64_t count = 0;
  if (__builtin_add_overflow(last, 1, &count)) return std::nullopt;  // the last element 2^63 - 1 past the first
  return count;
}

std::int64_t extreme(FuzzedDataProvider& in) {
  static constexpr std::int64_t values[] = {-1, 0, 1, 2, std::numeric_limits<std::int64_t>::max(),
                                            std::numeric_limits<std::int64_t>::min(), std::int64_t(1) << 40,
                                            std::int64_t(1) << 62, -(std::int64_t(1) << 40), 3};
  return in.ConsumeBool() ? in.PickValueInArray(values) : in.ConsumeIntegralInRange<std::int64_t>(-4, 40);
}

class Session {
 public:
  Session(FuzzedDataProvider& in, const ff::examples::Example& ex, ff_program* h, bool strict_layout, bool external)
      : in_(in), p_(ex.program), h_(h), strict_layout_(strict_layout), external_(external) {
    ff::examples::ExampleSize sizes;
    sizes.nx = in_.ConsumeIntegralInRange(3, 6);
    sizes.ny = in_.ConsumeIntegralInRange(3, 5);
    sizes.nk = in_.ConsumeIntegralInRange(1, 4);
    sizes.bounded = in_.ConsumeBool();
    base_ = ex.make_instance(sizes, ff::Layout::vertical_fastest, in_.ConsumeIntegral<std::uint8_t>());
  }

  void play() {
    for (int ops = 0; ops < 40 && in_.remaining_bytes() > 0; ++ops) {
      switch (in_.ConsumeIntegralInRange(0, 12)) {
        case 0: case 1: case 2: set_field(); break;
        case 3: set_table(); break;
        case 4: set_scalar(); break;
        case 5: case 6: set_everything(); break;
        case 7: case 8: case 9: run(); break;
        case 10: workspace(); break;
        case 11: queries(); break;
        case 12: bad_handles(); break;
      }
    }
    set_everything();
    run();
  }

 private:
  // Every C call's status: FF_OK, or a defined error with a message; never an internal error.
  ff_status expect(ff_status s, const char* call) {
    if (s == FF_OK) return s;
    if (s < 0 || s > FF_ERROR_CUDA) fail(std::string(call) + " returned the undefined status " + std::to_string(s));
    const char* message = ff_last_error();
    if (message == nullptr || message[0] == '\0') fail(std::string(call) + " failed without a message");
    if (s == FF_ERROR_INTERNAL || s == FF_ERROR_UNKNOWN)
      fail(std::string(call) + " failed with " + ff_status_name(s) + ": " + message);
    return s;
  }

  int param_count() const { return static_cast<int>(p_.params.size()); }
  int pick_param(ff::ir::ParamKind kind) {
    std::vector<int> of_kind;
    for (int i = 0; i < param_count(); ++i)
      if (p_.params[static_cast<std::size_t>(i)].kind == kind) of_kind.push_back(i);
    if (of_kind.empty() || in_.ConsumeIntegralInRange(0, 15) == 0)
      return in_.ConsumeIntegralInRange(-1, param_count());  // any parameter, or none
    return of_kind[in_.ConsumeIntegralInRange<std::size_t>(0, of_kind.size() - 1)];
  }
  bool valid_index(int i) const { return i >= 0 && i < param_count(); }
  // By index, or by name (sometimes NULL or unknown): the index the handle will use, or -1.
  template <class ByName, class ByIndex>
  ff_status by_name_or_index(int index, const ByName& by_name, const ByIndex& by_index, const char* call) {
    if (in_.ConsumeBool()) return expect(by_index(index), call);
    const int how = in_.ConsumeIntegralInRange(0, 15);
    if (how == 0) return expect(by_name(nullptr), call);
    if (how == 1 || !valid_index(index)) return expect(by_name("no_such_parameter"), call);
    return expect(by_name(p_.params[static_cast<std::size_t>(index)].name.c_str()), call);
  }

  // Fills a view's elements from the instance's field where their indices meet, else a filler.
  void fill(void* data, const ff::ir::Param& prm, ff::DType dtype, const std::vector<std::int64_t>& shape,
            const std::vector<std::int64_t>& strides, const std::vector<std::int64_t>& origin) {
    try {
      ff::Field view = ff::Field::view(data, prm.type.dims, dtype, shape, strides, origin);
      const auto found = base_.fields.find(prm.name);
      const double filler = in_.ConsumeFloatingPointInRange<double>(-4.0, 4.0);
      view.for_each_index([&](const std::vector<std::int64_t>& index) {
        double v = filler;
        if (found != base_.fields.end()) {
          try {
            v = found->second.get_as_double(found->second.offset_of(index));
          } catch (const ff::DomainError&) {
          }
        }
        view.set_from_double(view.offset_of(index), v);
      });
    } catch (const ff::Error&) {
      // a geometry Field::view refuses: the handle must refuse it too, and never reads the buffer
    }
  }

  void set_field() {
    const int index = pick_param(ff::ir::ParamKind::field);
    const ff::ir::Param* prm = valid_index(index) ? &p_.params[static_cast<std::size_t>(index)] : nullptr;
    std::int64_t shape[kArrayEntries] = {}, strides[kArrayEntries] = {}, origin[kArrayEntries] = {};
    int rank = 0, dtype = FF_DTYPE_FLOAT64;
    if (prm != nullptr && prm->kind == ff::ir::ParamKind::field) {
      const ff::Field& f = base_.fields.at(prm->name);
      rank = static_cast<int>(prm->type.dims.size());
      dtype = dtype_code(prm->type.dtype);
      for (int d = 0; d < rank; ++d) {
        const int axis = f.axis_of(prm->type.dims[static_cast<std::size_t>(d)]);
        shape[d] = f.shape()[static_cast<std::size_t>(axis)];
        strides[d] = f.strides()[static_cast<std::size_t>(axis)];
        origin[d] = f.origin()[static_cast<std::size_t>(axis)];
      }
    }
    bool null_shape = false, null_strides = false, null_origin = in_.ConsumeIntegralInRange(0, 7) == 0;
    std::ptrdiff_t misalign = 0;
    bool null_data = false, other_memory = false;
    switch (in_.ConsumeIntegralInRange(0, 15)) {
      case 0: dtype = in_.ConsumeIntegralInRange(-2, 6); break;
      case 1: rank = in_.ConsumeIntegralInRange(-1, kArrayEntries); break;
      case 2: (in_.ConsumeBool() ? null_shape : null_strides) = true; break;
      case 3: misalign = in_.ConsumeIntegralInRange(1, 7); break;
      case 4: null_data = true; break;
      case 5: if (rank > 0) shape[in_.ConsumeIntegralInRange(0, rank - 1)] = extreme(in_); break;
      case 6: if (rank > 0) strides[in_.ConsumeIntegralInRange(0, rank - 1)] = extreme(in_); break;
      case 7: if (rank > 0) origin[in_.ConsumeIntegralInRange(0, rank - 1)] = extreme(in_); break;
      case 8: other_memory = true; break;
      case 9:  // a shifted box: other origin and extent, within a few points
        for (int d = 0; d < rank; ++d) {
          const std::int64_t lo = in_.ConsumeIntegralInRange<std::int64_t>(-2, 2), hi = in_.ConsumeIntegralInRange<std::int64_t>(-2, 2);
          origin[d] += lo;
          shape[d] = std::max<std::int64_t>(0, shape[d] - lo + hi);
        }
        [[fallthrough]];
      case 10: {  // strides of a permuted, padded layout
        std::vector<int> order(static_cast<std::size_t>(std::max(rank, 0)));
        for (int d = 0; d < rank; ++d) order[static_cast<std::size_t>(d)] = d;
        for (int d = rank; d > 1; --d) std::swap(order[static_cast<std::size_t>(d - 1)], order[in_.ConsumeIntegralInRange<std::size_t>(0, static_cast<std::size_t>(d - 1))]);
        std::int64_t step = 1;
        for (int d : order) {
          strides[d] = step;
          step *= std::max<std::int64_t>(1, shape[d] + in_.ConsumeIntegralInRange<std::int64_t>(0, 2));
        }
        break;
      }
      default: break;
    }
    // Memory for the whole span of what could be accepted.
    const int n = std::clamp(rank, 0, kArrayEntries);
    const std::vector<std::int64_t> shp(shape, shape + n), str(strides, strides + n), org(origin, origin + n);
    const bool known_dtype = dtype >= FF_DTYPE_BOOL && dtype <= FF_DTYPE_FLOAT64;
    const std::size_t element_bytes = known_dtype ? ff::size_of(dtype_from_code(dtype)) : 8;
    const std::optional<std::int64_t> span = span_elements(shp, str);
    void* data = nullptr;
    if (other_memory && !arena_.buffers().empty()) {
      const Buffer& b = *arena_.buffers()[in_.ConsumeIntegralInRange<std::size_t>(0, arena_.buffers().size() - 1)];
      if (!span || static_cast<std::uint64_t>(*span) > kMaxBufferBytes ||
          static_cast<std::size_t>(*span) * element_bytes + static_cast<std::size_t>(misalign) > b.size)
        return;  // a view past the end of the caller's array
      data = b.data();
    } else {
      const bool fits = span && static_cast<std::uint64_t>(*span) <= kMaxBufferBytes / 8;
      if (span && !fits) return;  // a real array that large is not worth the fuzzer's time
      Buffer& b = arena_.make(fits ? static_cast<std::size_t>(*span) * element_bytes + 8 : 64);
      data = b.data();
      if (prm != nullptr && prm->kind == ff::ir::ParamKind::field && known_dtype && fits)
        fill(data, *prm, dtype_from_code(dtype), shp, str, org);
    }
    if (null_data) data = nullptr;
    if (data != nullptr) data = static_cast<unsigned char*>(data) + misalign;
    const std::int64_t* shape_arg = null_shape ? nullptr : shape;
    const std::int64_t* strides_arg = null_strides ? nullptr : strides;
    const std::int64_t* origin_arg = null_origin ? nullptr : origin;
    int used = index;
    const ff_status s = by_name_or_index(
        index,
        [&](const char* name) {
          used = name && valid_index(index) && name == p_.params[static_cast<std::size_t>(index)].name ? index : -1;
          return ff_program_set_field(h_, name, dtype, data, rank, shape_arg, strides_arg, origin_arg);
        },
        [&](int i) { return ff_program_set_field_at(h_, i, dtype, data, rank, shape_arg, strides_arg, origin_arg); },
        "ff_program_set_field");
    if (s != FF_OK) return;
    if (!valid_index(used)) fail("ff_program_set_field accepted a parameter that does not exist");
    if (!span) fail("ff_program_set_field accepted a view whose span does not fit 64 bits or has negative extents");
    FieldSet set{dtype, data, shp, str, null_origin ? std::vector<std::int64_t>(shp.size(), 0) : org};
    model_.fields[used] = set;
  }

  static ff::DType dtype_from_code(int code) {
    switch (code) {
      case FF_DTYPE_BOOL: return ff::DType::boolean;
      case FF_DTYPE_INT32: return ff::DType::int32;
      case FF_DTYPE_INT64: return ff::DType::int64;
      case FF_DTYPE_FLOAT32: return ff::DType::float32;
      default: return ff::DType::float64;
    }
  }

  void set_table() {
    const int index = pick_param(ff::ir::ParamKind::connectivity);
    const ff::ir::Param* prm = valid_index(index) ? &p_.params[static_cast<std::size_t>(index)] : nullptr;
    const ff::NeighborTable* source =
        prm && prm->kind == ff::ir::ParamKind::connectivity && base_.mesh ? &base_.mesh->table(prm->name) : nullptr;
    std::int64_t n_source = source ? source->n_source : 4, n_target = source ? source->n_target : 4;
    std::int64_t width = source ? source->max_neighbors : 2;
    bool null_data = false;
    switch (in_.ConsumeIntegralInRange(0, 11)) {
      case 0: width = in_.ConsumeBool() ? width + in_.ConsumeIntegralInRange(-2, 2) : extreme(in_); break;
      case 1: n_source = in_.ConsumeBool() ? n_source + in_.ConsumeIntegralInRange(-2, 2) : extreme(in_); break;
      case 2: n_target = in_.ConsumeBool() ? n_target + in_.ConsumeIntegralInRange(-2, 2) : extreme(in_); break;
      case 3: null_data = true; break;
      default: break;
    }
    const bool fortran = in_.ConsumeBool();
    std::int64_t s_stride = fortran ? 1 : width, n_stride = fortran ? n_source : 1;
    if (in_.ConsumeIntegralInRange(0, 7) == 0) (in_.ConsumeBool() ? s_stride : n_stride) = extreme(in_);
    if (width > std::numeric_limits<int>::max() || width < std::numeric_limits<int>::min()) width = -1;
    const std::optional<std::int64_t> span = span_elements({n_source, width}, {s_stride, n_stride});
    const bool fits = span && static_cast<std::uint64_t>(*span) <= kMaxBufferBytes / 4;
    if (span && !fits) return;
    Buffer& b = arena_.make(fits ? static_cast<std::size_t>(*span) * 4 + 4 : 64);
    auto* entries = reinterpret_cast<std::int32_t*>(b.data());
    if (fits) {
      for (std::int64_t i = 0; i < n_source; ++i)
        for (std::int64_t k = 0; k < width; ++k) {
          const bool inside = source && i < source->n_source && k < source->max_neighbors;
          entries[i * s_stride + k * n_stride] = inside ? (*source)(i, static_cast<int>(k)) : -1;
        }
      for (int edits = in_.ConsumeIntegralInRange(0, 3); edits > 0 && *span > 0; --edits)
        entries[in_.ConsumeIntegralInRange<std::int64_t>(0, *span - 1)] =
            in_.ConsumeIntegralInRange<std::int32_t>(-3, static_cast<std::int32_t>(std::min<std::int64_t>(n_target, 1 << 20)) + 2);
    }
    const std::int32_t* data = null_data ? nullptr : entries;
    const int w = static_cast<int>(width);
    int used = index;
    const ff_status s = by_name_or_index(
        index,
        [&](const char* name) {
          used = name && valid_index(index) && name == p_.params[static_cast<std::size_t>(index)].name ? index : -1;
          return ff_program_set_table(h_, name, data, n_source, n_target, w, s_stride, n_stride);
        },
        [&](int i) { return ff_program_set_table_at(h_, i, data, n_source, n_target, w, s_stride, n_stride); },
        "ff_program_set_table");
    if (s != FF_OK) return;
    if (!valid_index(used)) fail("ff_program_set_table accepted a parameter that does not exist");
    if (!span) fail("ff_program_set_table accepted a table whose span does not fit 64 bits or has negative extents: n_source " + std::to_string(n_source) + ", n_target " + std::to_string(n_target) + ", width " + std::to_string(w) + ", strides " + std::to_string(s_stride) + ", " + std::to_string(n_stride));
    model_.tables[used] = TableSet{data, n_source, n_target, w, s_stride, n_stride};
  }

  void set_scalar() {
    const int index = pick_param(ff::ir::ParamKind::scalar);
    const ff::ir::Param* prm = valid_index(index) ? &p_.params[static_cast<std::size_t>(index)] : nullptr;
    const auto found = prm ? base_.scalars.find(prm->name) : base_.scalars.end();
    const bool have = found != base_.scalars.end();
    int used = index;
    auto named = [&](const char* name) {
      used = name && valid_index(index) && name == p_.params[static_cast<std::size_t>(index)].name ? index : -1;
      return name;
    };
    std::optional<ff::Scalar> expected;
    ff_status s = FF_OK;
    switch (in_.ConsumeIntegralInRange(0, 2)) {
      case 0: {
        const std::int64_t v = in_.ConsumeBool() && have ? found->second.as_int() + in_.ConsumeIntegralInRange(-2, 2)
                                                         : extreme(in_);
        s = by_name_or_index(
            index, [&](const char* name) { return ff_program_set_int(h_, named(name), v); },
            [&](int i) { return ff_program_set_int_at(h_, i, v); }, "ff_program_set_int");
        if (prm && prm->type.dtype == ff::DType::int32) expected = ff::Scalar(static_cast<std::int32_t>(v));
        if (prm && prm->type.dtype == ff::DType::int64) expected = ff::Scalar(v);
        break;
      }
      case 1: {
        static constexpr double odd[] = {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                                         -0.0, 1e300, std::numeric_limits<double>::denorm_min()};
        const double v = in_.ConsumeBool() && have ? found->second.as_double() * in_.ConsumeFloatingPointInRange(0.5, 2.0)
                                                   : in_.PickValueInArray(odd);
        s = by_name_or_index(
            index, [&](const char* name) { return ff_program_set_real(h_, named(name), v); },
            [&](int i) { return ff_program_set_real_at(h_, i, v); }, "ff_program_set_real");
        if (prm && prm->type.dtype == ff::DType::float64) expected = ff::Scalar(v);
        if (prm && prm->type.dtype == ff::DType::float32) expected = ff::Scalar(static_cast<float>(v));
        break;
      }
      default: {
        const int v = in_.ConsumeIntegralInRange(-2, 2);
        s = by_name_or_index(
            index, [&](const char* name) { return ff_program_set_bool(h_, named(name), v); },
            [&](int i) { return ff_program_set_bool_at(h_, i, v); }, "ff_program_set_bool");
        if (prm && prm->type.dtype == ff::DType::boolean) expected = ff::Scalar(v != 0);
        break;
      }
    }
    if (s != FF_OK) return;
    if (!valid_index(used) || !expected || prm->kind != ff::ir::ParamKind::scalar)
      fail("a scalar setter accepted a value for a parameter that is not a scalar of its kind");
    model_.scalars[used] = *expected;
  }

  // Every parameter set from the instance, as a host's time loop does: runs then usually happen.
  void set_everything() {
    for (int i = 0; i < param_count(); ++i) {
      const ff::ir::Param& prm = p_.params[static_cast<std::size_t>(i)];
      if (prm.kind == ff::ir::ParamKind::scalar) {
        const ff::Scalar v = base_.scalars.at(prm.name);
        const ff_status s = is_floating(prm.type.dtype) ? ff_program_set_real_at(h_, i, v.as_double())
                            : prm.type.dtype == ff::DType::boolean ? ff_program_set_bool_at(h_, i, v.as_int() != 0)
                                                                   : ff_program_set_int_at(h_, i, v.as_int());
        if (expect(s, "setting a scalar") != FF_OK) fail(std::string("a valid scalar was refused: ") + ff_last_error());
        model_.scalars[i] = v;
      } else if (prm.kind == ff::ir::ParamKind::connectivity) {
        const ff::NeighborTable& t = base_.mesh->table(prm.name);
        const std::int64_t span = t.n_source * t.max_neighbors;
        Buffer& b = arena_.make(static_cast<std::size_t>(std::max<std::int64_t>(span, 1)) * 4);
        auto* entries = reinterpret_cast<std::int32_t*>(b.data());
        for (std::int64_t r = 0; r < t.n_source; ++r)
          for (int k = 0; k < t.max_neighbors; ++k) entries[r * t.max_neighbors + k] = t(r, k);
        const TableSet set{entries, t.n_source, t.n_target, t.max_neighbors, t.max_neighbors, 1};
        if (expect(ff_program_set_table_at(h_, i, entries, set.n_source, set.n_target, set.width, set.source_stride,
                                           set.neighbor_stride), "setting a table") != FF_OK)
          fail(std::string("a valid table was refused: ") + ff_last_error());
        model_.tables[i] = set;
      } else {
        const ff::Field& f = base_.fields.at(prm.name);
        Buffer& b = arena_.make(std::max<std::size_t>(f.span_bytes(), 8));
        std::memcpy(b.data(), f.data(), f.span_bytes());
        FieldSet set{dtype_code(prm.type.dtype), b.data(), {}, {}, {}};
        for (const auto& d : prm.type.dims) {
          const auto axis = static_cast<std::size_t>(f.axis_of(d));
          set.shape.push_back(f.shape()[axis]);
          set.strides.push_back(f.strides()[axis]);
          set.origin.push_back(f.origin()[axis]);
        }
        if (expect(ff_program_set_field_at(h_, i, set.dtype, set.data, static_cast<int>(set.shape.size()),
                                           set.shape.data(), set.strides.data(), set.origin.data()),
                   "setting a field") != FF_OK)
          fail(std::string("a valid field was refused: ") + ff_last_error());
        model_.fields[i] = set;
      }
    }
  }

  void workspace() {
    if (in_.ConsumeIntegralInRange(0, 3) == 0) {  // a query with any names and values
      static const char* const names[] = {"nx", "ny", "nk", "len(Vertex)", "len(Edge)", "len(Cell)", "unknown", nullptr};
      const int count = in_.ConsumeIntegralInRange(-1, 4);
      std::vector<const char*> ns;
      std::vector<std::int64_t> vs;
      for (int i = 0; i < std::max(count, 0); ++i) {
        ns.push_back(in_.PickValueInArray(names));
        vs.push_back(extreme(in_));
      }
      std::size_t bytes = 0, alignment = 0;
      expect(ff_program_workspace_query(h_, in_.ConsumeIntegralInRange(-1, 2), count, in_.ConsumeBool() ? ns.data() : nullptr,
                                        vs.data(), &bytes, &alignment),
             "ff_program_workspace_query");
      return;
    }
    std::size_t bytes = 0, alignment = 0;
    if (expect(ff_program_workspace_for_arguments(h_, FF_DEVICE_CPU, &bytes, &alignment),
               "ff_program_workspace_for_arguments") != FF_OK)
      return;
    if (alignment == 0 || (alignment & (alignment - 1)) != 0)
      fail("ff_program_workspace_for_arguments gave alignment " + std::to_string(alignment));
    if (bytes > kMaxBufferBytes) return;
    Buffer& b = workspaces_.make(bytes + alignment + 64);
    auto* aligned = reinterpret_cast<unsigned char*>((reinterpret_cast<std::uintptr_t>(b.data()) + alignment - 1) /
                                                     alignment * alignment);
    void* pointer = aligned;
    std::size_t given = bytes;
    int device = FF_DEVICE_CPU;
    switch (in_.ConsumeIntegralInRange(0, 7)) {
      case 0: given = bytes > 0 ? bytes - 1 : 0; break;
      case 1: pointer = aligned + (alignment > 1 ? 1 : 0); break;
      case 2: pointer = nullptr; break;
      case 3: device = in_.ConsumeIntegralInRange(-1, 3); break;
      default: break;
    }
    expect(ff_program_set_workspace(h_, device, pointer, given), "ff_program_set_workspace");
  }

  void queries() {
    int count = -1;
    expect(ff_program_param_count(h_, &count), "ff_program_param_count");
    if (count != param_count()) fail("ff_program_param_count disagrees with the program");
    ff_param_info info{};
    const int index = in_.ConsumeIntegralInRange(-2, param_count() + 1);
    expect(ff_program_param_info(h_, index, &info), "ff_program_param_info");
    const char* name = nullptr;
    int kind = 0;
    expect(ff_program_param_dim(h_, index, in_.ConsumeIntegralInRange(-1, 4), &name, &kind), "ff_program_param_dim");
    int found = -1;
    expect(ff_program_param_index(h_, in_.ConsumeBool() ? "no_such_parameter" : nullptr, &found), "ff_program_param_index");
    ff_memory_stats stats{};
    expect(ff_program_memory_stats(h_, &stats), "ff_program_memory_stats");
    expect(ff_program_param_info(h_, 0, nullptr), "ff_program_param_info");
  }

  void bad_handles() {
    if (ff_program_run(nullptr) != FF_ERROR_INVALID_HANDLE) fail("ff_program_run accepted a NULL handle");
    // An id that was never handed out (ids are tagged; this one is not).
    auto* never = reinterpret_cast<ff_program*>(std::uintptr_t(0x1234));
    if (ff_program_set_int(never, "nx", 1) != FF_ERROR_INVALID_HANDLE) fail("ff_program_set_int accepted a made-up handle");
    if (expect(ff_program_destroy(never), "ff_program_destroy") != FF_ERROR_INVALID_HANDLE)
      fail("ff_program_destroy accepted a made-up handle");
  }

  void run() {
    const auto before = arena_.snapshot();
    const ff_status s = expect(ff_program_run(h_), "ff_program_run");
    for (const Arena* a : {&arena_, &workspaces_})
      for (const auto& b : a->buffers())
        if (!b->guards_intact()) fail("ff_program_run wrote outside a buffer it was given");
    const auto after = arena_.snapshot();

    // The reference on copies of the memory as it was, through views of what the handle holds.
    auto copies = before;
    auto moved = [&](const void* p) -> void* {
      if (p == nullptr) return nullptr;
      const Buffer* b = arena_.find(p);
      if (b == nullptr) fail("the model holds a pointer outside the arena");
      const std::size_t i = static_cast<std::size_t>(
          std::find_if(arena_.buffers().begin(), arena_.buffers().end(), [&](const auto& x) { return x.get() == b; }) -
          arena_.buffers().begin());
      return copies[i].data() + (static_cast<const unsigned char*>(p) - b->data());
    };
    std::vector<ff::Field> fields;
    std::vector<ff::NeighborTable> tables;
    fields.reserve(model_.fields.size());
    tables.reserve(model_.tables.size());
    ff::Arguments args;
    try {
      for (const auto& [i, f] : model_.fields) {
        const ff::ir::Param& prm = p_.params[static_cast<std::size_t>(i)];
        fields.push_back(ff::Field::view(moved(f.data), prm.type.dims, dtype_from_code(f.dtype), f.shape, f.strides, f.origin));
        args.field(prm.name, fields.back());
      }
      for (const auto& [i, t] : model_.tables) {
        const ff::ir::Param& prm = p_.params[static_cast<std::size_t>(i)];
        tables.push_back(ff::NeighborTable::view(prm.conn.name, prm.conn.source.name, prm.conn.target.name, t.n_source,
                                                 t.n_target, t.width, static_cast<const std::int32_t*>(moved(t.data)),
                                                 t.source_stride, t.neighbor_stride));
        args.connectivity(prm.name, tables.back());
      }
      for (const auto& [i, v] : model_.scalars) args.scalar(p_.params[static_cast<std::size_t>(i)].name, v);
    } catch (const ff::Error& e) {
      fail(std::string("the handle holds an argument the C++ API refuses: ") + e.what());
    }
    std::string reference_error;
    try {
      ff::run_reference(p_, args);
    } catch (const ff::InternalError& e) {
      fail(std::string("the reference raised an internal error: ") + e.what());
    } catch (const ff::Error& e) {
      reference_error = e.what();
      if (reference_error.empty()) reference_error = "?";
    }
    const bool compiled_refused = s != FF_OK;
    if (compiled_refused) {
      if (after != before) fail(std::string("a refused run changed memory: ") + ff_last_error());
      const bool allowed = !reference_error.empty() || (s == FF_ERROR_LAYOUT && strict_layout_) ||
                           (s == FF_ERROR_WORKSPACE && external_);
      if (!allowed) fail(std::string("the run was refused, the reference accepted: ") + ff_last_error());
      return;
    }
    if (!reference_error.empty()) fail("the run was accepted, the reference refused: " + reference_error);
    for (std::size_t b = 0; b < after.size(); ++b) {
      if (after[b] == copies[b]) continue;
      // NaNs may differ in sign and payload: compare the elements of floating views as values.
      std::vector<bool> as_values(after[b].size(), false);
      for (const auto& [i, f] : model_.fields) {
        if (f.dtype != FF_DTYPE_FLOAT32 && f.dtype != FF_DTYPE_FLOAT64) continue;
        if (f.data == nullptr || arena_.find(f.data) != arena_.buffers()[b].get()) continue;
        const ff::Field view = ff::Field::view(arena_.buffers()[b]->data() + (static_cast<unsigned char*>(f.data) -
                                                                              arena_.buffers()[b]->data()),
                                               p_.params[static_cast<std::size_t>(i)].type.dims,
                                               dtype_from_code(f.dtype), f.shape, f.strides, f.origin);
        const std::size_t base = static_cast<std::size_t>(static_cast<unsigned char*>(f.data) - arena_.buffers()[b]->data());
        const std::size_t width = ff::size_of(view.dtype());
        view.for_each_index([&](const std::vector<std::int64_t>& index) {
          const std::size_t at = base + static_cast<std::size_t>(view.offset_of(index)) * width;
          double x = 0, y = 0;
          if (width == 4) {
            float a, c;
            std::memcpy(&a, &after[b][at], 4);
            std::memcpy(&c, &copies[b][at], 4);
            x = a, y = c;
          } else {
            std::memcpy(&x, &after[b][at], 8);
            std::memcpy(&y, &copies[b][at], 8);
          }
          if (std::isnan(x) && std::isnan(y))
            for (std::size_t k = 0; k < width; ++k) as_values[at + k] = true;
        });
      }
      for (std::size_t k = 0; k < after[b].size(); ++k)
        if (!as_values[k] && after[b][k] != copies[b][k])
          fail("the run and the reference differ at byte " + std::to_string(k) + " of buffer " + std::to_string(b) +
               " (program " + p_.name + ")");
    }
  }

  FuzzedDataProvider& in_;
  const ff::ir::Program& p_;
  ff_program* h_;
  bool strict_layout_, external_;
  ff::examples::ExampleInstance base_;
  Arena arena_;       // the arrays the handle is given, compared with the reference's after runs
  Arena workspaces_;  // caller workspaces: scratch the reference has none of, only their guards are checked
  Model model_;
};

}  // namespace

// The modules are compiled before the first input (it would otherwise run into -timeout).
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ff::fuzz::keep_jit_openmp_runtime_loaded();
  for (const char* name : kPrograms)
    for (int layout : {FF_LAYOUT_VERTICAL_FASTEST, FF_LAYOUT_ANY})
      for (int mode : {FF_MEMORY_POOL, FF_MEMORY_EXTERNAL}) {
        ff_options o;
        ff_options_init(&o);
        o.layout = layout;
        o.memory_mode = mode;
        o.num_threads = 2;
        o.parallel_threshold = 0;
        ff_program* h = nullptr;
        if (ff_program_create(name, &o, &h) != FF_OK) fail(std::string("cannot create ") + name + ": " + ff_last_error());
        ff_program_destroy(h);
      }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  const char* name = in.PickValueInArray(kPrograms);
  const bool any_layout = in.ConsumeBool(), external = in.ConsumeBool();
  ff_options o;
  ff_options_init(&o);
  o.layout = any_layout ? FF_LAYOUT_ANY : FF_LAYOUT_VERTICAL_FASTEST;
  o.memory_mode = external ? FF_MEMORY_EXTERNAL : FF_MEMORY_POOL;
  o.num_threads = in.ConsumeIntegralInRange(1, 3);
  o.parallel_threshold = 0;  // the OpenMP path at these sizes
  ff_program* h = nullptr;
  if (ff_program_create(name, &o, &h) != FF_OK) fail(std::string("cannot create ") + name + ": " + ff_last_error());
  {
    Session session(in, ff::examples::example(name), h, !any_layout, external);
    session.play();
    if (ff_program_destroy(h) != FF_OK) fail(std::string("ff_program_destroy failed: ") + ff_last_error());
  }  // the caller's memory outlives the handle, as in a host
  if (ff_program_destroy(h) != FF_ERROR_INVALID_HANDLE) fail("a destroyed handle was destroyed again");
  if (ff_program_run(h) != FF_ERROR_INVALID_HANDLE) fail("a destroyed handle ran");
  return 0;
}
