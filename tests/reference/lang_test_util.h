#pragma once
// Helpers shared by the language tests (tests/frontend, tests/reference): dimensions, field
// filling and snapshots, and a checker for the type AND the message of a fieldflow::Error.
// Expected values are always computed by the tests themselves with plain loops; nothing here
// evaluates expressions.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <typeinfo>
#include <vector>

#include "fieldflow/errors.h"
#include "fieldflow/field.h"

namespace fieldflow::langtest {

inline const Dimension I = horizontal_dim("I");
inline const Dimension J = horizontal_dim("J");
inline const Dimension K = vertical_dim("K");
inline const Dimension Vertex = horizontal_dim("Vertex");
inline const Dimension Edge = horizontal_dim("Edge");
inline const Dimension Cell = horizontal_dim("Cell");

// Passes when f throws exactly an E (a sibling error kind is a failure) whose message contains
// every one of `words`.
template <class E, class F>
::testing::AssertionResult throws_with(F&& f, std::initializer_list<std::string> words) {
  try {
    f();
  } catch (const E& e) {
    const std::string msg = e.what();
    for (const auto& w : words)
      if (msg.find(w) == std::string::npos)
        return ::testing::AssertionFailure() << "message lacks \"" << w << "\": " << msg;
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "expected " << typeid(E).name() << ", got " << typeid(e).name()
                                         << ": " << e.what();
  }
  return ::testing::AssertionFailure() << "expected " << typeid(E).name() << ", nothing was thrown";
}

#define EXPECT_ERROR(Kind, stmt, ...) \
  EXPECT_TRUE((::fieldflow::langtest::throws_with<Kind>([&] { stmt; }, {__VA_ARGS__})))

// Calls fn(index) for every absolute index of f's box, in f.dims() order.
inline void for_each_index(const Field& f, const std::function<void(const std::vector<std::int64_t>&)>& fn) {
  if (f.size() == 0) return;
  const std::size_t n = f.dims().size();
  std::vector<std::int64_t> idx = f.origin();
  while (true) {
    fn(idx);
    std::size_t a = n;
    bool advanced = false;
    while (a > 0) {
      --a;
      if (++idx[a] < f.origin()[a] + f.shape()[a]) {
        advanced = true;
        break;
      }
      idx[a] = f.origin()[a];
    }
    if (!advanced) return;
  }
}

// A deterministic, irregular value per index (distinct enough that a wrong neighbour shows).
inline double pattern(const std::vector<std::int64_t>& idx, int seed = 0) {
  std::uint64_t h = 1469598103934665603ull + static_cast<std::uint64_t>(seed) * 7919u;
  for (auto v : idx) {
    h ^= static_cast<std::uint64_t>(v + 1000);
    h *= 1099511628211ull;
  }
  return static_cast<double>(static_cast<std::int64_t>(h % 2001) - 1000) / 64.0;
}

// Fills f with fn(index) (converted to f's dtype).
inline void fill_with(Field& f, const std::function<double(const std::vector<std::int64_t>&)>& fn) {
  for_each_index(f, [&](const std::vector<std::int64_t>& idx) { f.set_from_double(f.offset_of(idx), fn(idx)); });
}
inline void fill_pattern(Field& f, int seed) {
  fill_with(f, [&](const std::vector<std::int64_t>& idx) { return pattern(idx, seed); });
}

// Every element of f as a double, in storage order: compare two snapshots to prove nothing changed.
inline std::vector<double> snapshot(const Field& f) {
  std::vector<double> v(static_cast<std::size_t>(f.size()));
  for (std::int64_t i = 0; i < f.size(); ++i) v[static_cast<std::size_t>(i)] = f.get_as_double(i);
  return v;
}

// Bitwise-equal snapshot check that treats NaN == NaN (sentinels may be NaN).
inline bool same_values(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == b[i] || (a[i] != a[i] && b[i] != b[i]))) return false;
  return true;
}

inline constexpr double kSentinel = -12345.5;
inline constexpr double kIntSentinel = -12345;  // for integer outputs

using Index = std::vector<std::int64_t>;

// Compares every element of `out` (absolute index in out.dims() order) with expected(index) where
// inside(index) holds (everywhere when inside is empty) and with `sentinel` elsewhere. Values agree
// when equal, both NaN, or within rel_tol relative to max(1, |expected|). Reports the first few
// mismatches with their index.
inline ::testing::AssertionResult matches(const Field& out, const std::function<double(const Index&)>& expected,
                                          const std::function<bool(const Index&)>& inside = {},
                                          double rel_tol = 1e-14, double sentinel = kSentinel) {
  int bad = 0, checked = 0;
  std::string report;
  for_each_index(out, [&](const Index& idx) {
    const double got = out.get_as_double(out.offset_of(idx));
    const bool in = !inside || inside(idx);
    const double want = in ? expected(idx) : sentinel;
    ++checked;
    const bool ok = got == want || (got != got && want != want) ||
                    (in && rel_tol > 0 && std::abs(got - want) <= rel_tol * std::max(1.0, std::abs(want)));
    if (!ok && ++bad <= 5) {
      report += "\n  at (";
      for (std::size_t a = 0; a < idx.size(); ++a) report += (a ? ", " : "") + std::to_string(idx[a]);
      report += ") got " + std::to_string(got) + ", expected " + std::to_string(want) + (in ? "" : " (outside)");
    }
  });
  if (checked == 0) return ::testing::AssertionFailure() << "empty field, nothing compared";
  if (bad) return ::testing::AssertionFailure() << bad << " of " << checked << " elements differ:" << report;
  return ::testing::AssertionSuccess();
}

}  // namespace fieldflow::langtest
