// Every built-in program compiled for the CPU equals the reference executor bit for bit, in both
// layouts, at two sizes served by the same compiled program.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "codegen/cpu/generate_cpu.h"
#include "fieldflow/examples.h"
#include "support/backend_harness.h"
#include "support/example_cases.h"

namespace fieldflow {
namespace {

using testing_support::same_bits;

using Case = testing_support::ExampleCase;

class CpuExamples : public ::testing::TestWithParam<Case> {};

TEST_P(CpuExamples, EqualsReferenceBitwiseAtTwoSizes) {
  const auto& ex = examples::example(GetParam().name);
  const Layout layout = GetParam().layout;
  CompiledProgram prog = compile(ex.program, testing_support::cpu_options(layout));
  for (const examples::ExampleSize size : {examples::ExampleSize{9, 7, 5}, examples::ExampleSize{6, 11, 3}}) {
    auto ref = ex.make_instance(size, layout, 7);
    auto cpu = ex.make_instance(size, layout, 7);
    run_reference(ex.program, ref.arguments());
    prog(cpu.arguments());
    // All fields, inputs included: untouched regions and inputs must be left as they were.
    for (auto& [name, field] : ref.fields)
      EXPECT_TRUE(same_bits(field, cpu.fields.at(name), ex.name + "." + name)) << "size " << size.nx << "x" << size.ny;
  }
}

TEST_P(CpuExamples, RepeatedCallsGiveIdenticalResults) {
  const auto& ex = examples::example(GetParam().name);
  CompiledProgram prog = compile(ex.program, testing_support::cpu_options(GetParam().layout));
  auto a = ex.make_instance({8, 8, 4}, GetParam().layout, 3);
  auto b = ex.make_instance({8, 8, 4}, GetParam().layout, 3);
  Arguments args = a.arguments();
  prog(args);
  prog(b.arguments());
  for (auto& [name, field] : a.fields) EXPECT_TRUE(same_bits(field, b.fields.at(name), name));
}

// The parallel path: threads start however small the call (parallel_threshold 0), at 1 to 4
// threads (3 splits every size here unevenly), at sizes no thread count or block divides, and for
// mesh programs also on the bounded mesh, whose tables have skip values.
TEST_P(CpuExamples, ParallelPathEqualsReferenceAtOneToFourThreads) {
  const auto& ex = examples::example(GetParam().name);
  const Layout layout = GetParam().layout;
  std::vector<CompiledProgram> programs;
  for (int threads = 1; threads <= 4; ++threads) {
    CompileOptions o = testing_support::cpu_options(layout);
    o.num_threads = threads;
    o.parallel_threshold = 0;
    programs.push_back(compile(ex.program, o));
  }
  std::vector<examples::ExampleSize> sizes = {{13, 7, 5}, {5, 11, 9}};
  if (ex.unstructured) sizes.push_back({7, 5, 7, true});
  for (const examples::ExampleSize& size : sizes) {
    auto ref = ex.make_instance(size, layout, 11);
    run_reference(ex.program, ref.arguments());
    for (int threads = 1; threads <= 4; ++threads) {
      auto cpu = ex.make_instance(size, layout, 11);
      programs[threads - 1](cpu.arguments());
      for (auto& [name, field] : ref.fields)
        EXPECT_TRUE(same_bits(field, cpu.fields.at(name), ex.name + "." + name))
            << threads << " threads, size " << size.nx << "x" << size.ny << "x" << size.nk
            << (size.bounded ? " (bounded mesh)" : "");
    }
  }
}

// The two forms of the element-block loops (LoopForm), each pinned, at 1 and 3 threads on the torus
// and the bounded mesh (rows without some neighbours, so each block has runs of every kind), at
// sizes no block divides; and tuned, whose first calls take the forms in turn: equal to the
// reference at every call, and after the tuning calls it keeps one form. Horizontal-fastest mesh
// programs have both forms; every other program has one, and reports scalar from the start.
TEST_P(CpuExamples, BothLoopFormsAndTheirTuningEqualTheReference) {
  const auto& ex = examples::example(GetParam().name);
  const Layout layout = GetParam().layout;
  const bool forms = codegen::has_loop_forms(compile(ex.program, testing_support::cpu_options(layout)).generated_source());
  EXPECT_EQ(forms, ex.unstructured && layout == Layout::horizontal_fastest) << "which programs have two loop forms";
  const auto expect_reference = [&](CompiledProgram& prog, const examples::ExampleSize& size, std::uint64_t seed,
                                    const std::string& what) {
    auto ref = ex.make_instance(size, layout, seed);
    auto cpu = ex.make_instance(size, layout, seed);
    run_reference(ex.program, ref.arguments());
    prog(cpu.arguments());
    for (auto& [name, field] : ref.fields)
      EXPECT_TRUE(same_bits(field, cpu.fields.at(name), ex.name + "." + name))
          << what << ", size " << size.nx << "x" << size.ny << "x" << size.nk << (size.bounded ? " (bounded mesh)" : "");
  };
  std::vector<examples::ExampleSize> sizes = {{23, 17, 5}};
  if (ex.unstructured) sizes.push_back({21, 19, 4, true});
  for (const LoopForm form : {LoopForm::scalar, LoopForm::vector})
    for (const int threads : {1, 3}) {
      CompileOptions o = testing_support::cpu_options(layout);
      o.loop_form = form;
      o.num_threads = threads;
      o.parallel_threshold = 0;
      CompiledProgram prog = compile(ex.program, o);
      EXPECT_EQ(prog.loop_form(), form);
      for (const auto& size : sizes)
        expect_reference(prog, size, 5, fmt::format("{} form, {} threads", to_string(form), threads));
    }
  CompileOptions o = testing_support::cpu_options(layout);
  o.num_threads = 3;
  o.parallel_threshold = 0;
  CompiledProgram tuned = compile(ex.program, o);
  EXPECT_EQ(tuned.loop_form(), forms ? LoopForm::tuned : LoopForm::scalar);
  constexpr int tuning_calls = 7;  // a warm-up, then three timed calls per form
  for (int call = 0; call < tuning_calls + 2; ++call) {
    expect_reference(tuned, sizes[static_cast<std::size_t>(call) % sizes.size()], 20 + static_cast<std::uint64_t>(call),
                     fmt::format("tuned, call {}", call));
    if (forms && call + 1 < tuning_calls) EXPECT_EQ(tuned.loop_form(), LoopForm::tuned) << "after call " << call;
    else EXPECT_NE(tuned.loop_form(), LoopForm::tuned) << "after call " << call;
  }
  // set_loop_form: a host pins a form, or has the forms timed again (say for new sizes), between
  // calls; a value outside LoopForm changes nothing.
  tuned.set_loop_form(LoopForm::vector);
  EXPECT_EQ(tuned.loop_form(), LoopForm::vector);
  expect_reference(tuned, sizes.back(), 40, "pinned vector after tuning");
  EXPECT_THROW(tuned.set_loop_form(static_cast<LoopForm>(7)), OptionError);
  EXPECT_EQ(tuned.loop_form(), LoopForm::vector);
  tuned.set_loop_form(LoopForm::tuned);
  for (int call = 0; call < tuning_calls; ++call) {
    EXPECT_EQ(tuned.loop_form(), forms ? LoopForm::tuned : LoopForm::scalar) << "retuning, before call " << call;
    expect_reference(tuned, sizes.back(), 50 + static_cast<std::uint64_t>(call), fmt::format("retuning, call {}", call));
  }
  EXPECT_NE(tuned.loop_form(), LoopForm::tuned) << "the second tuning ends after as many calls as the first";
}

INSTANTIATE_TEST_SUITE_P(AllExamples, CpuExamples, ::testing::ValuesIn(testing_support::all_example_cases()),
                         testing_support::example_case_name);

TEST(CpuDeterminism, ThreadCountDoesNotChangeBits) {
  const auto& ex = examples::example("hdiff");
  CompileOptions one = testing_support::cpu_options(), two = testing_support::cpu_options();
  one.num_threads = 1;
  two.num_threads = 2;
  auto a = ex.make_instance({13, 9, 6}, Layout::vertical_fastest, 5);
  auto b = ex.make_instance({13, 9, 6}, Layout::vertical_fastest, 5);
  compile(ex.program, one)(a.arguments());
  compile(ex.program, two)(b.arguments());
  for (auto& [name, field] : a.fields) EXPECT_TRUE(same_bits(field, b.fields.at(name), name));
}

}  // namespace
}  // namespace fieldflow
