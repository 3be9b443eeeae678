#pragma once
// Shrinking a failing case to a small one that still fails the same way: fewer layouts and size
// sets, smaller sizes, fewer statements, subexpressions replaced by one of their operands or by a
// literal. Greedy: each step is kept only if the case still fails.
#include <functional>

#include "fuzz/program_generator.h"

namespace fieldflow::fuzz {

using StillFails = std::function<bool(const FuzzCase&)>;

struct ShrinkStats {
  int attempts = 0, accepted = 0;
};

// `max_attempts` bounds the number of predicate calls (each usually compiles a new program).
FuzzCase shrink_case(const FuzzCase& failing, const StillFails& still_fails, int max_attempts, ShrinkStats& stats);

}  // namespace fieldflow::fuzz
