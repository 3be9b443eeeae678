// Whether two views share memory, decided element by element (ir/memory_overlap.h), against a
// brute-force count of every byte each one covers; and the element copies that save and restore
// a view's values (ir/field_elements.h) touching nothing between its elements.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <cstddef>
#include <limits>
#include <optional>
#include <random>
#include <set>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "fieldflow/dsl.h"
#include "ir/field_elements.h"
#include "ir/memory_overlap.h"

namespace fieldflow {
namespace {

const Dimension A{"A", DimKind::horizontal}, B{"B", DimKind::horizontal}, C{"C", DimKind::horizontal},
    L{"L", DimKind::vertical};

// Every byte address the elements of `f` cover.
std::set<const std::byte*> bytes_of(const Field& f) {
  std::set<const std::byte*> out;
  const std::size_t n = size_of(f.dtype());
  f.for_each_index([&](const std::vector<std::int64_t>& index) {
    const auto* at = static_cast<const std::byte*>(f.data()) + f.offset_of(index) * static_cast<std::int64_t>(n);
    for (std::size_t b = 0; b < n; ++b) out.insert(at + b);
  });
  return out;
}

bool brute_force_shared(const Field& a, const Field& b) {
  const auto x = bytes_of(a), y = bytes_of(b);
  return std::any_of(x.begin(), x.end(), [&](const std::byte* p) { return y.count(p) > 0; });
}

// A view of `dtype` at byte `offset` of `memory`.
Field view_at(std::vector<std::byte>& memory, std::size_t offset, DType dtype, std::vector<std::int64_t> shape,
              std::vector<std::int64_t> strides) {
  const std::vector<Dimension> all{A, B, C, L};
  const std::vector<Dimension> dims(all.begin(), all.begin() + static_cast<long>(shape.size()));
  return Field::view(memory.data() + offset, dims, dtype, std::move(shape), std::move(strides));
}

TEST(MemoryOverlap, InterleavedViewsShareNoElement) {
  std::vector<std::byte> m(8 * 6 * 2 * 3);  // an array of structures: (A = 6, component = 2, L = 3) doubles
  const Field u = view_at(m, 0, DType::float64, {6, 3}, {6, 1});
  const Field v = view_at(m, 3 * 8, DType::float64, {6, 3}, {6, 1});
  EXPECT_TRUE(ir::spans_overlap(u, v));
  EXPECT_EQ(ir::element_overlap(u, v), ir::Overlap::none);
  EXPECT_EQ(ir::element_overlap(v, u), ir::Overlap::none);
  // The same strides one element further: u(0, 1) is v(0, 0).
  const Field shifted = view_at(m, 8, DType::float64, {6, 3}, {6, 1});
  EXPECT_EQ(ir::element_overlap(u, shifted), ir::Overlap::shared);
  // Even and odd columns of a row-major (4, 10) array; the two halves of each row.
  const Field even = view_at(m, 0, DType::float64, {4, 5}, {10, 2});
  const Field odd = view_at(m, 8, DType::float64, {4, 5}, {10, 2});
  const Field left = view_at(m, 0, DType::float64, {4, 5}, {10, 1});
  const Field right = view_at(m, 5 * 8, DType::float64, {4, 5}, {10, 1});
  EXPECT_EQ(ir::element_overlap(even, odd), ir::Overlap::none);
  EXPECT_EQ(ir::element_overlap(left, right), ir::Overlap::none);
  EXPECT_EQ(ir::element_overlap(even, left), ir::Overlap::shared);
  EXPECT_EQ(ir::element_overlap(odd, right), ir::Overlap::shared);
  // A float32 view over the upper halves of strided float64 elements meets them; one over the
  // gaps between them does not.
  const Field doubles = view_at(m, 0, DType::float64, {5}, {2});      // bytes [16 i, 16 i + 8)
  const Field upper_halves = view_at(m, 4, DType::float32, {5}, {4});  // [16 i + 4, 16 i + 8)
  const Field gaps = view_at(m, 8, DType::float32, {5}, {4});          // [16 i + 8, 16 i + 12)
  EXPECT_EQ(ir::element_overlap(doubles, upper_halves), ir::Overlap::shared);
  EXPECT_EQ(ir::element_overlap(doubles, gaps), ir::Overlap::none);
  // Empty views and views whose spans do not meet share nothing.
  const Field empty = view_at(m, 0, DType::float64, {0, 3}, {6, 1});
  EXPECT_FALSE(ir::spans_overlap(u, empty));
  EXPECT_EQ(ir::element_overlap(u, empty), ir::Overlap::none);
  EXPECT_EQ(ir::element_overlap(view_at(m, 0, DType::float64, {4}, {1}), view_at(m, 32, DType::float64, {4}, {1})),
            ir::Overlap::none);
}

// Random geometries in a small block of memory, every dtype, strides 0 to 12 in any order,
// extents 0 to 4: the search agrees with a byte-by-byte comparison, and never gives up.
TEST(MemoryOverlap, AgreesWithBruteForceOnRandomViews) {
  std::mt19937_64 rng(20261206);
  std::vector<std::byte> m(512);
  const DType dtypes[] = {DType::boolean, DType::int32, DType::float32, DType::int64, DType::float64};
  const auto random_view = [&]() {
    while (true) {
      const DType t = dtypes[rng() % 5];
      const std::size_t rank = 1 + rng() % 3, n = size_of(t);
      std::vector<std::int64_t> shape(rank), strides(rank);
      std::int64_t last = 0;
      for (std::size_t a = 0; a < rank; ++a) {
        shape[a] = static_cast<std::int64_t>(rng() % 5);
        strides[a] = static_cast<std::int64_t>(rng() % 13);
        last += strides[a] * std::max<std::int64_t>(shape[a] - 1, 0);
      }
      const std::size_t span = static_cast<std::size_t>(last + 1) * n;
      if (span > m.size()) continue;
      const std::size_t offset = (rng() % (m.size() - span + 1)) / n * n;
      return view_at(m, offset, t, shape, strides);
    }
  };
  int shared = 0, interleaved = 0;
  for (int c = 0; c < 100000; ++c) {
    const Field a = random_view(), b = random_view();
    const bool expected = brute_force_shared(a, b);
    const ir::Overlap got = ir::element_overlap(a, b);
    ASSERT_NE(got, ir::Overlap::undecided) << a.describe() << " / " << b.describe();
    ASSERT_EQ(got == ir::Overlap::shared, expected)
        << fmt::format("{} strides [{}] at {} and {} strides [{}] at {}", a.describe(), fmt::join(a.strides(), ", "),
                       static_cast<const void*>(a.data()), b.describe(), fmt::join(b.strides(), ", "),
                       static_cast<const void*>(b.data()));
    shared += expected;
    interleaved += !expected && ir::spans_overlap(a, b);
  }
  // Both answers, and the interleaved case the spans alone would get wrong, occur many times.
  EXPECT_GT(shared, 5000);
  EXPECT_GT(interleaved, 5000);
}

// A search bounded too tightly says so rather than guessing: the caller then refuses the call.
TEST(MemoryOverlap, ASearchThatGivesUpIsUndecided) {
  std::vector<std::byte> m(8 * 64);
  const Field even = view_at(m, 0, DType::float64, {4, 5}, {10, 2});
  const Field odd = view_at(m, 8, DType::float64, {4, 5}, {10, 2});
  EXPECT_EQ(ir::element_overlap(even, odd, 0), ir::Overlap::undecided);
  EXPECT_EQ(ir::element_overlap(even, odd), ir::Overlap::none);
}

// Whether two indices of one view share an element: the same search against a count of the
// distinct offsets, over random geometries of up to 4 axes whose strides need not be nested
// (strides 0 to 12 in any order, extents 0 to 6). Such a view is a valid output when its
// elements are distinct, as for a 3 x 3 box with strides 2 and 3.
TEST(MemoryOverlap, InternalOverlapAgreesWithBruteForceOnRandomViews) {
  std::mt19937_64 rng(20261207);
  std::vector<std::byte> m(8 * 4096);
  int distinct = 0, irregular = 0;
  for (int c = 0; c < 100000; ++c) {
    const std::size_t rank = 1 + rng() % 4;
    std::vector<std::int64_t> shape(rank), strides(rank);
    for (std::size_t a = 0; a < rank; ++a) {
      shape[a] = static_cast<std::int64_t>(rng() % 7);
      strides[a] = static_cast<std::int64_t>(rng() % 13);
    }
    const Field f = view_at(m, 0, DType::float64, shape, strides);
    std::set<std::int64_t> offsets;
    f.for_each_index([&](const std::vector<std::int64_t>& index) { offsets.insert(f.offset_of(index)); });
    const bool expected = static_cast<std::int64_t>(offsets.size()) == f.size();
    const ir::Overlap got = ir::internal_overlap(f);
    ASSERT_NE(got, ir::Overlap::undecided) << fmt::format("shape [{}] strides [{}]", fmt::join(shape, ", "),
                                                         fmt::join(strides, ", "));
    ASSERT_EQ(got == ir::Overlap::none, expected)
        << fmt::format("shape [{}] strides [{}]", fmt::join(shape, ", "), fmt::join(strides, ", "));
    ASSERT_EQ(f.elements_distinct(), expected);
    distinct += expected;
    // Distinct elements under strides that are not nested: what a check of nested strides refused.
    std::vector<std::int64_t> steps;
    for (std::size_t a = 0; a < rank; ++a)
      if (shape[a] > 1) steps.push_back(a);
    std::sort(steps.begin(), steps.end(), [&](std::int64_t x, std::int64_t y) { return strides[x] < strides[y]; });
    std::int64_t covered = 1;
    bool nested = true;
    for (std::int64_t a : steps) {
      nested = nested && strides[a] >= covered;
      covered = strides[a] * shape[a];
    }
    irregular += expected && !nested;
  }
  EXPECT_GT(distinct, 10000);
  EXPECT_GT(irregular, 1000);
  EXPECT_TRUE(view_at(m, 0, DType::float64, {3, 3}, {2, 3}).elements_distinct());
  EXPECT_FALSE(view_at(m, 0, DType::float64, {4, 4}, {3, 2}).elements_distinct());  // (2, 0) and (0, 3)
  EXPECT_EQ(ir::internal_overlap(view_at(m, 0, DType::float64, {3, 3}, {2, 3}), 0), ir::Overlap::undecided);
}

// A view's span, first element to the end of the last, in bytes; refused past int64.
TEST(MemoryOverlap, SpanBytesAreCountedWithoutOverflow) {
  using V = std::vector<std::int64_t>;
  const auto span = [](V extents, V strides, std::size_t bytes) {
    return ir::checked_span_bytes(extents, strides, bytes);
  };
  EXPECT_EQ(span({6, 4}, {4, 1}, 8), 6 * 4 * 8);
  EXPECT_EQ(span({6, 4}, {5, 1}, 8), (5 * 5 + 3 + 1) * 8);  // padded rows: the last row's padding is not in it
  EXPECT_EQ(span({6, 0}, {4, 1}, 8), 0);
  EXPECT_EQ(span({6, 4}, {0, 0}, 4), 4);
  EXPECT_EQ(span({}, {}, 8), 8);  // a scalar-like field of no axes: one element
  const std::int64_t most = std::numeric_limits<std::int64_t>::max();
  EXPECT_EQ(span({2}, {most - 1}, 1), most);                      // the largest count that fits
  EXPECT_EQ(span({2}, {most}, 1), std::nullopt);                  // last + 1 passes int64
  EXPECT_EQ(span({2}, {most / 8}, 8), std::nullopt);              // the bytes do
  EXPECT_EQ(span({3}, {most / 2 + 1}, 1), std::nullopt);          // the last offset does
  EXPECT_EQ(span({2, 2}, {most / 2 + 1, most / 2 + 1}, 1), std::nullopt);  // the sum of the axes does
}

// Saving and restoring a view's values moves its elements only: the bytes between them (here
// another view's elements) are neither read into the copy nor written back.
TEST(FieldElements, PackAndUnpackTouchOnlyTheElements) {
  std::vector<double> memory(6 * 2 * 3);
  for (std::size_t i = 0; i < memory.size(); ++i) memory[i] = static_cast<double>(i);
  const Dimension I = horizontal_dim("I"), K = vertical_dim("K");
  Field u = Field::view(memory.data(), {I, K}, DType::float64, {6, 3}, {6, 1});
  std::vector<std::byte> saved(u.bytes());
  ir::pack_elements(u, saved.data());
  std::vector<double> values(u.size());
  std::memcpy(values.data(), saved.data(), saved.size());
  for (int i = 0; i < 6; ++i)
    for (int k = 0; k < 3; ++k) EXPECT_EQ(values[static_cast<std::size_t>(i * 3 + k)], i * 6 + k);
  std::vector<double> expected = memory;
  for (std::size_t i = 0; i < memory.size(); ++i) memory[i] = -1.0;
  ir::unpack_elements(u, saved.data());
  for (std::size_t i = 0; i < memory.size(); ++i)
    EXPECT_EQ(memory[i], i % 6 < 3 ? expected[i] : -1.0) << "element " << i;
  // A dense field in any axis order: one copy, the same values back.
  Field dense({I, K}, DType::float64, {4, 5}, {}, Layout::horizontal_fastest);
  for (int i = 0; i < 4; ++i)
    for (int k = 0; k < 5; ++k) dense.at<double>({i, k}) = i * 10 + k;
  std::vector<std::byte> copy(dense.bytes());
  ir::pack_elements(dense, copy.data());
  dense.fill(0.0);
  ir::unpack_elements(dense, copy.data());
  for (int i = 0; i < 4; ++i)
    for (int k = 0; k < 5; ++k) EXPECT_EQ(dense.at<double>({i, k}), i * 10 + k);
}

}  // namespace
}  // namespace fieldflow
