#include "toolchain/module_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <optional>
#include <random>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <xxhash.h>

#include "fieldflow/errors.h"

namespace fieldflow::toolchain {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Bump when the key derivation or the entry layout changes: old entries then simply stop matching.
constexpr std::string_view kKeyFormat = "fieldflow-module-cache-v1";
constexpr const char* kModuleFile = "module.so";
constexpr const char* kSourceFile = "source.cpp";
constexpr const char* kMetaFile = "meta.json";

// ---- keys ----------------------------------------------------------------------------------

// Appends a length-prefixed field, so that ("ab","c") and ("a","bc") hash differently.
void append_field(std::string& buffer, std::string_view field) {
  const std::uint64_t length = field.size();
  for (int byte = 0; byte < 8; ++byte) buffer.push_back(static_cast<char>((length >> (8 * byte)) & 0xff));
  buffer.append(field);
}

std::string make_key(const std::string& source, const std::string& identity,
                     const std::vector<std::string>& flags, const std::string& extra_key) {
  std::string buffer;
  buffer.reserve(source.size() + identity.size() + extra_key.size() + 256);
  append_field(buffer, kKeyFormat);
  append_field(buffer, source);
  append_field(buffer, identity);
  // Flags one by one (plus their count) rather than joined with a separator, which a flag could
  // itself contain.
  append_field(buffer, std::to_string(flags.size()));
  for (const auto& flag : flags) append_field(buffer, flag);
  append_field(buffer, extra_key);
  const XXH128_hash_t hash = XXH3_128bits(buffer.data(), buffer.size());
  return fmt::format("{:016x}{:016x}", hash.high64, hash.low64);
}

bool is_key(std::string_view name) {
  return name.size() == 32 && name.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

// ---- small file helpers --------------------------------------------------------------------

struct FileDigest {
  std::uintmax_t size = 0;
  std::uint64_t xxh3 = 0;
};

// Size and XXH3-64 of a file, or nothing if it cannot be read completely.
std::optional<FileDigest> digest_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  XXH3_state_t* state = XXH3_createState();
  if (state == nullptr) return std::nullopt;
  XXH3_64bits_reset(state);
  FileDigest digest;
  std::vector<char> chunk(1 << 16);
  while (in) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    const auto n = static_cast<std::size_t>(in.gcount());
    XXH3_64bits_update(state, chunk.data(), n);
    digest.size += n;
  }
  const bool complete = in.eof() && !in.bad();
  digest.xxh3 = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  if (!complete) return std::nullopt;
  return digest;
}

void write_file(const fs::path& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
  out.close();
  if (!out) {
    throw CacheError(fmt::format("cannot write '{}' in the module cache: {}", path.string(),
                                 std::strerror(errno)));
  }
}

std::optional<json> read_json(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  json value = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded() || !value.is_object()) return std::nullopt;
  return value;
}

std::string utc_now_iso8601() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

std::uintmax_t directory_size(const fs::path& dir) {
  std::uintmax_t total = 0;
  std::error_code ec;
  for (const auto& item : fs::recursive_directory_iterator(dir, ec)) {
    std::error_code size_ec;
    if (item.is_regular_file(size_ec)) {
      const auto size = item.file_size(size_ec);
      if (!size_ec) total += size;
    }
  }
  return total;
}

// A name no other thread or process picks: pid separates processes, random bits separate threads
// (std::random_device is read fresh each time, so forked children do not repeat their parent).
std::string unique_suffix() {
  std::random_device random;
  const std::uint64_t bits = (std::uint64_t{random()} << 32) ^ random();
  return fmt::format("{}-{:016x}", getpid(), bits);
}

// Ensures the cache directory exists and is a directory we can use; CacheError names it otherwise.
void ensure_directory(const fs::path& dir) {
  std::error_code ec, type_ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir, type_ec)) {
    throw CacheError(fmt::format("cannot create the module cache directory '{}': {}",
                                 dir.string(), ec ? ec.message() : "not a directory"));
  }
}

// An exclusive flock on <dir>/<key>.lock for the lifetime of the object.
// flock (unlike fcntl locks) belongs to the open file description, so two threads of one process
// that each open the file exclude each other just like two processes do.
class KeyLock {
 public:
  explicit KeyLock(fs::path path) : path_(std::move(path)) {
    for (;;) {
      fd_ = open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
      if (fd_ < 0) {
        throw CacheError(fmt::format("cannot create lock file '{}' in the module cache: {}",
                                     path_.string(), std::strerror(errno)));
      }
      while (flock(fd_, LOCK_EX) != 0) {
        if (errno != EINTR) {
          const int error = errno;
          close(fd_);
          throw CacheError(fmt::format("cannot lock '{}': {}", path_.string(),
                                       std::strerror(error)));
        }
      }
      // clear() unlinks lock files while holding them. If that happened while we waited, we hold
      // a lock on a file nobody else will open; lock the file now at the path instead.
      struct stat held {}, current {};
      if (fstat(fd_, &held) == 0 && stat(path_.c_str(), &current) == 0 &&
          held.st_dev == current.st_dev && held.st_ino == current.st_ino) {
        return;
      }
      close(fd_);
    }
  }
  ~KeyLock() { close(fd_); }  // closing the descriptor releases the lock
  KeyLock(const KeyLock&) = delete;
  KeyLock& operator=(const KeyLock&) = delete;

  // Removes the lock file while still holding it (see the constructor for why that is safe).
  void unlink_file() { unlink(path_.c_str()); }

 private:
  fs::path path_;
  int fd_ = -1;
};

// Removes a directory tree when it goes out of scope unless released: a failed build must not
// leave its temporary directory behind.
class RemoveOnExit {
 public:
  explicit RemoveOnExit(fs::path path) : path_(std::move(path)) {}
  ~RemoveOnExit() {
    if (!path_.empty()) {
      std::error_code ec;
      fs::remove_all(path_, ec);
    }
  }
  RemoveOnExit(const RemoveOnExit&) = delete;
  RemoveOnExit& operator=(const RemoveOnExit&) = delete;
  void release() { path_.clear(); }

 private:
  fs::path path_;
};

// An entry is usable only if its metadata names it and module.so is byte-for-byte what was built.
// Anything else (interrupted write, disk corruption, manual tampering) means "rebuild".
bool entry_is_valid(const fs::path& entry, const std::string& key) {
  const auto meta = read_json(entry / kMetaFile);
  if (!meta) return false;
  const auto digest = digest_file(entry / kModuleFile);
  if (!digest) return false;
  try {
    return meta->at("key").get<std::string>() == key &&
           meta->at("module_size").get<std::uintmax_t>() == digest->size &&
           meta->at("module_xxh3_64").get<std::string>() == fmt::format("{:016x}", digest->xxh3);
  } catch (const json::exception&) {
    return false;
  }
}

// Deletes `path` by first renaming it to a unique name, so the name is free at once even if
// deleting a large tree takes a while (or partly fails).
void discard_directory(const fs::path& dir, const fs::path& path, const std::string& key) {
  std::error_code ec;
  const fs::path aside = dir / fmt::format("stale-{}-{}", key, unique_suffix());
  fs::rename(path, aside, ec);
  fs::remove_all(ec ? path : aside, ec);
}

}  // namespace

ModuleCache::ModuleCache(fs::path directory)
    : directory_(directory.empty() ? default_directory() : std::move(directory)) {}

fs::path ModuleCache::default_directory() {
  auto env = [](const char* name) -> std::string {
    const char* value = std::getenv(name);
    return value != nullptr ? value : "";
  };
  if (std::string dir = env("FIELDFLOW_CACHE_DIR"); !dir.empty()) return dir;
  if (std::string xdg = env("XDG_CACHE_HOME"); !xdg.empty()) return fs::path(xdg) / "fieldflow";
  if (std::string home = env("HOME"); !home.empty()) return fs::path(home) / ".cache" / "fieldflow";
  throw CacheError(
      "cannot locate the module cache: none of FIELDFLOW_CACHE_DIR, XDG_CACHE_HOME, HOME is set");
}

std::string ModuleCache::key_for(const std::string& source, const CompilerConfig& config,
                                 const std::string& extra_key) const {
  return make_key(source, compiler_identity(config.cxx), config.flags, extra_key);
}

CacheEntry ModuleCache::get_or_build(const std::string& name, const std::string& source,
                                     const CompilerConfig& config, const std::string& extra_key) {
  const std::string identity = compiler_identity(config.cxx);
  const std::string key = make_key(source, identity, config.flags, extra_key);
  const fs::path entry = directory_ / key;
  CacheEntry result{key, entry / kModuleFile, false, 0.0};

  ensure_directory(directory_);
  // Holding the key's lock for check *and* build means concurrent callers of one build wait for
  // the first to finish and then find a hit, instead of all compiling the same thing.
  KeyLock lock(directory_ / (key + ".lock"));

  std::error_code ec;
  if (fs::exists(entry, ec)) {
    if (entry_is_valid(entry, key)) {
      result.was_hit = true;
      return result;
    }
    discard_directory(directory_, entry, key);  // corrupted or partial: rebuild from scratch
  }

  // Build in a private directory and publish it with one rename, so that no reader -- including
  // one that ignores the lock -- ever sees a half-written entry.
  const fs::path staging = directory_ / fmt::format("tmp-{}-{}", key, unique_suffix());
  if (!fs::create_directory(staging, ec) || ec) {
    throw CacheError(fmt::format("cannot create '{}' in the module cache: {}", staging.string(),
                                 ec ? ec.message() : "already exists"));
  }
  RemoveOnExit cleanup(staging);
  write_file(staging / kSourceFile, source);

  const auto start = std::chrono::steady_clock::now();
  compile_shared_object(staging / kSourceFile, staging / kModuleFile, config,
                        directory_ / "failed" / (key + ".cpp"));
  result.compile_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  const auto digest = digest_file(staging / kModuleFile);
  if (!digest) {
    throw CacheError(fmt::format("cannot read back the compiled module '{}'",
                                 (staging / kModuleFile).string()));
  }
  const json meta = {
      {"name", name},
      {"key", key},
      {"compiler", identity},
      {"cxx", config.cxx},
      {"flags", config.flags},
      {"extra_key", extra_key},
      {"created", utc_now_iso8601()},
      {"compile_seconds", result.compile_seconds},
      {"module_size", digest->size},
      {"module_xxh3_64", fmt::format("{:016x}", digest->xxh3)},
  };
  write_file(staging / kMetaFile, meta.dump(2) + "\n");

  fs::rename(staging, entry, ec);
  if (ec) {
    // Only possible if someone wrote <key>/ without the lock; accept their entry if it is sound.
    if (entry_is_valid(entry, key)) return result;
    throw CacheError(fmt::format("cannot publish '{}' as '{}' in the module cache: {}",
                                 staging.string(), entry.string(), ec.message()));
  }
  cleanup.release();
  return result;
}

std::vector<CacheListing> ModuleCache::list() const {
  std::vector<CacheListing> listings;
  std::error_code ec;
  if (!fs::exists(directory_, ec)) return listings;
  fs::directory_iterator it(directory_, ec);
  if (ec) {
    throw CacheError(fmt::format("cannot read the module cache directory '{}': {}",
                                 directory_.string(), ec.message()));
  }
  for (const auto& item : it) {
    const std::string key = item.path().filename().string();
    std::error_code type_ec;
    if (!is_key(key) || !item.is_directory(type_ec)) continue;
    CacheListing listing{key, "?", directory_size(item.path()), ""};
    if (const auto meta = read_json(item.path() / kMetaFile)) {
      listing.name = meta->value("name", "?");
      listing.created = meta->value("created", "");
    }
    listings.push_back(std::move(listing));
  }
  std::sort(listings.begin(), listings.end(), [](const CacheListing& a, const CacheListing& b) {
    return std::tie(a.created, a.key) < std::tie(b.created, b.key);
  });
  return listings;
}

std::string ModuleCache::show(const std::string& key) const {
  // Validating the shape also keeps a user-supplied "key" from addressing paths outside the cache.
  if (!is_key(key)) {
    throw CacheError(fmt::format("'{}' is not a module cache key (expected 32 hex digits)", key));
  }
  const fs::path entry = directory_ / key;
  const auto meta = read_json(entry / kMetaFile);
  if (!meta) {
    throw CacheError(fmt::format("no usable entry '{}' in the module cache '{}'", key,
                                 directory_.string()));
  }
  return fmt::format("{}\nsource: {}\nmodule: {}\n", meta->dump(2),
                     (entry / kSourceFile).string(), (entry / kModuleFile).string());
}

std::size_t ModuleCache::clear() {
  std::error_code ec;
  if (!fs::exists(directory_, ec)) return 0;
  std::vector<fs::path> items;
  for (fs::directory_iterator it(directory_, ec), end; !ec && it != end; it.increment(ec)) {
    items.push_back(it->path());
  }
  if (ec) {
    throw CacheError(fmt::format("cannot read the module cache directory '{}': {}",
                                 directory_.string(), ec.message()));
  }

  std::size_t removed = 0;
  for (const auto& path : items) {
    const std::string name = path.filename().string();
    // Every item except failed/ belongs to one key: <key>, <key>.lock, tmp-<key>-..., stale-<key>-...
    std::string key;
    if (is_key(name)) {
      key = name;
    } else if (name.size() >= 37 && name.ends_with(".lock")) {
      key = name.substr(0, 32);
    } else if (name.starts_with("tmp-")) {
      key = name.substr(4, 32);
    } else if (name.starts_with("stale-")) {
      key = name.substr(6, 32);
    } else if (name == "failed") {
      fs::remove_all(path, ec);
      continue;
    }
    if (!is_key(key)) continue;  // not ours: leave it alone
    // Taking the key's lock waits for a build in progress, so its files are never pulled away
    // from under the compiler.
    KeyLock lock(directory_ / (key + ".lock"));
    const bool was_entry = is_key(name) && fs::is_directory(path, ec);
    if (name != key + ".lock") fs::remove_all(path, ec);
    if (ec) {
      throw CacheError(fmt::format("cannot remove '{}' from the module cache: {}", path.string(),
                                   ec.message()));
    }
    if (was_entry) ++removed;
    lock.unlink_file();
  }
  return removed;
}

}  // namespace fieldflow::toolchain
