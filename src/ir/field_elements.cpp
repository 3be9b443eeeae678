#include "ir/field_elements.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "fieldflow/abi.h"

namespace fieldflow::ir {

namespace {

// Calls run(offset, count, step) for each run of the box [lo, hi) along its innermost axis (the
// unit-stride one if any, else the last): `count` elements, the first `offset` bytes from f.data(),
// `step` bytes apart; the runs in the field's own axis order, the last axis fastest.
template <class Run>
void for_each_run(const Field& f, const std::int64_t* lo, const std::int64_t* hi, Run run) {
  const std::size_t rank = f.dims().size();
  const auto esize = static_cast<std::int64_t>(size_of(f.dtype()));
  for (std::size_t a = 0; a < rank; ++a)
    if (hi[a] <= lo[a]) return;
  int inner = static_cast<int>(rank) - 1;
  for (std::size_t a = 0; a < rank; ++a)
    if (f.strides()[a] == 1 && hi[a] - lo[a] > 1) inner = static_cast<int>(a);
  const std::int64_t count = rank > 0 ? hi[inner] - lo[inner] : 1;
  const std::int64_t step = (rank > 0 ? f.strides()[inner] : 0) * esize;
  // Compiled programs' fields have at most FF_MAX_DIMS axes (no allocation on their hot paths);
  // the reference's may have more.
  std::int64_t fixed[FF_MAX_DIMS];
  std::vector<std::int64_t> more(rank > FF_MAX_DIMS ? rank : 0);
  std::int64_t* index = rank > FF_MAX_DIMS ? more.data() : fixed;
  for (std::size_t a = 0; a < rank; ++a) index[a] = lo[a];
  while (true) {
    std::int64_t offset = 0;
    for (std::size_t a = 0; a < rank; ++a) offset += (index[a] - f.origin()[a]) * f.strides()[a];
    run(offset * esize, count, step);
    // Next run: odometer over the other axes, the last one fastest.
    int a = static_cast<int>(rank) - 1;
    for (; a >= 0; --a) {
      if (a == inner) continue;
      if (++index[a] < hi[a]) break;
      index[a] = lo[a];
    }
    if (a < 0) break;
  }
}

// Copies `count` elements of `esize` bytes from `from`, `from_step` bytes apart, to `to`,
// `to_step` bytes apart: one memcpy where both are consecutive.
void copy_run(std::byte* to, std::int64_t to_step, const std::byte* from, std::int64_t from_step, std::int64_t count,
              std::size_t esize) {
  const auto e = static_cast<std::int64_t>(esize);
  if (to_step == e && from_step == e) {
    std::memcpy(to, from, static_cast<std::size_t>(count) * esize);
    return;
  }
  for (std::int64_t i = 0; i < count; ++i) std::memcpy(to + i * to_step, from + i * from_step, esize);
}

// A run of a field (`step` bytes apart at `strided`) to or from consecutive bytes at `packed`.
void pack_run(std::byte* strided, std::int64_t step, std::byte* packed, std::int64_t count, std::size_t esize,
              bool pack) {
  const auto e = static_cast<std::int64_t>(esize);
  if (pack)
    copy_run(packed, e, strided, step, count, esize);
  else
    copy_run(strided, step, packed, e, count, esize);
}

}  // namespace

std::size_t copy_box(Field& f, const std::int64_t* lo, const std::int64_t* hi, std::byte* buffer, bool pack) {
  const std::size_t esize = size_of(f.dtype());
  auto* base = static_cast<std::byte*>(f.data());
  std::byte* out = buffer;
  for_each_run(f, lo, hi, [&](std::int64_t offset, std::int64_t count, std::int64_t step) {
    pack_run(base + offset, step, out, count, esize, pack);
    out += static_cast<std::size_t>(count) * esize;
  });
  return static_cast<std::size_t>(out - buffer);
}

bool elements_fill_span(const Field& f) { return f.span_bytes() == f.bytes() && f.elements_distinct(); }

namespace {

// for_each_run over the whole box.
template <class Run>
void for_each_run(const Field& f, Run run) {
  const std::size_t rank = f.dims().size();
  std::int64_t fixed[2 * FF_MAX_DIMS];
  std::vector<std::int64_t> more(rank > FF_MAX_DIMS ? 2 * rank : 0);
  std::int64_t* lo = rank > FF_MAX_DIMS ? more.data() : fixed;
  std::int64_t* hi = lo + rank;
  for (std::size_t a = 0; a < rank; ++a) {
    lo[a] = f.origin()[a];
    hi[a] = f.origin()[a] + f.shape()[a];
  }
  for_each_run(f, lo, hi, run);
}

void pack_or_unpack(const Field& f, std::byte* packed, bool pack) {
  if (f.size() == 0) return;
  auto* base = static_cast<std::byte*>(const_cast<void*>(f.data()));  // written only to unpack
  if (elements_fill_span(f)) {
    if (pack) std::memcpy(packed, base, f.bytes()); else std::memcpy(base, packed, f.bytes());
    return;
  }
  const std::size_t esize = size_of(f.dtype());
  for_each_run(f, [&](std::int64_t offset, std::int64_t count, std::int64_t step) {
    pack_run(base + offset, step, packed, count, esize, pack);
    packed += static_cast<std::size_t>(count) * esize;
  });
}

}  // namespace

void pack_elements(const Field& f, std::byte* out) { pack_or_unpack(f, out, true); }

void unpack_elements(Field& f, const std::byte* in) { pack_or_unpack(f, const_cast<std::byte*>(in), false); }

void copy_elements(const Field& f, const std::byte* from, std::byte* to) {
  if (f.size() == 0) return;
  if (elements_fill_span(f)) {
    std::memcpy(to, from, f.span_bytes());
    return;
  }
  const std::size_t esize = size_of(f.dtype());
  for_each_run(f, [&](std::int64_t offset, std::int64_t count, std::int64_t step) {
    copy_run(to + offset, step, from + offset, step, count, esize);
  });
}

void for_each_element_run(const Field& f, const std::function<void(std::int64_t, std::int64_t, std::int64_t)>& run) {
  if (f.size() > 0) for_each_run(f, run);
}

}  // namespace fieldflow::ir
