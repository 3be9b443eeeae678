#include "ir/field_elements.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "fieldflow/abi.h"

namespace fieldflow::ir {

std::size_t copy_box(Field& f, const std::int64_t* lo, const std::int64_t* hi, std::byte* buffer, bool pack) {
  const std::size_t rank = f.dims().size(), esize = size_of(f.dtype());
  std::int64_t count = 1;
  for (std::size_t a = 0; a < rank; ++a) count *= std::max<std::int64_t>(0, hi[a] - lo[a]);
  if (count == 0) return 0;
  // The innermost axis of the run: the unit-stride one if any, else the last.
  int inner = static_cast<int>(rank) - 1;
  for (std::size_t a = 0; a < rank; ++a)
    if (f.strides()[a] == 1 && hi[a] - lo[a] > 1) inner = static_cast<int>(a);
  const bool contiguous = rank > 0 && f.strides()[inner] == 1;
  const std::int64_t run = rank > 0 ? hi[inner] - lo[inner] : 1;
  auto* base = static_cast<std::byte*>(f.data());
  // Compiled programs' fields have at most FF_MAX_DIMS axes (no allocation on their hot paths);
  // the reference's may have more.
  std::int64_t fixed[FF_MAX_DIMS];
  std::vector<std::int64_t> more(rank > FF_MAX_DIMS ? rank : 0);
  std::int64_t* index = rank > FF_MAX_DIMS ? more.data() : fixed;
  for (std::size_t a = 0; a < rank; ++a) index[a] = lo[a];
  std::byte* out = buffer;
  while (true) {
    std::int64_t offset = 0;
    for (std::size_t a = 0; a < rank; ++a) offset += (index[a] - f.origin()[a]) * f.strides()[a];
    std::byte* at = base + offset * static_cast<std::int64_t>(esize);
    if (contiguous) {
      const std::size_t bytes = static_cast<std::size_t>(run) * esize;
      if (pack) std::memcpy(out, at, bytes); else std::memcpy(at, out, bytes);
      out += bytes;
    } else {
      const std::int64_t step = (rank > 0 ? f.strides()[inner] : 0) * static_cast<std::int64_t>(esize);
      for (std::int64_t i = 0; i < run; ++i, out += esize) {
        if (pack) std::memcpy(out, at + i * step, esize); else std::memcpy(at + i * step, out, esize);
      }
    }
    // Next run: odometer over the other axes, the last one fastest.
    int a = static_cast<int>(rank) - 1;
    for (; a >= 0; --a) {
      if (a == inner) continue;
      if (++index[a] < hi[a]) break;
      index[a] = lo[a];
    }
    if (a < 0) break;
  }
  return static_cast<std::size_t>(out - buffer);
}

namespace {

// The elements fill their span exactly, each once (a dense field, in any axis order): one memcpy
// moves them. For nested strides (every dense layout) deciding it allocates nothing.
bool dense(const Field& f) { return f.span_bytes() == f.bytes() && f.elements_distinct(); }

std::size_t whole_box(Field& f, std::byte* buffer, bool pack) {
  const std::size_t rank = f.dims().size();
  std::int64_t fixed[2 * FF_MAX_DIMS];
  std::vector<std::int64_t> more(rank > FF_MAX_DIMS ? 2 * rank : 0);
  std::int64_t* lo = rank > FF_MAX_DIMS ? more.data() : fixed;
  std::int64_t* hi = lo + rank;
  for (std::size_t a = 0; a < rank; ++a) {
    lo[a] = f.origin()[a];
    hi[a] = f.origin()[a] + f.shape()[a];
  }
  return copy_box(f, lo, hi, buffer, pack);
}

}  // namespace

void pack_elements(const Field& f, std::byte* out) {
  if (f.size() == 0) return;
  if (dense(f))
    std::memcpy(out, f.data(), f.bytes());
  else
    whole_box(const_cast<Field&>(f), out, true);  // packing only reads the field
}

void unpack_elements(Field& f, const std::byte* in) {
  if (f.size() == 0) return;
  if (dense(f))
    std::memcpy(f.data(), in, f.bytes());
  else
    whole_box(f, const_cast<std::byte*>(in), false);  // unpacking only reads the buffer
}

}  // namespace fieldflow::ir
