// The hand-written baselines of the benchmark suite compute exactly what the programs compute,
// bit for bit: every baseline, in both layouts, against the reference executor, compiled with the
// benchmark's flags, on small sizes (including a single level, the edge case of the vertical
// solver) and on sizes above every block size of the baselines (vadv: several 8-column blocks and
// 2-row blocks with remainders, more levels than the benchmark's 80: 17x19x83; the
// horizontal-fastest mesh kernels' blocks of 128 elements, full and partial, with and without
// missing neighbours: 20x17 and 23x19), on tori and on the bounded mesh whose tables have skip
// values (11x9x83). Every field is compared, so inputs
// and points outside the domain must be left untouched too. Each bound baseline is called twice (its scratch, allocated
// once when bound, is reused), with 3 threads (per-thread scratch, uneven static schedules).
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <ostream>
#include <string>

#include "baselines.h"
#include "fieldflow/errors.h"
#include "fieldflow/examples.h"
#include "fieldflow/reference.h"
#include "support/instance_bits.h"

namespace fieldflow::bench {
namespace {

using testing_support::expect_same_bits;

struct Case {
  std::string program;
  Layout layout;
  examples::ExampleSize size;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.program << (c.layout == Layout::vertical_fastest ? " vertical_fastest " : " horizontal_fastest ")
      << c.size.nx << "x" << c.size.ny << "x" << c.size.nk << (c.size.bounded ? " bounded" : "");
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  return c.program + "_" + (c.layout == Layout::vertical_fastest ? "vf" : "hf") + "_" + std::to_string(c.size.nx) +
         "x" + std::to_string(c.size.ny) + "x" + std::to_string(c.size.nk) + (c.size.bounded ? "_bounded" : "");
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (const auto& ex : examples::all_examples())
    for (Layout layout : {Layout::vertical_fastest, Layout::horizontal_fastest}) {
      // Odd, unequal sizes catch swapped strides; 19 and 21 J rows take several vadv blocks (8
      // columns, 2 rows) and a remainder; 83 levels are more than the benchmark's 80. Meshes: tori,
      // and the bounded mesh whose tables have skip values.
      const std::vector<examples::ExampleSize> sizes =
          ex.unstructured ? std::vector<examples::ExampleSize>{{5, 4, 7}, {3, 6, 1}, {9, 7, 5, true}, {4, 3, 2, true},
                                                               {11, 9, 83, true}, {6, 5, 83},
                                                               {20, 17, 3}, {23, 19, 3, true}}
                          : std::vector<examples::ExampleSize>{{11, 7, 9}, {5, 6, 1}, {3, 4, 2}, {13, 21, 6},
                                                               {17, 19, 83}};
      for (const auto& s : sizes) cases.push_back({ex.name, layout, s});
    }
  return cases;
}

class Baseline : public ::testing::TestWithParam<Case> {};

// Binds the baseline of `program` to `actual` in `form` and calls it twice on 3 threads.
void run_baseline_twice(const std::string& program, examples::ExampleInstance& actual,
                        BaselineForm form = BaselineForm::tuned) {
  const int threads = omp_get_max_threads();
  omp_set_num_threads(3);
  auto run = bind_baseline(program, actual, form);
  run();
  run();
  run = nullptr;
  omp_set_num_threads(threads);
}

TEST_P(Baseline, MatchesReferenceExecutor) {
  const Case& c = GetParam();
  const auto& ex = examples::example(c.program);
  ASSERT_TRUE(has_baseline(c.program, c.layout));
  auto expected = ex.make_instance(c.size, c.layout, 7);
  auto actual = ex.make_instance(c.size, c.layout, 7);
  run_reference(ex.program, expected.arguments());
  // masked_update updates in place: its second call must match a second reference call.
  if (c.program == "masked_update") run_reference(ex.program, expected.arguments());
  run_baseline_twice(c.program, actual);
  expect_same_bits(expected, actual, c.program);
  // The mesh baselines' two forms, each pinned (tuned ran both while binding, then kept one).
  if (ex.unstructured)
    for (const BaselineForm form : {BaselineForm::as_written, BaselineForm::vector}) {
      SCOPED_TRACE(form == BaselineForm::vector ? "vector form" : "as written");
      auto pinned = ex.make_instance(c.size, c.layout, 7);
      run_baseline_twice(c.program, pinned, form);
      expect_same_bits(expected, pinned, c.program);
    }
}

INSTANTIATE_TEST_SUITE_P(Examples, Baseline, ::testing::ValuesIn(all_cases()), case_name);

TEST(Baselines, EveryExampleHasOne) {
  for (const auto& ex : examples::all_examples()) {
    EXPECT_TRUE(has_baseline(ex.name, Layout::vertical_fastest)) << ex.name;
    EXPECT_TRUE(has_baseline(ex.name, Layout::horizontal_fastest)) << ex.name;
  }
  examples::ExampleInstance empty;
  EXPECT_THROW(bind_baseline("no_such_program", empty), Error);
}

// The fused fvm_nabla folds the orientation sign into the edge weight, which is exact only for
// signs of +-1 (a sign of 0 is not: (z S) 0 is NaN where z S overflows, z (S 0) is 0); any other
// value is refused when the baseline is bound.
TEST(Baselines, FvmNablaRefusesSignsOtherThanOrientations) {
  const auto& ex = examples::example("fvm_nabla");
  for (const auto& [value, text] : {std::pair{0.5, "= 0.5,"}, std::pair{0.0, "= 0,"}}) {
    auto inst = ex.make_instance({5, 4, 3}, Layout::vertical_fastest, 1);
    inst.fields.at("sign").data_as<double>()[0] = value;
    try {
      bind_baseline("fvm_nabla", inst);
      ADD_FAILURE() << "a sign of " << value << " was accepted";
    } catch (const ArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("+-1"), std::string::npos) << e.what();
    }
  }
}

// fvm_nabla's edge average 0.5 (a + b) is inexact where a + b is a subnormal with an odd last
// bit, so its 0.5 cannot be folded into the edge weight (0.5 (a + b) S != (a + b) (0.5 S) there):
// a baseline that did would match the reference only on data without such sums. Level 1 holds
// v x the smallest subnormal at vertex v, so the edges between vertices of either parity sum to
// odd multiples of it; edge weights between 0.8 and 1.0; both layouts, on a torus and on the
// bounded mesh.
TEST(Baselines, FvmNablaIsExactWhereEdgeSumsAreSubnormal) {
  const auto& ex = examples::example("fvm_nabla");
  for (Layout layout : {Layout::vertical_fastest, Layout::horizontal_fastest})
    for (const examples::ExampleSize size : {examples::ExampleSize{6, 5, 4}, examples::ExampleSize{11, 9, 4, true}}) {
      SCOPED_TRACE(std::string(to_string(layout)) + (size.bounded ? " bounded" : " torus"));
      const auto instance = [&] {
        auto inst = ex.make_instance(size, layout, 7);
        Field& pp = inst.fields.at("pp");
        for (std::int64_t v = 0; v < pp.shape()[0]; ++v)
          pp.at<double>({v, 1}) = static_cast<double>(v) * std::numeric_limits<double>::denorm_min();
        // Weights that are not powers of two, so the two roundings can differ.
        for (const char* name : {"S_x", "S_y"}) {
          Field& w = inst.fields.at(name);
          for (std::int64_t e = 0; e < w.size(); ++e) w.data_as<double>()[e] = 0.8 + 0.013 * static_cast<double>(e % 17);
        }
        return inst;
      };
      auto expected = instance(), actual = instance();
      run_reference(ex.program, expected.arguments());
      run_baseline_twice("fvm_nabla", actual);
      expect_same_bits(expected, actual, "fvm_nabla");
    }
}

// A baseline's loops are written for one layout: an instance whose fields with levels are in two
// layouts is refused when bound, naming the field in the other layout, whichever field it is (the
// first of the instance's fields decides nothing). Every field with levels of every example, in
// both layouts, is swapped for one in the other layout.
TEST(Baselines, AFieldInTheOtherLayoutIsRefused) {
  for (const auto& ex : examples::all_examples())
    for (Layout layout : {Layout::vertical_fastest, Layout::horizontal_fastest}) {
      const examples::ExampleSize size = ex.unstructured ? examples::ExampleSize{5, 4, 3} : examples::ExampleSize{5, 6, 3};
      const Layout other = layout == Layout::vertical_fastest ? Layout::horizontal_fastest : Layout::vertical_fastest;
      int swapped = 0;
      for (const auto& [name, field] : ex.make_instance(size, layout, 7).fields) {
        const auto& dims = field.dims();
        if (std::none_of(dims.begin(), dims.end(), [](const Dimension& d) { return d.kind == DimKind::vertical; }) ||
            dims.size() < 2)
          continue;
        SCOPED_TRACE(fmt::format("{} {}, field {}", ex.name, to_string(layout), name));
        auto inst = ex.make_instance(size, layout, 7);
        inst.fields.erase(name);
        inst.fields.emplace(name, Field(field.dims(), field.dtype(), field.shape(), field.origin(), other));
        ++swapped;
        try {
          bind_baseline(ex.name, inst);
          ADD_FAILURE() << "a " << to_string(other) << " '" << name << "' was accepted";
        } catch (const ArgumentError& e) {
          const std::string what = e.what();
          EXPECT_NE(what.find(fmt::format("'{}' is {}", name, to_string(other))), std::string::npos) << what;
          EXPECT_NE(what.find(std::string(to_string(layout))), std::string::npos) << what;
        }
      }
      EXPECT_GE(swapped, 2) << ex.name << ": an input and an output with levels";
    }
}

// The mesh baselines walk vertical-fastest fields as contiguous columns: a view whose levels are
// not adjacent (stride 2 along K) is refused when bound, naming the field, its stride and the one
// expected. (A horizontal-fastest view without unit horizontal stride is not that layout's: the
// check above refuses it.)
TEST(Baselines, MeshBaselinesRefuseAViewWhoseLevelsAreNotAdjacent) {
  for (const auto& ex : examples::all_examples()) {
    if (!ex.unstructured) continue;
    const examples::ExampleSize size{5, 4, 3};
    int refused = 0;
    for (const auto& [name, field] : ex.make_instance(size, Layout::vertical_fastest, 7).fields) {
      const auto& dims = field.dims();
      if (dims.size() != 2 || dims[1].kind != DimKind::vertical) continue;
      SCOPED_TRACE(ex.name + ", field " + name);
      auto inst = ex.make_instance(size, Layout::vertical_fastest, 7);
      std::vector<double> memory(static_cast<std::size_t>(field.shape()[0] * field.shape()[1] * 2));
      inst.fields.erase(name);
      inst.fields.emplace(name, Field::view(memory.data(), dims, field.dtype(), field.shape(),
                                            {2 * field.shape()[1], 2}, field.origin()));
      try {
        bind_baseline(ex.name, inst);
        ADD_FAILURE() << "a view of '" << name << "' with levels 2 apart was accepted";
      } catch (const ArgumentError& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find(fmt::format("field '{}' has vertical stride 2, expected 1 (vertical_fastest)", name)), std::string::npos)
            << what;
        ++refused;
      }
    }
    EXPECT_GE(refused, 2) << ex.name << ": an input and an output with levels";
  }
}

TEST(Baselines, CopyKernelCopies) {
  std::vector<double> in(1000), out(1000, -1.0);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = 0.5 * static_cast<double>(i);
  copy_kernel(in.data(), out.data(), static_cast<std::int64_t>(in.size()));
  EXPECT_EQ(in, out);
}

}  // namespace
}  // namespace fieldflow::bench
