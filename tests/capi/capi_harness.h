#pragma once
// Test helpers for the C API: a built-in example's arguments copied into caller-style buffers of
// any dimension order and padding, set on a C handle; outputs compared with the C++ reference
// executor bit for bit.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "fieldflow/examples.h"
#include "fieldflow/fieldflow.h"
#include "fieldflow/reference.h"
#include "support/capi_codes.h"

namespace fieldflow::capi_test {

#define FF_ASSERT_OK(call)                                                           \
  do {                                                                               \
    const int status_ = (call);                                                      \
    ASSERT_EQ(status_, FF_OK) << ff_status_name(status_) << ": " << ff_last_error(); \
  } while (0)

// Which dimension of a buffer varies fastest: the last (C row-major) or the first (Fortran).
enum class Order { c, fortran };

// A caller-owned array holding one field's values: `pad` extra elements along the fastest
// dimension, so strides differ from the dense ones; data 64-byte aligned.
struct Buffer {
  std::vector<std::byte> storage;
  void* data = nullptr;
  DType dtype = DType::float64;
  std::vector<std::int64_t> shape, strides, origin;

  std::int64_t offset_of(const std::vector<std::int64_t>& absolute) const {
    std::int64_t o = 0;
    for (std::size_t a = 0; a < shape.size(); ++a) o += (absolute[a] - origin[a]) * strides[a];
    return o;
  }
  void* at(const std::vector<std::int64_t>& absolute) {
    return static_cast<std::byte*>(data) + offset_of(absolute) * static_cast<std::int64_t>(size_of(dtype));
  }
};

// Calls f(absolute index) for every element of a box.
template <class F>
void for_each_index(const std::vector<std::int64_t>& origin, const std::vector<std::int64_t>& shape, F&& f) {
  for (auto s : shape)
    if (s == 0) return;
  std::vector<std::int64_t> i = origin;
  while (true) {
    f(i);
    std::size_t a = shape.size();
    while (a > 0) {
      --a;
      if (++i[a] < origin[a] + shape[a]) break;
      i[a] = origin[a];
      if (a == 0) return;
    }
    if (shape.empty()) return;
  }
}

inline Buffer copy_to_buffer(const Field& f, Order order, int pad) {
  Buffer b;
  b.dtype = f.dtype();
  b.shape = f.shape();
  b.origin = f.origin();
  const std::size_t rank = b.shape.size();
  b.strides.assign(rank, 1);
  std::int64_t stride = 1;
  for (std::size_t k = 0; k < rank; ++k) {
    const std::size_t a = order == Order::c ? rank - 1 - k : k;
    b.strides[a] = stride;
    stride *= b.shape[a] + (k == 0 ? pad : 0);
  }
  const std::size_t bytes = static_cast<std::size_t>(stride) * size_of(b.dtype);
  b.storage.assign(bytes + 64, std::byte{0x5a});
  auto addr = reinterpret_cast<std::uintptr_t>(b.storage.data());
  b.data = b.storage.data() + (64 - addr % 64) % 64;
  for_each_index(b.origin, b.shape, [&](const std::vector<std::int64_t>& i) {
    std::memcpy(b.at(i), static_cast<const std::byte*>(f.data()) + f.offset_of(i) * static_cast<std::int64_t>(size_of(b.dtype)),
                size_of(b.dtype));
  });
  return b;
}

// Expects every element of `b` to equal the field's, bit for bit.
inline void expect_bitwise_equal(const std::string& what, Buffer& b, const Field& f) {
  int mismatches = 0;
  for_each_index(b.origin, b.shape, [&](const std::vector<std::int64_t>& i) {
    const void* want =
        static_cast<const std::byte*>(f.data()) + f.offset_of(i) * static_cast<std::int64_t>(size_of(b.dtype));
    if (std::memcmp(b.at(i), want, size_of(b.dtype)) != 0 && ++mismatches <= 3) {
      ADD_FAILURE() << what << ": element " << ::testing::PrintToString(i) << " differs from the reference ("
                    << f.get_as_double(f.offset_of(i)) << ")";
    }
  });
  EXPECT_EQ(mismatches, 0) << what;
}

// One example's arguments as caller buffers, set on a handle.
struct CallerArguments {
  examples::ExampleInstance instance;  // the values (and the mesh)
  std::map<std::string, Buffer> fields;
  std::map<std::string, std::vector<std::int32_t>> tables;

  CallerArguments(const examples::Example& ex, const examples::ExampleSize& size, Layout layout, Order order, int pad,
                  std::uint64_t seed = 7)
      : instance(ex.make_instance(size, layout, seed)) {
    for (auto& [name, f] : instance.fields) fields.emplace(name, copy_to_buffer(f, order, pad));
  }

  // Sets every argument; tables in C or Fortran order.
  int set_all(ff_program* p, Order table_order) {
    for (auto& [name, b] : fields) {
      const int s = ff_program_set_field(p, name.c_str(), testing_support::ff_dtype_code(b.dtype), b.data,
                                         static_cast<int>(b.shape.size()), b.shape.data(), b.strides.data(),
                                         b.origin.data());
      if (s != FF_OK) return s;
    }
    for (const auto& [name, v] : instance.scalars) {
      int s = FF_OK;
      if (v.dtype() == DType::boolean) s = ff_program_set_bool(p, name.c_str(), v.as_int() != 0);
      else if (is_integral(v.dtype())) s = ff_program_set_int(p, name.c_str(), v.as_int());
      else s = ff_program_set_real(p, name.c_str(), v.as_double());
      if (s != FF_OK) return s;
    }
    for (const auto& name : instance.connectivities) {
      const NeighborTable& t = instance.mesh->table(name);
      std::vector<std::int32_t>& copy = tables[name];
      copy.assign(static_cast<std::size_t>(t.n_source * t.max_neighbors), 0);
      const bool c = table_order == Order::c;
      for (std::int64_t i = 0; i < t.n_source; ++i)
        for (int n = 0; n < t.max_neighbors; ++n)
          copy[static_cast<std::size_t>(c ? i * t.max_neighbors + n : n * t.n_source + i)] = t(i, n);
      const int s = ff_program_set_table(p, name.c_str(), copy.data(), t.n_source, t.n_target, t.max_neighbors,
                                         c ? t.max_neighbors : 1, c ? 1 : t.n_source);
      if (s != FF_OK) return s;
    }
    return FF_OK;
  }

  // Runs the reference executor `runs` times on the original values (in/out fields change every
  // run); returns the instance holding its results.
  examples::ExampleInstance reference(const examples::Example& ex, const examples::ExampleSize& size, Layout layout,
                                      int runs = 1, std::uint64_t seed = 7) const {
    examples::ExampleInstance ref = ex.make_instance(size, layout, seed);
    for (int r = 0; r < runs; ++r) run_reference(ex.program, ref.arguments());
    return ref;
  }
};

}  // namespace fieldflow::capi_test
