// The module cache and the compiler driver attacked (issue 12, "Defects found by attacking the
// cache and toolchain"): planted and foreign entries, symbolic links, truncated modules, clear()
// racing with loads, read-only caches, a full disk, leftovers, compiler command lines.
//
// These tests run as root here. Another user is simulated with files chown'ed to uid 65534 and
// modes like 0777/0666. A read-only cache is a read-only bind mount and a full disk a small tmpfs
// when this process may mount (root with CAP_SYS_ADMIN), otherwise those two tests are skipped and
// the same code paths are reached another way (a directory where the lock file should be; a
// compiler that reports "No space left on device").
#include <dirent.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <typeinfo>
#include <variant>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <xxhash.h>

#include "fieldflow/errors.h"
#include "toolchain/compiler.h"
#include "toolchain/loaded_module.h"
#include "toolchain/module_cache.h"
#include "toolchain/toolchain_support.h"

namespace fieldflow::toolchain {
namespace {
namespace fs = std::filesystem;
using testing::call_answer;
using testing::read_text;
using testing::ScopedEnv;

constexpr const char* kAnswer42 = "extern \"C\" int answer() { return 42; }\n";
constexpr uid_t kOtherUid = 65534;  // nobody

unsigned mode_of(const fs::path& path) {
  struct stat st {};
  EXPECT_EQ(lstat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

void chown_tree(const fs::path& root, uid_t uid) {
  ASSERT_EQ(lchown(root.c_str(), uid, uid), 0);
  if (!fs::is_directory(fs::symlink_status(root))) return;
  for (const auto& item : fs::recursive_directory_iterator(root)) ASSERT_EQ(lchown(item.path().c_str(), uid, uid), 0);
}

std::string xxh3_hex(const std::string& bytes) { return fmt::format("{:016x}", XXH3_64bits(bytes.data(), bytes.size())); }

// meta.json that matches `module` byte for byte: what an attacker (or the old, trusting code after
// publishing a short module) writes.
void write_matching_meta(const fs::path& entry, const std::string& key) {
  const std::string module = read_text(entry / "module.so");
  const nlohmann::json meta = {{"name", "answer"}, {"key", key}, {"module_size", module.size()},
                               {"module_xxh3_64", xxh3_hex(module)}, {"created", "2026-01-01T00:00:00Z"}};
  std::ofstream(entry / "meta.json") << meta.dump(2);
}

bool can_mount() { return geteuid() == 0; }

// Runs a shell command (mount/umount), quietly; true on success.
bool sh(const std::string& command) { return std::system((command + " >/dev/null 2>&1").c_str()) == 0; }

std::string host_tag() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  std::string tag;
  for (const char* c = name; *c != '\0'; ++c) tag.push_back(std::isalnum(static_cast<unsigned char>(*c)) || *c == '.' ? *c : '_');
  return tag.empty() ? "unknown" : tag;
}

pid_t dead_pid() {
  const pid_t pid = fork();
  if (pid == 0) _exit(0);
  int status = 0;
  waitpid(pid, &status, 0);
  return pid;
}

class CacheHardeningTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::random_device random;
    dir_ = fs::temp_directory_path() / fmt::format("fieldflow-test-hardening-{}-{:08x}", getpid(), random());
    fs::create_directories(dir_);
    fs::permissions(dir_, fs::perms::owner_all);
    cache_dir_ = dir_ / "cache";
    config_ = default_compiler_config(/*openmp=*/false);
    // Fallback builds land in the test's scratch space, never in the real home.
    xdg_.emplace("XDG_CACHE_HOME", (dir_ / "xdg").string());
  }
  void TearDown() override {
    for (auto it = mounts_.rbegin(); it != mounts_.rend(); ++it) sh("umount -l '" + it->string() + "'");
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // A working module answering 42, compiled once (fake compilers copy it).
  fs::path prebuilt() {
    const fs::path so = dir_ / "prebuilt.so";
    if (!fs::exists(so)) {
      std::ofstream(dir_ / "prebuilt.cpp") << kAnswer42;
      compile_shared_object(dir_ / "prebuilt.cpp", so, config_);
    }
    return so;
  }

  // A fake compiler: answers --version, and otherwise runs `body` with $out set to the -o argument.
  CompilerConfig fake_compiler(const std::string& name, const std::string& body) {
    const fs::path script = dir_ / name;
    std::ofstream(script) << "#!/bin/sh\n"
                          << "if [ \"$1\" = --version ]; then echo 'fake-cxx " << name << "'; exit 0; fi\n"
                          << "out=; prev=; for a in \"$@\"; do [ \"$prev\" = -o ] && out=$a; prev=$a; done\n"
                          << body << "\n";
    fs::permissions(script, fs::perms::owner_all);
    CompilerConfig config = config_;
    config.cxx = script.string();
    return config;
  }

  // False when this process may not mount (the caller skips the test).
  bool try_mount(const std::string& command, const fs::path& at) {
    if (!can_mount() || !sh(command)) return false;
    mounts_.push_back(at);
    return true;
  }

  fs::path dir_, cache_dir_;
  CompilerConfig config_;
  std::optional<ScopedEnv> xdg_;
  std::vector<fs::path> mounts_;
};

// ---- (1) planted modules, trust and modes ---------------------------------------------------

TEST_F(CacheHardeningTest, PlantedModuleOfAnotherUserIsNeverLoaded) {
  if (geteuid() != 0) GTEST_SKIP() << "chown to another uid needs root";
  ModuleCache cache(cache_dir_);
  const std::string key = cache.key_for(kAnswer42, config_, "");
  const fs::path marker = dir_ / "planted-code-ran";
  // The attacker's module: a constructor (runs at dlopen) and a wrong answer.
  std::ofstream(dir_ / "planted.cpp") << "#include <cstdio>\n"
                                      << "__attribute__((constructor)) static void planted() { std::fclose(std::fopen(\""
                                      << marker.string() << "\", \"w\")); }\n"
                                      << "extern \"C\" int answer() { return 666; }\n";
  fs::create_directories(cache_dir_ / key);
  fs::permissions(cache_dir_, fs::perms::owner_all);
  compile_shared_object(dir_ / "planted.cpp", cache_dir_ / key / "module.so", config_);
  write_matching_meta(cache_dir_ / key, key);
  chown_tree(cache_dir_ / key, kOtherUid);

  LoadedEntry loaded = cache.get_or_load("answer", kAnswer42, config_, "");
  EXPECT_FALSE(loaded.entry.was_hit);
  EXPECT_EQ(reinterpret_cast<int (*)()>(loaded.module.symbol("answer"))(), 42);
  EXPECT_FALSE(fs::exists(marker)) << "the planted module was loaded";
  struct stat st {};
  ASSERT_EQ(lstat((cache_dir_ / key).c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, geteuid());  // replaced by our own build

  // Ours, but writable by others: just as untrusted.
  fs::permissions(cache_dir_ / key / "module.so", fs::perms::all);
  EXPECT_FALSE(cache.get_or_build("answer", kAnswer42, config_, "").was_hit);
  fs::permissions(cache_dir_ / key, fs::perms::all);
  EXPECT_FALSE(cache.get_or_build("answer", kAnswer42, config_, "").was_hit);
  const auto listing = cache.list();
  ASSERT_EQ(listing.size(), 1u);
  EXPECT_EQ(listing[0].problem, "");
  EXPECT_FALSE(fs::exists(marker));
}

TEST_F(CacheHardeningTest, CacheWritableByOthersIsIgnoredAndBuildsGoToThePrivateFallback) {
  // A cache folder others can write (umask 000, a shared FIELDFLOW_CACHE_DIR) and, separately, a
  // private cache below a folder others can write (they could swap the whole cache).
  const fs::path shared = dir_ / "shared";
  for (const fs::path& configured : {cache_dir_, shared / "cache"}) {
    SCOPED_TRACE(configured.string());
    fs::create_directories(configured);
    fs::permissions(configured, fs::perms::owner_all);
    if (configured == cache_dir_) fs::permissions(cache_dir_, fs::perms::all);  // 0777, not sticky
    else fs::permissions(shared, fs::perms::all);
    ModuleCache cache(configured);
    // An entry that would be a perfect hit if the folder were trusted.
    const CacheEntry real = ModuleCache(dir_ / "elsewhere").get_or_build("answer", kAnswer42, config_, "");
    fs::copy(real.path.parent_path(), configured / real.key, fs::copy_options::recursive);
    EXPECT_NE(cache.trust_problem().find("writable by others"), std::string::npos) << cache.trust_problem();

    LoadedEntry loaded = cache.get_or_load("answer", kAnswer42, config_, "");
    EXPECT_EQ(loaded.entry.path, dir_ / "xdg" / "fieldflow" / real.key / "module.so");
    EXPECT_NE(loaded.entry.fallback_reason.find(configured.string()), std::string::npos) << loaded.entry.fallback_reason;
    EXPECT_NE(loaded.entry.fallback_reason.find("writable by others"), std::string::npos) << loaded.entry.fallback_reason;
    EXPECT_EQ(reinterpret_cast<int (*)()>(loaded.module.symbol("answer"))(), 42);
    EXPECT_TRUE(fs::exists(configured / real.key / "module.so"));  // an untrusted folder is not written to
  }
  // A sticky shared folder (like /tmp) is fine: others cannot rename our entries in it.
  const fs::path sticky = dir_ / "sticky";
  fs::create_directories(sticky);
  fs::permissions(sticky, fs::perms::all | fs::perms::sticky_bit);
  const CacheEntry in_sticky = ModuleCache(sticky).get_or_build("answer", kAnswer42, config_, "");
  EXPECT_EQ(in_sticky.fallback_reason, "");
  EXPECT_TRUE(ModuleCache(sticky).get_or_build("answer", kAnswer42, config_, "").was_hit);
}

TEST_F(CacheHardeningTest, GroupWritableIsTrustedOnlyForTheOwnersPrivateGroup) {
  // Debian's user private groups with umask 002: a group-writable cache whose group has no other
  // member is as safe as a private one; any other group could plant modules.
  if (geteuid() != 0) GTEST_SKIP() << "chgrp to an arbitrary group needs root";
  fs::create_directories(cache_dir_);
  fs::permissions(cache_dir_, fs::perms::owner_all | fs::perms::group_all);  // 0770
  ASSERT_EQ(chown(cache_dir_.c_str(), 0, 0), 0);  // root's own group: root is its only member
  ModuleCache cache(cache_dir_);
  EXPECT_EQ(cache.trust_problem(), "");
  EXPECT_EQ(cache.get_or_build("answer", kAnswer42, config_, "").fallback_reason, "");
  ASSERT_EQ(chown(cache_dir_.c_str(), 0, 100), 0);  // "users": not root's private group
  EXPECT_NE(cache.trust_problem().find("writable by its group"), std::string::npos) << cache.trust_problem();
  const CacheEntry entry = cache.get_or_build("answer", kAnswer42, config_, "");
  EXPECT_NE(entry.fallback_reason.find("writable by its group"), std::string::npos) << entry.fallback_reason;
  EXPECT_EQ(entry.path.parent_path().parent_path(), dir_ / "xdg" / "fieldflow");
}

TEST_F(CacheHardeningTest, EverythingIsCreatedPrivateWhateverTheUmask) {
  const mode_t old_umask = umask(0);
  const fs::path nested = dir_ / "a" / "b" / "cache";
  ModuleCache cache(nested);
  const CacheEntry entry = cache.get_or_build("answer", kAnswer42, config_, "");
  EXPECT_THROW(cache.get_or_build("broken", "int x = ;\n", config_, ""), CompileError);
  umask(old_umask);

  EXPECT_EQ(mode_of(dir_ / "a"), 0700u);
  EXPECT_EQ(mode_of(dir_ / "a" / "b"), 0700u);
  EXPECT_EQ(mode_of(nested), 0700u);
  EXPECT_EQ(mode_of(nested / entry.key), 0700u);
  for (const char* file : {"module.so", "meta.json", "source.cpp"}) EXPECT_EQ(mode_of(nested / entry.key / file), 0600u) << file;
  EXPECT_EQ(mode_of(nested / (entry.key + ".lock")), 0600u);
  EXPECT_EQ(mode_of(nested / "failed"), 0700u);
  for (const auto& item : fs::directory_iterator(nested / "failed")) EXPECT_EQ(mode_of(item.path()), 0600u) << item.path();
  EXPECT_FALSE(fs::is_empty(nested / "failed"));
}

// ---- (2) symbolic links ---------------------------------------------------------------------

TEST_F(CacheHardeningTest, LockFileSymlinkIsNeverFollowed) {
  ModuleCache cache(cache_dir_);
  const std::string key = cache.key_for(kAnswer42, config_, "");
  const fs::path victim = dir_ / "victim", missing = dir_ / "would-be-created";
  std::ofstream(victim) << "precious";
  fs::permissions(victim, fs::perms::owner_read | fs::perms::owner_write | fs::perms::others_read);
  fs::create_directories(cache_dir_);
  fs::permissions(cache_dir_, fs::perms::owner_all);
  for (const fs::path& target : {victim, missing}) {
    SCOPED_TRACE(target.string());
    fs::remove(cache_dir_ / (key + ".lock"));
    fs::create_symlink(target, cache_dir_ / (key + ".lock"));
    const CacheEntry entry = cache.get_or_build("answer", kAnswer42, config_, "");
    EXPECT_EQ(call_answer(entry.path), 42);
    EXPECT_NE(entry.fallback_reason.find(key + ".lock"), std::string::npos) << entry.fallback_reason;
    EXPECT_EQ(read_text(victim), "precious");
    EXPECT_EQ(mode_of(victim), 0604u);
    EXPECT_FALSE(fs::exists(missing));
  }
  // clear() does not follow it either.
  cache.clear();
  EXPECT_EQ(read_text(victim), "precious");
  EXPECT_FALSE(fs::exists(missing));
}

TEST_F(CacheHardeningTest, FailedSourceIsNeverWrittenThroughASymlink) {
  ModuleCache cache(cache_dir_);
  const std::string bad = "extern \"C\" int answer() { return not_declared_here; }\n";
  const std::string key = cache.key_for(bad, config_, "");
  const fs::path victim = dir_ / "victim", victim_log = dir_ / "victim.log";
  std::ofstream(victim) << "precious";
  std::ofstream(victim_log) << "precious log";
  fs::create_directories(cache_dir_ / "failed");
  fs::permissions(cache_dir_, fs::perms::owner_all);
  fs::permissions(cache_dir_ / "failed", fs::perms::owner_all);
  fs::create_symlink(victim, cache_dir_ / "failed" / (key + ".cpp"));
  fs::create_symlink(victim_log, cache_dir_ / "failed" / (key + ".log"));
  EXPECT_THROW(cache.get_or_build("broken", bad, config_, ""), CompileError);
  EXPECT_EQ(read_text(victim), "precious");
  EXPECT_EQ(read_text(victim_log), "precious log");
  // The links were replaced by the kept copies.
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(cache_dir_ / "failed" / (key + ".cpp"))));
  EXPECT_EQ(read_text(cache_dir_ / "failed" / (key + ".cpp")), bad);

  // failed/ itself a link to another folder: nothing is written there, and the message says so.
  const fs::path elsewhere = dir_ / "elsewhere";
  fs::create_directories(elsewhere);
  fs::remove_all(cache_dir_ / "failed");
  fs::create_directory_symlink(elsewhere, cache_dir_ / "failed");
  try {
    cache.get_or_build("broken", bad, config_, "");
    FAIL() << "expected a CompileError";
  } catch (const CompileError& e) {
    EXPECT_NE(std::string(e.what()).find("could not keep a copy"), std::string::npos) << e.what();
    // Nor does it send the user to the build folder's copies, which are removed.
    EXPECT_EQ(std::string(e.what()).find("kept at"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::is_empty(elsewhere));
}

// ---- (3) truncated and unloadable modules ---------------------------------------------------

TEST_F(CacheHardeningTest, CompilerWritingATruncatedModuleGetsNothingPublished) {
  const std::string so = prebuilt().string();
  const struct {
    const char* name;
    std::string body;
    const char* expected;
  } cases[] = {
      {"truncating-cxx", "head -c 3000 '" + so + "' > \"$out\"", "truncated"},
      {"tiny-cxx", "head -c 10 '" + so + "' > \"$out\"", "at least 64 bytes"},
      {"garbage-cxx", "printf '%0200d' 0 > \"$out\"", "ELF signature"},
  };
  ModuleCache cache(cache_dir_);
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    try {
      cache.get_or_load("answer", kAnswer42, fake_compiler(c.name, c.body), "");
      FAIL() << "expected a CompileError";
    } catch (const CompileError& e) {
      EXPECT_NE(std::string(e.what()).find(c.expected), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("nothing was published"), std::string::npos) << e.what();
    }
    EXPECT_TRUE(cache.list().empty());
  }
  // The next attempt with a working compiler succeeds.
  LoadedEntry loaded = cache.get_or_load("answer", kAnswer42, config_, "");
  EXPECT_EQ(reinterpret_cast<int (*)()>(loaded.module.symbol("answer"))(), 42);
}

TEST_F(CacheHardeningTest, PublishedTruncatedModuleWithMatchingMetadataIsRebuiltNotLoaded) {
  // What the old code left behind: a short module whose meta.json was computed from it. dlopen of
  // it dies with SIGBUS; it must be detected and rebuilt instead.
  ModuleCache cache(cache_dir_);
  const CacheEntry built = cache.get_or_build("answer", kAnswer42, config_, "");
  fs::resize_file(built.path, fs::file_size(built.path) / 2);
  write_matching_meta(built.path.parent_path(), built.key);
  EXPECT_NE(cache.list().at(0).problem.find("truncated"), std::string::npos) << cache.list().at(0).problem;
  LoadedEntry loaded = cache.get_or_load("answer", kAnswer42, config_, "");
  EXPECT_FALSE(loaded.entry.was_hit);
  EXPECT_EQ(reinterpret_cast<int (*)()>(loaded.module.symbol("answer"))(), 42);
}

TEST_F(CacheHardeningTest, HitThatFailsToLoadIsEvictedAndRebuiltOnce) {
  ModuleCache cache(cache_dir_);
  const CacheEntry built = cache.get_or_build("answer", kAnswer42, config_, "");
  // A complete, well-formed module that dlopen(RTLD_NOW) refuses: an undefined symbol.
  std::ofstream(dir_ / "unloadable.cpp") << "extern \"C\" int fieldflow_no_such_function();\n"
                                         << "extern \"C\" int answer() { return fieldflow_no_such_function(); }\n";
  compile_shared_object(dir_ / "unloadable.cpp", dir_ / "unloadable.so", config_);
  fs::copy_file(dir_ / "unloadable.so", built.path, fs::copy_options::overwrite_existing);
  write_matching_meta(built.path.parent_path(), built.key);

  LoadedEntry loaded = cache.get_or_load("answer", kAnswer42, config_, "");
  EXPECT_FALSE(loaded.entry.was_hit);
  EXPECT_EQ(reinterpret_cast<int (*)()>(loaded.module.symbol("answer"))(), 42);
  EXPECT_TRUE(cache.get_or_load("answer", kAnswer42, config_, "").entry.was_hit);

  // A compiler whose module never loads: one rebuild, then a typed error; nothing published.
  const CompilerConfig unloadable = fake_compiler("unloadable-cxx", "cp '" + (dir_ / "unloadable.so").string() + "' \"$out\"");
  ModuleCache other(dir_ / "other");
  try {
    other.get_or_load("answer", kAnswer42, unloadable, "");
    FAIL() << "expected a CompileError";
  } catch (const CompileError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot be loaded, so it was not published"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("fieldflow_no_such_function"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(other.list().empty());
}

// ---- (4) clear() racing with loads ----------------------------------------------------------

TEST_F(CacheHardeningTest, ClearWhileLoadingNeverFailsALoad) {
  // A fast fake compiler (copies a prebuilt module), so that many rebuilds fit in a test.
  const CompilerConfig fast = fake_compiler("copying-cxx", "cp '" + prebuilt().string() + "' \"$out\"");
  ModuleCache cache(cache_dir_);
  std::atomic<bool> done{false};
  std::atomic<int> clears{0};
  std::thread clearer([&] {
    ModuleCache mine(cache_dir_);
    while (!done) {
      mine.clear();
      ++clears;
    }
  });
  int failures = 0, hits = 0;
  std::string first_failure;
  for (int i = 0; i < 1000; ++i) {
    try {
      LoadedEntry loaded = cache.get_or_load("answer", kAnswer42, fast, "");
      if (reinterpret_cast<int (*)()>(loaded.module.symbol("answer"))() != 42) ++failures;
      hits += loaded.entry.was_hit ? 1 : 0;
    } catch (const Error& e) {
      if (failures++ == 0) first_failure = e.what();
    }
  }
  done = true;
  clearer.join();
  EXPECT_EQ(failures, 0) << first_failure;
  EXPECT_GT(clears.load(), 0);
  RecordProperty("hits", hits);
}

// ---- (5) read-only caches -------------------------------------------------------------------

TEST_F(CacheHardeningTest, UnopenableLockFileServesHitsAndBuildsInTheFallback) {
  // The lock file cannot be opened for writing (here: a folder in its place; on a read-only mount
  // or a system-wide folder it is EROFS/EACCES): hits are still served, misses built elsewhere.
  ModuleCache cache(cache_dir_);
  const CacheEntry built = cache.get_or_build("answer", kAnswer42, config_, "");
  fs::remove(cache_dir_ / (built.key + ".lock"));
  fs::create_directory(cache_dir_ / (built.key + ".lock"));
  LoadedEntry hit = cache.get_or_load("answer", kAnswer42, config_, "");
  EXPECT_TRUE(hit.entry.was_hit);
  EXPECT_EQ(hit.entry.path, built.path);
  EXPECT_EQ(hit.entry.fallback_reason, "");

  const std::string other_source = "extern \"C\" int answer() { return 7; }\n";
  const std::string other_key = cache.key_for(other_source, config_, "");
  fs::create_directory(cache_dir_ / (other_key + ".lock"));
  LoadedEntry miss = cache.get_or_load("answer", other_source, config_, "");
  EXPECT_FALSE(miss.entry.was_hit);
  EXPECT_EQ(miss.entry.path, dir_ / "xdg" / "fieldflow" / other_key / "module.so");
  EXPECT_NE(miss.entry.fallback_reason.find(other_key + ".lock"), std::string::npos) << miss.entry.fallback_reason;
  EXPECT_EQ(reinterpret_cast<int (*)()>(miss.module.symbol("answer"))(), 7);
  EXPECT_FALSE(fs::exists(cache_dir_ / other_key));
}

TEST_F(CacheHardeningTest, ReadOnlyMountServesHitsAndBuildsInTheFallback) {
  const fs::path writable = dir_ / "rw", readonly = dir_ / "ro";
  fs::create_directories(writable);
  fs::create_directories(readonly);
  fs::permissions(writable, fs::perms::owner_all);
  const CacheEntry built = ModuleCache(writable / "cache").get_or_build("answer", kAnswer42, config_, "");
  if (!try_mount(fmt::format("mount --bind '{}' '{}' && mount -o remount,bind,ro '{}'", writable.string(),
                             readonly.string(), readonly.string()), readonly)) {
    GTEST_SKIP() << "cannot bind-mount read-only here (needs root with CAP_SYS_ADMIN); "
                    "UnopenableLockFileServesHitsAndBuildsInTheFallback covers the code path";
  }
  ASSERT_NE(access((readonly / "cache").c_str(), W_OK), 0);
  ASSERT_EQ(errno, EROFS);

  ModuleCache cache(readonly / "cache");
  LoadedEntry hit = cache.get_or_load("answer", kAnswer42, config_, "");
  EXPECT_TRUE(hit.entry.was_hit);
  EXPECT_EQ(hit.entry.path, readonly / "cache" / built.key / "module.so");
  EXPECT_EQ(hit.entry.fallback_reason, "");
  EXPECT_EQ(reinterpret_cast<int (*)()>(hit.module.symbol("answer"))(), 42);

  const std::string other_source = "extern \"C\" int answer() { return 7; }\n";
  LoadedEntry miss = cache.get_or_load("answer", other_source, config_, "");
  EXPECT_FALSE(miss.entry.was_hit);
  EXPECT_EQ(miss.entry.path.parent_path().parent_path(), dir_ / "xdg" / "fieldflow");
  EXPECT_NE(miss.entry.fallback_reason.find("Read-only file system"), std::string::npos) << miss.entry.fallback_reason;
  EXPECT_EQ(reinterpret_cast<int (*)()>(miss.module.symbol("answer"))(), 7);
  EXPECT_THROW(cache.clear(), CacheError);
}

// ---- (6) full disk --------------------------------------------------------------------------

TEST_F(CacheHardeningTest, CompilerReportingNoSpaceIsACacheErrorSayingSo) {
  const CompilerConfig full = fake_compiler(
      "full-disk-cxx", "echo '/usr/bin/ld: final link failed: No space left on device' >&2; exit 1");
  ModuleCache cache(cache_dir_);
  try {
    cache.get_or_build("answer", kAnswer42, full, "");
    FAIL() << "expected a CacheError";
  } catch (const CacheError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("no space left on device"), std::string::npos) << message;
    EXPECT_NE(message.find(cache_dir_.string()), std::string::npos) << message;
    EXPECT_NE(message.find("final link failed: No space left on device"), std::string::npos) << message;
  }
}

TEST_F(CacheHardeningTest, FullTmpfsIsReportedAsNoSpaceNotAsACompilerFailure) {
  const fs::path small = dir_ / "small";
  fs::create_directories(small);
  if (!try_mount(fmt::format("mount -t tmpfs -o size=1m,mode=0700 tmpfs '{}'", small.string()), small)) {
    GTEST_SKIP() << "cannot mount a tmpfs here (needs root with CAP_SYS_ADMIN); "
                    "CompilerReportingNoSpaceIsACacheErrorSayingSo covers the reporting";
  }
  ModuleCache cache(small / "cache");
  fs::create_directories(small / "cache");
  (void)cache.key_for(kAnswer42, config_, "");
  const fs::path filler = small / "filler";
  auto fill = [&] {  // appends real bytes until the file system is full
    const int fd = open(filler.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    ASSERT_GE(fd, 0);
    std::vector<char> block(64 * 1024, 'x');
    while (write(fd, block.data(), block.size()) > 0) {
    }
    while (write(fd, block.data(), 512) > 0) {
    }
    close(fd);
  };
  // Full but for 8 KiB (room for the source, not for the module), then completely full.
  for (const std::uintmax_t give_back : {std::uintmax_t{8192}, std::uintmax_t{0}}) {
    SCOPED_TRACE(give_back);
    fill();
    if (give_back > 0) fs::resize_file(filler, fs::file_size(filler) - give_back);
    try {
      cache.get_or_build("answer", kAnswer42, config_, "");
      FAIL() << "expected a CacheError";
    } catch (const CacheError& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("no space left"), std::string::npos) << message;
      EXPECT_NE(message.find((small / "cache").string()), std::string::npos) << message;
    }
  }
  fs::remove(filler);
  EXPECT_EQ(call_answer(cache.get_or_build("answer", kAnswer42, config_, "").path), 42);  // space again: works
}

// ---- (7) leftovers --------------------------------------------------------------------------

TEST_F(CacheHardeningTest, AbandonedTemporariesAndOrphanLocksAreRemoved) {
  ModuleCache cache(cache_dir_);
  const std::string key = cache.key_for(kAnswer42, config_, "");
  const std::string k2(32, 'a'), k3(32, 'b');
  fs::create_directories(cache_dir_);
  fs::permissions(cache_dir_, fs::perms::owner_all);
  const pid_t dead = dead_pid();
  const std::string host = host_tag();
  auto make = [&](const std::string& name) {
    fs::create_directories(cache_dir_ / name);
    std::ofstream(cache_dir_ / name / "module.so") << "partial";
    return cache_dir_ / name;
  };
  const fs::path dead_build = make(fmt::format("tmp-{}-{}-{}-0123456789abcdef", key, host, dead));
  const fs::path live_build = make(fmt::format("tmp-{}-{}-{}-0123456789abcdef", key, host, getpid()));
  const fs::path other_host = make(fmt::format("tmp-{}-otherhost-{}-0123456789abcdef", key, dead));
  const fs::path old_format = make(fmt::format("tmp-{}-{}-0123456789abcdef", key, getpid()));
  const fs::path stale = make(fmt::format("stale-{}-{}-0123456789abcdef", key, dead));
  // Two days old: abandoned whatever its pid says.
  const auto two_days_ago = fs::file_time_type::clock::now() - std::chrono::hours(48);
  fs::last_write_time(old_format, two_days_ago);
  std::ofstream(cache_dir_ / (k2 + ".lock"));                 // no entry, nobody holds it
  std::ofstream(cache_dir_ / (k3 + ".lock"));                 // no entry, held below
  const int held = open((cache_dir_ / (k3 + ".lock")).c_str(), O_RDWR);
  ASSERT_EQ(flock(held, LOCK_EX), 0);

  EXPECT_EQ(cache.remove_leftovers(), 4u);
  close(held);
  EXPECT_FALSE(fs::exists(dead_build));
  EXPECT_TRUE(fs::exists(live_build));
  EXPECT_TRUE(fs::exists(other_host));
  EXPECT_FALSE(fs::exists(old_format));
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_FALSE(fs::exists(cache_dir_ / (k2 + ".lock")));
  EXPECT_TRUE(fs::exists(cache_dir_ / (k3 + ".lock")));

  // Every build sweeps: an abandoned temporary disappears without anyone calling remove_leftovers.
  const fs::path later = make(fmt::format("tmp-{}-{}-{}-fedcba9876543210", k2, host, dead));
  EXPECT_FALSE(cache.get_or_build("answer", kAnswer42, config_, "").was_hit);
  EXPECT_FALSE(fs::exists(later));
  EXPECT_FALSE(fs::exists(cache_dir_ / (k3 + ".lock")));  // no longer held: removed too
  EXPECT_TRUE(fs::exists(cache_dir_ / (key + ".lock")));  // the lock of a published entry stays
}

TEST_F(CacheHardeningTest, FailedSourcesAreCapped) {
  const CompilerConfig failing = fake_compiler("failing-cxx", "echo 'error: rejected' >&2; exit 1");
  ModuleCache cache(cache_dir_);
  std::string last_key;
  for (std::size_t i = 0; i < kMaxFailedSources + 10; ++i) {
    const std::string source = fmt::format("int x{} = ;\n", i);
    EXPECT_THROW(cache.get_or_build("broken", source, failing, ""), CompileError);
    last_key = cache.key_for(source, failing, "");
  }
  std::size_t sources = 0, logs = 0;
  for (const auto& item : fs::directory_iterator(cache_dir_ / "failed")) {
    sources += item.path().extension() == ".cpp";
    logs += item.path().extension() == ".log";
  }
  EXPECT_EQ(sources, kMaxFailedSources);
  EXPECT_EQ(logs, kMaxFailedSources);
  EXPECT_TRUE(fs::exists(cache_dir_ / "failed" / (last_key + ".cpp")));  // the newest are kept
  // Lock files of failed builds do not pile up either: at most the one of the last failure.
  std::size_t locks = 0;
  for (const auto& item : fs::directory_iterator(cache_dir_)) locks += item.path().extension() == ".lock";
  EXPECT_LE(locks, 1u);
}

// ---- (8) compiler command lines and paths ---------------------------------------------------

TEST(CompilerCommandTest, SplitLikeAShell) {
  using Words = std::vector<std::string>;
  EXPECT_EQ(command_words("g++"), Words{"g++"});
  EXPECT_EQ(command_words("ccache g++"), (Words{"ccache", "g++"}));
  EXPECT_EQ(command_words("  c++   -O0 "), (Words{"c++", "-O0"}));
  EXPECT_EQ(command_words("'/opt/my cc/g++' -m64"), (Words{"/opt/my cc/g++", "-m64"}));
  EXPECT_EQ(command_words("\"/opt/my cc/g++\" -DX=\\\"y\\\""), (Words{"/opt/my cc/g++", "-DX=\"y\""}));
  EXPECT_EQ(command_words("a\\ b c"), (Words{"a b", "c"}));
  EXPECT_EQ(command_words("''"), Words{""});
  for (const char* bad : {"'g++", "\"g++", "   ", ""}) {
    SCOPED_TRACE(bad);
    EXPECT_THROW(command_words(bad), CompileError);
  }
}

TEST_F(CacheHardeningTest, CompilerCommandWithArgumentsOrAWrapperWorks) {
  // A wrapper like ccache: runs the rest of its command line.
  const fs::path wrapper = dir_ / "my wrappers" / "wrap";
  fs::create_directories(wrapper.parent_path());
  std::ofstream(wrapper) << "#!/bin/sh\nexec \"$@\"\n";
  fs::permissions(wrapper, fs::perms::owner_all);
  const std::string cxx = config_.cxx;
  ModuleCache cache(cache_dir_);
  std::vector<std::string> keys;
  for (const std::string& command : {cxx, cxx + " -O0", "'" + wrapper.string() + "' " + cxx}) {
    SCOPED_TRACE(command);
    ScopedEnv ff("FIELDFLOW_CXX", command);
    const CompilerConfig config = default_compiler_config(false);
    EXPECT_EQ(config.cxx, command);
    const CacheEntry entry = cache.get_or_build("answer", kAnswer42, config, "");
    EXPECT_EQ(call_answer(entry.path), 42);
    keys.push_back(entry.key);
  }
  // Each command line builds something else, so each has its own key.
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(std::unique(keys.begin(), keys.end()), keys.end());
  // An executable whose path has a space, given unquoted (as before commands were split), still works.
  std::ofstream(dir_ / "my wrappers" / "cxx") << "#!/bin/sh\nexec " << cxx << " \"$@\"\n";
  fs::permissions(dir_ / "my wrappers" / "cxx", fs::perms::owner_all);
  CompilerConfig spaced = config_;
  spaced.cxx = (dir_ / "my wrappers" / "cxx").string();
  EXPECT_EQ(call_answer(cache.get_or_build("answer", kAnswer42, spaced, "").path), 42);
  // A missing wrapper is named as the program not found.
  CompilerConfig missing = config_;
  missing.cxx = "fieldflow-no-such-wrapper " + cxx;
  try {
    cache.get_or_build("answer", kAnswer42, missing, "");
    FAIL() << "expected a CompileError";
  } catch (const CompileError& e) {
    EXPECT_NE(std::string(e.what()).find("'fieldflow-no-such-wrapper' not found"), std::string::npos) << e.what();
  }
}

TEST_F(CacheHardeningTest, RelativeCachePathStartingWithADashIsNotACompilerOption) {
  const fs::path old_cwd = fs::current_path();
  fs::current_path(dir_);
  ModuleCache cache("-cache");
  fs::current_path(old_cwd);  // the cache must not depend on the current directory any more
  EXPECT_EQ(cache.directory(), dir_ / "-cache");
  const CacheEntry entry = cache.get_or_build("answer", kAnswer42, config_, "");
  EXPECT_EQ(entry.path, dir_ / "-cache" / entry.key / "module.so");
  EXPECT_EQ(call_answer(entry.path), 42);
  // compile_shared_object itself, given relative paths starting with '-'.
  fs::current_path(dir_);
  std::ofstream("-answer.cpp") << kAnswer42;
  EXPECT_NO_THROW(compile_shared_object("-answer.cpp", "-answer.so", config_));
  fs::current_path(old_cwd);
  EXPECT_EQ(call_answer(dir_ / "-answer.so"), 42);
}


// Found by fuzz_cache_dir: a folder in place of meta.json made list() throw std::ios_base::failure
// from inside the JSON parser; a non-string name or bytes that are not UTF-8 made list() and show()
// throw nlohmann's type_error. All are damaged entries: listed with a problem, rebuilt when looked up.
TEST_F(CacheHardeningTest, DamagedMetadataIsListedShownAndRebuiltNeverThrownRaw) {
  ModuleCache cache(cache_dir_);
  const CacheEntry built = cache.get_or_build("answer", kAnswer42, config_, "");
  const fs::path meta = built.path.parent_path() / "meta.json";
  const std::string damaged[] = {"", "{\"name\": 7, \"created\": [1], \"key\": \"" + built.key + "\"}",
                                 "{\"name\": \"\xff\xfe\", \"key\": \"\xe5\"}"};
  for (int variant = 0; variant < 3; ++variant) {
    SCOPED_TRACE(variant);
    fs::remove_all(meta);
    if (variant == 0) fs::create_directory(meta);
    else std::ofstream(meta, std::ios::binary) << damaged[variant];
    std::vector<CacheListing> listing;
    EXPECT_NO_THROW(listing = cache.list());
    ASSERT_EQ(listing.size(), 1u);
    EXPECT_NE(listing[0].problem, "");
    try {
      (void)cache.show(built.key);  // a CacheError or the damaged text, never another exception
    } catch (const CacheError&) {
    }
    LoadedEntry loaded = cache.get_or_load("answer", kAnswer42, config_, "");
    EXPECT_FALSE(loaded.entry.was_hit);
    EXPECT_EQ(reinterpret_cast<int (*)()>(loaded.module.symbol("answer"))(), 42);
    EXPECT_FALSE(read_text(meta).empty());  // the rebuilt entry's own metadata
  }
}

// Found by fuzz_cache_dir: list() walking an entry while another process clears it threw
// std::filesystem_error ("cannot increment recursive directory iterator") instead of listing
// what was left. A race, so the test races for a second: entries with nested folders appear and
// vanish while list() runs; it returns or throws a CacheError, nothing else.
TEST_F(CacheHardeningTest, ListingWhileEntriesVanishNeverThrowsRaw) {
  ModuleCache cache(cache_dir_);
  (void)cache.get_or_build("answer", kAnswer42, config_, "");
  std::atomic<bool> stop{false};
  std::thread churn([&] {
    const fs::path entry = cache_dir_ / std::string(32, 'a');
    while (!stop.load()) {
      std::error_code ec;
      fs::create_directories(entry / "x" / "y" / "z", ec);
      for (int f = 0; f < 8; ++f) std::ofstream(entry / "x" / "y" / std::to_string(f)) << "data";
      fs::remove_all(entry, ec);
    }
  });
  int listings = 0;
  for (const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
       std::chrono::steady_clock::now() < until; ++listings) {
    try {
      (void)cache.list();
    } catch (const CacheError&) {
    } catch (const std::exception& e) {
      ADD_FAILURE() << "list() threw " << typeid(e).name() << ": " << e.what();
      break;
    }
  }
  stop = true;
  churn.join();
  EXPECT_GT(listings, 0);
}

// ---- (9) fault injection: the compiler and the cache folder fail, then recover -------------------
// Each fault gives a typed error, leaves the cache consistent (nothing half-built published, no
// temporaries left behind) and the next attempt after the fault clears succeeds. The truncated
// module after publish, dlopen failing, a read-only and a full cache folder are the tests above.

// Nothing of a build in progress is left, and every published entry is usable.
void expect_consistent(const ModuleCache& cache) {
  std::error_code ec;
  if (fs::is_directory(cache.directory(), ec)) {
    for (const auto& item : fs::directory_iterator(cache.directory())) {
      const std::string name = item.path().filename().string();
      EXPECT_FALSE(name.starts_with("tmp-") || name.starts_with("stale-")) << "left behind: " << name;
    }
  }
  for (const CacheListing& entry : cache.list()) EXPECT_EQ(entry.problem, "") << entry.key;
}

TEST_F(CacheHardeningTest, CompilerMissingThenInstalled) {
  ModuleCache cache(cache_dir_);
  CompilerConfig config = config_;
  config.cxx = (dir_ / "later-cxx").string();
  EXPECT_THROW(cache.get_or_load("answer", kAnswer42, config, ""), CompileError);
  expect_consistent(cache);
  EXPECT_TRUE(cache.list().empty());
  config = fake_compiler("later-cxx", "cp '" + prebuilt().string() + "' \"$out\"");
  LoadedEntry loaded = cache.get_or_load("answer", kAnswer42, config, "");
  EXPECT_EQ(reinterpret_cast<int (*)()>(loaded.module.symbol("answer"))(), 42);
  expect_consistent(cache);
}

// `config` is a fake compiler that fails while the file `armed` exists and otherwise copies the
// prebuilt module: the lookup must fail with a CompileError containing `expected`, publish
// nothing, leave no temporaries, and succeed once the file is removed.
void expect_compiler_fault_then_recovery(const fs::path& armed, const CompilerConfig& config, const std::string& expected,
                                         const fs::path& cache_dir) {
  ModuleCache cache(cache_dir);
  try {
    cache.get_or_load("answer", kAnswer42, config, "");
    FAIL() << "expected a CompileError";
  } catch (const CompileError& e) {
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
  expect_consistent(cache);
  EXPECT_TRUE(cache.list().empty());
  fs::remove(armed);
  LoadedEntry loaded = cache.get_or_load("answer", kAnswer42, config, "");
  EXPECT_FALSE(loaded.entry.was_hit);
  EXPECT_EQ(reinterpret_cast<int (*)()>(loaded.module.symbol("answer"))(), 42);
  expect_consistent(cache);
}

TEST_F(CacheHardeningTest, CompilerFailingThenWorking) {
  const fs::path armed = dir_ / "armed";
  std::ofstream(armed) << "";
  const CompilerConfig flaky = fake_compiler(
      "flaky-cxx", "if [ -e '" + armed.string() + "' ]; then echo 'internal compiler error: injected' >&2; exit 1; fi\n"
                   "cp '" + prebuilt().string() + "' \"$out\"");
  expect_compiler_fault_then_recovery(armed, flaky, "internal compiler error: injected", cache_dir_);
}

TEST_F(CacheHardeningTest, CompilerKilledMidCompile) {
  const fs::path armed = dir_ / "armed";
  std::ofstream(armed) << "";
  // Half a module written, then the compiler dies (the OOM killer, a user's kill -9).
  const CompilerConfig killed = fake_compiler(
      "killed-cxx", "head -c 2000 '" + prebuilt().string() + "' > \"$out\"\n"
                    "if [ -e '" + armed.string() + "' ]; then kill -9 $$; fi\n"
                    "cp '" + prebuilt().string() + "' \"$out\"");
  expect_compiler_fault_then_recovery(armed, killed, "killed by signal 9", cache_dir_);
}

TEST_F(CacheHardeningTest, CacheFolderDeletedBetweenCompileAndLoad) {
  ModuleCache cache(cache_dir_);
  const CacheEntry built = cache.get_or_build("answer", kAnswer42, config_, "");
  fs::remove_all(cache_dir_);
  // The caller that loads the returned path itself gets a typed error...
  EXPECT_THROW(LoadedModule{built.path}, CompileError);
  // ...and get_or_load, which looks up and loads in one step, rebuilds.
  LoadedEntry loaded = cache.get_or_load("answer", kAnswer42, config_, "");
  EXPECT_FALSE(loaded.entry.was_hit);
  EXPECT_EQ(reinterpret_cast<int (*)()>(loaded.module.symbol("answer"))(), 42);
  expect_consistent(cache);
}

TEST_F(CacheHardeningTest, CacheFolderDeletedWhileCompiling) {
  // The folder (with the build's temporary folder in it) disappears while the compiler runs.
  const fs::path armed = dir_ / "armed";
  std::ofstream(armed) << "";
  const CompilerConfig deleting = fake_compiler(
      "deleting-cxx", "cp '" + prebuilt().string() + "' \"$out\"\n"
                      "if [ -e '" + armed.string() + "' ]; then rm -rf '" + cache_dir_.string() + "'; fi");
  ModuleCache cache(cache_dir_);
  try {
    LoadedEntry loaded = cache.get_or_load("answer", kAnswer42, deleting, "");
    EXPECT_EQ(reinterpret_cast<int (*)()>(loaded.module.symbol("answer"))(), 42);
  } catch (const InternalError& e) {
    FAIL() << e.what();
  } catch (const Error& e) {
    RecordProperty("error", e.what());  // typed: fine
  }
  expect_consistent(cache);
  fs::remove(armed);
  LoadedEntry loaded = cache.get_or_load("answer", kAnswer42, deleting, "");
  EXPECT_EQ(reinterpret_cast<int (*)()>(loaded.module.symbol("answer"))(), 42);
  expect_consistent(cache);
}

// The process's open descriptors, from /proc/self/fd (less the listing's own).
std::vector<int> open_descriptors() {
  std::vector<int> fds;
  DIR* listing = opendir("/proc/self/fd");
  if (listing == nullptr) throw std::runtime_error("cannot list /proc/self/fd");
  while (const dirent* item = readdir(listing)) {
    if (item->d_name[0] == '.') continue;
    if (const int fd = std::stoi(item->d_name); fd != dirfd(listing)) fds.push_back(fd);
  }
  closedir(listing);
  std::sort(fds.begin(), fds.end());
  return fds;
}

// get_or_load of `source` with RLIMIT_NOFILE lowered to `limit` (restored before anything else is
// checked): the module loaded, or the message of the fieldflow::Error it threw. An InternalError or
// another exception is a test failure (returned as its message).
std::variant<std::string, LoadedEntry> load_with_descriptor_limit(const fs::path& cache_dir, const std::string& source,
                                                                  const CompilerConfig& config, rlim_t limit) {
  struct rlimit original {};
  if (getrlimit(RLIMIT_NOFILE, &original) != 0) throw std::runtime_error("getrlimit failed");
  struct rlimit lowered = original;
  lowered.rlim_cur = limit;
  if (setrlimit(RLIMIT_NOFILE, &lowered) != 0) throw std::runtime_error("setrlimit failed");
  std::variant<std::string, LoadedEntry> result;
  try {
    ModuleCache cache(cache_dir);
    result = cache.get_or_load("answer", source, config, "");
  } catch (const InternalError& e) {
    result = std::string("InternalError: ") + e.what();
    ADD_FAILURE() << std::get<std::string>(result);
  } catch (const Error& e) {
    result = std::string(e.what());
  } catch (const std::exception& e) {
    result = fmt::format("not a fieldflow error: {}: {}", typeid(e).name(), e.what());
    ADD_FAILURE() << std::get<std::string>(result);
  }
  if (setrlimit(RLIMIT_NOFILE, &original) != 0) throw std::runtime_error("setrlimit failed");
  return result;
}

// A model that has opened many files (NetCDF output, MPI) reaches RLIMIT_NOFILE. The soft limit is
// lowered so that only 0, 1, 2, ... more descriptors can be opened, until a cache miss succeeds:
// each try fails at the first step that needs more descriptors at once than the limit leaves.
// Twice: the first miss also asks the compiler for its identity (the pipe to `--version`, the
// compiler's script), the second, whose identity is remembered, fails in the build (the lock, the
// build folder, the source, the pipe to the compiler, the compiler's own files). The steps after
// the compile (checking and trial-loading the module, the metadata) hold no more descriptors than
// the pipe did, so they are not reached this way. Each failure must be a typed error (not an
// InternalError, not a raw std::system_error), leak no descriptor, publish nothing and leave no
// temporaries. Then hits short of descriptors: they fail or load, and never evict the good entry.
TEST_F(CacheHardeningTest, RunningOutOfFileDescriptorsIsTypedAndLeaksNothing) {
  const CompilerConfig copying = fake_compiler("copying-cxx", "cp '" + prebuilt().string() + "' \"$out\"");
  const std::vector<int> before = open_descriptors();
  rlim_t no_spare = 0;  // the limit that leaves no descriptor free
  while (std::binary_search(before.begin(), before.end(), static_cast<int>(no_spare))) ++no_spare;
  std::vector<std::string> failures;
  auto sweep = [&](const std::string& source) {
    for (rlim_t limit = no_spare; limit < no_spare + 64; ++limit) {
      SCOPED_TRACE(fmt::format("RLIMIT_NOFILE {} ({} spare)", limit, limit - no_spare));
      auto result = load_with_descriptor_limit(cache_dir_, source, copying, limit);
      if (auto* loaded = std::get_if<LoadedEntry>(&result)) {
        EXPECT_FALSE(loaded->entry.was_hit);
        EXPECT_EQ(reinterpret_cast<int (*)()>(loaded->module.symbol("answer"))(), 42);
        return;
      }
      const std::string& what = std::get<std::string>(result);
      failures.push_back(what);
      EXPECT_EQ(open_descriptors(), before) << "descriptors leaked by a lookup that failed with: " << what;
      const ModuleCache cache(cache_dir_);
      expect_consistent(cache);
      for (const CacheListing& entry : cache.list())
        EXPECT_EQ(entry.key, cache.key_for(kAnswer42, copying, ""))
            << "published by a lookup that failed with: " << what;
    }
    ADD_FAILURE() << "the miss never succeeded with up to 64 spare descriptors";
  };
  sweep(kAnswer42);
  const std::size_t identity_failures = failures.size();
  const std::string second = std::string(kAnswer42) + "// another program\n";
  sweep(second);
  EXPECT_GE(identity_failures, 2u);
  EXPECT_GE(failures.size() - identity_failures, 1u);
  for (std::size_t i = 0; i < failures.size(); ++i) RecordProperty(fmt::format("failure{}", i), failures[i]);
  EXPECT_EQ(open_descriptors(), before);

  // A hit (read the metadata and module, check them, dlopen) short of descriptors fails, or loads
  // the entry; it never evicts the good entry as if it were damaged.
  const fs::path module = cache_dir_ / ModuleCache(cache_dir_).key_for(second, copying, "") / "module.so";
  const auto built = fs::last_write_time(module);
  for (rlim_t limit = no_spare; limit < no_spare + 16; ++limit) {
    SCOPED_TRACE(fmt::format("hit with RLIMIT_NOFILE {} ({} spare)", limit, limit - no_spare));
    auto result = load_with_descriptor_limit(cache_dir_, second, copying, limit);
    if (auto* loaded = std::get_if<LoadedEntry>(&result)) {
      EXPECT_EQ(reinterpret_cast<int (*)()>(loaded->module.symbol("answer"))(), 42);
    }
    EXPECT_EQ(open_descriptors(), before);
    EXPECT_EQ(fs::last_write_time(module), built) << "the good entry was rebuilt";
  }
}

}  // namespace
}  // namespace fieldflow::toolchain
