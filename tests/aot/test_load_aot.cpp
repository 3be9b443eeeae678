// Programs of ahead-of-time libraries (built by fieldflow_add_library in CMakeLists.txt) give the same
// bits as the same programs JIT-compiled and as the reference executor, at 1-3 threads on the
// parallel path, in every memory mode; load_aot refuses options, descriptors and libraries that do
// not match with typed errors naming what was expected and given.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <sstream>

#include "aot_cases.h"
#include "fieldflow/aot_module.h"
#include "fieldflow/errors.h"
#include "fieldflow/examples.h"
#include "support/backend_harness.h"
#include "toolchain/compiler.h"

namespace fieldflow {
namespace {

using testing_support::error_of;

using testing_support::AotExampleCase;
using testing_support::same_bits;

constexpr TransientMemoryMode kModes[] = {TransientMemoryMode::scoped, TransientMemoryMode::persistent,
                                          TransientMemoryMode::pool, TransientMemoryMode::external};

class AotVsJit : public ::testing::TestWithParam<AotExampleCase> {};

// Sizes above any threshold are not needed: parallel_threshold 0 sends every kernel down the
// parallel path; 3 threads split these sizes unevenly, and the bounded mesh has skip values.
TEST_P(AotVsJit, BitwiseEqualAtOneToThreeThreadsInEveryMemoryMode) {
  const AotExampleCase& c = GetParam();
  const auto& ex = examples::example(c.example);
  std::vector<examples::ExampleSize> sizes = {{19, 13, 9}};
  if (ex.unstructured) sizes.push_back({7, 5, 7, true});
  for (const examples::ExampleSize& size : sizes) {
    auto ref = ex.make_instance(size, c.fields, 5);
    run_reference(ex.program, ref.arguments());
    for (int threads = 1; threads <= 3; ++threads)
      for (TransientMemoryMode mode : kModes) {
        CompileOptions o = testing_support::cpu_options(c.layout);
        o.num_threads = threads;
        o.parallel_threshold = 0;
        o.memory = testing_support::memory_options(mode);
        CompiledProgram aot = load_aot(c.descriptor, o);
        CompiledProgram jit = compile(ex.program, o);
        EXPECT_EQ(aot.memory_mode(), mode);
        auto a = ex.make_instance(size, c.fields, 5), j = ex.make_instance(size, c.fields, 5);
        aot(a.arguments());
        aot(a.arguments());  // a second call (persistent / external memory installed) is the same
        jit(j.arguments());
        for (auto& [name, field] : ref.fields) {
          const std::string what = fmt::format("{}.{} ({} threads, {} mode, {}x{}x{})", c.example, name, threads,
                                               to_string(mode), size.nx, size.ny, size.nk);
          EXPECT_TRUE(same_bits(a.fields.at(name), j.fields.at(name), what + ": AOT vs JIT"));
          EXPECT_TRUE(same_bits(field, a.fields.at(name), what + ": reference vs AOT"));
        }
        if (mode == TransientMemoryMode::external &&
            !aot.memory_plan(size_symbols(ex.program, a.arguments())).transients.empty()) {
          EXPECT_EQ(aot.memory_stats().allocator_calls, 1u);
        }
      }
  }
}

INSTANTIATE_TEST_SUITE_P(Libraries, AotVsJit, ::testing::ValuesIn(testing_support::aot_example_cases()),
                         [](const auto& info) { return testing_support::case_name(info.param); });

// The AOT program's code is the JIT's code but for the names of its two exported functions.
TEST(LoadAot, GeneratedSourceIsTheJitsWithItsOwnSymbols) {
  CompiledProgram aot = load_aot(fieldflow_aot_aot_test_vertical_hdiff(), testing_support::cpu_options());
  CompiledProgram jit = compile(examples::example("hdiff").program, testing_support::cpu_options());
  std::string renamed = aot.generated_source();
  for (const std::string fn : {"run", "abi_version"}) {
    const std::string aot_name = "ff_aot_aot_test_vertical_hdiff_" + fn;
    ASSERT_NE(renamed.find(aot_name), std::string::npos) << aot_name;
    renamed.replace(renamed.find(aot_name), aot_name.size(), "ff_" + fn);
  }
  EXPECT_EQ(renamed, jit.generated_source());
  EXPECT_EQ(aot.schedule_text(), jit.schedule_text());
  EXPECT_EQ(aot.compile_seconds(), 0.0);
  // Two libraries holding a program of one name hold two programs.
  EXPECT_NE(fieldflow_aot_aot_test_vertical_hdiff(), fieldflow_aot_aot_test_horizontal_hdiff());
}

// A DSL program of the generator file, generated with a static scalar (limit = 0.75).
Field column_field(int ni, int nk, double scale) {
  Field f({horizontal_dim("I"), vertical_dim("K")}, DType::float64, {ni, nk});
  for (std::int64_t i = 0; i < f.size(); ++i) f.set_from_double(i, scale * std::sin(0.37 * static_cast<double>(i)));
  return f;
}

TEST(LoadAot, StaticScalarProgramEqualsJitAndReference) {
  const ff_aot_program* d = fieldflow_aot_aot_test_vertical_clipped_scale();
  const AotProgramInfo info = aot_program_info(d);
  EXPECT_EQ(info.library, "aot_test_vertical");
  EXPECT_EQ(info.name, "clipped_scale");
  EXPECT_EQ(info.layout, Layout::vertical_fastest);
  ASSERT_EQ(info.static_scalars.size(), 1u);
  EXPECT_EQ(info.static_scalars.at("limit"), Scalar(0.75));
  EXPECT_EQ(info.abi_version, FF_ABI_VERSION);
  EXPECT_EQ(info.hash.size(), 32u);

  CompileOptions o = testing_support::cpu_options();
  o.static_scalars = info.static_scalars;
  o.parallel_threshold = 0;
  CompiledProgram aot = load_aot(d, o);
  CompiledProgram jit = compile(aot.program(), o);
  const int ni = 40, nk = 7;
  Field in = column_field(ni, nk, 1.5), out_aot = column_field(ni, nk, 0.0), out_jit = out_aot.clone(), out_ref = out_aot.clone();
  auto args = [&](Field& out) {
    return Arguments().field("in", in).field("out", out).scalar("alpha", 3.0).scalar("limit", 0.75).scalar("ni", ni).scalar("nk", nk);
  };
  aot(args(out_aot));
  jit(args(out_jit));
  run_reference(aot.program(), args(out_ref));
  EXPECT_TRUE(same_bits(out_aot, out_jit, "AOT vs JIT"));
  EXPECT_TRUE(same_bits(out_ref, out_aot, "reference vs AOT"));
  // Independently: out(i, k) = min(in, 0.75) * 3 + in(i, k - 1) for k >= 1, untouched at k = 0.
  const double expected = std::min(in.at<double>({5, 3}), 0.75) * 3.0 + in.at<double>({5, 2});
  EXPECT_EQ(out_aot.at<double>({5, 3}), expected);
  EXPECT_EQ(out_aot.at<double>({5, 0}), 0.0);
  // The static scalar stays static: a call passing another value is refused, as for the JIT.
  EXPECT_THROW(aot(Arguments().field("in", in).field("out", out_aot).scalar("alpha", 3.0).scalar("limit", 0.5)
                       .scalar("ni", ni).scalar("nk", nk)),
               ArgumentError);
}

TEST(LoadAot, OptionsMustMatchTheLibrary) {
  const ff_aot_program* d = fieldflow_aot_aot_test_vertical_clipped_scale();
  CompileOptions o = testing_support::cpu_options();
  o.static_scalars = {{"limit", Scalar(0.75)}};
  // Layout.
  CompileOptions wrong_layout = o;
  wrong_layout.layout = Layout::horizontal_fastest;
  std::string msg = error_of<OptionError>([&] { load_aot(d, wrong_layout); });
  EXPECT_NE(msg.find("generated for layout vertical_fastest, options.layout is horizontal_fastest"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'clipped_scale' of library 'aot_test_vertical'"), std::string::npos) << msg;
  // Static scalars: another value, none, an extra one.
  CompileOptions other_value = o;
  other_value.static_scalars["limit"] = Scalar(0.5);
  msg = error_of<OptionError>([&] { load_aot(d, other_value); });
  EXPECT_NE(msg.find("generated with static scalars 'limit=0.75;', options.static_scalars are 'limit=0.5;'"),
            std::string::npos) << msg;
  CompileOptions none = o;
  none.static_scalars.clear();
  msg = error_of<OptionError>([&] { load_aot(d, none); });
  EXPECT_NE(msg.find("options.static_scalars are none"), std::string::npos) << msg;
  CompileOptions extra = o;
  extra.static_scalars["alpha"] = Scalar(2.0);
  msg = error_of<OptionError>([&] { load_aot(d, extra); });
  EXPECT_NE(msg.find("'alpha=2;limit=0.75;'"), std::string::npos) << msg;
  // A program without static scalars given one.
  CompileOptions on_hdiff = testing_support::cpu_options();
  on_hdiff.static_scalars = {{"limit", Scalar(0.75)}};
  EXPECT_THROW(load_aot(fieldflow_aot_aot_test_vertical_hdiff(), on_hdiff), OptionError);
  // Backend and the options compile() checks too.
  CompileOptions reference = o;
  reference.backend = Backend::reference;
  msg = error_of<OptionError>([&] { load_aot(d, reference); });
  EXPECT_NE(msg.find("options.backend must be cpu"), std::string::npos) << msg;
  CompileOptions threads = o;
  threads.num_threads = -1;
  EXPECT_THROW(load_aot(d, threads), OptionError);
  CompileOptions external_without_memory = o;
  external_without_memory.memory.mode = TransientMemoryMode::external;
  EXPECT_THROW(load_aot(d, external_without_memory), OptionError);
}

TEST(LoadAot, NullDescriptorIsAnArgumentError) {
  std::string msg = error_of<ArgumentError>([] { load_aot(nullptr, testing_support::cpu_options()); });
  EXPECT_NE(msg.find("descriptor is null"), std::string::npos) << msg;
  EXPECT_THROW(aot_program_info(nullptr), ArgumentError);
}

// A library generated by another fieldflow: its descriptor's fingerprint or ABI version differs.
TEST(LoadAot, ForeignLibrariesAreRefusedNamingBothVersions) {
  const ff_aot_program& real = *fieldflow_aot_aot_test_vertical_vadv();
  ff_aot_program other_hash = real;
  other_hash.hash = "0123456789abcdef0123456789abcdef";
  std::string msg = error_of<CompileError>([&] { load_aot(&other_hash, testing_support::cpu_options()); });
  EXPECT_NE(msg.find("(fingerprint 0123456789abcdef0123456789abcdef)"), std::string::npos) << msg;
  EXPECT_NE(msg.find(std::string("generates fingerprint ") + real.hash), std::string::npos) << msg;

  ff_aot_program other_abi = real;
  other_abi.abi_version = FF_ABI_VERSION + 1;
  msg = error_of<CompileError>([&] { load_aot(&other_abi, testing_support::cpu_options()); });
  EXPECT_NE(msg.find(fmt::format("generated for ABI version {}", FF_ABI_VERSION + 1)), std::string::npos) << msg;
  EXPECT_NE(msg.find(fmt::format("this fieldflow has ABI version {}", FF_ABI_VERSION)), std::string::npos) << msg;

  ff_aot_program other_format = real;
  other_format.descriptor_version = FF_AOT_DESCRIPTOR_VERSION + 1;
  EXPECT_THROW(load_aot(&other_format, testing_support::cpu_options()), CompileError);
  ff_aot_program not_a_descriptor = real;
  not_a_descriptor.magic = 0;
  EXPECT_THROW(load_aot(&not_a_descriptor, testing_support::cpu_options()), CompileError);
}

// fieldflow_add_library compiles generated code with the JIT's flags (cmake/FieldflowAot.cmake); the
// flags that only say how to build (standard, PIC, shared, OpenMP, include path) come from CMake,
// and so do a sanitized library's sanitizer flags (the JIT adds them to match the library).
TEST(LoadAot, CmakeCompilesGeneratedCodeWithTheJitsFlags) {
  std::vector<std::string> jit;
  for (const auto& f : toolchain::default_compiler_config(true).flags)
    if (f != "-std=c++20" && f != "-fPIC" && f != "-shared" && f != "-fopenmp" && f.rfind("-I", 0) != 0 &&
        f.rfind("-fsanitize=", 0) != 0 && f != "-fno-omit-frame-pointer")
      jit.push_back(f);
  std::vector<std::string> cmake;
  std::istringstream in(FIELDFLOW_AOT_COMPILE_OPTIONS_TEXT);
  for (std::string f; in >> f;) cmake.push_back(f);
  EXPECT_EQ(cmake, jit);
}

}  // namespace
}  // namespace fieldflow
