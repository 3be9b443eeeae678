// libFuzzer target: the compile cache's directory contents.
//
// A pristine cache holds the entry of a module answering 42 and the entry of another one
// answering 7. Each input copies it and damages the copy: truncates, overwrites or replaces files
// (module.so, meta.json with edited fields, source.cpp, lock files), turns them into folders or
// symbolic links, changes modes, plants the other program's module or metadata in the entry
// (a foreign entry), leaves temporaries and stale folders, and may run clear(), another lookup or
// remove_leftovers() on a second thread while the lookup runs (racing entries). Promises checked:
// the lookup answers 42 (never 7, never a damaged module: no crash) or throws a typed
// fieldflow::Error; a second lookup after the damage succeeds; nothing escapes as another
// exception. Builds use a fake compiler that copies a prebuilt module, so an input takes
// milliseconds.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <fuzzer/FuzzedDataProvider.h>
#include <nlohmann/json.hpp>

#include "fieldflow/errors.h"
#include "toolchain/compiler.h"
#include "toolchain/loaded_module.h"
#include "toolchain/module_cache.h"

namespace fs = std::filesystem;
namespace tc = fieldflow::toolchain;

namespace {

const std::string kSource42 = "extern \"C\" int answer() { return 42; }\n";
const std::string kSource7 = "extern \"C\" int answer() { return 7; }\n";
const std::string kExtraKey = "fuzz-cache-dir";

[[noreturn]] void fail(const std::string& message) {
  std::fprintf(stderr, "fuzz_cache_dir: %s\n", message.c_str());
  std::abort();
}

struct Setup {
  fs::path root, pristine, work;
  tc::CompilerConfig fake;
  std::string key42, key7;

  Setup() {
    root = fs::temp_directory_path() / ("fieldflow-fuzz-cache-" + std::to_string(getpid()));
    fs::remove_all(root);
    fs::create_directories(root);
    fs::permissions(root, fs::perms::owner_all);
    setenv("XDG_CACHE_HOME", (root / "xdg").c_str(), 1);  // fallback builds stay in the scratch space
    const tc::CompilerConfig real = tc::default_compiler_config(/*openmp=*/false);
    for (const auto& [name, source] : {std::pair{"p42", kSource42}, std::pair{"p7", kSource7}}) {
      std::ofstream(root / (std::string(name) + ".cpp")) << source;
      tc::compile_shared_object(root / (std::string(name) + ".cpp"), root / (std::string(name) + ".so"), real);
    }
    const fs::path script = root / "fake-cxx";
    std::ofstream(script) << "#!/bin/sh\n"
                          << "if [ \"$1\" = --version ]; then echo fake-cxx; exit 0; fi\n"
                          << "out=; prev=; src=; for a in \"$@\"; do [ \"$prev\" = -o ] && out=$a; "
                          << "case $a in *.cpp) src=$a;; esac; prev=$a; done\n"
                          << "if grep -q 42 \"$src\"; then cp '" << (root / "p42.so").string() << "' \"$out\"; "
                          << "else cp '" << (root / "p7.so").string() << "' \"$out\"; fi\n";
    fs::permissions(script, fs::perms::owner_all);
    fake = real;
    fake.cxx = script.string();
    std::ofstream(root / "decoy") << "a file outside the cache\n";
    pristine = root / "pristine";
    work = root / "cache";
    tc::ModuleCache cache(pristine);
    key42 = cache.get_or_build("answer", kSource42, fake, kExtraKey).key;
    key7 = cache.get_or_build("answer", kSource7, fake, kExtraKey).key;
  }
  ~Setup() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
};

Setup& setup() {
  static Setup s;
  return s;
}

void restore(const Setup& s) {
  std::error_code ec;
  // Whatever a previous input left (modes included) must not stop the removal.
  if (fs::exists(fs::symlink_status(s.work))) {
    chmod(s.work.c_str(), 0700);
    for (auto it = fs::recursive_directory_iterator(s.work, fs::directory_options::skip_permission_denied, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (it->is_directory(ec) && !it->is_symlink(ec)) chmod(it->path().c_str(), 0700);
    }
  }
  // libFuzzer's timer signal can interrupt the copy (EINTR, which std::filesystem does not
  // retry): a harness fault, so the copy is tried again from scratch.
  for (int attempt = 0; attempt < 5; ++attempt) {
    fs::remove_all(s.work, ec);
    fs::copy(s.pristine, s.work, fs::copy_options::recursive, ec);
    if (ec != std::errc::interrupted) break;
  }
  if (ec) fail("cannot copy the pristine cache: " + ec.message());
  chmod(s.work.c_str(), 0700);
}

std::string bytes(FuzzedDataProvider& in) { return in.ConsumeRandomLengthString(256); }

void damage(FuzzedDataProvider& in, const Setup& s) {
  const fs::path e42 = s.work / s.key42, e7 = s.work / s.key7;
  const fs::path targets[] = {e42 / "module.so", e42 / "meta.json", e42 / "source.cpp", s.work / (s.key42 + ".lock"),
                              e42, s.work, s.work / "failed", e7 / "module.so", e7 / "meta.json"};
  std::error_code ec;
  for (int n = in.ConsumeIntegralInRange(1, 4); n > 0; --n) {
    const fs::path& target = in.PickValueInArray(targets);
    switch (in.ConsumeIntegralInRange(0, 11)) {
      case 0: truncate(target.c_str(), in.ConsumeIntegralInRange<off_t>(0, 20000)); break;
      case 1: {  // overwrite some bytes in place
        std::fstream f(target, std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(in.ConsumeIntegralInRange<std::streamoff>(0, 20000));
        const std::string b = bytes(in);
        f.write(b.data(), static_cast<std::streamsize>(b.size()));
        break;
      }
      case 2: { std::ofstream(target, std::ios::binary | std::ios::trunc) << bytes(in); break; }
      case 3: fs::remove_all(target, ec); break;
      case 4: fs::remove_all(target, ec); fs::create_directories(target, ec); break;
      case 5: {
        // Links stay inside the scratch folder: the damage below follows them (truncate, chmod, write).
        const fs::path links[] = {e7 / target.filename(), s.root / "decoy", s.root / "missing"};
        fs::remove_all(target, ec);
        fs::create_symlink(in.PickValueInArray(links), target, ec);
        break;
      }
      case 6: chmod(target.c_str(), in.ConsumeIntegralInRange<mode_t>(0, 0777)); break;
      case 7: {  // a foreign entry: the other program's module or metadata in this entry
        const char* file = in.ConsumeBool() ? "module.so" : "meta.json";
        fs::copy_file(e7 / file, e42 / file, fs::copy_options::overwrite_existing, ec);
        break;
      }
      case 8: {  // meta.json with one field changed
        // Not through a folder put in its place: reading one throws from inside the JSON parser.
        if (!fs::is_regular_file(e42 / "meta.json", ec)) break;
        nlohmann::json meta = nlohmann::json::parse(std::ifstream(e42 / "meta.json"), nullptr, false);
        if (meta.is_discarded() || !meta.is_object()) break;
        static const char* const fields[] = {"key", "module_size", "module_xxh3_64", "name", "created"};
        const char* field = in.PickValueInArray(fields);
        switch (in.ConsumeIntegralInRange(0, 3)) {
          case 0: meta[field] = in.ConsumeIntegral<std::int64_t>(); break;
          case 1: meta[field] = bytes(in); break;
          case 2: meta.erase(field); break;
          default: meta[field] = nullptr; break;
        }
        // Invalid UTF-8 from the input is written as U+FFFD (raw bytes reach meta.json in case 2).
        std::ofstream(e42 / "meta.json", std::ios::trunc) << meta.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        break;
      }
      case 9: {  // leftovers of an interrupted build or discard
        const std::string name = in.ConsumeBool() ? "tmp-" + s.key42 + "-host-" + std::to_string(in.ConsumeIntegral<std::uint16_t>()) + "-x"
                                                  : "stale-" + s.key42 + "-1-x";
        fs::create_directories(s.work / name, ec);
        std::ofstream(s.work / name / "module.so") << bytes(in);
        break;
      }
      case 10: { std::ofstream(s.work / (bytes(in) + ".lock")) << ""; break; }
      default: std::ofstream(s.work / "failed" / (s.key42 + ".cpp")) << bytes(in); break;
    }
  }
}

// One lookup: 42 or a typed error; anything else aborts. Returns whether it succeeded; `error`
// gets the message of a typed error.
bool lookup(const Setup& s, std::string* error = nullptr) {
  try {
    tc::ModuleCache cache(s.work);
    tc::LoadedEntry loaded = cache.get_or_load("answer", kSource42, s.fake, kExtraKey);
    const int got = reinterpret_cast<int (*)()>(loaded.module.symbol("answer"))();
    if (got != 42) fail("the lookup served another program's module (answer " + std::to_string(got) + ")");
    return true;
  } catch (const fieldflow::InternalError& e) {
    fail(std::string("internal error: ") + e.what());
  } catch (const fieldflow::Error& e) {
    if (error != nullptr) *error = e.what();
    return false;
  } catch (const std::exception& e) {
    fail(std::string("untyped exception: ") + e.what());
  }
}

}  // namespace

// The prebuilt modules and the pristine cache are made before the first input.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)setup();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  const Setup& s = setup();
  restore(s);
  damage(in, s);
  const int racer = in.ConsumeIntegralInRange(0, 4);
  std::thread other;
  if (racer > 0) {
    other = std::thread([&s, racer] {
      try {
        tc::ModuleCache cache(s.work);
        if (racer == 1) cache.clear();
        else if (racer == 2) (void)cache.remove_leftovers();
        else if (racer == 3) (void)cache.list();
        else (void)lookup(s);
      } catch (const fieldflow::InternalError& e) {
        fail(std::string("racing thread: internal error: ") + e.what());
      } catch (const fieldflow::Error&) {
      }
    });
  }
  std::string first_error, second_error;
  const bool first = lookup(s, &first_error);
  if (other.joinable()) other.join();
  // The damage stays; the next attempt must succeed all the same (rebuilding, or in the fallback),
  // unless the cache folder itself is gone (a file or a dangling link in its place: a typed "cannot
  // create the module cache directory"); then the attempt after that fault is cleared must.
  std::error_code ec;
  if (!fs::is_directory(s.work, ec) && !lookup(s, &second_error)) {
    fs::remove_all(s.work, ec);
  }
  if (!lookup(s, &second_error)) {
    fail("a second lookup failed after " + (first ? std::string("a successful one") : "a failed one (" + first_error + ")") +
         ": " + second_error);
  }
  try {
    tc::ModuleCache cache(s.work);
    (void)cache.list();
    (void)cache.show(in.ConsumeBool() ? s.key42 : bytes(in));
  } catch (const fieldflow::InternalError& e) {
    fail(std::string("list/show: internal error: ") + e.what());
  } catch (const fieldflow::Error&) {
  }
  return 0;
}
