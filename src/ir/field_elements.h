#pragma once
// Copies a field's elements to and from consecutive bytes, touching only the elements: never the
// bytes between them, which may be another field's (a padded view, one component of an array of
// structures, a view that interleaves with another) and may be written by another thread.
#include <cstddef>
#include <cstdint>
#include <functional>

#include "fieldflow/field.h"

namespace fieldflow::ir {

// Copies the box [lo, hi) (absolute indices, one per axis) of `f` to (pack) or from (unpack)
// consecutive bytes at `buffer`, in the field's own axis order, the last axis fastest except that
// runs along a unit-stride axis move with one memcpy each. Returns the bytes copied.
std::size_t copy_box(Field& f, const std::int64_t* lo, const std::int64_t* hi, std::byte* buffer, bool pack);

// Whether the elements fill their span exactly, each once (a dense field, in any axis order): then
// one memcpy moves them. Decided without allocating for nested strides (every dense layout).
bool elements_fill_span(const Field& f);

// The whole box: exactly f.bytes() bytes, in an order of their own (a dense field's memory order,
// one memcpy), the same for both. For saving a field's values and restoring them.
void pack_elements(const Field& f, std::byte* out);
void unpack_elements(Field& f, const std::byte* in);

// Copies f's elements from one span laid out as f's (f.span_bytes() bytes at `from`, element
// offsets as from f.data()) to the same offsets of another at `to`; f's own memory is not touched.
// What lands a host output from its device copy, element by element.
void copy_elements(const Field& f, const std::byte* from, std::byte* to);

// Calls run(offset, count, step) for each run of f's elements along one axis (the unit-stride one
// if any): `count` elements, the first `offset` bytes from f.data(), `step` bytes apart (step >= the
// element size where count > 1). For copies that move runs themselves (device memory).
void for_each_element_run(const Field& f, const std::function<void(std::int64_t, std::int64_t, std::int64_t)>& run);

}  // namespace fieldflow::ir
