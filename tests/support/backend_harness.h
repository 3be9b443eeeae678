#pragma once
// Shared by the compiled-backend tests: run a program on the reference executor and compiled,
// on identical inputs, and compare every output bit for bit.
#include <gtest/gtest.h>

#include <cstring>
#include <exception>
#include <functional>
#include <list>
#include <optional>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

#include "fieldflow/compile.h"
#include "fieldflow/dsl.h"
#include "fieldflow/errors.h"
#include "fieldflow/reference.h"

namespace fieldflow::testing_support {

// fe = 0.5 * (fv(E2V[0]) + fv(E2V[1])) over Edge [0, ne): the smallest program that reads a
// neighbour table, for tests of how tables are bound, checked and copied.
inline ir::Program edge_mean_program() {
  const Dimension Vertex = horizontal_dim("Vertex"), Edge = horizontal_dim("Edge");
  const Connectivity E2V = make_connectivity("E2V", Edge, Vertex, 2);
  ProgramBuilder pb("edge_mean");
  Expr fv = pb.field("fv", {Vertex}, DType::float64), fe = pb.field("fe", {Edge}, DType::float64);
  Expr ne = pb.scalar("ne", DType::int32);
  pb.call("mean", 0.5 * (fv(E2V[0]) + fv(E2V[1])), {fe}, {{Edge, 0, ne}});
  return pb.build();
}

// u = (a(I + 1) + a(I - 1)) / 2 over [1, n - 1) and v = 2 a over [0, n), both x [0, nk): one
// input and two outputs over [I, K], for views that interleave in one array (the components of
// an array of structures).
inline ir::Program components_program() {
  const Dimension I = horizontal_dim("I"), K = vertical_dim("K");
  ProgramBuilder pb("components");
  Expr a = pb.field("a", {I, K}, DType::float64);
  Expr u = pb.field("u", {I, K}, DType::float64), v = pb.field("v", {I, K}, DType::float64);
  Expr n = pb.scalar("n", DType::int32), levels = pb.scalar("nk", DType::int32);
  pb.call("average", (a(I + 1) + a(I - 1)) * 0.5, {u}, {{I, 1, n - 1}, {K, 0, levels}});
  pb.call("twice", a * 2.0, {v}, {{I, 0, n}, {K, 0, levels}});
  return pb.build();
}

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

// The message of the E that f throws; "no error", or the other exception's message prefixed with
// "wrong exception type: ", otherwise (so a test can check the text and the type at once).
template <class E>
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("wrong exception type: ") + e.what();
  }
  return "no error";
}

inline CompileOptions cpu_options(Layout layout = Layout::vertical_fastest) {
  CompileOptions o;
  o.backend = Backend::cpu;
  o.layout = layout;
  return o;
}

// Pairs of (the caller's field, its copy), in argument order.
using FieldPairs = std::vector<std::pair<const Field*, const Field*>>;

// Arguments like `args` but over copies of its fields, kept in `copies`.
inline Arguments copy_arguments(const Arguments& args, std::list<Field>& copies, FieldPairs& pairs) {
  Arguments copy;
  for (const auto& e : args.entries()) {
    switch (e.kind) {
      case Arguments::Entry::Kind::field:
        copies.push_back(e.field->clone());
        copy.field(e.name, copies.back());
        pairs.push_back({e.field, &copies.back()});
        break;
      case Arguments::Entry::Kind::scalar: copy.scalar(e.name, e.scalar); break;
      case Arguments::Entry::Kind::connectivity: copy.connectivity(e.name, *e.table); break;
    }
  }
  return copy;
}

// The reference run on copies of every field, so a compiled run can start from the same data:
// its results (in `pairs`) or the kind of error it raised.
struct ReferenceOutcome {
  std::list<Field> copies;
  FieldPairs pairs;
  const std::type_info* error = nullptr;
  std::exception_ptr exception;
};
inline ReferenceOutcome run_reference_on_copies(const ir::Program& p, const Arguments& args) {
  ReferenceOutcome out;
  Arguments ref_args = copy_arguments(args, out.copies, out.pairs);
  try {
    run_reference(p, ref_args);
  } catch (const Error& e) {
    out.error = &typeid(e);
    out.exception = std::current_exception();
  }
  return out;
}

// The layout to compile for: the one the multi-dimensional fields share (the reference accepts any;
// a compiled variant has one), vertical_fastest when there is none, nullopt when they mix layouts.
inline std::optional<Layout> common_layout(const Arguments& args) {
  std::optional<Layout> layout;
  for (const auto& e : args.entries())
    if (e.kind == Arguments::Entry::Kind::field && e.field->dims().size() > 1) {
      if (layout && *layout != e.field->layout()) return std::nullopt;
      layout = e.field->layout();
    }
  return layout.value_or(Layout::vertical_fastest);
}

}  // namespace fieldflow::testing_support
