#pragma once
// Shared by the compiled-backend tests: run a program on the reference executor and compiled,
// on identical inputs, and compare every output bit for bit.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "fieldflow/compile.h"
#include "fieldflow/reference.h"

namespace fieldflow::testing_support {

// Bitwise comparison of two fields of the same shape; reports the first differing element.
inline ::testing::AssertionResult same_bits(const Field& a, const Field& b, const std::string& what) {
  if (a.bytes() != b.bytes()) return ::testing::AssertionFailure() << what << ": sizes differ";
  if (std::memcmp(a.data(), b.data(), a.bytes()) == 0) return ::testing::AssertionSuccess();
  for (std::int64_t i = 0; i < a.size(); ++i) {
    const double x = a.get_as_double(i), y = b.get_as_double(i);
    if (std::memcmp(static_cast<const char*>(a.data()) + i * size_of(a.dtype()),
                    static_cast<const char*>(b.data()) + i * size_of(b.dtype()), size_of(a.dtype())) != 0)
      return ::testing::AssertionFailure() << what << ": element " << i << " differs: reference " << x
                                           << " vs compiled " << y;
  }
  return ::testing::AssertionFailure() << what << ": bytes differ";
}

inline CompileOptions cpu_options(Layout layout = Layout::vertical_fastest) {
  CompileOptions o;
  o.backend = Backend::cpu;
  o.layout = layout;
  return o;
}

}  // namespace fieldflow::testing_support
