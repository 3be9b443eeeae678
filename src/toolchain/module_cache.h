#pragma once
// A content-addressed on-disk cache of compiled modules.
//
// Compiling generated code takes a noticeable fraction of a second per program, and a model calls
// the same programs in every run, so each distinct build is done once per machine and reused. The
// key is a 128-bit XXH3 hash of everything that decides the produced code: the source text, the
// compiler identity, the flags, and a caller-supplied `extra_key` (e.g. the pass-pipeline
// description and an ABI version -- headers found through -I are NOT hashed, so a change to the
// ABI header must change `extra_key`).
//
// Layout of the cache directory:
//   <key>/module.so, source.cpp, meta.json   one published entry
//   <key>.lock                                flock'ed while the entry is checked or built
//   tmp-<key>-<pid>-<random>/                 a build in progress, renamed to <key>/ when done
//   failed/<key>.cpp, failed/<key>.log        sources the compiler rejected, for the user to see
// Entries are immutable once published: a rebuild goes to a fresh directory that replaces the old
// one by rename, so a module another process has mapped is never rewritten underneath it.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "toolchain/compiler.h"

namespace fieldflow::toolchain {

struct CacheEntry {
  std::string key;                    // 32 hex digits
  std::filesystem::path path;         // <dir>/<key>/module.so
  bool was_hit = false;               // true when no compilation was needed
  double compile_seconds = 0.0;       // wall time spent in the compiler (0 on a hit)
};

struct CacheListing {
  std::string key;
  std::string name;            // program name recorded at build time ("?" if meta.json is unusable)
  std::uintmax_t size_bytes;   // all files of the entry (module, source, metadata)
  std::string created;         // ISO 8601 UTC, as recorded in meta.json
};

class ModuleCache {
 public:
  // `directory` empty: default_directory(). Nothing is created until something is stored.
  explicit ModuleCache(std::filesystem::path directory = {});

  // env FIELDFLOW_CACHE_DIR, else $XDG_CACHE_HOME/fieldflow, else $HOME/.cache/fieldflow.
  static std::filesystem::path default_directory();

  const std::filesystem::path& directory() const { return directory_; }

  // The key get_or_build would use. Throws CompileError if the compiler cannot be identified.
  std::string key_for(const std::string& source, const CompilerConfig& config,
                      const std::string& extra_key) const;

  // Returns the cached module for this build, compiling it first when absent or damaged (a hit
  // requires meta.json and a module.so whose size and hash match it). Safe to call concurrently
  // from any number of threads and processes: each build is compiled exactly once.
  // Throws CompileError (compiler missing or rejecting the source; the source is kept under
  // failed/ and the message says where) or CacheError (directory unusable, naming it).
  CacheEntry get_or_build(const std::string& name, const std::string& source,
                          const CompilerConfig& config, const std::string& extra_key);

  // Published entries, oldest first. A missing cache directory is empty, not an error.
  std::vector<CacheListing> list() const;

  // meta.json of one entry, pretty-printed, followed by the paths of its source and module.
  // Throws CacheError if `key` is malformed or not in the cache.
  std::string show(const std::string& key) const;

  // Removes every entry (and failed sources, leftovers of interrupted builds, lock files);
  // returns the number of entries removed. Waits for builds in progress to finish first.
  std::size_t clear();

 private:
  std::filesystem::path directory_;
};

}  // namespace fieldflow::toolchain
