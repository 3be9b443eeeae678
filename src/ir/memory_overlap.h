#pragma once
// Whether two fields share memory: exactly, element by element, not by comparing their spans.
// A host's views of one array often interleave without sharing an element: the components of an
// array of structures (u = x[:, 0], v = x[:, 1]), the two halves of a row-major array, even and
// odd columns. Their spans overlap, their elements do not; both may be outputs of one call.
#include <cstdint>

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

// Whether the byte ranges [data, data + span) of the two fields meet (false when one is empty).
bool spans_overlap(const Field& a, const Field& b);

}  // namespace fieldflow::ir
