// Fields and neighbour tables over the caller's own memory (Field::view, NeighborTable::view):
// every built-in program run on views in C order, Fortran order and padded layouts, compiled for
// the matching layout and for Layout::any, compared element by element with the reference
// executor on ordinary fields; padding is never written; bad views are typed errors before
// anything runs.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "fieldflow/compile.h"
#include "fieldflow/dsl.h"
#include "fieldflow/errors.h"
#include "fieldflow/examples.h"
#include "fieldflow/mesh.h"
#include "fieldflow/reference.h"
#include "support/backend_harness.h"
#include "support/host_arrays.h"

namespace fieldflow {
namespace {

using testing_support::AxisOrder;
using testing_support::HostArray;

// Options that put every kernel on its parallel path, with `threads` threads.
CompileOptions on_threads(int threads) {
  CompileOptions o;
  o.num_threads = threads;
  o.parallel_threshold = 0;
  return o;
}

::testing::AssertionResult same_values(const Field& expected, const Field& got, const std::string& what) {
  std::string first;
  expected.for_each_index([&](const std::vector<std::int64_t>& index) {
    if (!first.empty()) return;
    const std::size_t n = size_of(expected.dtype());
    if (std::memcmp(static_cast<const char*>(expected.data()) + expected.offset_of(index) * n,
                    static_cast<const char*>(got.data()) + got.offset_of(index) * n, n) != 0)
      first = fmt::format("{} differs at offset {}: expected {}, got {}", what, expected.offset_of(index),
                          expected.get_as_double(expected.offset_of(index)), got.get_as_double(got.offset_of(index)));
  });
  if (first.empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << first;
}

// A neighbour table copied into caller memory in C or Fortran order, read through a view.
struct HostTable {
  std::vector<std::int32_t> entries;
  NeighborTable view;
  HostTable(const NeighborTable& t, bool fortran) : entries(static_cast<std::size_t>(t.n_source * t.max_neighbors)) {
    for (std::int64_t i = 0; i < t.n_source; ++i)
      for (int k = 0; k < t.max_neighbors; ++k)
        entries[static_cast<std::size_t>(fortran ? k * t.n_source + i : i * t.max_neighbors + k)] = t(i, k);
    view = NeighborTable::view(t.name, t.source, t.target, t.n_source, t.n_target, t.max_neighbors, entries.data(),
                               fortran ? 1 : t.max_neighbors, fortran ? t.n_source : 1);
  }
};

struct Case {
  Layout compiled;  // the program's layout
  Layout fields;    // the layout the reference fields (and the unit stride of the views) have
  AxisOrder order;
  std::int64_t pad;
};

void run_example_on_views(const examples::Example& ex, const Case& c, int threads) {
  SCOPED_TRACE(fmt::format("{}: compiled {}, fields {}, {} threads", ex.name, to_string(c.compiled), to_string(c.fields),
                           threads));
  examples::ExampleSize size{12, 7, 5, ex.unstructured};  // bounded mesh: tables with skip values
  examples::ExampleInstance expected = ex.make_instance(size, c.fields, 7);
  examples::ExampleInstance given = ex.make_instance(size, c.fields, 7);
  run_reference(ex.program, expected.arguments());

  std::map<std::string, std::unique_ptr<HostArray>> arrays;
  std::map<std::string, std::unique_ptr<HostTable>> tables;
  Arguments args;
  for (auto& [name, f] : given.fields) {
    arrays[name] = std::make_unique<HostArray>(f, testing_support::axis_order(f.dims(), c.order), c.pad);
    args.field(name, arrays[name]->view());
  }
  for (const auto& [name, v] : given.scalars) args.scalar(name, v);
  for (const auto& name : given.connectivities) {
    tables[name] = std::make_unique<HostTable>(given.mesh->table(name), c.order == AxisOrder::fortran);
    args.connectivity(name, tables[name]->view);
  }
  CompileOptions o = on_threads(threads);
  o.layout = c.compiled;
  CompiledProgram program = compile(ex.program, o);
  program(args);
  for (const auto& [name, f] : expected.fields) {
    EXPECT_TRUE(same_values(f, arrays.at(name)->view(), name));
    EXPECT_TRUE(arrays.at(name)->padding_untouched()) << name << ": padding or slack was written";
  }
}

// Views whose unit-stride dimension is the compiled layout's, the other strides in C or Fortran
// order and padded: the module compiled for that layout runs them unchanged.
TEST(Views, EveryExampleInItsLayoutWithPaddedStrides) {
  for (const auto& ex : examples::all_examples()) {
    run_example_on_views(ex, {Layout::vertical_fastest, Layout::vertical_fastest, AxisOrder::c, 3}, 3);
    run_example_on_views(ex, {Layout::horizontal_fastest, Layout::horizontal_fastest, AxisOrder::fortran, 5}, 2);
  }
}

// Layout::any reads every stride: C order, Fortran order and a scrambled order all run.
TEST(Views, LayoutAnyRunsEveryStrideOrder) {
  for (const auto& ex : examples::all_examples())
    for (AxisOrder order : {AxisOrder::c, AxisOrder::fortran, AxisOrder::scrambled})
      run_example_on_views(ex, {Layout::any, Layout::vertical_fastest, order, order == AxisOrder::c ? 0 : 3},
                           order == AxisOrder::scrambled ? 1 : 3);
}

const Dimension I = horizontal_dim("I"), J = horizontal_dim("J"), K = vertical_dim("K");

// out = a(I+1) + a(I-1) over [1, n-1) x [0, nk).
ir::Program shift_program() {
  ProgramBuilder pb("shift");
  Expr a = pb.field("a", {I, K}, DType::float64), out = pb.field("out", {I, K}, DType::float64);
  Expr n = pb.scalar("n", DType::int32), nk = pb.scalar("nk", DType::int32);
  pb.call("s", a(I + 1) + a(I - 1), {out}, {{I, 1, n - 1}, {K, 0, nk}});
  return pb.build();
}

TEST(Views, LayoutMismatchNamesBothAndAnyAcceptsIt) {
  const ir::Program p = shift_program();
  std::vector<double> a(6 * 4, 1.0), out(6 * 4, 0.0);
  // C order over (I, K): K is unit-stride (vertical_fastest); a horizontal_fastest program refuses it.
  Field va = Field::view(a.data(), {I, K}, DType::float64, {6, 4}, {4, 1});
  Field vo = Field::view(out.data(), {I, K}, DType::float64, {6, 4}, {4, 1});
  Arguments args;
  args.field("a", va).field("out", vo).scalar("n", 6).scalar("nk", 4);
  CompileOptions o;
  o.layout = Layout::horizontal_fastest;
  try {
    compile(p, o)(args);
    FAIL() << "expected LayoutError";
  } catch (const LayoutError& e) {
    EXPECT_NE(std::string(e.what()).find("horizontal_fastest"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("unit stride along I"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("given stride 4"), std::string::npos) << e.what();
  }
  EXPECT_EQ(out, std::vector<double>(24, 0.0));  // nothing written
  o.layout = Layout::any;
  compile(p, o)(args);
  for (int i = 1; i < 5; ++i)
    for (int k = 0; k < 4; ++k) EXPECT_EQ(out[i * 4 + k], 2.0);
  EXPECT_EQ(out[0], 0.0);
}

TEST(Views, BadViewsAreRejectedWhenMade) {
  std::vector<double> mem(64, 0.0);
  EXPECT_THROW(Field::view(nullptr, {I, K}, DType::float64, {4, 4}, {4, 1}), ArgumentError);
  EXPECT_NO_THROW(Field::view(nullptr, {I, K}, DType::float64, {0, 4}, {4, 1}));  // empty: no data needed
  try {
    Field::view(reinterpret_cast<char*>(mem.data()) + 4, {I, K}, DType::float64, {4, 4}, {4, 1});
    FAIL() << "expected ArgumentError";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("misaligned for float64"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Field::view(mem.data(), {I, K}, DType::float64, {4, 4}, {-4, 1}), ArgumentError);
  EXPECT_THROW(Field::view(mem.data(), {I, K}, DType::float64, {4, 4}, {1}), ArgumentError);
  EXPECT_THROW(Field::view(mem.data(), {I, K}, DType::float64, {4}, {4, 1}), ArgumentError);
  Field owned({I, K}, DType::float64, {4, 4});
  EXPECT_THROW(owned.set_view_data(mem.data()), ArgumentError);
  Field v = Field::view(mem.data(), {I, K}, DType::float64, {4, 4}, {4, 1});
  EXPECT_THROW(v.set_view_data(nullptr), ArgumentError);
  EXPECT_EQ(v.data(), mem.data());  // a rejected set_view_data changes nothing
  EXPECT_THROW(Field({I, K}, DType::float64, {4, 4}, {}, Layout::any), ArgumentError);

  const std::int32_t entries[4] = {0, 1, 1, 0};
  EXPECT_THROW(NeighborTable::view("E2V", "Edge", "Vertex", 2, 2, 2, nullptr, 2, 1), ConnectivityError);
  EXPECT_THROW(NeighborTable::view("E2V", "Edge", "Vertex", 2, 2, 2, entries, -2, 1), ConnectivityError);
  EXPECT_THROW(NeighborTable::view("E2V", "Edge", "Vertex", 2, 2, 0, entries, 2, 1), ConnectivityError);
  EXPECT_THROW(NeighborTable::view("E2V", "Edge", "Vertex", 2, 2, 2,
                                   reinterpret_cast<const std::int32_t*>(reinterpret_cast<const char*>(entries) + 2), 2, 1),
               ConnectivityError);
}

// Counts, spans and index ends are int64 arithmetic everywhere (bindings, generated code, the
// reference): a shape, stride or origin whose product, span or end does not fit would wrap into a
// small number and address memory the array does not have. Found by fuzz_c_api: a table of 60
// rows with a row stride of 2^62 was accepted.
TEST(Views, GeometryBeyond64BitsIsRefusedWhenMade) {
  std::vector<double> mem(64, 0.0);
  const std::int64_t big = std::int64_t(1) << 40, huge = std::int64_t(1) << 62;
  auto refused = [](auto make, const std::string& says) {
    try {
      make();
      ADD_FAILURE() << "accepted; expected an error saying '" << says << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  // Elements: 2^40 x 2^40 wraps to 0.
  refused([&] { Field::view(mem.data(), {I, K}, DType::float64, {big, big}, {0, 0}); },
          "holds more elements than a 64-bit count");
  refused([&] { Field({I, K}, DType::float64, {big, big}); }, "holds more elements than a 64-bit count");
  refused([&] { Field({I, J, K}, DType::float64, {big, big, 0}); }, "holds more elements than a 64-bit count");
  // Bytes: 2^62 float64 elements are 2^65 bytes.
  refused([&] { Field::view(mem.data(), {I, K}, DType::float64, {huge, 1}, {1, 1}); }, "bytes");
  refused([&] { Field({I, K}, DType::float64, {huge, 1}); }, "bytes");
  // The span: 3 elements 2^62 apart.
  refused([&] { Field::view(mem.data(), {I, K}, DType::int32, {3, 1}, {huge, 1}); }, "span");
  // The last element exactly 2^63 - 1 elements past the first: counting it overflowed (UBSan,
  // found by the fuzz_c_api harness in its own copy of this arithmetic).
  refused([&] { Field::view(mem.data(), {I, K}, DType::int32, {2, 1}, {INT64_MAX, 1}); }, "span");
  // The index end: origin + extent.
  refused([&] { Field::view(mem.data(), {I, K}, DType::float64, {2, 1}, {1, 1}, {INT64_MAX, 0}); }, "origin");
  refused([&] { Field::view(mem.data(), {I, K}, DType::float64, {2, 1}, {1, 1}, {INT64_MIN, 0}); }, "origin");
  // Tables: the last entry's offset, 59 * 2^62 + 60.
  const std::int32_t entries[4] = {0, 1, 1, 0};
  refused([&] { NeighborTable::view("E2V", "Edge", "Vertex", 60, 20, 2, entries, huge, 60); }, "last entry");
  refused([&] { NeighborTable::view("E2V", "Edge", "Vertex", huge, 20, 4, entries, 1, huge); }, "last entry");
  refused([&] { NeighborTable::view("E2V", "Edge", "Vertex", 2, 20, 1, entries, INT64_MAX, 1); }, "last entry");
  // Within 64 bits (stride 0 folds a large extent onto one element) is a view like any other.
  EXPECT_NO_THROW(Field::view(mem.data(), {I, K}, DType::float64, {big, 1}, {0, 0}));
  EXPECT_NO_THROW(Field::view(mem.data(), {I, K}, DType::float64, {2, 1}, {1, 1}, {INT64_MAX - 2, 0}));
  EXPECT_NO_THROW(NeighborTable::view("E2V", "Edge", "Vertex", 2, 2, 2, entries, 2, 1));
}

TEST(Views, BadViewsAreRejectedBeforeAnythingRuns) {
  const ir::Program p = shift_program();
  CompiledProgram program = compile(p, CompileOptions{});
  std::vector<double> a(6 * 4, 1.0), out(6 * 4, -1.0), big(12 * 4, 0.0);
  Field va = Field::view(a.data(), {I, K}, DType::float64, {6, 4}, {4, 1});
  auto call = [&](Field& input, Field& output) {
    program(Arguments().field("a", input).field("out", output).scalar("n", 6).scalar("nk", 4));
  };
  // An output whose strides map several indices to one element (stride 0 along I).
  Field overlapping = Field::view(out.data(), {I, K}, DType::float64, {6, 4}, {0, 1});
  EXPECT_THROW(call(va, overlapping), ArgumentError);
  // An output over the input's memory.
  Field over_input = Field::view(a.data(), {I, K}, DType::float64, {6, 4}, {4, 1});
  EXPECT_THROW(call(va, over_input), ArgumentError);
  // Too small for the domain plus the halo the call reads: a shape of 5 along I.
  Field short_input = Field::view(a.data(), {I, K}, DType::float64, {5, 4}, {4, 1});
  Field vo = Field::view(out.data(), {I, K}, DType::float64, {6, 4}, {4, 1});
  EXPECT_THROW(call(short_input, vo), DomainError);
  EXPECT_EQ(out, std::vector<double>(24, -1.0));  // none of these wrote anything
  // Views of one array whose elements meet: the odd rows, and the same one element earlier.
  Field odd = Field::view(big.data() + 4, {I, K}, DType::float64, {6, 4}, {8, 1});
  Field odd_shifted = Field::view(big.data() + 3, {I, K}, DType::float64, {6, 4}, {8, 1});
  std::fill(big.begin(), big.end(), 3.0);
  const std::vector<double> big_before = big;
  try {
    call(odd, odd_shifted);
    ADD_FAILURE() << "an output over its input's elements was accepted";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("output 'out' and argument 'a' share memory"), std::string::npos) << e.what();
  }
  EXPECT_EQ(big, big_before);
  // An input may repeat itself (stride 0): a column broadcast along I.
  std::vector<double> column = {1, 2, 3, 4};
  Field broadcast = Field::view(column.data(), {I, K}, DType::float64, {6, 4}, {0, 1});
  call(broadcast, vo);
  for (int i = 1; i < 5; ++i)
    for (int k = 0; k < 4; ++k) EXPECT_EQ(out[i * 4 + k], 2.0 * (k + 1));
}

// Views that interleave in one array without sharing an element may be inputs and outputs of one
// call: the components of an array of structures (I, component, K), where a reads one component,
// u and v write the others. Their spans overlap; only their elements count. The compiled code,
// on 1 to 3 threads over rows longer than a block, and the reference write exactly their
// elements, equal to plain loops; the component nobody writes keeps its values.
TEST(Views, InterleavedViewsAreInputsAndOutputsOfOneCall) {
  const ir::Program p = testing_support::components_program();
  const std::int64_t ni = 37, nk = 9, components = 4;
  std::vector<double> aos(static_cast<std::size_t>(ni * components * nk));
  const auto at = [&](int c, std::int64_t i, std::int64_t k) -> double& {
    return aos[static_cast<std::size_t>((i * components + c) * nk + k)];
  };
  const auto component = [&](int c) {
    return Field::view(aos.data() + c * nk, {I, K}, DType::float64, {ni, nk}, {components * nk, 1});
  };
  Field fa = component(0), fu = component(1), fv = component(2);
  Arguments args;
  args.field("a", fa).field("u", fu).field("v", fv).scalar("n", ni).scalar("nk", nk);
  const auto check = [&](const std::string& what) {
    for (std::int64_t i = 0; i < ni; ++i)
      for (std::int64_t k = 0; k < nk; ++k) {
        ASSERT_EQ(at(0, i, k), static_cast<double>(i * 3 + k)) << what << ": a at " << i << ", " << k;
        const double u_expected = i == 0 || i == ni - 1 ? -1.0 : (at(0, i + 1, k) + at(0, i - 1, k)) * 0.5;
        ASSERT_EQ(at(1, i, k), u_expected) << what << ": u at " << i << ", " << k;
        ASSERT_EQ(at(2, i, k), 2.0 * at(0, i, k)) << what << ": v at " << i << ", " << k;
        ASSERT_EQ(at(3, i, k), -3.0) << what << ": the fourth component, which nobody writes";
      }
  };
  const auto reset = [&] {
    for (std::int64_t i = 0; i < ni; ++i)
      for (std::int64_t k = 0; k < nk; ++k) {
        at(0, i, k) = static_cast<double>(i * 3 + k);
        at(1, i, k) = -1.0;
        at(2, i, k) = -2.0;
        at(3, i, k) = -3.0;
      }
  };
  reset();
  run_reference(p, args);
  check("reference");
  for (Layout layout : {Layout::vertical_fastest, Layout::any})
    for (int threads : {1, 2, 3}) {
      CompileOptions o = on_threads(threads);
      o.layout = layout;
      reset();
      compile(p, o)(args);
      check(fmt::format("{}, {} threads", to_string(layout), threads));
    }
}

// An output whose strides are not nested but whose elements are distinct is an output like any
// other: strides 5 along I and 37 along K over 37 x 9 points never meet (5 di = 37 dk has no
// solution with |di| < 37), although a stride does not step over the faster axis's extent. Both
// backends write exactly its elements, equal to plain loops, and none of the holes between them.
TEST(Views, AnOutputOfIrregularStridesWithDistinctElementsIsWritten) {
  const ir::Program p = shift_program();
  const std::int64_t ni = 37, nk = 9, si = 5, sk = 37;
  std::vector<double> a(static_cast<std::size_t>(ni * nk)), out(static_cast<std::size_t>((ni - 1) * si + (nk - 1) * sk + 1));
  for (std::size_t e = 0; e < a.size(); ++e) a[e] = static_cast<double>(e % 23) - 4.0;
  Field va = Field::view(a.data(), {I, K}, DType::float64, {ni, nk}, {nk, 1});
  Field vo = Field::view(out.data(), {I, K}, DType::float64, {ni, nk}, {si, sk});
  ASSERT_TRUE(vo.elements_distinct());
  Arguments args;
  args.field("a", va).field("out", vo).scalar("n", ni).scalar("nk", nk);
  const auto check = [&](const std::string& what) {
    std::vector<bool> element(out.size(), false);
    for (std::int64_t i = 0; i < ni; ++i)
      for (std::int64_t k = 0; k < nk; ++k) {
        const auto o = static_cast<std::size_t>(i * si + k * sk);
        element[o] = true;
        const double expected = i == 0 || i == ni - 1 ? -1.0 : a[(i + 1) * nk + k] + a[(i - 1) * nk + k];
        ASSERT_EQ(out[o], expected) << what << ": out at " << i << ", " << k;
      }
    for (std::size_t o = 0; o < out.size(); ++o) {
      if (!element[o]) {
        ASSERT_EQ(out[o], -7.0) << what << ": the hole at " << o;
      }
    }
  };
  const auto reset = [&] {
    std::fill(out.begin(), out.end(), -7.0);
    for (std::int64_t i = 0; i < ni; ++i)
      for (std::int64_t k = 0; k < nk; ++k) out[static_cast<std::size_t>(i * si + k * sk)] = -1.0;
  };
  reset();
  run_reference(p, args);
  check("reference");
  for (int threads : {1, 2, 3}) {
    CompileOptions o = on_threads(threads);
    o.layout = Layout::any;
    reset();
    compile(p, o)(args);
    check(fmt::format("any, {} threads", threads));
  }
}

// Two views of irregular strides in four axes whose spans meet: whether an element of one is an
// element of the other is a search too large to finish (ir::element_overlap gives up after 2^16
// steps). Both backends refuse the call with a typed error that says so, before writing anything;
// the same views over separate arrays run.
TEST(Views, OutputsThatMayShareMemoryAreRefusedWhenUndecided) {
  const Dimension A = horizontal_dim("A"), B = horizontal_dim("B"), C = horizontal_dim("C");
  ProgramBuilder pb("copy4");
  Expr x = pb.field("x", {A, B, C, K}, DType::float64), y = pb.field("y", {A, B, C, K}, DType::float64);
  pb.call("copy", x * 2.0, {y}, {{A, 0, 2}, {B, 0, 27}, {C, 0, 5}, {K, 0, 29}});
  const ir::Program p = pb.build();
  const std::vector<std::int64_t> shape{2, 27, 5, 29}, out_strides{888, 206, 758, 920}, in_strides{380, 128, 534, 756};
  std::vector<double> memory(40000, -7.0), separate(40000);
  for (std::size_t e = 0; e < separate.size(); ++e) separate[e] = static_cast<double>(e % 101);
  Field out = Field::view(memory.data(), {A, B, C, K}, DType::float64, shape, out_strides);
  Field in = Field::view(memory.data() + 29, {A, B, C, K}, DType::float64, shape, in_strides);
  ASSERT_TRUE(out.elements_distinct());
  Arguments args;
  args.field("x", in).field("y", out);
  CompileOptions o;
  o.layout = Layout::any;
  CompiledProgram compiled = compile(p, o);
  for (const auto& [what, call] : std::vector<std::pair<std::string, std::function<void()>>>{
           {"reference", [&] { run_reference(p, args); }}, {"compiled", [&] { compiled(args); }}}) {
    const std::string message = testing_support::error_of<ArgumentError>(call);
    EXPECT_NE(message.find("output 'y'"), std::string::npos) << what << ": " << message;
    EXPECT_NE(message.find("argument 'x'"), std::string::npos) << what << ": " << message;
    EXPECT_NE(message.find("may share memory"), std::string::npos) << what << ": " << message;
    EXPECT_TRUE(std::all_of(memory.begin(), memory.end(), [](double v) { return v == -7.0; })) << what;
  }
  Field apart = Field::view(separate.data(), {A, B, C, K}, DType::float64, shape, in_strides);
  Arguments ok;
  ok.field("x", apart).field("y", out);
  compiled(ok);
  apart.for_each_index([&](const std::vector<std::int64_t>& index) {
    ASSERT_EQ(static_cast<const double*>(out.data())[out.offset_of(index)],
              2.0 * static_cast<const double*>(apart.data())[apart.offset_of(index)]);
  });
}

// An output without elements (no levels) has no two indices sharing an element, whatever its
// strides: with an empty vertical domain both backends accept it and write nothing (the fuzzer
// found the reference refusing it while compiled code accepted it).
TEST(Views, AnOutputWithoutElementsIsDistinctWhateverItsStrides) {
  const ir::Program p = shift_program();
  std::vector<double> a(6 * 4, 1.0), out(4, -1.0);
  Field va = Field::view(a.data(), {I, K}, DType::float64, {6, 4}, {4, 1});
  Field empty = Field::view(out.data(), {I, K}, DType::float64, {6, 0}, {0, 1}, {0, 1});
  EXPECT_TRUE(empty.elements_distinct());
  Arguments args;
  args.field("a", va).field("out", empty).scalar("n", 6).scalar("nk", 0);
  EXPECT_NO_THROW(run_reference(p, args));
  CompileOptions o;
  o.parallel_threshold = 0;
  EXPECT_NO_THROW(compile(p, o)(args));
  EXPECT_EQ(out, std::vector<double>(4, -1.0));
  // With elements, the same strides do share them: refused by both.
  Field overlapping = Field::view(out.data(), {I, K}, DType::float64, {6, 1}, {0, 1});
  Arguments bad;
  bad.field("a", va).field("out", overlapping).scalar("n", 6).scalar("nk", 1);
  EXPECT_THROW(run_reference(p, bad), ArgumentError);
  EXPECT_THROW(compile(p, o)(bad), ArgumentError);
}

// ICON's tables are Fortran arrays (n_source, max_neighbors); an out-of-range entry is refused
// before anything is written, and the same table object is not scanned again on the next call
// unless its entries pointer or shape changed.
TEST(Views, TableViewsInFortranOrderAndOutOfRangeEntries) {
  const Dimension Vertex = horizontal_dim("Vertex"), Edge = horizontal_dim("Edge");
  const ir::Program p = testing_support::edge_mean_program();
  // 3 edges over 3 vertices, Fortran order: column k holds neighbour k of every edge.
  std::int32_t e2v[6] = {0, 1, 2,  //
                         1, 2, 0};
  std::vector<double> v = {10, 20, 40}, e(3, -1.0);
  Field fvv = Field::view(v.data(), {Vertex}, DType::float64, {3}, {1});
  Field fev = Field::view(e.data(), {Edge}, DType::float64, {3}, {1});
  const NeighborTable t = NeighborTable::view("E2V", "Edge", "Vertex", 3, 3, 2, e2v, 1, 3);
  Arguments args;
  args.field("fv", fvv).field("fe", fev).connectivity("E2V", t).scalar("ne", 3);
  for (Layout layout : {Layout::vertical_fastest, Layout::horizontal_fastest, Layout::any}) {
    CompileOptions o;
    o.layout = layout;
    CompiledProgram program = compile(p, o);
    std::fill(e.begin(), e.end(), -1.0);
    program(args);
    EXPECT_EQ(e, (std::vector<double>{15, 30, 25})) << to_string(layout);
    e2v[4] = 3;  // edge 1's second vertex: out of range (3 vertices)
    std::fill(e.begin(), e.end(), -1.0);
    const NeighborTable bad = NeighborTable::view("E2V", "Edge", "Vertex", 3, 3, 2, e2v, 1, 3);
    try {
      program(Arguments().field("fv", fvv).field("fe", fev).connectivity("E2V", bad).scalar("ne", 3));
      FAIL() << "expected ConnectivityError";
    } catch (const ConnectivityError& err) {
      EXPECT_NE(std::string(err.what()).find("entry (1, 1) is 3"), std::string::npos) << err.what();
    }
    EXPECT_EQ(e, std::vector<double>(3, -1.0));
    e2v[4] = 2;
  }
}

// What a cuda program copies of a table: from its first entry to the last one its strides reach.
TEST(Views, ATablesSpanRunsFromItsFirstEntryToItsLast) {
  std::int32_t entries[16] = {};
  EXPECT_EQ(NeighborTable::view("E2V", "Edge", "Vertex", 3, 3, 2, entries, 2, 1).span_bytes(), 6u * 4);  // C order
  EXPECT_EQ(NeighborTable::view("E2V", "Edge", "Vertex", 3, 3, 2, entries, 1, 3).span_bytes(), 6u * 4);  // Fortran
  EXPECT_EQ(NeighborTable::view("E2V", "Edge", "Vertex", 3, 3, 2, entries, 5, 1).span_bytes(), 12u * 4);  // padded rows
  EXPECT_EQ(NeighborTable::view("E2V", "Edge", "Vertex", 0, 3, 2, entries, 2, 1).span_bytes(), 0u);
  const Mesh mesh = make_torus_mesh(3, 3);
  const NeighborTable& owned = mesh.table("E2V");
  EXPECT_EQ(owned.span_bytes(), static_cast<std::size_t>(owned.n_source * owned.max_neighbors) * 4);
}

// Found by fuzz_c_api (finding 13): a table may declare far more targets than it reaches (a view
// of 3 edges declaring 2^40 or 2^63 - 1 vertices). Binding sized a mark per declared target to
// find the vertices the reads reach: an allocation of that many bytes, which failed (aborting
// under AddressSanitizer). The reached vertices come from the entries alone now; both backends
// read exactly the vertices the entries name.
TEST(Views, ATableDeclaringMoreTargetsThanItReachesCostsNothingMore) {
  const Dimension Vertex = horizontal_dim("Vertex"), Edge = horizontal_dim("Edge");
  const ir::Program p = testing_support::edge_mean_program();
  std::int32_t e2v[6] = {0, 1, 2, 1, 2, 0};  // Fortran order, as above
  std::vector<double> v = {10, 20, 40};
  for (std::int64_t n_vertices : {std::int64_t{1} << 40, std::numeric_limits<std::int64_t>::max()}) {
    std::vector<double> e(3, -1.0), expected(3, -1.0);
    Field fvv = Field::view(v.data(), {Vertex}, DType::float64, {3}, {1});
    Field fev = Field::view(e.data(), {Edge}, DType::float64, {3}, {1});
    Field fexpected = Field::view(expected.data(), {Edge}, DType::float64, {3}, {1});
    const NeighborTable t = NeighborTable::view("E2V", "Edge", "Vertex", 3, n_vertices, 2, e2v, 1, 3);
    run_reference(p, Arguments().field("fv", fvv).field("fe", fexpected).connectivity("E2V", t).scalar("ne", 3));
    EXPECT_EQ(expected, (std::vector<double>{15, 30, 25}));
    compile(p, CompileOptions{})(Arguments().field("fv", fvv).field("fe", fev).connectivity("E2V", t).scalar("ne", 3));
    EXPECT_EQ(e, expected) << n_vertices << " vertices";
  }
}

// A table's entries are checked when a call gives another table object than the last call, even
// one built where a freed table lived (same object and entries addresses, same shape): without
// that, a new table's out-of-range entry would be read unchecked.
TEST(Views, ANewTableObjectAtAFreedTablesAddressIsCheckedAgain) {
  const Dimension Vertex = horizontal_dim("Vertex"), Edge = horizontal_dim("Edge");
  CompiledProgram program = compile(testing_support::edge_mean_program(), CompileOptions{});
  std::int32_t e2v[6] = {0, 1, 1, 2, 2, 0};
  std::vector<double> v = {10, 20, 40}, e(3, -1.0);
  Field fvv = Field::view(v.data(), {Vertex}, DType::float64, {3}, {1});
  Field fev = Field::view(e.data(), {Edge}, DType::float64, {3}, {1});
  std::optional<NeighborTable> table;
  table.emplace(NeighborTable::view("E2V", "Edge", "Vertex", 3, 3, 2, e2v, 2, 1));
  program(Arguments().field("fv", fvv).field("fe", fev).connectivity("E2V", *table).scalar("ne", 3));
  EXPECT_EQ(e, (std::vector<double>{15, 30, 25}));
  table.reset();
  e2v[3] = 3;  // edge 1's second vertex: out of range (3 vertices)
  table.emplace(NeighborTable::view("E2V", "Edge", "Vertex", 3, 3, 2, e2v, 2, 1));
  std::fill(e.begin(), e.end(), -1.0);
  EXPECT_THROW(program(Arguments().field("fv", fvv).field("fe", fev).connectivity("E2V", *table).scalar("ne", 3)),
               ConnectivityError);
  EXPECT_EQ(e, std::vector<double>(3, -1.0));
}

// Found by fuzz_call_binding: another table of the same shape, with the same sizes, is a new
// mesh for everything derived from its entries. Binding skipped that derivation when the sizes
// were unchanged and kept the last table's: the edges a vertex reaches through V2E (the boxes
// where values on edges are computed, the rows of E2V a fixed-index shift reads). So a table
// reaching an edge whose E2V[0] is missing was accepted. Each table must give the reference's
// answer, error or values, whatever table came before. (A missing first vertex on an edge that no
// vertex reaches: AMissingNeighbourOnAnUnreachedRowIsNoError.)
TEST(Views, AnotherTableOfTheSameShapeIsANewMesh) {
  const Dimension Vertex = horizontal_dim("Vertex"), Edge = horizontal_dim("Edge");
  const Connectivity V2E = make_connectivity("V2E", Vertex, Edge, 2), E2V = make_connectivity("E2V", Edge, Vertex, 2);
  ProgramBuilder pb("reach");
  Expr pv = pb.field("pv", {Vertex}, DType::float64), out = pb.field("out", {Vertex}, DType::float64);
  Expr nv = pb.scalar("nv", DType::int32);
  const Expr pe = named("pe", pv(E2V[0]) * 2.0 + pv(E2V[1]));
  pb.call("gather", neighbor_sum(pe(V2E), V2E), {out}, {{Vertex, 0, nv}});
  const ir::Program p = pb.build();
  // 4 vertices, 6 edges; edge 5 has no first vertex.
  std::int32_t e2v[12] = {0, 1, 1, 2, 2, 3, 3, 0, 2, 1, -1, 0};
  const NeighborTable e2v_table = NeighborTable::view("E2V", "Edge", "Vertex", 6, 4, 2, e2v, 2, 1);
  std::vector<double> v = {1.5, -2.0, 4.0, 8.25};
  Field fv = Field::view(v.data(), {Vertex}, DType::float64, {4}, {1});
  // The vertices reach edges 0-3 (a ring); then vertex 0 reaches edge 5 instead of 1, or edge 4.
  std::int32_t ring[8] = {0, 1, 1, 2, 2, 3, 3, 0}, to_missing[8] = {0, 5, 1, 2, 2, 3, 3, 0},
               to_edge_4[8] = {0, 4, 1, 2, 2, 3, 3, 0};
  for (int threads : {1, 2}) {
    CompiledProgram program = compile(p, on_threads(threads));
    for (std::int32_t* v2e : {ring, to_missing, to_edge_4, ring, to_edge_4, to_missing}) {
      const NeighborTable v2e_table = NeighborTable::view("V2E", "Vertex", "Edge", 4, 6, 2, v2e, 2, 1);
      const std::string what = fmt::format("{} threads, vertex 0 reaches edge {}", threads, v2e[1]);
      std::vector<double> expected(4, -1.0), got(4, -1.0);
      Field fexpected = Field::view(expected.data(), {Vertex}, DType::float64, {4}, {1});
      Field fgot = Field::view(got.data(), {Vertex}, DType::float64, {4}, {1});
      const auto args = [&](Field& result) {
        Arguments a;
        a.field("pv", fv).field("out", result).connectivity("V2E", v2e_table).connectivity("E2V", e2v_table).scalar("nv", 4);
        return a;
      };
      const std::string reference_error = testing_support::error_of<DomainError>([&] { run_reference(p, args(fexpected)); });
      const std::string compiled_error = testing_support::error_of<DomainError>([&] { program(args(fgot)); });
      if (v2e == to_missing) {
        EXPECT_NE(reference_error.find("missing neighbour"), std::string::npos) << what << ": " << reference_error;
        EXPECT_NE(compiled_error.find("missing neighbour"), std::string::npos) << what << ": " << compiled_error;
        EXPECT_EQ(got, std::vector<double>(4, -1.0)) << what << ": a refused call writes nothing";
        continue;
      }
      EXPECT_EQ(reference_error, "no error") << what;
      EXPECT_EQ(compiled_error, "no error") << what;
      for (int x = 0; x < 4; ++x) {
        double sum = 0.0;
        for (int n = 0; n < 2; ++n) {
          const std::int32_t edge = v2e[x * 2 + n];
          sum += v[static_cast<std::size_t>(e2v[edge * 2])] * 2.0 + v[static_cast<std::size_t>(e2v[edge * 2 + 1])];
        }
        EXPECT_EQ(expected[static_cast<std::size_t>(x)], sum) << what << ": reference at vertex " << x;
      }
      EXPECT_EQ(got, expected) << what;
    }
  }
}

// A missing neighbour on a row no read reaches is no error, even when reached rows lie on each
// side of it (compiled code used to check fixed-index shifts reached through other tables over
// the bounding range of the rows reached, and so refused what the reference accepts). Edge 2 has
// no first vertex; the vertices reach edges 0, 1, 4 and 5 only. Inlined, pe reads E2V only where
// a vertex needs it. Stored (materialize), pe is computed over edges [0, 6), edge 2 too, which
// would read vertex -1: compiled code refuses that call alone, saying why, and writes nothing.
TEST(Views, AMissingNeighbourOnAnUnreachedRowIsNoError) {
  const Dimension Vertex = horizontal_dim("Vertex"), Edge = horizontal_dim("Edge");
  const Connectivity V2E = make_connectivity("V2E", Vertex, Edge, 2), E2V = make_connectivity("E2V", Edge, Vertex, 2);
  std::int32_t e2v[12] = {0, 1, 1, 2, -1, 3, 3, 0, 2, 1, 3, 0};
  std::int32_t v2e[8] = {0, 1, 1, 4, 4, 5, 5, 0};
  const NeighborTable e2v_table = NeighborTable::view("E2V", "Edge", "Vertex", 6, 4, 2, e2v, 2, 1);
  const NeighborTable v2e_table = NeighborTable::view("V2E", "Vertex", "Edge", 4, 6, 2, v2e, 2, 1);
  std::vector<double> v = {1.5, -2.0, 4.0, 8.25};
  Field fv = Field::view(v.data(), {Vertex}, DType::float64, {4}, {1});
  std::vector<double> plain(4);
  for (int x = 0; x < 4; ++x)
    for (int n = 0; n < 2; ++n) {
      const std::int32_t edge = v2e[x * 2 + n];
      plain[static_cast<std::size_t>(x)] += v[static_cast<std::size_t>(e2v[edge * 2])] * 2.0 + v[static_cast<std::size_t>(e2v[edge * 2 + 1])];
    }
  for (const bool stored : {false, true}) {
    ProgramBuilder pb(stored ? "stored" : "inlined");
    Expr pv = pb.field("pv", {Vertex}, DType::float64), out = pb.field("out", {Vertex}, DType::float64);
    Expr nv = pb.scalar("nv", DType::int32);
    const Expr value = pv(E2V[0]) * 2.0 + pv(E2V[1]);
    const Expr pe = stored ? materialize("pe", value) : named("pe", value);
    pb.call("gather", neighbor_sum(pe(V2E), V2E), {out}, {{Vertex, 0, nv}});
    const ir::Program p = pb.build();
    std::vector<double> expected(4, -1.0);
    Field fexpected = Field::view(expected.data(), {Vertex}, DType::float64, {4}, {1});
    Arguments ref_args;
    ref_args.field("pv", fv).field("out", fexpected).connectivity("V2E", v2e_table).connectivity("E2V", e2v_table).scalar("nv", 4);
    run_reference(p, ref_args);
    EXPECT_EQ(expected, plain) << p.name;
    for (int threads : {1, 2}) {
      CompiledProgram program = compile(p, on_threads(threads));
      std::vector<double> got(4, -1.0);
      Field fgot = Field::view(got.data(), {Vertex}, DType::float64, {4}, {1});
      Arguments args;
      args.field("pv", fv).field("out", fgot).connectivity("V2E", v2e_table).connectivity("E2V", e2v_table).scalar("nv", 4);
      const std::string error = testing_support::error_of<DomainError>([&] { program(args); });
      if (stored) {
        EXPECT_NE(error.find("E2V[0] of Edge 2 is -1"), std::string::npos) << error;
        EXPECT_NE(error.find("stored as 'pe' is computed over Edge [0, 6), the range its readers reach"), std::string::npos)
            << error;
        EXPECT_EQ(got, std::vector<double>(4, -1.0)) << threads << " threads: a refused call writes nothing";
        continue;
      }
      EXPECT_EQ(error, "no error") << p.name << ", " << threads << " threads";
      EXPECT_EQ(got, plain) << p.name << ", " << threads << " threads";
    }
  }
}

// A missing neighbour in a reduction is skipped, and nothing is read for it: a field of edges
// that covers only the edges the vertices reach (a view from edge 2 on, at the start of its
// memory) is enough, and so is an E2V whose rows no vertex reaches lack their vertices.
// Branch-free reductions read some element in place of a missing one; it must be one the call
// was checked to read.
TEST(Views, AMissingNeighbourInAReductionReadsNothingOutsideWhatIsReached) {
  const Dimension Vertex = horizontal_dim("Vertex"), Edge = horizontal_dim("Edge");
  const Connectivity V2E = make_connectivity("V2E", Vertex, Edge, 3), E2V = make_connectivity("E2V", Edge, Vertex, 2);
  // Vertices reach edges 2-5; each vertex has a missing third edge (vertex 3 its first as well).
  std::int32_t v2e[12] = {2, 3, -1, 3, 4, -1, 4, 5, -1, -1, 5, -1};
  std::int32_t e2v[12] = {-1, -1, -1, -1, 0, 1, 1, 2, 2, 3, 3, 0};  // edges 0 and 1 have no vertices
  const NeighborTable v2e_table = NeighborTable::view("V2E", "Vertex", "Edge", 4, 6, 3, v2e, 3, 1);
  const NeighborTable e2v_table = NeighborTable::view("E2V", "Edge", "Vertex", 6, 4, 2, e2v, 2, 1);
  // Heap memory of exactly the edges 2-5, so that ASan sees a read of edge 0 or 1.
  auto edge_values = std::make_unique<double[]>(4);
  for (int e = 0; e < 4; ++e) edge_values[static_cast<std::size_t>(e)] = 0.75 * (e + 1);
  Field fe = Field::view(edge_values.get(), {Edge}, DType::float64, {4}, {1}, {2});
  std::vector<double> v = {1.5, -2.0, 4.0, 8.25};
  Field fv = Field::view(v.data(), {Vertex}, DType::float64, {4}, {1});
  std::vector<double> plain(4, 0.0);
  for (int x = 0; x < 4; ++x)
    for (int n = 0; n < 3; ++n)
      if (const std::int32_t e = v2e[x * 3 + n]; e >= 0)
        plain[static_cast<std::size_t>(x)] += edge_values[static_cast<std::size_t>(e - 2)] *
                                                  v[static_cast<std::size_t>(e2v[e * 2])] +
                                              v[static_cast<std::size_t>(e2v[e * 2 + 1])];
  ProgramBuilder pb("skips");
  Expr pe = pb.field("pe", {Edge}, DType::float64), pv = pb.field("pv", {Vertex}, DType::float64);
  Expr out = pb.field("out", {Vertex}, DType::float64), nv = pb.scalar("nv", DType::int32);
  pb.call("gather", neighbor_sum((pe * pv(E2V[0]) + pv(E2V[1]))(V2E), V2E), {out}, {{Vertex, 0, nv}});
  const ir::Program p = pb.build();
  const auto arguments = [&](Field& result) {
    Arguments a;
    a.field("pe", fe).field("pv", fv).field("out", result).connectivity("V2E", v2e_table).connectivity("E2V", e2v_table);
    return a.scalar("nv", 4);
  };
  std::vector<double> expected(4, -1.0);
  Field fexpected = Field::view(expected.data(), {Vertex}, DType::float64, {4}, {1});
  run_reference(p, arguments(fexpected));
  EXPECT_EQ(expected, plain);
  for (int threads : {1, 2}) {
    CompiledProgram program = compile(p, on_threads(threads));
    std::vector<double> got(4, -1.0);
    Field fgot = Field::view(got.data(), {Vertex}, DType::float64, {4}, {1});
    EXPECT_EQ(testing_support::error_of<DomainError>([&] { program(arguments(fgot)); }), "no error") << threads << " threads";
    EXPECT_EQ(got, plain) << threads << " threads";
  }
}

// Memory whose preceding page is not readable: a read before `data()` faults, in any build.
class AfterAnUnreadablePage {
 public:
  explicit AfterAnUnreadablePage(std::size_t bytes) {
    page_ = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    size_ = page_ + (bytes + page_ - 1) / page_ * page_ + page_;
    base_ = static_cast<char*>(mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    EXPECT_NE(base_, MAP_FAILED);
    EXPECT_EQ(mprotect(base_, page_, PROT_NONE), 0);
  }
  ~AfterAnUnreadablePage() { munmap(base_, size_); }
  AfterAnUnreadablePage(const AfterAnUnreadablePage&) = delete;
  AfterAnUnreadablePage& operator=(const AfterAnUnreadablePage&) = delete;
  template <class T>
  T* data() const { return reinterpret_cast<T*>(base_ + page_); }
  // The unreadable page itself: the entries of a table without rows.
  template <class T>
  const T* unreadable() const { return reinterpret_cast<const T*>(base_); }

 private:
  std::size_t page_ = 0, size_ = 0;
  char* base_ = nullptr;
};

// `run` calls what it is given on the arguments it builds and returns the output: it equals
// `plain` for the reference and for code compiled for `layout` on 1 and 2 threads.
using Caller = std::function<void(const Arguments&)>;
void expect_every_run_equals(const ir::Program& p, Layout layout, const std::function<std::vector<double>(const Caller&)>& run,
                             const std::vector<double>& plain) {
  EXPECT_EQ(run([&](const Arguments& a) { run_reference(p, a); }), plain) << to_string(layout);
  for (int threads : {1, 2}) {
    CompileOptions o = on_threads(threads);
    o.layout = layout;
    CompiledProgram program = compile(p, o);
    EXPECT_EQ(run([&](const Arguments& a) { program(a); }), plain) << to_string(layout) << ", " << threads << " threads";
  }
}

// A vertex without any edge reads nothing in a reduction over its edges: branch-free code reads
// every slot at a stand-in element, and a row without neighbours has none the call reaches (edge
// 0 here is before the memory of the edge field, which covers only edges 2-7, and E2V row 0 has
// no vertices). Both layouts (the vertical one runs the hoisted per-row code and its "every
// neighbour present" copy), 1 and 2 threads, 19 vertices and 5 levels (vector remainders).
TEST(Views, AVertexWithoutEdgesReadsNothingInAReductionOverThem) {
  const Dimension Vertex = horizontal_dim("Vertex"), Edge = horizontal_dim("Edge"), K = vertical_dim("K");
  const Connectivity V2E = make_connectivity("V2E", Vertex, Edge, 3), E2V = make_connectivity("E2V", Edge, Vertex, 2);
  constexpr int nv = 19, ne = 8, nk = 5;
  std::vector<std::int32_t> v2e(nv * 3), e2v(ne * 2);
  for (int x = 0; x < nv; ++x)
    for (int n = 0; n < 3; ++n)  // every fourth vertex has no edge, every third slot is missing
      v2e[static_cast<std::size_t>(x * 3 + n)] = x % 4 == 0 || (x + n) % 3 == 0 ? -1 : 2 + (x + n) % 6;
  for (int e = 0; e < ne; ++e)
    for (int n = 0; n < 2; ++n) e2v[static_cast<std::size_t>(e * 2 + n)] = e < 2 ? -1 : (e * 5 + n * 7) % nv;
  const NeighborTable v2e_table = NeighborTable::view("V2E", "Vertex", "Edge", nv, ne, 3, v2e.data(), 3, 1);
  const NeighborTable e2v_table = NeighborTable::view("E2V", "Edge", "Vertex", ne, nv, 2, e2v.data(), 2, 1);
  ProgramBuilder pb("isolated_vertices");
  Expr pe = pb.field("pe", {Edge, K}, DType::float64), pv = pb.field("pv", {Vertex, K}, DType::float64);
  Expr out = pb.field("out", {Vertex, K}, DType::float64), n = pb.scalar("nv", DType::int32), levels = pb.scalar("nk", DType::int32);
  pb.call("gather", neighbor_sum((pe * pv(E2V[0]) + pv(E2V[1]))(V2E), V2E), {out}, {{Vertex, 0, n}, {K, 0, levels}});
  const ir::Program p = pb.build();
  const auto edge_value = [](int e, int k) { return 0.25 * e - 0.5 * k + 1.0; };
  const auto vertex_value = [](int x, int k) { return 1.5 * x + 0.125 * k - 3.0; };
  std::vector<double> plain(nv * nk, 0.0);  // by (vertex, level)
  for (int x = 0; x < nv; ++x)
    for (int s = 0; s < 3; ++s)
      if (const int e = v2e[static_cast<std::size_t>(x * 3 + s)]; e >= 0)
        for (int k = 0; k < nk; ++k)
          plain[static_cast<std::size_t>(x * nk + k)] += edge_value(e, k) * vertex_value(e2v[static_cast<std::size_t>(e * 2)], k) +
                                                         vertex_value(e2v[static_cast<std::size_t>(e * 2 + 1)], k);
  for (Layout layout : {Layout::vertical_fastest, Layout::horizontal_fastest}) {
    const bool vf = layout == Layout::vertical_fastest;
    // Edges 2-7 only, at the start of memory after an unreadable page.
    AfterAnUnreadablePage edge_memory(sizeof(double) * (ne - 2) * nk);
    double* const edges = edge_memory.data<double>();
    const std::vector<std::int64_t> edge_strides = vf ? std::vector<std::int64_t>{nk, 1} : std::vector<std::int64_t>{1, ne - 2};
    const std::vector<std::int64_t> strides = vf ? std::vector<std::int64_t>{nk, 1} : std::vector<std::int64_t>{1, nv};
    for (int e = 2; e < ne; ++e)
      for (int k = 0; k < nk; ++k) edges[(e - 2) * edge_strides[0] + k * edge_strides[1]] = edge_value(e, k);
    std::vector<double> vertices(nv * nk);
    for (int x = 0; x < nv; ++x)
      for (int k = 0; k < nk; ++k) vertices[static_cast<std::size_t>(x * strides[0] + k * strides[1])] = vertex_value(x, k);
    Field fe = Field::view(edges, {Edge, K}, DType::float64, {ne - 2, nk}, edge_strides, {2, 0});
    Field fv = Field::view(vertices.data(), {Vertex, K}, DType::float64, {nv, nk}, strides);
    const auto run = [&](const Caller& call) {
      std::vector<double> result(nv * nk, -1.0);
      Field fresult = Field::view(result.data(), {Vertex, K}, DType::float64, {nv, nk}, strides);
      Arguments a;
      a.field("pe", fe).field("pv", fv).field("out", fresult).connectivity("V2E", v2e_table).connectivity("E2V", e2v_table);
      call(a.scalar("nv", nv).scalar("nk", nk));
      std::vector<double> by_vertex(nv * nk);
      for (int x = 0; x < nv; ++x)
        for (int k = 0; k < nk; ++k)
          by_vertex[static_cast<std::size_t>(x * nk + k)] = result[static_cast<std::size_t>(x * strides[0] + k * strides[1])];
      return by_vertex;
    };
    expect_every_run_equals(p, layout, run, plain);
  }
}

// No vertex has an edge, and there are no edges: E2V has no rows, so nothing the reduction's
// operand reads exists. Its entries are an unreadable page.
TEST(Views, AReductionOverNeighboursThatDoNotExistReadsNothing) {
  const Dimension Vertex = horizontal_dim("Vertex"), Edge = horizontal_dim("Edge"), K = vertical_dim("K");
  const Connectivity V2E = make_connectivity("V2E", Vertex, Edge, 3), E2V = make_connectivity("E2V", Edge, Vertex, 2);
  constexpr int nv = 11, nk = 3;
  std::vector<std::int32_t> v2e(nv * 3, -1);
  AfterAnUnreadablePage nothing(1);
  const NeighborTable v2e_table = NeighborTable::view("V2E", "Vertex", "Edge", nv, 0, 3, v2e.data(), 3, 1);
  const NeighborTable e2v_table = NeighborTable::view("E2V", "Edge", "Vertex", 0, nv, 2, nothing.unreadable<std::int32_t>(), 2, 1);
  ProgramBuilder pb("no_edges");
  Expr pv = pb.field("pv", {Vertex, K}, DType::float64);
  Expr out = pb.field("out", {Vertex, K}, DType::float64), n = pb.scalar("nv", DType::int32), levels = pb.scalar("nk", DType::int32);
  pb.call("gather", max_over((pv(E2V[0]) - pv(E2V[1]))(V2E), V2E), {out}, {{Vertex, 0, n}, {K, 0, levels}});
  const ir::Program p = pb.build();
  std::vector<double> vertices(nv * nk, 2.5);
  const std::vector<double> plain(nv * nk, std::numeric_limits<double>::lowest());  // the max of nothing
  for (Layout layout : {Layout::vertical_fastest, Layout::horizontal_fastest}) {
    const std::vector<std::int64_t> strides =
        layout == Layout::vertical_fastest ? std::vector<std::int64_t>{nk, 1} : std::vector<std::int64_t>{1, nv};
    Field fv = Field::view(vertices.data(), {Vertex, K}, DType::float64, {nv, nk}, strides);
    const auto run = [&](const Caller& call) {
      std::vector<double> result(nv * nk, -1.0);
      Field fresult = Field::view(result.data(), {Vertex, K}, DType::float64, {nv, nk}, strides);
      Arguments a;
      a.field("pv", fv).field("out", fresult).connectivity("V2E", v2e_table).connectivity("E2V", e2v_table);
      call(a.scalar("nv", nv).scalar("nk", nk));
      return result;
    };
    expect_every_run_equals(p, layout, run, plain);
  }
}

// A neighbour table and an int32 output interleaved in one array (rows of four: three entries,
// then the output's element) share no element: accepted, by the reference and compiled code
// alike, and equal to plain loops. An output over the entries themselves is refused by both
// before anything is written (it would change the neighbours the kernels follow).
TEST(Views, AnOutputInterleavedWithANeighbourTable) {
  const Dimension Vertex = horizontal_dim("Vertex"), Edge = horizontal_dim("Edge");
  const Connectivity V2E = make_connectivity("V2E", Vertex, Edge, 3);
  constexpr int nv = 9, ne = 7;
  std::vector<std::int32_t> memory(nv * 4);
  for (int x = 0; x < nv; ++x)
    for (int n = 0; n < 3; ++n) memory[static_cast<std::size_t>(x * 4 + n)] = (x + n) % 4 == 0 ? -1 : (x * 2 + n) % ne;
  const NeighborTable table = NeighborTable::view("V2E", "Vertex", "Edge", nv, ne, 3, memory.data(), 4, 1);
  std::vector<std::int32_t> edge_values(ne);
  for (int e = 0; e < ne; ++e) edge_values[static_cast<std::size_t>(e)] = 10 * e + 3;
  Field fe = Field::view(edge_values.data(), {Edge}, DType::int32, {ne}, {1});
  ProgramBuilder pb("interleaved");
  Expr pe = pb.field("pe", {Edge}, DType::int32), out = pb.field("out", {Vertex}, DType::int32), n = pb.scalar("nv", DType::int32);
  pb.call("gather", neighbor_sum(pe(V2E), V2E), {out}, {{Vertex, 0, n}});
  const ir::Program p = pb.build();
  std::vector<std::int32_t> plain(nv, 0);
  for (int x = 0; x < nv; ++x)
    for (int k = 0; k < 3; ++k)
      if (const std::int32_t e = memory[static_cast<std::size_t>(x * 4 + k)]; e >= 0)
        plain[static_cast<std::size_t>(x)] += edge_values[static_cast<std::size_t>(e)];
  const auto fourth = [&] {
    std::vector<std::int32_t> v(nv);
    for (int x = 0; x < nv; ++x) v[static_cast<std::size_t>(x)] = memory[static_cast<std::size_t>(x * 4 + 3)];
    return v;
  };
  Field interleaved = Field::view(memory.data() + 3, {Vertex}, DType::int32, {nv}, {4});
  Arguments a;
  a.field("pe", fe).field("out", interleaved).connectivity("V2E", table).scalar("nv", nv);
  run_reference(p, a);
  EXPECT_EQ(fourth(), plain);
  for (int threads : {1, 2}) {
    for (int x = 0; x < nv; ++x) memory[static_cast<std::size_t>(x * 4 + 3)] = -7;
    CompileOptions o = on_threads(threads);
    o.layout = Layout::any;  // the output's stride is 4
    compile(p, o)(a);
    EXPECT_EQ(fourth(), plain) << threads << " threads";
  }
  // The output over the entries of vertices 0-2: refused, nothing written.
  Field over_entries = Field::view(memory.data() + 1, {Vertex}, DType::int32, {nv}, {1});
  Arguments bad;
  bad.field("pe", fe).field("out", over_entries).connectivity("V2E", table).scalar("nv", nv);
  const std::vector<std::int32_t> before = memory;
  for (const bool compiled : {false, true}) {
    try {
      if (compiled) compile(p, CompileOptions{})(bad);
      else run_reference(p, bad);
      ADD_FAILURE() << "an output over a table's entries was accepted" << (compiled ? " (compiled)" : " (reference)");
    } catch (const ArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find("output 'out'"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("neighbour table 'V2E'"), std::string::npos) << e.what();
    }
    EXPECT_EQ(memory, before);
  }
}

// A model swaps time levels: the same views pointed at other memory each step. Results follow
// the memory, and the aliasing check still applies on this fast path.
TEST(Views, SetViewDataFollowsTimeLevels) {
  const ir::Program p = shift_program();
  CompiledProgram program = compile(p, CompileOptions{});
  std::vector<double> level[2] = {std::vector<double>(24), std::vector<double>(24)};
  for (int x = 0; x < 24; ++x) level[0][static_cast<std::size_t>(x)] = x;
  Field now = Field::view(level[0].data(), {I, K}, DType::float64, {6, 4}, {4, 1});
  Field next = Field::view(level[1].data(), {I, K}, DType::float64, {6, 4}, {4, 1});
  Arguments args;
  args.field("a", now).field("out", next).scalar("n", 6).scalar("nk", 4);
  for (int step = 0; step < 4; ++step) {
    const std::vector<double> before = level[step % 2];
    program(args);
    for (int i = 1; i < 5; ++i)
      for (int k = 0; k < 4; ++k)
        EXPECT_EQ(level[(step + 1) % 2][static_cast<std::size_t>(i * 4 + k)],
                  before[static_cast<std::size_t>((i + 1) * 4 + k)] + before[static_cast<std::size_t>((i - 1) * 4 + k)]);
    now.set_view_data(level[(step + 1) % 2].data());
    next.set_view_data(level[step % 2].data());
  }
  next.set_view_data(now.data());  // output over the input
  EXPECT_THROW(program(args), ArgumentError);
  next.set_view_data(level[1].data() == now.data() ? level[0].data() : level[1].data());
  EXPECT_NO_THROW(program(args));
}

// A view over device memory (Device::cuda) is for Backend::cuda programs: the host accessors, the
// reference and the cpu backend refuse it with an ArgumentError naming the field and the memory,
// before anything runs, and the instance works on host fields afterwards. (Its pointer is never
// dereferenced here: host memory stands in for device memory.)
TEST(Views, DeviceMemoryViewsAreRefusedOnTheHost) {
  std::vector<double> stand_in(24, 5.0), a(24), out(24, -1.0);
  for (int x = 0; x < 24; ++x) a[static_cast<std::size_t>(x)] = x;
  Field on_device = Field::view(stand_in.data(), {I, K}, DType::float64, {6, 4}, {4, 1}, {}, Device::cuda);
  EXPECT_EQ(on_device.device(), Device::cuda);
  EXPECT_NE(on_device.describe().find("on cuda"), std::string::npos) << on_device.describe();
  Field host_view = Field::view(a.data(), {I, K}, DType::float64, {6, 4}, {4, 1});
  EXPECT_EQ(host_view.device(), Device::cpu);
  auto expect_refused = [&](auto&& access, const char* what) {
    try {
      access();
      ADD_FAILURE() << what << " read device memory on the host";
    } catch (const ArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find("cuda memory"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  expect_refused([&] { (void)on_device.at<double>({0, 0}); }, "at");
  expect_refused([&] { (void)on_device.get_as_double(0); }, "get_as_double");
  expect_refused([&] { on_device.set_from_double(0, 1.0); }, "set_from_double");
  expect_refused([&] { on_device.fill(1.0); }, "fill");
  expect_refused([&] { (void)on_device.clone(); }, "clone");
  expect_refused([&] { host_view.copy_values_from(on_device); }, "copy_values_from");
  expect_refused([&] { on_device.copy_values_from(host_view); }, "copy_values_from");
  EXPECT_EQ(stand_in, std::vector<double>(24, 5.0));
  EXPECT_THROW(Field::view(a.data(), {I, K}, DType::float64, {6, 4}, {4, 1}, {}, static_cast<Device>(7)),
               ArgumentError);

  const ir::Program p = shift_program();
  Field vo = Field::view(out.data(), {I, K}, DType::float64, {6, 4}, {4, 1});
  for (const char* which : {"input", "output"}) {
    Field& input = std::string(which) == "input" ? on_device : host_view;
    Field& output = std::string(which) == "input" ? vo : on_device;
    const Arguments args = Arguments().field("a", input).field("out", output).scalar("n", 6).scalar("nk", 4);
    const std::string name = std::string(which) == "input" ? "'a'" : "'out'";
    for (Backend b : {Backend::reference, Backend::cpu}) {
      CompileOptions o;
      o.backend = b;
      CompiledProgram program = compile(p, o);
      try {
        program(args);
        ADD_FAILURE() << "backend " << to_string(b) << " ran on a device field";
      } catch (const ArgumentError& e) {
        EXPECT_NE(std::string(e.what()).find("field " + name + " expects host memory"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("cuda memory"), std::string::npos) << e.what();
      }
      // The same instance on host fields: bound afresh, right values.
      program(Arguments().field("a", host_view).field("out", vo).scalar("n", 6).scalar("nk", 4));
      EXPECT_EQ(out[static_cast<std::size_t>(2 * 4 + 1)], a[3 * 4 + 1] + a[1 * 4 + 1]) << to_string(b);
      std::fill(out.begin(), out.end(), -1.0);
    }
  }
  EXPECT_EQ(stand_in, std::vector<double>(24, 5.0));
  // size_symbols reads only shapes and scalars: any memory.
  EXPECT_EQ(size_symbols(p, Arguments().field("a", on_device).field("out", vo).scalar("n", 6).scalar("nk", 4)).at("n"), 6);
}

// CallOptions::cuda_stream belongs to the cuda backend: another backend refuses it, naming both.
TEST(Views, ACudaStreamGivenToAHostProgramIsAnOptionError) {
  const ir::Program p = shift_program();
  std::vector<double> a(24, 1.0), out(24, -1.0);
  Field va = Field::view(a.data(), {I, K}, DType::float64, {6, 4}, {4, 1});
  Field vo = Field::view(out.data(), {I, K}, DType::float64, {6, 4}, {4, 1});
  const Arguments args = Arguments().field("a", va).field("out", vo).scalar("n", 6).scalar("nk", 4);
  int stand_in_stream = 0;
  for (Backend b : {Backend::reference, Backend::cpu}) {
    CompileOptions o;
    o.backend = b;
    CompiledProgram program = compile(p, o);
    try {
      program(args, CallOptions{&stand_in_stream});
      ADD_FAILURE() << "a stream was accepted by backend " << to_string(b);
    } catch (const OptionError& e) {
      EXPECT_NE(std::string(e.what()).find("cuda_stream is for backend cuda"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(std::string("backend ") + std::string(to_string(b))), std::string::npos)
          << e.what();
    }
    EXPECT_EQ(out, std::vector<double>(24, -1.0));
    program(args, CallOptions{});  // no stream: an ordinary call
    EXPECT_EQ(out[4 + 1], 2.0) << to_string(b);
    std::fill(out.begin(), out.end(), -1.0);
  }
}

// Without a layout, a program gets its backend's: vertical_fastest on the host.
TEST(Views, TheDefaultLayoutIsTheBackends) {
  EXPECT_EQ(default_layout(Backend::cpu), Layout::vertical_fastest);
  EXPECT_EQ(default_layout(Backend::reference), Layout::vertical_fastest);
  EXPECT_EQ(default_layout(Backend::cuda), Layout::horizontal_fastest);
  EXPECT_EQ(compile(shift_program(), CompileOptions{}).layout(), Layout::vertical_fastest);
  CompileOptions o;
  o.layout = Layout::horizontal_fastest;
  EXPECT_EQ(compile(shift_program(), o).layout(), Layout::horizontal_fastest);
}

}  // namespace
}  // namespace fieldflow
