#pragma once
// Comparing two instances of an example field by field, bit for bit (the reference's against a
// hand-written or compiled version's): every element of every field, so inputs and points outside
// the domain must be untouched too.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <string>

#include "fieldflow/examples.h"

namespace fieldflow::testing_support {

inline void expect_same_bits(const examples::ExampleInstance& expected, const examples::ExampleInstance& actual,
                             const std::string& program) {
  for (const auto& [name, want] : expected.fields) {
    const Field& got = actual.fields.at(name);
    ASSERT_EQ(want.size(), got.size()) << name;
    std::int64_t bad = 0;
    double worst = 0;
    for (std::int64_t i = 0; i < want.size(); ++i) {
      const double w = want.get_as_double(i), g = got.get_as_double(i);
      if (std::bit_cast<std::uint64_t>(w) != std::bit_cast<std::uint64_t>(g)) {
        ++bad;
        worst = std::max(worst, std::abs(w - g) / std::max({std::abs(w), std::abs(g), 1e-300}));
      }
    }
    EXPECT_EQ(bad, 0) << program << ": field '" << name << "' differs from the reference at " << bad
                      << " elements (not bit for bit; worst relative error " << worst << ")";
  }
}

}  // namespace fieldflow::testing_support
