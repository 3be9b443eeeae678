// Tests of the toolchain stage: compiler configuration, the on-disk module cache and module loading.
// Every test gets its own empty cache directory, so results never depend on earlier runs or on
// the shared test cache the build configures through FIELDFLOW_CACHE_DIR.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "fieldflow/errors.h"
#include "toolchain/compiler.h"
#include "toolchain/loaded_module.h"
#include "toolchain/module_cache.h"
#include "toolchain/toolchain_support.h"

#if defined(FIELDFLOW_TEST_CLANG_TSAN)
// A reported race ends the process (the death test below relies on it); libomp itself is not
// instrumented, and Archer supplies its synchronisation instead.
extern "C" const char* __tsan_default_options() { return "halt_on_error=1 ignore_noninstrumented_modules=1"; }
#endif

namespace fieldflow::toolchain {
namespace {
namespace fs = std::filesystem;

constexpr const char* kAnswer42 = "extern \"C\" int answer() { return 42; }\n";
constexpr const char* kAnswer43 = "extern \"C\" int answer() { return 43; }\n";

using testing::call_answer;
using testing::read_text;
using testing::ScopedEnv;

// Names in the cache directory that are neither published entries, lock files nor failed/: there
// must be none once all builds are over (no leaked temporary or stale directories).
std::vector<std::string> leftovers(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& item : fs::directory_iterator(dir)) {
    const std::string name = item.path().filename().string();
    if (name.starts_with("tmp-") || name.starts_with("stale-")) names.push_back(name);
  }
  return names;
}

class ModuleCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::random_device random;
    dir_ = fs::temp_directory_path() /
           fmt::format("fieldflow-test-toolchain-{}-{:08x}", getpid(), random());
    fs::create_directories(dir_);
    cache_dir_ = dir_ / "cache";
    // Without OpenMP: the tests exercise caching, not the runtime library, and it compiles faster.
    config_ = default_compiler_config(/*openmp=*/false);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  fs::path dir_;        // scratch space owned by this test
  fs::path cache_dir_;  // not created up front: the cache must create it itself
  CompilerConfig config_;
};

// ---- compiler configuration ----------------------------------------------------------------

TEST(CompilerConfigTest, DefaultFlagsAreExactAndNeverFastMath) {
  ScopedEnv include("FIELDFLOW_INCLUDE_DIR", std::nullopt);
  ScopedEnv march("FIELDFLOW_JIT_MARCH", std::nullopt);
  const CompilerConfig with_omp = default_compiler_config(true);
  const CompilerConfig without_omp = default_compiler_config(false);
  auto has = [](const CompilerConfig& c, const std::string& flag) {
    return std::find(c.flags.begin(), c.flags.end(), flag) != c.flags.end();
  };
  for (const char* flag : {"-std=c++20", "-O3", "-march=native", "-fPIC", "-shared", "-fno-math-errno"}) {
    EXPECT_TRUE(has(with_omp, flag)) << flag;
    EXPECT_TRUE(has(without_omp, flag)) << flag;
  }
  EXPECT_TRUE(has(with_omp, "-fopenmp"));
  EXPECT_FALSE(has(without_omp, "-fopenmp"));
  EXPECT_FALSE(has(with_omp, "-ffast-math"));
  // The include directory is the source tree's include/, which holds the public headers.
  const auto include_flag = std::find_if(with_omp.flags.begin(), with_omp.flags.end(),
                                         [](const std::string& f) { return f.starts_with("-I"); });
  ASSERT_NE(include_flag, with_omp.flags.end());
  EXPECT_TRUE(fs::exists(fs::path(include_flag->substr(2)) / "fieldflow" / "errors.h")) << *include_flag;
}

// FIELDFLOW_JIT_MARCH replaces -march=native (an AVX2 build that valgrind can count on an AVX-512
// machine); a value that is not one word is refused before any compiler runs, naming it.
TEST(CompilerConfigTest, JitMarchComesFromTheEnvironment) {
  const auto marches = [](const CompilerConfig& c) {
    std::vector<std::string> m;
    for (const auto& f : c.flags)
      if (f.starts_with("-march=")) m.push_back(f);
    return m;
  };
  {
    ScopedEnv march("FIELDFLOW_JIT_MARCH", "x86-64-v3");
    EXPECT_EQ(marches(default_compiler_config(true)), std::vector<std::string>{"-march=x86-64-v3"});
  }
  {
    ScopedEnv march("FIELDFLOW_JIT_MARCH", "");
    EXPECT_EQ(marches(default_compiler_config(true)), std::vector<std::string>{"-march=native"});
  }
  ScopedEnv march("FIELDFLOW_JIT_MARCH", "native -O0");
  try {
    default_compiler_config(true);
    FAIL() << "expected OptionError";
  } catch (const OptionError& e) {
    EXPECT_NE(std::string(e.what()).find("FIELDFLOW_JIT_MARCH is 'native -O0'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("x86-64-v3"), std::string::npos) << e.what();
  }
}

// A library built with AddressSanitizer (CMake FIELDFLOW_SANITIZE) compiles generated modules with
// it too (and UBSan; never TSan, see CMakeLists.txt): an out-of-bounds read in a module is then reported like one in the library. The
// flags are in CompilerConfig::flags, hence in the cache key: instrumented and plain modules of
// the same source are different entries.
TEST(CompilerConfigTest, SanitizedLibraryCompilesSanitizedModules) {
  const CompilerConfig config = default_compiler_config(false);
  const auto sanitize = std::find_if(config.flags.begin(), config.flags.end(),
                                     [](const std::string& f) { return f.starts_with("-fsanitize="); });
#if defined(__SANITIZE_ADDRESS__)
  ASSERT_NE(sanitize, config.flags.end());
  EXPECT_NE(sanitize->find("address"), std::string::npos) << *sanitize;
  const fs::path dir = fs::temp_directory_path() / fmt::format("fieldflow-test-sanitized-{}", getpid());
  fs::create_directories(dir);
  std::ofstream(dir / "overflow.cpp") << "extern \"C\" int read_past(int i) {\n"
                                         "  int* p = new int[4]{1, 2, 3, 4};\n  const int v = p[i];\n"
                                         "  delete[] p;\n  return v;\n}\n";
  compile_shared_object(dir / "overflow.cpp", dir / "overflow.so", config);
  {
    LoadedModule module(dir / "overflow.so");
    auto* read_past = reinterpret_cast<int (*)(int)>(module.symbol("read_past"));
    EXPECT_EQ(read_past(3), 4);
    // ASan reports it as a heap-buffer-overflow, or UBSan's object-size check first (it runs
    // before the load; halt_on_error makes either fatal).
    EXPECT_DEATH(read_past(4), "heap-buffer-overflow|insufficient space for an object");
  }
  fs::remove_all(dir);
  CompilerConfig plain = config;
  plain.flags.erase(plain.flags.begin() + (sanitize - config.flags.begin()));
  ModuleCache cache(fs::temp_directory_path() / "fieldflow-test-unused");
  EXPECT_NE(cache.key_for("int x;", config, ""), cache.key_for("int x;", plain, ""));
#elif defined(FIELDFLOW_TEST_CLANG_TSAN)
  // The race preset: modules get ThreadSanitizer and run on libomp, whose barriers Archer
  // annotates (scripts/race.sh sets OMP_TOOL_LIBRARIES). A reduction is race-free; a shared
  // counter written by every thread of a parallel loop is reported.
  ASSERT_NE(sanitize, config.flags.end());
  EXPECT_EQ(*sanitize, "-fsanitize=thread");
  const fs::path dir = fs::temp_directory_path() / fmt::format("fieldflow-test-tsan-{}", getpid());
  fs::create_directories(dir);
  std::ofstream(dir / "race.cpp") << "extern \"C\" int reduced(int n) {\n  int hits = 0;\n"
                                     "#pragma omp parallel for num_threads(4) reduction(+ : hits)\n"
                                     "  for (int i = 0; i < n; ++i) hits += 1;\n  return hits;\n}\n"
                                     "extern \"C\" int racy(int n) {\n  int hits = 0;\n"
                                     "#pragma omp parallel for num_threads(4)\n"
                                     "  for (int i = 0; i < n; ++i) hits += 1;\n  return hits;\n}\n";
  compile_shared_object(dir / "race.cpp", dir / "race.so", default_compiler_config(true));
  {
    LoadedModule module(dir / "race.so");
    auto* reduced = reinterpret_cast<int (*)(int)>(module.symbol("reduced"));
    auto* racy = reinterpret_cast<int (*)(int)>(module.symbol("racy"));
    EXPECT_EQ(reduced(4000), 4000);
    GTEST_FLAG_SET(death_test_style, "threadsafe");  // libomp's threads exist: re-run the binary for the child
    EXPECT_DEATH(racy(4000), "ThreadSanitizer: data race");
  }
  fs::remove_all(dir);
#else
  EXPECT_EQ(sanitize, config.flags.end()) << (sanitize != config.flags.end() ? *sanitize : "");
#endif
}

// Modules include <fieldflow/abi.h>, whose helpers define results: a changed header is a new key.
TEST(CompilerConfigTest, KeyFollowsThePreludeHeader) {
  const fs::path dir = fs::temp_directory_path() / ("fieldflow-test-prelude-" + std::to_string(::getpid()));
  fs::create_directories(dir / "fieldflow");
  const auto write_header = [&](const std::string& text) { std::ofstream(dir / "fieldflow" / "abi.h") << text; };
  CompilerConfig config = default_compiler_config();
  config.flags.erase(std::remove_if(config.flags.begin(), config.flags.end(),
                                    [](const std::string& f) { return f.rfind("-I", 0) == 0; }),
                     config.flags.end());
  config.flags.push_back("-I" + dir.string());
  ModuleCache cache(fs::temp_directory_path() / "fieldflow-test-unused");
  write_header("#define FF_ABI_VERSION 4\n");
  const std::string before = cache.key_for("int x;", config, "");
  EXPECT_EQ(cache.key_for("int x;", config, ""), before);
  write_header("#define FF_ABI_VERSION 4\n/* ff_div changed */\n");
  EXPECT_NE(cache.key_for("int x;", config, ""), before);
  fs::remove_all(dir);
}

TEST(CompilerConfigTest, EnvironmentChoosesCompilerAndIncludeDir) {
  {
    ScopedEnv ff("FIELDFLOW_CXX", "my-ff-cxx");
    ScopedEnv cxx("CXX", "my-cxx");
    EXPECT_EQ(default_compiler_config().cxx, "my-ff-cxx");
  }
  {
    ScopedEnv ff("FIELDFLOW_CXX", std::nullopt);
    ScopedEnv cxx("CXX", "my-cxx");
    EXPECT_EQ(default_compiler_config().cxx, "my-cxx");
  }
  {
    ScopedEnv ff("FIELDFLOW_CXX", std::nullopt);
    ScopedEnv cxx("CXX", std::nullopt);
    EXPECT_EQ(default_compiler_config().cxx, FIELDFLOW_JIT_DEFAULT_CXX);
  }
  ScopedEnv include("FIELDFLOW_INCLUDE_DIR", "/opt/ff/include");
  const auto flags = default_compiler_config().flags;
  EXPECT_EQ(flags.back(), "-I/opt/ff/include");
}

TEST(CompilerConfigTest, IdentityIsStableAndCached) {
  const std::string cxx = default_compiler_config().cxx;
  const std::string identity = compiler_identity(cxx);
  EXPECT_FALSE(identity.empty());
  EXPECT_NE(identity.find('/'), std::string::npos) << identity;  // includes the resolved path
  // After the first call no process is spawned: 1000 lookups take far less than one spawn each.
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(compiler_identity(cxx), identity);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(200));
}

TEST(CompilerConfigTest, NonexistentCompilerIsNamed) {
  EXPECT_THROW(
      {
        try {
          compiler_identity("/nonexistent/fieldflow-no-such-cxx");
        } catch (const CompileError& e) {
          EXPECT_NE(std::string(e.what()).find("/nonexistent/fieldflow-no-such-cxx"), std::string::npos);
          throw;
        }
      },
      CompileError);
}

// ---- cache location ------------------------------------------------------------------------

TEST(ModuleCacheLocationTest, EnvironmentPrecedence) {
  ScopedEnv home("HOME", "/home/someone");
  {
    ScopedEnv ff("FIELDFLOW_CACHE_DIR", "/ff/cache");
    ScopedEnv xdg("XDG_CACHE_HOME", "/xdg");
    EXPECT_EQ(ModuleCache::default_directory(), fs::path("/ff/cache"));
    EXPECT_EQ(ModuleCache().directory(), fs::path("/ff/cache"));
    EXPECT_EQ(ModuleCache("/explicit").directory(), fs::path("/explicit"));
  }
  {
    ScopedEnv ff("FIELDFLOW_CACHE_DIR", std::nullopt);
    ScopedEnv xdg("XDG_CACHE_HOME", "/xdg");
    EXPECT_EQ(ModuleCache::default_directory(), fs::path("/xdg/fieldflow"));
  }
  ScopedEnv ff("FIELDFLOW_CACHE_DIR", std::nullopt);
  ScopedEnv xdg("XDG_CACHE_HOME", std::nullopt);
  EXPECT_EQ(ModuleCache::default_directory(), fs::path("/home/someone/.cache/fieldflow"));
}

// ---- get_or_build --------------------------------------------------------------------------

TEST_F(ModuleCacheTest, MissThenHitReturnsSameWorkingModule) {
  ModuleCache cache(cache_dir_);
  const CompilerConfig with_omp = default_compiler_config(/*openmp=*/true);
  const CacheEntry first = cache.get_or_build("answer", kAnswer42, with_omp, "pipeline-a");
  EXPECT_FALSE(first.was_hit);
  EXPECT_GT(first.compile_seconds, 0.0);
  EXPECT_EQ(first.key.size(), 32u);
  EXPECT_EQ(first.path, cache_dir_ / first.key / "module.so");
  EXPECT_EQ(read_text(cache_dir_ / first.key / "source.cpp"), kAnswer42);
  EXPECT_TRUE(fs::exists(cache_dir_ / first.key / "meta.json"));

  const CacheEntry second = cache.get_or_build("answer", kAnswer42, with_omp, "pipeline-a");
  EXPECT_TRUE(second.was_hit);
  EXPECT_EQ(second.compile_seconds, 0.0);
  EXPECT_EQ(second.key, first.key);
  EXPECT_EQ(second.path, first.path);
  EXPECT_EQ(call_answer(second.path), 42);
}

TEST_F(ModuleCacheTest, ChangedSourceGivesDifferentKeyAndModule) {
  ModuleCache cache(cache_dir_);
  const CacheEntry a = cache.get_or_build("answer", kAnswer42, config_, "");
  const CacheEntry b = cache.get_or_build("answer", kAnswer43, config_, "");
  EXPECT_FALSE(b.was_hit);
  EXPECT_NE(a.key, b.key);
  EXPECT_NE(a.path, b.path);
  EXPECT_EQ(call_answer(a.path), 42);
  EXPECT_EQ(call_answer(b.path), 43);
  EXPECT_EQ(cache.list().size(), 2u);
}

TEST_F(ModuleCacheTest, FlagsAndExtraKeyArePartOfTheKey) {
  ModuleCache cache(cache_dir_);
  const std::string base = cache.key_for(kAnswer42, config_, "");
  EXPECT_EQ(cache.key_for(kAnswer42, config_, ""), base);  // deterministic

  CompilerConfig other_flags = config_;
  other_flags.flags.push_back("-DFIELDFLOW_TEST=1");
  EXPECT_NE(cache.key_for(kAnswer42, other_flags, ""), base);

  // Same characters, split differently between flags: length prefixes keep the keys apart.
  CompilerConfig split1 = config_, split2 = config_;
  split1.flags.insert(split1.flags.end(), {"-DA", "B"});
  split2.flags.insert(split2.flags.end(), {"-D", "AB"});
  EXPECT_NE(cache.key_for(kAnswer42, split1, ""), cache.key_for(kAnswer42, split2, ""));

  EXPECT_NE(cache.key_for(kAnswer42, config_, "pipeline-b"), base);
  // Moving text from the end of the source into extra_key must not collide either.
  EXPECT_NE(cache.key_for("ab", config_, "c"), cache.key_for("a", config_, "bc"));
}

TEST_F(ModuleCacheTest, CorruptedEntriesAreDetectedAndRebuilt) {
  ModuleCache cache(cache_dir_);
  const CacheEntry built = cache.get_or_build("answer", kAnswer42, config_, "");
  const fs::path entry = cache_dir_ / built.key;

  auto expect_rebuilt = [&](const char* what) {
    SCOPED_TRACE(what);
    const CacheEntry rebuilt = cache.get_or_build("answer", kAnswer42, config_, "");
    EXPECT_FALSE(rebuilt.was_hit);
    EXPECT_EQ(rebuilt.key, built.key);
    EXPECT_EQ(call_answer(rebuilt.path), 42);
    EXPECT_TRUE(cache.get_or_build("answer", kAnswer42, config_, "").was_hit);
    EXPECT_TRUE(leftovers(cache_dir_).empty());
  };

  // A partial write: module.so cut in half.
  fs::resize_file(entry / "module.so", fs::file_size(entry / "module.so") / 2);
  expect_rebuilt("truncated module.so");

  // Same size, different bytes: only the hash can tell.
  {
    std::fstream file(entry / "module.so", std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(static_cast<std::streamoff>(fs::file_size(entry / "module.so") / 2));
    file.write("CORRUPTED!", 10);
  }
  expect_rebuilt("overwritten module.so");

  fs::remove(entry / "meta.json");
  expect_rebuilt("missing meta.json");
}

TEST_F(ModuleCacheTest, CompileErrorShowsDiagnosticsAndKeepsSource) {
  ModuleCache cache(cache_dir_);
  const std::string bad = "extern \"C\" int answer() { return fieldflow_undeclared_thing; }\n";
  std::string message;
  try {
    cache.get_or_build("broken", bad, config_, "");
    FAIL() << "expected a CompileError";
  } catch (const CompileError& e) {
    message = e.what();
  }
  const std::string key = cache.key_for(bad, config_, "");
  const fs::path kept = cache_dir_ / "failed" / (key + ".cpp");
  EXPECT_NE(message.find("fieldflow_undeclared_thing"), std::string::npos) << message;  // diagnostics
  EXPECT_NE(message.find(config_.cxx), std::string::npos) << message;                 // command
  EXPECT_NE(message.find(kept.string()), std::string::npos) << message;                // kept source
  ASSERT_TRUE(fs::exists(kept));
  EXPECT_EQ(read_text(kept), bad);
  // Nothing half-built is published or left behind.
  EXPECT_TRUE(cache.list().empty());
  EXPECT_FALSE(fs::exists(cache_dir_ / key));
  EXPECT_TRUE(leftovers(cache_dir_).empty());
}

TEST_F(ModuleCacheTest, ConcurrentProcessesAndThreadsCompileOnce) {
  constexpr int kProcesses = 4;
  constexpr int kThreads = 4;
  // Child exit codes: 0 = correct module from a hit, 2 = correct module it compiled, else failure.
  auto build_and_check = [&]() -> int {
    ModuleCache cache(cache_dir_);
    const CacheEntry entry = cache.get_or_build("answer", kAnswer42, config_, "");
    if (call_answer(entry.path) != 42) return 1;
    return entry.was_hit ? 0 : 2;
  };

  // Fork before any thread exists, so the children start from a consistent single-threaded state.
  std::vector<pid_t> children;
  for (int i = 0; i < kProcesses; ++i) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int code = 1;
      try {
        code = build_and_check();
      } catch (...) {
      }
      _exit(code);  // never return into the test framework in the child
    }
    children.push_back(pid);
  }
  std::atomic<int> thread_misses{0}, thread_failures{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&] {
      try {
        const int code = build_and_check();
        if (code == 2) ++thread_misses;
        if (code == 1) ++thread_failures;
      } catch (...) {
        ++thread_failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  int process_misses = 0;
  for (const pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    const int code = WEXITSTATUS(status);
    EXPECT_TRUE(code == 0 || code == 2) << "child exit code " << code;
    if (code == 2) ++process_misses;
  }
  EXPECT_EQ(thread_failures.load(), 0);
  EXPECT_EQ(process_misses + thread_misses.load(), 1);  // exactly one compilation in total
  EXPECT_EQ(ModuleCache(cache_dir_).list().size(), 1u);
  EXPECT_TRUE(leftovers(cache_dir_).empty());
}

// ---- source index (recall_source / remember_source) ----------------------------------------

TEST_F(ModuleCacheTest, RememberedSourceIsRecalledForTheSameGeneratorKeyOnly) {
  ModuleCache cache(cache_dir_);
  EXPECT_FALSE(cache.recall_source("program P", config_, "x"));  // nothing recorded, no folder yet
  const LoadedEntry built = cache.get_or_load("answer", kAnswer42, config_, "x");
  cache.remember_source("program P", built.entry, config_, "x");
  ASSERT_EQ(std::distance(fs::directory_iterator(cache_dir_ / "index"), fs::directory_iterator()), 1);

  const auto recalled = cache.recall_source("program P", config_, "x");
  ASSERT_TRUE(recalled);
  EXPECT_EQ(*recalled, kAnswer42);
  // A fresh cache object (another process) reads the same record.
  EXPECT_EQ(ModuleCache(cache_dir_).recall_source("program P", config_, "x"), std::optional<std::string>(kAnswer42));
  // Everything that enters the entry's key enters the record's: another generator key, extra
  // key or compiler flag finds nothing.
  EXPECT_FALSE(cache.recall_source("program Q", config_, "x"));
  EXPECT_FALSE(cache.recall_source("program P", config_, "y"));
  CompilerConfig other_flags = config_;
  other_flags.flags.push_back("-DFIELDFLOW_TEST=1");
  EXPECT_FALSE(cache.recall_source("program P", other_flags, "x"));

  // Recording another build under the same generator key replaces the record.
  const LoadedEntry other = cache.get_or_load("answer", kAnswer43, config_, "x");
  cache.remember_source("program P", other.entry, config_, "x");
  EXPECT_EQ(cache.recall_source("program P", config_, "x"), std::optional<std::string>(kAnswer43));
}

TEST_F(ModuleCacheTest, DamagedOrStaleRecordsAreNotBelieved) {
  ModuleCache cache(cache_dir_);
  const LoadedEntry built = cache.get_or_load("answer", kAnswer42, config_, "");
  cache.remember_source("P", built.entry, config_, "");
  const fs::path record = *fs::directory_iterator(cache_dir_ / "index");
  const std::string good = read_text(record);
  ASSERT_EQ(good, built.entry.key + "\n");
  auto write = [&](const std::string& text) {
    fs::remove(record);
    std::ofstream(record) << text;
    fs::permissions(record, fs::perms::owner_read | fs::perms::owner_write);
  };

  for (const std::string& bad : {std::string(""), built.entry.key, built.entry.key + "\nx", std::string(32, 'g') + "\n",
                                "../" + built.entry.key.substr(3) + "\n", std::string(33, '\n')}) {
    write(bad);
    EXPECT_FALSE(cache.recall_source("P", config_, "")) << "record '" << bad << "'";
  }
  // A well-formed record naming no entry (cleared since).
  write(std::string(32, 'a') + "\n");
  EXPECT_FALSE(cache.recall_source("P", config_, ""));

  // The entry's source changed after the build: it no longer hashes to the entry's key.
  write(good);
  ASSERT_TRUE(cache.recall_source("P", config_, ""));
  const fs::path source = cache_dir_ / built.entry.key / "source.cpp";
  const std::string original = read_text(source);
  fs::permissions(source, fs::perms::owner_write, fs::perm_options::add);
  std::ofstream(source) << kAnswer43;
  EXPECT_FALSE(cache.recall_source("P", config_, ""));
  std::ofstream(source) << original;
  ASSERT_TRUE(cache.recall_source("P", config_, ""));

  // An entry folder others may write is not trusted either (its source could be anyone's).
  const fs::path entry = cache_dir_ / built.entry.key;
  fs::permissions(entry, fs::perms::others_write, fs::perm_options::add);
  EXPECT_FALSE(cache.recall_source("P", config_, ""));
  fs::permissions(entry, fs::perms::others_write, fs::perm_options::remove);
  ASSERT_TRUE(cache.recall_source("P", config_, ""));

  // A record others may write is not trusted; nor is a symbolic link in its place.
  fs::permissions(record, fs::perms::others_write, fs::perm_options::add);
  EXPECT_FALSE(cache.recall_source("P", config_, ""));
  write(good);
  const fs::path elsewhere = dir_ / "record";
  std::ofstream(elsewhere) << good;
  fs::permissions(elsewhere, fs::perms::owner_read | fs::perms::owner_write);
  fs::remove(record);
  fs::create_symlink(elsewhere, record);
  EXPECT_FALSE(cache.recall_source("P", config_, ""));
  fs::remove(record);
  write(good);
  EXPECT_TRUE(cache.recall_source("P", config_, ""));
}

TEST_F(ModuleCacheTest, RecordsGoWithTheirEntries) {
  ModuleCache cache(cache_dir_);
  const LoadedEntry a = cache.get_or_load("a", kAnswer42, config_, "");
  const LoadedEntry b = cache.get_or_load("b", kAnswer43, config_, "");
  cache.remember_source("A", a.entry, config_, "");
  cache.remember_source("B", b.entry, config_, "");
  std::ofstream(cache_dir_ / "index" / ".tmp-interrupted") << "x";  // a write cut short, just now
  // An entry discarded by hand: the sweep before the next build drops its record, not the other.
  fs::remove_all(cache_dir_ / b.entry.key);
  EXPECT_EQ(cache.remove_leftovers(), 2u);  // b's lock file and b's record
  EXPECT_TRUE(cache.recall_source("A", config_, ""));
  EXPECT_FALSE(cache.recall_source("B", config_, ""));
  EXPECT_TRUE(fs::exists(cache_dir_ / "index" / ".tmp-interrupted"));  // younger than an hour: left to finish
  // clear() takes the index with the entries.
  EXPECT_EQ(cache.clear(), 1u);
  EXPECT_TRUE(fs::is_empty(cache_dir_));
  EXPECT_FALSE(cache.recall_source("A", config_, ""));
}

TEST_F(ModuleCacheTest, ARecordThatCannotBeWrittenIsSkipped) {
  ModuleCache cache(cache_dir_);
  const LoadedEntry a = cache.get_or_load("a", kAnswer42, config_, "");
  std::ofstream(cache_dir_ / "index") << "a file where the folder goes";
  EXPECT_NO_THROW(cache.remember_source("A", a.entry, config_, ""));
  EXPECT_FALSE(cache.recall_source("A", config_, ""));
  EXPECT_TRUE(cache.get_or_load("a", kAnswer42, config_, "").entry.was_hit);  // the cache still works
}

// ---- list / show / clear -------------------------------------------------------------------

TEST_F(ModuleCacheTest, ListShowClear) {
  ModuleCache cache(cache_dir_);
  EXPECT_TRUE(cache.list().empty());  // directory does not exist yet: empty, not an error
  EXPECT_EQ(cache.clear(), 0u);

  const CacheEntry a = cache.get_or_build("first_program", kAnswer42, config_, "");
  const CacheEntry b = cache.get_or_build("second_program", kAnswer43, config_, "");
  const auto listing = cache.list();
  ASSERT_EQ(listing.size(), 2u);
  for (const auto& item : listing) {
    const bool is_a = item.key == a.key;
    EXPECT_TRUE(is_a || item.key == b.key);
    EXPECT_EQ(item.name, is_a ? "first_program" : "second_program");
    EXPECT_GT(item.size_bytes, fs::file_size(is_a ? a.path : b.path));  // module + source + meta
    EXPECT_EQ(item.created.size(), 20u) << item.created;               // 2024-01-02T03:04:05Z
  }

  const std::string shown = cache.show(a.key);
  EXPECT_NE(shown.find("\"first_program\""), std::string::npos) << shown;
  EXPECT_NE(shown.find(a.key), std::string::npos) << shown;
  EXPECT_NE(shown.find((cache_dir_ / a.key / "source.cpp").string()), std::string::npos) << shown;
  EXPECT_THROW(cache.show("../../etc/passwd"), CacheError);
  EXPECT_THROW(cache.show(std::string(32, '0')), CacheError);

  EXPECT_EQ(cache.clear(), 2u);
  EXPECT_TRUE(cache.list().empty());
  EXPECT_TRUE(fs::is_empty(cache_dir_));  // entries, locks and all
  // The cache still works after clearing.
  EXPECT_FALSE(cache.get_or_build("first_program", kAnswer42, config_, "").was_hit);
}

TEST_F(ModuleCacheTest, UnusableDirectoryIsNamed) {
  // A path below a regular file cannot be created, whoever runs the test (even root).
  const fs::path blocker = dir_ / "a_file";
  std::ofstream(blocker) << "x";
  const fs::path impossible = blocker / "cache";
  ModuleCache cache(impossible);
  try {
    cache.get_or_build("answer", kAnswer42, config_, "");
    FAIL() << "expected a CacheError";
  } catch (const CacheError& e) {
    EXPECT_NE(std::string(e.what()).find(impossible.string()), std::string::npos) << e.what();
  }
}

TEST_F(ModuleCacheTest, CompilerFromEnvironmentThatDoesNotExistIsNamed) {
  for (const char* missing : {"/nonexistent/dir/fieldflow-missing-cxx", "fieldflow-missing-cxx-in-path"}) {
    ScopedEnv ff("FIELDFLOW_CXX", missing);
    ModuleCache cache(cache_dir_);
    try {
      cache.get_or_build("answer", kAnswer42, default_compiler_config(false), "");
      FAIL() << "expected a CompileError for " << missing;
    } catch (const CompileError& e) {
      EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("FIELDFLOW_CXX"), std::string::npos) << e.what();
    }
  }
}

// ---- loading -------------------------------------------------------------------------------

TEST_F(ModuleCacheTest, MissingSymbolIsNamed) {
  ModuleCache cache(cache_dir_);
  const CacheEntry entry = cache.get_or_build("answer", kAnswer42, config_, "");
  LoadedModule module(entry.path);
  EXPECT_NE(module.symbol("answer"), nullptr);
  try {
    module.symbol("fieldflow_no_such_entry_point");
    FAIL() << "expected a CompileError";
  } catch (const CompileError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("fieldflow_no_such_entry_point"), std::string::npos) << message;
    EXPECT_NE(message.find(entry.path.string()), std::string::npos) << message;
  }
  // Moving transfers ownership; the moved-to module still works.
  LoadedModule moved = std::move(module);
  EXPECT_EQ(reinterpret_cast<int (*)()>(moved.symbol("answer"))(), 42);
}

TEST_F(ModuleCacheTest, LoadingANonModuleFails) {
  const fs::path not_a_module = dir_ / "not_a_module.so";
  std::ofstream(not_a_module) << "this is not an ELF file";
  try {
    LoadedModule module(not_a_module);
    FAIL() << "expected a CompileError";
  } catch (const CompileError& e) {
    EXPECT_NE(std::string(e.what()).find(not_a_module.string()), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace fieldflow::toolchain
