// The driver's side of the source index (toolchain::ModuleCache::recall_source): the key a
// generated source is recorded under, and compile() finding a program's source again through it.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <cstdlib>
#include <iterator>
#include <optional>
#include <random>
#include <string>

#include <fmt/format.h>
#include <unistd.h>

#include "driver/build_identity.h"
#include "driver/cpu_build.h"
#include "fieldflow/compile.h"
#include "fieldflow/dsl.h"
#include "fieldflow/examples.h"
#include "support/backend_harness.h"

namespace fieldflow {
namespace {
namespace fs = std::filesystem;

const Dimension I = horizontal_dim("I");
const Dimension K = vertical_dim("K");

ir::Program scaled_shift(double weight) {
  ProgramBuilder pb("scaled_shift");
  Expr in = pb.field("in", {I, K}, DType::float64);
  Expr out = pb.field("out", {I, K}, DType::float64);
  Expr w = pb.scalar("w", DType::float64);
  Expr n = pb.scalar("n", DType::int32);
  Expr nk = pb.scalar("nk", DType::int32);
  pb.call("scaled_shift", in(I + 1) * weight + in(I - 1) * w, {out}, {{I, 1, n}, {K, 0, nk}});
  return pb.build();
}

TEST(BuildIdentity, IsTheLinkersBuildIdOfThisLibrary) {
  const std::string& id = driver::build_identity();
  // GNU ld and gold write a 160-bit SHA-1 by default; any non-empty even run of hex digits is one.
  ASSERT_FALSE(id.empty()) << "libfieldflow was linked without --build-id: programs are never found by key";
  EXPECT_EQ(id.size() % 2, 0u);
  EXPECT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos) << id;
  EXPECT_EQ(&driver::build_identity(), &id);  // read once
}

TEST(CpuSourceKey, FollowsEverythingTheSourceIsAFunctionOf) {
  const CompileOptions vf = testing_support::cpu_options(Layout::vertical_fastest);
  const std::string base = driver::cpu_source_key(scaled_shift(0.5), vf);
  EXPECT_EQ(driver::cpu_source_key(scaled_shift(0.5), vf), base);  // an equal program built again
  EXPECT_NE(driver::cpu_source_key(scaled_shift(std::nextafter(0.5, 1.0)), vf), base);
  EXPECT_NE(driver::cpu_source_key(scaled_shift(0.5), testing_support::cpu_options(Layout::horizontal_fastest)), base);
  EXPECT_NE(driver::cpu_source_key(scaled_shift(0.5), vf, "ff_other_"), base);
  // Options the generator does not read leave the key alone.
  CompileOptions other_runtime = vf;
  other_runtime.num_threads = 3;
  other_runtime.memory.mode = TransientMemoryMode::scoped;
  EXPECT_EQ(driver::cpu_source_key(scaled_shift(0.5), other_runtime), base);
  // Static scalars by bits: 0.0 and -0.0 are different literals once folded in.
  CompileOptions zero = vf, minus_zero = vf;
  zero.static_scalars["w"] = Scalar(0.0);
  minus_zero.static_scalars["w"] = Scalar(-0.0);
  const std::string zero_key = driver::cpu_source_key(scaled_shift(0.5), zero);
  EXPECT_NE(zero_key, base);
  EXPECT_NE(driver::cpu_source_key(scaled_shift(0.5), minus_zero), zero_key);
}

class SourceIndexCompile : public ::testing::Test {
 protected:
  void SetUp() override {
    std::random_device random;
    dir_ = fs::temp_directory_path() / fmt::format("fieldflow-test-driver-{}-{:08x}", getpid(), random());
    // The cache also recalls sources from its fallback folder (XDG_CACHE_HOME or ~/.cache): one
    // of this test's own, so records made by other runs on this machine are not found.
    if (const char* x = std::getenv("XDG_CACHE_HOME")) saved_xdg_ = x;
    setenv("XDG_CACHE_HOME", (dir_ / "fallback-home").c_str(), 1);
  }
  void TearDown() override {
    if (saved_xdg_) setenv("XDG_CACHE_HOME", saved_xdg_->c_str(), 1);
    else unsetenv("XDG_CACHE_HOME");
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::optional<std::string> saved_xdg_;
  CompileOptions options(Layout layout) const {
    CompileOptions o = testing_support::cpu_options(layout);
    o.cache_dir = dir_.string();
    return o;
  }
  std::size_t records() const {
    std::error_code ec;
    if (!fs::exists(dir_ / "index", ec)) return 0;
    return static_cast<std::size_t>(std::distance(fs::directory_iterator(dir_ / "index"), fs::directory_iterator()));
  }
  fs::path dir_;
};

// Runs `compiled` and the reference on the same data of example `name`; every output bit for bit.
void expect_matches_reference(const std::string& name, CompiledProgram& compiled, Layout layout) {
  const auto& ex = examples::example(name);
  examples::ExampleInstance inst = ex.make_instance({13, 11, 9}, layout, 7);
  Arguments args = inst.arguments();
  auto ref = testing_support::run_reference_on_copies(ex.program, args);
  ASSERT_EQ(ref.error, nullptr);
  compiled(args);
  for (const auto& [mine, theirs] : ref.pairs) EXPECT_TRUE(testing_support::same_bits(*theirs, *mine, name));
}

TEST_F(SourceIndexCompile, ASecondCompileFindsTheSourceAndTheModule) {
  const auto& ex = examples::example("vadv");
  CompiledProgram first = compile(ex.program, options(Layout::vertical_fastest));
  EXPECT_FALSE(first.cache_hit());
  EXPECT_EQ(records(), 1u);
  CompiledProgram second = compile(ex.program, options(Layout::vertical_fastest));
  EXPECT_TRUE(second.cache_hit());
  EXPECT_EQ(second.generated_source(), first.generated_source());
  EXPECT_EQ(second.generated_source(),
            driver::build_cpu_source(ex.program, options(Layout::vertical_fastest)).source);
  expect_matches_reference("vadv", second, Layout::vertical_fastest);

  // Another layout is another source: its own entry and record, right results.
  CompiledProgram hf = compile(ex.program, options(Layout::horizontal_fastest));
  EXPECT_FALSE(hf.cache_hit());
  EXPECT_NE(hf.generated_source(), first.generated_source());
  EXPECT_EQ(records(), 2u);
  CompiledProgram hf_again = compile(ex.program, options(Layout::horizontal_fastest));
  EXPECT_TRUE(hf_again.cache_hit());
  expect_matches_reference("vadv", hf_again, Layout::horizontal_fastest);
}

TEST_F(SourceIndexCompile, AClearedCacheRebuildsAndRecordsAgain) {
  const auto& ex = examples::example("hdiff");
  { CompiledProgram p = compile(ex.program, options(Layout::vertical_fastest)); }
  fs::remove_all(dir_);  // what `fieldflow cache clear` and a wiped scratch folder leave
  CompiledProgram again = compile(ex.program, options(Layout::vertical_fastest));
  EXPECT_FALSE(again.cache_hit());
  EXPECT_EQ(records(), 1u);
  expect_matches_reference("hdiff", again, Layout::vertical_fastest);
}

}  // namespace
}  // namespace fieldflow
