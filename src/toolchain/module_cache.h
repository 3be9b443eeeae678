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
//   tmp-<key>-<host>-<pid>-<random>/          a build in progress, renamed to <key>/ when done
//   stale-<key>-<pid>-<random>/               an entry being discarded
//   failed/<key>.cpp, failed/<key>.log        sources the compiler rejected, for the user to see
//                                             (the newest kMaxFailedSources)
//   index/<index key>                         the key of the entry built from a generator's source
//                                             (recall_source); removed with its entry by sweeps
// Entries are immutable once published: a rebuild goes to a fresh directory that replaces the old
// one by rename, so a module another process has mapped is never rewritten underneath it.
//
// Trust (docs/cache.md): a module runs with the rights of whoever loads it, so an entry is used
// only if it, its files, the cache folder and every folder above are owned by the current user or
// root and not writable by others or a group other than the owner's private one (secure_fs.h). Everything is created 0700/0600. A module is
// checked (size and hash against meta.json, complete ELF image) before every load, and a new one
// is also loaded once in the building process before it is published. A cache folder that is not
// trusted, or that cannot be written (a read-only mount, a system-wide folder), still serves
// verified hits without writing anything; builds then go to fallback_directory().
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "toolchain/compiler.h"
#include "toolchain/loaded_module.h"

namespace fieldflow::toolchain {

struct CacheEntry {
  std::string key;                    // 32 hex digits
  std::filesystem::path path;         // <dir>/<key>/module.so
  bool was_hit = false;               // true when no compilation was needed
  double compile_seconds = 0.0;       // wall time spent in the compiler (0 on a hit)
  // Empty when the configured cache folder served the entry; otherwise why it could not (untrusted,
  // not writable, ...) and so the entry lies in fallback_directory().
  std::string fallback_reason;
};

// An entry and its module. A hit is loaded without the lock first; if that fails (a concurrent
// clear() removed it, say) the lookup is repeated and the module loaded while the entry's lock is
// held, so clear() cannot pull the file away between lookup and load.
struct LoadedEntry {
  CacheEntry entry;
  LoadedModule module;
};

// A build done in-process instead of by running a compiler (NVRTC for CUDA programs): the entry
// holds source.cu and module.cubin, is keyed, locked and published exactly like a module, and
// checked as a CUDA binary (no trial load: the building machine may have no device).
struct InProcessBuild {
  std::string identity;            // the compiler and its version, part of the key
  std::vector<std::string> flags;  // part of the key
  // Returns the binary; throws CompileError with the compiler's diagnostics.
  std::function<std::string(const std::string& source)> build;
};

struct CacheListing {
  std::string key;
  std::string name;            // program name recorded at build time ("?" if meta.json is unusable)
  std::uintmax_t size_bytes;   // all files of the entry (module, source, metadata)
  std::string created;         // ISO 8601 UTC, as recorded in meta.json
  std::string problem;         // empty when the entry is trusted (see above), else why it is ignored
};

// failed/ keeps the sources of this many most recent failed builds.
inline constexpr std::size_t kMaxFailedSources = 20;

class ModuleCache {
 public:
  // `directory` empty: default_directory(). Made absolute (relative to the current directory).
  // Nothing is created until something is stored.
  explicit ModuleCache(std::filesystem::path directory = {});

  // env FIELDFLOW_CACHE_DIR, else $XDG_CACHE_HOME/fieldflow, else $HOME/.cache/fieldflow.
  static std::filesystem::path default_directory();

  const std::filesystem::path& directory() const { return directory_; }

  // Where builds go when directory() cannot take them: $XDG_CACHE_HOME/fieldflow, else
  // $HOME/.cache/fieldflow, else (or when that is directory() itself) <temp>/fieldflow-<uid>.
  std::filesystem::path fallback_directory() const;

  // "" when directory() is trusted (see above), else why its entries are ignored.
  std::string trust_problem() const;

  // The key get_or_build would use. Throws CompileError if the compiler cannot be identified.
  std::string key_for(const std::string& source, const CompilerConfig& config,
                      const std::string& extra_key) const;

  // The source index: a generated source is a function of what generated it, so a caller that can
  // name all of that in a `generator_key` (driver::cpu_source_key) finds the source of an earlier
  // build without generating it again. remember_source records, in the folder holding `entry` (from
  // get_or_load with this config and extra_key), index/<key of generator_key, compiler, flags,
  // extra_key> naming the entry; best effort: a folder that cannot be written records nothing.
  // recall_source reads it back (configured folder, then the fallback): the entry's source.cpp,
  // but only when the record and the source are trusted files and the source hashes to the entry's
  // key, so a damaged or stale record costs a regeneration, never another program's module. The
  // caller still passes the source to get_or_load, which checks and loads the module as usual.
  std::optional<std::string> recall_source(const std::string& generator_key, const CompilerConfig& config,
                                           const std::string& extra_key) const;
  void remember_source(const std::string& generator_key, const CacheEntry& entry, const CompilerConfig& config,
                       const std::string& extra_key);

  // Returns the cached module for this build, compiling it first when absent, damaged or untrusted
  // (a hit requires a trusted entry, meta.json and a module.so whose size and hash match it and
  // that is a complete ELF image). Safe to call concurrently from any number of threads and
  // processes: each build is compiled exactly once. The returned path may be removed by a
  // concurrent clear() before the caller loads it: get_or_load() does not have that race.
  // Throws CompileError (compiler missing or rejecting the source -- kept under failed/, the
  // message says where --, or producing a module that cannot be loaded) or CacheError (directory
  // unusable, or a full disk, naming the folder).
  CacheEntry get_or_build(const std::string& name, const std::string& source,
                          const CompilerConfig& config, const std::string& extra_key);

  // get_or_build, and the module loaded (RTLD_NOW; see LoadedEntry for the locking). A hit that
  // fails to load is evicted and rebuilt once.
  LoadedEntry get_or_load(const std::string& name, const std::string& source,
                          const CompilerConfig& config, const std::string& extra_key);

  // The in-process variant of get_or_build; CacheEntry::path is the binary (read_artifact).
  CacheEntry get_or_build(const std::string& name, const std::string& source, const InProcessBuild& build,
                          const std::string& extra_key);
  // The bytes of an entry's artifact. Throws CacheError.
  static std::string read_artifact(const CacheEntry& entry);

  // Published entries, oldest first. A missing cache directory is empty, not an error.
  std::vector<CacheListing> list() const;

  // meta.json of one entry, pretty-printed, followed by the paths of its source and module.
  // Throws CacheError if `key` is malformed or not in the cache.
  std::string show(const std::string& key) const;

  // Removes every entry (and failed sources, leftovers of interrupted builds, lock files);
  // returns the number of entries removed. Waits for builds in progress to finish first. In a
  // folder that is not trusted, only what the current user owns is removed.
  std::size_t clear();

  // Removes leftovers: temporary folders of builds whose process is gone (or older than a day),
  // stale-* folders, lock files of keys without an entry that nobody holds, and failed sources
  // beyond kMaxFailedSources. Runs before every build; returns the number of items removed.
  std::size_t remove_leftovers();

 private:
  struct Request;
  struct Outcome;
  // Serves or builds `request` in `dir`; nullopt (reason in *why) when `dir` cannot be used for it.
  std::optional<Outcome> lookup_in(const std::filesystem::path& dir, const Request& request, bool load,
                                   std::string* why);
  Outcome lookup(const Request& request, bool load);

  std::filesystem::path directory_;
};

}  // namespace fieldflow::toolchain
