// AOT programs need no toolchain at run time. CMakeLists.txt runs this test with the compiler set to
// /bin/false and the cache directory (and the JIT's include directory) below /dev/null, where nothing
// can be created: the JIT fails in this process, every AOT program loads and equals the reference
// executor bit for bit, and no shared object from a cache was ever mapped.
#include <gtest/gtest.h>
#include <link.h>

#include <cstdlib>
#include <filesystem>

#include "aot/aot_cases.h"  // tests/aot/
#include "fieldflow/errors.h"
#include "fieldflow/examples.h"
#include "fieldflow/reference.h"
#include "support/backend_harness.h"

namespace fieldflow {
namespace {

std::vector<std::string> loaded_objects() {
  std::vector<std::string> names;
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* out) {
        static_cast<std::vector<std::string>*>(out)->push_back(info->dlpi_name ? info->dlpi_name : "");
        return 0;
      },
      &names);
  return names;
}

TEST(AotWithoutToolchain, TheEnvironmentLeavesTheJitNoCompilerAndNoCache) {
  ASSERT_STREQ(std::getenv("FIELDFLOW_CXX"), "/bin/false") << "run through ctest (aot_without_toolchain)";
  ASSERT_STREQ(std::getenv("FIELDFLOW_CACHE_DIR"), "/dev/null/fieldflow-cache");
  EXPECT_THROW(compile(examples::example("hdiff").program, testing_support::cpu_options()), Error);
}

TEST(AotWithoutToolchain, EveryProgramEqualsTheReference) {
  using testing_support::same_bits;
  for (const auto& c : testing_support::aot_example_cases()) {
    const auto& ex = examples::example(c.example);
    for (int threads = 1; threads <= 3; ++threads)
      for (TransientMemoryMode mode : {TransientMemoryMode::pool, TransientMemoryMode::external}) {
        CompileOptions o = testing_support::cpu_options(c.layout);
        o.num_threads = threads;
        o.parallel_threshold = 0;
        o.memory = testing_support::memory_options(mode);
        CompiledProgram aot = load_aot(c.descriptor, o);
        auto ref = ex.make_instance({17, 11, 6}, c.fields, 3), got = ex.make_instance({17, 11, 6}, c.fields, 3);
        run_reference(ex.program, ref.arguments());
        aot(got.arguments());
        for (auto& [name, field] : ref.fields)
          EXPECT_TRUE(same_bits(field, got.fields.at(name), testing_support::case_name(c) + "." + name))
              << threads << " threads, " << to_string(mode);
      }
  }
  // Nothing was created where the cache would be, and no generated module was ever loaded.
  EXPECT_FALSE(std::filesystem::exists("/dev/null/fieldflow-cache"));
  for (const auto& name : loaded_objects()) EXPECT_EQ(name.find("module.so"), std::string::npos) << name;
}

}  // namespace
}  // namespace fieldflow
