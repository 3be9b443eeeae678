#pragma once
// Caller-owned memory for view tests: a field's values copied into a plain byte array in a chosen
// stride order, with a padded fastest dimension and slack around it, all filled with a sentinel
// byte, and a Field::view over it. padding_untouched() tells whether a call wrote anything but the
// view's elements.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <utility>
#include <vector>

#include "fieldflow/field.h"

namespace fieldflow::testing_support {

inline constexpr unsigned char kPaddingSentinel = 0xA5;

// Axis orders, fastest first. C order is vertical_fastest's memory order (vertical, then local,
// then the horizontal dims from the last declared to the first); Fortran order is its reverse;
// scrambled swaps C order's fastest axis with a middle one (no layout has that unit stride).
enum class AxisOrder { c, fortran, scrambled };

inline std::vector<int> axis_order(const std::vector<Dimension>& dims, AxisOrder order) {
  const int n = static_cast<int>(dims.size());
  std::vector<int> axes(n);
  std::iota(axes.begin(), axes.end(), 0);
  auto rank = [&](int x) { return dims[x].kind == DimKind::vertical ? 0 : dims[x].kind == DimKind::local ? 1 : 2; };
  std::stable_sort(axes.begin(), axes.end(), [&](int a, int b) { return rank(a) != rank(b) ? rank(a) < rank(b) : a > b; });
  if (order == AxisOrder::fortran) std::reverse(axes.begin(), axes.end());
  if (order == AxisOrder::scrambled && n > 2) std::swap(axes[0], axes[n / 2]);
  return axes;
}

class HostArray {
 public:
  // `order`: the field's axes, fastest first; the fastest one gets `pad` extra elements.
  HostArray(const Field& values, const std::vector<int>& order, std::int64_t pad)
      : view_(make(values, order, pad, bytes_)) {
    view_.copy_values_from(values);
  }
  HostArray(const HostArray&) = delete;
  HostArray& operator=(const HostArray&) = delete;

  Field& view() { return view_; }
  const Field& view() const { return view_; }
  // The whole host allocation behind the view: elements, padding and slack.
  std::pair<const void*, std::size_t> allocation() const { return {bytes_.data(), bytes_.size()}; }

  bool padding_untouched() const {
    std::vector<char> is_element(bytes_.size(), 0);
    const auto* base = static_cast<const unsigned char*>(view_.data());
    const std::size_t w = size_of(view_.dtype());
    view_.for_each_index([&](const std::vector<std::int64_t>& index) {
      const auto at = static_cast<std::size_t>(base - bytes_.data()) + static_cast<std::size_t>(view_.offset_of(index)) * w;
      std::fill_n(is_element.begin() + static_cast<std::ptrdiff_t>(at), w, 1);
    });
    for (std::size_t i = 0; i < bytes_.size(); ++i)
      if (!is_element[i] && bytes_[i] != kPaddingSentinel) return false;
    return true;
  }

 private:
  static Field make(const Field& f, const std::vector<int>& order, std::int64_t pad, std::vector<unsigned char>& bytes) {
    std::vector<std::int64_t> strides(f.dims().size(), 0);
    std::int64_t stride = 1;
    for (std::size_t i = 0; i < order.size(); ++i) {
      strides[static_cast<std::size_t>(order[i])] = stride;
      stride *= f.shape()[static_cast<std::size_t>(order[i])] + (i == 0 ? pad : 0);
    }
    // 64 bytes of slack on both sides; the view starts 64-byte aligned like a model's arrays.
    bytes.assign(static_cast<std::size_t>(stride) * size_of(f.dtype()) + 192, kPaddingSentinel);
    auto* start = bytes.data() + (64 - reinterpret_cast<std::uintptr_t>(bytes.data()) % 64);
    return Field::view(start, f.dims(), f.dtype(), f.shape(), strides, f.origin());
  }

  std::vector<unsigned char> bytes_;
  Field view_;
};

}  // namespace fieldflow::testing_support
