#pragma once
// Whether two fields share memory: exactly, element by element, not by comparing their spans.
// A host's views of one array often interleave without sharing an element: the components of an
// array of structures (u = x[:, 0], v = x[:, 1]), the two halves of a row-major array, even and
// odd columns. Their spans overlap, their elements do not; both may be outputs of one call.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "fieldflow/field.h"

namespace fieldflow::ir {

enum class Overlap {
  none,       // no byte of an element of one is a byte of an element of the other
  shared,     // at least one byte is
  undecided,  // the search gave up (strides of no regular structure); treat as shared
};

// Decides whether any element of `a` and any element of `b` share a byte. Each field's bytes are
// data + sum(stride * index) * element size + [0, element size); this asks whether the two sets
// meet: a bounded linear equation in nonnegative integers, solved by a search over the axes
// (largest step first) that keeps only the indices whose remainder the other axes can still
// reach, in size and modulo the gcd of their steps. Nested strides (any dense or padded layout,
// any stride order) take one candidate per axis; `max_steps` bounds the rest.
Overlap element_overlap(const Field& a, const Field& b, std::uint64_t max_steps = 1u << 16);

// Decides whether two indices of `f`'s box share an element (an output must not: generated code
// writes its points in any order, on any thread). The same search: exact where it finishes,
// `undecided` where strides of no regular structure exhaust `max_steps`.
Overlap internal_overlap(const Field& f, std::uint64_t max_steps = 1u << 16);

// The span of an array with these extents and (non-negative) strides, in bytes from its first
// element to the end of its last; 0 without elements; nullopt when the count passes int64 (a
// view's geometry is refused then: the offsets generated code computes would wrap).
std::optional<std::int64_t> checked_span_bytes(std::span<const std::int64_t> extents,
                                               std::span<const std::int64_t> strides, std::size_t element_bytes);

// Whether the byte ranges [data, data + span) of the two fields meet (false when one is empty).
bool spans_overlap(const Field& a, const Field& b);

}  // namespace fieldflow::ir
