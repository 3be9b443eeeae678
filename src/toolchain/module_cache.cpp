#include "toolchain/module_cache.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <limits>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iterator>
#include <new>
#include <optional>
#include <random>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <xxhash.h>

#include "fieldflow/errors.h"
#include "toolchain/secure_fs.h"

namespace fieldflow::toolchain {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Bump when the key derivation or the entry layout changes: old entries then simply stop matching.
constexpr std::string_view kKeyFormat = "fieldflow-module-cache-v1";
// The same for the source index (index/<index key>: the key of the entry built from a generator
// key's source).
constexpr std::string_view kIndexFormat = "fieldflow-source-index-v1";
constexpr const char* kIndexFolder = "index";
constexpr const char* kModuleFile = "module.so";
constexpr const char* kSourceFile = "source.cpp";
// Entries of in-process builds (InProcessBuild: NVRTC) hold these instead; meta.json says which.
constexpr const char* kCudaBinaryFile = "module.cubin";
constexpr const char* kCudaSourceFile = "source.cu";
constexpr const char* kMetaFile = "meta.json";

// ---- keys ----------------------------------------------------------------------------------

// XXH3-128 of length-prefixed fields, so that ("ab","c") and ("a","bc") hash differently. Fed to
// the hash as they come (the same value as hashing them concatenated): a warm load computes three
// keys, and copying the source and the prelude into one buffer was half of their cost.
class FieldHasher {
 public:
  FieldHasher() : state_(XXH3_createState()) {
    if (state_ == nullptr) throw std::bad_alloc();
    XXH3_128bits_reset(state_);
  }
  ~FieldHasher() { XXH3_freeState(state_); }
  FieldHasher(const FieldHasher&) = delete;
  FieldHasher& operator=(const FieldHasher&) = delete;

  void field(std::string_view f) {
    unsigned char length[8];
    for (int byte = 0; byte < 8; ++byte) length[byte] = static_cast<unsigned char>((std::uint64_t{f.size()} >> (8 * byte)) & 0xff);
    XXH3_128bits_update(state_, length, sizeof length);
    XXH3_128bits_update(state_, f.data(), f.size());
  }
  std::string hex() const {
    const XXH128_hash_t hash = XXH3_128bits_digest(state_);
    return fmt::format("{:016x}{:016x}", hash.high64, hash.low64);
  }

 private:
  XXH3_state_t* state_;
};

// The generated prelude every module includes (<fieldflow/abi.h>, found like the compiler finds it:
// the first -I folder that has it): its helpers define results (integer division, pow, bounds), so
// a changed header must not reuse modules compiled against the old one.
// (Read with read(2): every key computes it, and a warm load computes three keys.)
std::string prelude_of(const std::vector<std::string>& flags) {
  for (const auto& flag : flags) {
    if (flag.rfind("-I", 0) != 0 || flag.size() == 2) continue;
    const fs::path header = fs::path(flag.substr(2)) / "fieldflow" / "abi.h";
    const int fd = open(header.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    std::string text;
    char chunk[16384];
    for (ssize_t n; (n = read(fd, chunk, sizeof chunk)) != 0;) {
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) break;
      text.append(chunk, static_cast<std::size_t>(n));
    }
    close(fd);
    return text;
  }
  return "";
}

std::string make_key(const std::string& source, const std::string& identity,
                     const std::vector<std::string>& flags, const std::string& extra_key,
                     std::string_view format = kKeyFormat) {
  FieldHasher hash;
  hash.field(format);
  hash.field(source);
  hash.field(identity);
  // Flags one by one (plus their count) rather than joined with a separator, which a flag could
  // itself contain.
  hash.field(std::to_string(flags.size()));
  for (const auto& flag : flags) hash.field(flag);
  hash.field(extra_key);
  hash.field(prelude_of(flags));
  return hash.hex();
}

bool is_key(std::string_view name) {
  return name.size() == 32 && name.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

// ---- small file helpers --------------------------------------------------------------------

struct FileDigest {
  std::uintmax_t size = 0;
  std::uint64_t xxh3 = 0;
};

// Size and XXH3-64 of an open file, or nothing if it cannot be read completely.
std::optional<FileDigest> digest_fd(int fd) {
  XXH3_state_t* state = XXH3_createState();
  if (state == nullptr) return std::nullopt;
  XXH3_64bits_reset(state);
  FileDigest digest;
  std::vector<char> chunk(1 << 16);
  off_t offset = 0;
  bool complete = true;
  for (;;) {
    const ssize_t n = pread(fd, chunk.data(), chunk.size(), offset);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      complete = false;
      break;
    }
    if (n == 0) break;
    XXH3_64bits_update(state, chunk.data(), static_cast<std::size_t>(n));
    digest.size += static_cast<std::uintmax_t>(n);
    offset += n;
  }
  digest.xxh3 = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  if (!complete) return std::nullopt;
  return digest;
}

std::optional<json> read_json(const fs::path& path) {
  // A folder (or anything but a file) where meta.json should be opens, then fails to read, which
  // libstdc++ reports by throwing from inside the parser (found by fuzz_cache_dir).
  std::error_code ec;
  if (!fs::is_regular_file(fs::symlink_status(path, ec))) return std::nullopt;
  std::ifstream in(path);
  if (!in) return std::nullopt;
  json value;
  try {
    value = json::parse(in, nullptr, /*allow_exceptions=*/false);
  } catch (const std::ios_base::failure&) {
    return std::nullopt;
  }
  if (value.is_discarded() || !value.is_object()) return std::nullopt;
  return value;
}

// A string member of meta.json, or `fallback` when it is missing or not a string.
std::string string_member(const json& meta, const char* name, const char* fallback) {
  const auto it = meta.find(name);
  return it != meta.end() && it->is_string() ? it->get<std::string>() : fallback;
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
  // Advanced with error codes: an entry cleared by another process while it is being listed
  // ends the walk instead of throwing filesystem_error (found by fuzz_cache_dir).
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::directory_entry& item = *it;
    std::error_code size_ec;
    if (item.is_regular_file(size_ec)) {
      const auto size = item.file_size(size_ec);
      if (!size_ec) total += size;
    }
  }
  return total;
}

// The host name as it appears in temporary folder names: only [A-Za-z0-9.], so '-' still
// separates the fields. A cache on a file system shared between hosts judges a temporary folder
// by process liveness only when it was made on this host.
std::string host_tag() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "unknown";
  std::string tag;
  for (const char* c = name; *c != '\0'; ++c) tag.push_back(std::isalnum(static_cast<unsigned char>(*c)) || *c == '.' ? *c : '_');
  return tag.empty() ? "unknown" : tag;
}

// A name no other thread or process picks: pid separates processes, random bits separate threads
// (std::random_device is read fresh each time, so forked children do not repeat their parent).
std::string unique_suffix() {
  std::random_device random;
  const std::uint64_t bits = (std::uint64_t{random()} << 32) ^ random();
  return fmt::format("{}-{:016x}", getpid(), bits);
}

bool process_alive(long pid) {
  if (pid <= 0 || pid > std::numeric_limits<pid_t>::max()) return false;
  return kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

bool owned_by_me(const fs::path& path) {
  struct stat st {};
  return lstat(path.c_str(), &st) == 0 && (st.st_uid == geteuid() || geteuid() == 0);
}

// An exclusive flock on <dir>/<key>.lock for the lifetime of the object; held() says whether it
// was obtained, why() why not. The lock file is opened without following a symbolic link and must
// be a regular file owned by the current user or root (a file someone else owns could be held by
// them forever). flock (unlike fcntl locks) belongs to the open file description, so two threads
// of one process that each open the file exclude each other just like two processes do.
class KeyLock {
 public:
  explicit KeyLock(fs::path path, bool blocking = true) : path_(std::move(path)) {
    for (;;) {
      fd_ = open(path_.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
      if (fd_ < 0) {
        fail(errno, std::strerror(errno));
        return;
      }
      struct stat held {};
      if (fstat(fd_, &held) != 0) {
        fail(errno, std::strerror(errno));
        return;
      }
      if (!S_ISREG(held.st_mode)) {
        fail(EINVAL, "expected a regular file");
        return;
      }
      if (held.st_uid != geteuid() && held.st_uid != 0) {
        foreign_ = true;
        fail(EPERM, fmt::format("owned by uid {}, expected uid {} or root", held.st_uid, geteuid()));
        return;
      }
      if (held.st_uid == geteuid() && (held.st_mode & 07777) != 0600) fchmod(fd_, 0600);
      int rc = 0;
      while ((rc = flock(fd_, blocking ? LOCK_EX : LOCK_EX | LOCK_NB)) != 0 && errno == EINTR) {
      }
      if (rc != 0) {
        fail(errno, std::strerror(errno));
        return;
      }
      // clear() unlinks lock files while holding them. If that happened while we waited, we hold
      // a lock on a file nobody else will open; lock the file now at the path instead.
      struct stat current {};
      if (lstat(path_.c_str(), &current) == 0 && held.st_dev == current.st_dev && held.st_ino == current.st_ino) {
        return;
      }
      close(fd_);
    }
  }
  ~KeyLock() {
    if (fd_ >= 0) close(fd_);  // closing the descriptor releases the lock
  }
  KeyLock(const KeyLock&) = delete;
  KeyLock& operator=(const KeyLock&) = delete;

  bool held() const { return fd_ >= 0; }
  int error() const { return error_; }
  bool foreign() const { return foreign_; }
  std::string why() const { return fmt::format("cannot lock '{}': {}", path_.string(), why_); }

  // Removes the lock file while still holding it (see the constructor for why that is safe).
  void unlink_file() { unlink(path_.c_str()); }

 private:
  void fail(int error, std::string why) {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
    error_ = error;
    why_ = std::move(why);
  }

  fs::path path_;
  int fd_ = -1;
  int error_ = 0;
  bool foreign_ = false;
  std::string why_;
};

// Removes a directory tree when it goes out of scope unless released: a failed build must not
// leave its temporary directory behind.
class RemoveOnExit {
 public:
  // `names`: the files a build writes into the folder, removed by name if listing it fails.
  RemoveOnExit(fs::path path, std::vector<std::string> names) : path_(std::move(path)), names_(std::move(names)) {}
  ~RemoveOnExit() {
    if (path_.empty()) return;
    std::error_code ec;
    if (fs::remove_all(path_, ec) != static_cast<std::uintmax_t>(-1) && !ec) return;
    // remove_all lists the folder, which takes a file descriptor: when the build failed because
    // the process has none left (RLIMIT_NOFILE), neither has this. unlink and rmdir take none.
    for (const std::string& name : names_) unlink((path_ / name).c_str());
    rmdir(path_.c_str());
  }
  RemoveOnExit(const RemoveOnExit&) = delete;
  RemoveOnExit& operator=(const RemoveOnExit&) = delete;
  void release() { path_.clear(); }

 private:
  fs::path path_;
  std::vector<std::string> names_;
};

class CloseOnExit {
 public:
  explicit CloseOnExit(int fd) : fd_(fd) {}
  ~CloseOnExit() {
    if (fd_ >= 0) close(fd_);
  }
  CloseOnExit(const CloseOnExit&) = delete;
  CloseOnExit& operator=(const CloseOnExit&) = delete;

 private:
  int fd_;
};

// The bytes of a regular file that is trusted like an entry's files (opened without following a
// symbolic link), or nothing: absent, of another kind, untrusted, unreadable or above `max_size`.
std::optional<std::string> read_trusted_file(const fs::path& path, std::size_t max_size) {
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  CloseOnExit closer(fd);
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || !secure_fs::trust_problem(st, path).empty() ||
      static_cast<std::uintmax_t>(st.st_size) > max_size) {
    return std::nullopt;
  }
  std::string bytes(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = pread(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::nullopt;  // an error, or the file shrank
    done += static_cast<std::size_t>(n);
  }
  return bytes;
}

// The entry key an index file names ("<32 hex digits>\n"), or "" when it does not name one.
std::string indexed_key(const fs::path& index_file) {
  const auto text = read_trusted_file(index_file, 64);
  if (!text || text->size() != 33 || text->back() != '\n') return "";
  const std::string key = text->substr(0, 32);
  return is_key(key) ? key : "";
}

constexpr const char* kAbsent = "absent";

// "" when <entry> may be used: a trusted folder with trusted meta.json and module.so, the metadata
// naming the key, the module byte-for-byte what was built, and a complete ELF image. Otherwise
// what is wrong (kAbsent when there is no entry). Anything wrong (interrupted write, disk
// corruption, tampering, an entry planted by someone else) means "rebuild" (or "fall back").
// The artifact meta.json names: absent means a CPU module (entries from before CUDA modules); a
// damaged file may hold anything there, which names no artifact ("").
std::string artifact_of(const json& meta) {
  const auto it = meta.find("artifact");
  if (it == meta.end()) return kModuleFile;
  return it->is_string() ? it->get<std::string>() : std::string();
}

std::string entry_problem(const fs::path& entry, const std::string& key) {
  struct stat st {};
  if (lstat(entry.c_str(), &st) != 0) return kAbsent;
  if (!S_ISDIR(st.st_mode)) return fmt::format("'{}' is not a folder", entry.string());
  if (std::string problem = secure_fs::trust_problem(st, entry); !problem.empty()) return problem;
  const fs::path meta_path = entry / kMetaFile;
  if (lstat(meta_path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return fmt::format("'{}' is missing or not a regular file", meta_path.string());
  }
  if (std::string problem = secure_fs::trust_problem(st, meta_path); !problem.empty()) return problem;
  const auto meta = read_json(meta_path);
  if (!meta) return fmt::format("'{}' is not a JSON object", meta_path.string());

  // Only the two known artifact names: a planted meta.json cannot point outside the entry.
  const std::string artifact = artifact_of(*meta);
  if (artifact != kModuleFile && artifact != kCudaBinaryFile)
    return fmt::format("'{}' names an unknown artifact '{}'", meta_path.string(), artifact);
  const fs::path module_path = entry / artifact;
  const int fd = open(module_path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return fmt::format("cannot open '{}': {}", module_path.string(), std::strerror(errno));
  CloseOnExit closer(fd);
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return fmt::format("'{}' is not a regular file", module_path.string());
  if (std::string problem = secure_fs::trust_problem(st, module_path); !problem.empty()) return problem;
  const auto digest = digest_fd(fd);
  if (!digest) return fmt::format("cannot read '{}'", module_path.string());
  try {
    const std::string hash = fmt::format("{:016x}", digest->xxh3);
    if (meta->at("key").get<std::string>() != key) return fmt::format("'{}' names another key", meta_path.string());
    const auto size = meta->at("module_size").get<std::uintmax_t>();
    if (size != digest->size || meta->at("module_xxh3_64").get<std::string>() != hash) {
      return fmt::format("'{}' is {} bytes with hash {}, expected {} bytes with hash {} (meta.json)", module_path.string(),
                         digest->size, hash, size, meta->at("module_xxh3_64").get<std::string>());
    }
  } catch (const json::exception&) {
    return fmt::format("'{}' lacks key, module_size or module_xxh3_64", meta_path.string());
  }
  const std::string problem = artifact == kModuleFile ? secure_fs::shared_object_problem(fd, digest->size)
                                                     : secure_fs::cuda_binary_problem(fd, digest->size);
  if (!problem.empty()) return fmt::format("'{}': {}", module_path.string(), problem);
  return "";
}

// Deletes `path` by first renaming it to a unique name, so the name is free at once even if
// deleting a large tree takes a while (or partly fails). False when it cannot be renamed or removed
// (someone else's entry in a shared sticky folder, a read-only mount).
bool discard_directory(const fs::path& dir, const fs::path& path, const std::string& key) {
  std::error_code ec;
  const fs::path aside = dir / fmt::format("stale-{}-{}", key, unique_suffix());
  fs::rename(path, aside, ec);
  if (ec) {
    fs::remove_all(path, ec);
    return !ec;
  }
  fs::remove_all(aside, ec);
  return true;
}

[[noreturn]] void throw_no_space(const fs::path& dir, const std::string& doing, int error) {
  throw CacheError(fmt::format("no space left on the device holding the module cache '{}' ({} bytes free) while {}: {}",
                               dir.string(), secure_fs::free_bytes(dir), doing, std::strerror(error)));
}

// A temporary (tmp-<key>-<host>-<pid>-<random>, older tmp-<key>-<pid>-<random>) or stale
// (stale-<key>-<pid>-<random>) folder whose build or removal is over: its process is gone (when
// it was made on this host), or it is older than a day (a pid reused since, another host).
bool is_abandoned(const fs::path& path, std::string_view name, std::size_t prefix_length) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return false;
  const auto age = std::chrono::system_clock::now() - std::chrono::system_clock::from_time_t(st.st_mtime);
  if (age > std::chrono::hours(24)) return true;
  if (name.size() < prefix_length + 33) return false;
  std::vector<std::string_view> fields;
  std::string_view rest = name.substr(prefix_length + 33);
  for (std::size_t at; (at = rest.find('-')) != std::string_view::npos; rest.remove_prefix(at + 1)) {
    fields.push_back(rest.substr(0, at));
  }
  fields.push_back(rest);
  if (fields.size() < 2) return false;
  if (fields.size() >= 3 && fields[fields.size() - 3] != host_tag()) return false;
  const std::string_view pid_text = fields[fields.size() - 2];
  if (pid_text.empty() || pid_text.find_first_not_of("0123456789") != std::string_view::npos) return false;
  return !process_alive(std::stol(std::string(pid_text)));
}

// Keeps the newest kMaxFailedSources sources (with their logs) in <dir>/failed, always including
// the one of `newest_key` (timestamps may tie).
std::size_t cap_failed(const fs::path& dir, const std::string& newest_key = "") {
  const fs::path failed = dir / "failed";
  struct stat st {};
  if (lstat(failed.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || !secure_fs::trust_problem(st, failed).empty()) return 0;
  std::vector<std::pair<std::int64_t, fs::path>> sources;
  std::size_t removed = 0;
  std::error_code ec;
  for (fs::directory_iterator it(failed, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path path = it->path();
    const std::string name = path.filename().string();
    if (lstat(path.c_str(), &st) != 0) continue;
    if (name.starts_with(".tmp-")) {  // a write interrupted by a crash
      if (std::chrono::system_clock::now() - std::chrono::system_clock::from_time_t(st.st_mtime) > std::chrono::hours(1)) {
        removed += fs::remove(path, ec) ? 1 : 0;
      }
    } else if (path.extension() == ".cpp" && path.stem() != newest_key) {
      sources.emplace_back(std::int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec, path);
    }
  }
  const std::size_t keep = newest_key.empty() ? kMaxFailedSources : kMaxFailedSources - 1;
  if (sources.size() <= keep) return removed;
  std::sort(sources.begin(), sources.end());
  for (std::size_t i = 0; i + keep < sources.size(); ++i) {
    removed += fs::remove(sources[i].second, ec) ? 1 : 0;
    fs::remove(fs::path(sources[i].second).replace_extension(".log"), ec);
  }
  return removed;
}

// Removes index files that name no entry (it was cleared or discarded since) or nothing readable.
std::size_t sweep_index(const fs::path& dir) {
  const fs::path index = dir / kIndexFolder;
  struct stat st {};
  if (lstat(index.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || !secure_fs::trust_problem(st, index).empty()) return 0;
  std::size_t removed = 0;
  std::error_code ec;
  std::vector<fs::path> files;
  for (fs::directory_iterator it(index, ec), end; !ec && it != end; it.increment(ec)) files.push_back(it->path());
  for (const auto& path : files) {
    if (!owned_by_me(path)) continue;
    const std::string key = indexed_key(path);
    if (!key.empty() && lstat((dir / key).c_str(), &st) == 0) continue;
    // A write in progress (write_file_at's fresh name) is left to finish; an old one was abandoned.
    if (path.filename().string().starts_with(".") && lstat(path.c_str(), &st) == 0 &&
        std::chrono::system_clock::now() - std::chrono::system_clock::from_time_t(st.st_mtime) < std::chrono::hours(1)) {
      continue;
    }
    removed += fs::remove(path, ec) ? 1 : 0;
  }
  return removed;
}

// See ModuleCache::remove_leftovers. `held_key`: a key whose lock the caller holds.
std::size_t sweep(const fs::path& dir, const std::string& held_key) {
  std::size_t removed = 0;
  std::error_code ec;
  std::vector<fs::path> items;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) items.push_back(it->path());
  for (const auto& path : items) {
    const std::string name = path.filename().string();
    if (!owned_by_me(path)) continue;  // someone else's, in a shared folder: not ours to judge
    if (name.starts_with("tmp-") || name.starts_with("stale-")) {
      const std::size_t prefix = name.starts_with("tmp-") ? 4 : 6;
      if (is_key(name.substr(prefix, 32)) && is_abandoned(path, name, prefix)) {
        fs::remove_all(path, ec);
        if (!ec) ++removed;
      }
    } else if (name.size() == 37 && name.ends_with(".lock") && is_key(name.substr(0, 32)) &&
               name.substr(0, 32) != held_key) {
      // A lock without an entry (a failed or abandoned build): removed under its own lock, as
      // clear() does, and only if nobody holds it now.
      const std::string key = name.substr(0, 32);
      struct stat st {};
      if (lstat((dir / key).c_str(), &st) == 0) continue;
      KeyLock lock(path, /*blocking=*/false);
      if (lock.held() && lstat((dir / key).c_str(), &st) != 0) {
        lock.unlink_file();
        ++removed;
      }
    }
  }
  return removed + cap_failed(dir) + sweep_index(dir);
}

}  // namespace

struct ModuleCache::Request {
  std::string name;
  const std::string& source;
  const CompilerConfig& config;
  std::string extra_key;
  std::string identity;
  std::string key;
  const InProcessBuild* in_process = nullptr;  // set: built by this function, not by running config.cxx
  const char* artifact() const { return in_process ? kCudaBinaryFile : kModuleFile; }
  const char* source_file() const { return in_process ? kCudaSourceFile : kSourceFile; }
};

struct ModuleCache::Outcome {
  CacheEntry entry;
  std::optional<LoadedModule> module;
};

ModuleCache::ModuleCache(fs::path directory)
    : directory_(fs::absolute(directory.empty() ? default_directory() : std::move(directory)).lexically_normal()) {}

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

fs::path ModuleCache::fallback_directory() const {
  fs::path candidate;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    candidate = fs::path(xdg) / "fieldflow";
  } else if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    candidate = fs::path(home) / ".cache" / "fieldflow";
  }
  if (!candidate.empty()) candidate = fs::absolute(candidate).lexically_normal();
  if (candidate.empty() || candidate == directory_) {
    std::error_code ec;
    candidate = fs::temp_directory_path(ec) / fmt::format("fieldflow-{}", geteuid());
  }
  return candidate;
}

std::string ModuleCache::trust_problem() const {
  std::error_code ec;
  if (!fs::exists(directory_, ec)) return "";  // will be created private
  return secure_fs::folder_trust_problem(directory_);
}

std::string ModuleCache::key_for(const std::string& source, const CompilerConfig& config,
                                 const std::string& extra_key) const {
  return make_key(source, compiler_identity(config.cxx), config.flags, extra_key);
}

std::optional<std::string> ModuleCache::recall_source(const std::string& generator_key, const CompilerConfig& config,
                                                      const std::string& extra_key) const {
  const std::string identity = compiler_identity(config.cxx);
  const std::string index_key = make_key(generator_key, identity, config.flags, extra_key, kIndexFormat);
  const auto recall_in = [&](const fs::path& dir) -> std::optional<std::string> {
    std::error_code ec;
    if (!fs::exists(dir / kIndexFolder / index_key, ec) || !secure_fs::folder_trust_problem(dir / kIndexFolder).empty()) {
      return std::nullopt;
    }
    const std::string key = indexed_key(dir / kIndexFolder / index_key);
    if (key.empty()) return std::nullopt;
    // The entry folder is trusted like the files in it (a folder someone else may write could
    // hold a source.cpp that is not the entry's).
    struct stat st {};
    const fs::path entry = dir / key;
    if (lstat(entry.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || !secure_fs::trust_problem(st, entry).empty())
      return std::nullopt;
    auto source = read_trusted_file(entry / kSourceFile, std::numeric_limits<std::size_t>::max());
    // The source must be the one its entry was built from: a record damaged into naming another
    // entry of a different build, or a source file changed since, is not believed.
    if (!source || make_key(*source, identity, config.flags, extra_key) != key) return std::nullopt;
    return source;
  };
  if (auto source = recall_in(directory_)) return source;
  const fs::path fallback = fallback_directory();
  if (fallback != directory_) return recall_in(fallback);
  return std::nullopt;
}

void ModuleCache::remember_source(const std::string& generator_key, const CacheEntry& entry,
                                  const CompilerConfig& config, const std::string& extra_key) {
  if (!is_key(entry.key) || entry.path.filename() != kModuleFile) return;
  const fs::path dir = entry.path.parent_path().parent_path();
  const fs::path index = dir / kIndexFolder;
  const std::string index_key = make_key(generator_key, compiler_identity(config.cxx), config.flags, extra_key, kIndexFormat);
  try {
    std::error_code ec;
    if (!fs::exists(index, ec)) secure_fs::make_private_folders(index);
    if (!secure_fs::folder_trust_problem(index).empty()) return;
    const int dirfd = secure_fs::open_folder(index);
    if (dirfd < 0) return;
    CloseOnExit close_dir(dirfd);
    secure_fs::write_file_at(dirfd, index_key, entry.key + "\n", index);
  } catch (const CacheError&) {
    // Best effort: without the record the next compile generates the source again, nothing worse.
  }
}

std::optional<ModuleCache::Outcome> ModuleCache::lookup_in(const fs::path& dir, const Request& rq, bool load,
                                                         std::string* why) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) secure_fs::make_private_folders(dir);
  if (std::string problem = secure_fs::folder_trust_problem(dir); !problem.empty()) {
    *why = fmt::format("its entries are not trusted: {}", problem);
    return std::nullopt;
  }
  const fs::path entry = dir / rq.key;
  Outcome out{CacheEntry{rq.key, entry / rq.artifact(), true, 0.0, ""}, std::nullopt};

  // A verified hit needs no lock and writes nothing, so read-only caches serve hits. If the entry
  // goes away between check and load (a concurrent clear), the locked path below decides.
  if (entry_problem(entry, rq.key).empty()) {
    if (!load || rq.in_process) return out;
    try {
      out.module.emplace(out.entry.path);
      return out;
    } catch (const CompileError&) {
    }
  }

  // Holding the key's lock for check, build *and* load means concurrent callers of one build wait
  // for the first to finish and then find a hit, and clear() cannot remove an entry between its
  // check and its load.
  KeyLock lock(dir / (rq.key + ".lock"));
  if (!lock.held()) {
    if (secure_fs::is_no_space(lock.error())) throw_no_space(dir, "creating a lock file", lock.error());
    *why = lock.why();
    return std::nullopt;
  }
  std::string problem = entry_problem(entry, rq.key);
  if (problem.empty()) {
    if (!load || rq.in_process) return out;
    try {
      out.module.emplace(out.entry.path);
      return out;
    } catch (const CompileError& e) {
      problem = fmt::format("it cannot be loaded: {}", e.what());  // evicted and rebuilt once, below
    }
  }
  if (problem != kAbsent && !discard_directory(dir, entry, rq.key)) {
    *why = fmt::format("the unusable entry '{}' ({}) cannot be removed", entry.string(), problem);
    return std::nullopt;
  }
  out.entry.was_hit = false;
  sweep(dir, rq.key);

  // Build in a private directory and publish it with one rename, so that no reader -- including
  // one that ignores the lock -- ever sees a half-written entry.
  const fs::path staging = dir / fmt::format("tmp-{}-{}-{}", rq.key, host_tag(), unique_suffix());
  if (mkdir(staging.c_str(), 0700) != 0) {
    const int error = errno;
    if (secure_fs::is_no_space(error)) throw_no_space(dir, "creating a build folder", error);
    *why = fmt::format("cannot create '{}': {}", staging.string(), std::strerror(error));
    return std::nullopt;
  }
  RemoveOnExit cleanup(staging, {rq.source_file(), rq.artifact(), fs::path(rq.artifact()).replace_extension(".log").string(),
                                 kMetaFile});
  const int dirfd = secure_fs::open_folder(staging);
  if (dirfd < 0) {
    throw CacheError(fmt::format("cannot open the build folder '{}': {}", staging.string(), std::strerror(errno)));
  }
  CloseOnExit close_dir(dirfd);
  fchmod(dirfd, 0700);
  secure_fs::write_file_at(dirfd, rq.source_file(), rq.source, staging);

  const auto start = std::chrono::steady_clock::now();
  if (rq.in_process) {
    // The in-process compiler's diagnostics are in its CompileError; its output goes to the
    // staging folder like a compiler's, so publishing is the same rename.
    secure_fs::write_file_at(dirfd, rq.artifact(), rq.in_process->build(rq.source), staging);
  } else {
    try {
      compile_shared_object(staging / kSourceFile, staging / kModuleFile, rq.config, dir / "failed" / (rq.key + ".cpp"));
    } catch (const CompileError&) {
      cap_failed(dir, rq.key);
      throw;
    }
  }
  out.entry.compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  // A compiler that reports success is not believed blindly: a module cut short (full disk, a
  // killed linker, a broken wrapper) would be published and then crash every later run.
  const fs::path built = staging / rq.artifact();
  const int module_fd = openat(dirfd, rq.artifact(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (module_fd < 0) {
    throw CompileError(fmt::format("cannot open the compiled module '{}': {}", built.string(), std::strerror(errno)));
  }
  CloseOnExit close_module(module_fd);
  fchmod(module_fd, 0600);
  const auto digest = digest_fd(module_fd);
  if (!digest) throw CacheError(fmt::format("cannot read back the compiled module '{}'", built.string()));
  if (rq.in_process) {
    // A CUDA binary is loaded by the device runtime, not here (the building machine may have no device).
    if (std::string bad = secure_fs::cuda_binary_problem(module_fd, digest->size); !bad.empty())
      throw CompileError(fmt::format("{} reported success for program '{}' but returned an unusable binary: {}; "
                                     "nothing was published", rq.identity, rq.name, bad));
  } else {
    if (std::string bad = secure_fs::shared_object_problem(module_fd, digest->size); !bad.empty()) {
      throw CompileError(fmt::format("the C++ compiler '{}' reported success for program '{}' but wrote an unusable "
                                     "module: {}; nothing was published",
                                     rq.config.cxx, rq.name, bad));
    }
    try {
      LoadedModule trial(built);
    } catch (const CompileError& e) {
      throw CompileError(fmt::format("the module compiled for program '{}' cannot be loaded, so it was not published: {}",
                                     rq.name, e.what()));
    }
  }
  const json meta = {
      {"name", rq.name},
      {"key", rq.key},
      {"compiler", rq.identity},
      {"cxx", rq.config.cxx},
      {"flags", rq.config.flags},
      {"extra_key", rq.extra_key},
      {"created", utc_now_iso8601()},
      {"compile_seconds", out.entry.compile_seconds},
      {"module_size", digest->size},
      {"module_xxh3_64", fmt::format("{:016x}", digest->xxh3)},
      {"artifact", rq.artifact()},
  };
  secure_fs::write_file_at(dirfd, kMetaFile, meta.dump(2) + "\n", staging);

  fs::rename(staging, entry, ec);
  if (ec) {
    // Only possible if someone wrote <key>/ without the lock; accept their entry if it is sound.
    if (!entry_problem(entry, rq.key).empty()) {
      throw CacheError(fmt::format("cannot publish '{}' as '{}' in the module cache: {}", staging.string(),
                                   entry.string(), ec.message()));
    }
  } else {
    cleanup.release();
  }
  if (load && !rq.in_process) out.module.emplace(out.entry.path);  // still under the lock
  return out;
}

ModuleCache::Outcome ModuleCache::lookup(const Request& rq, bool load) {
  std::string why;
  if (auto out = lookup_in(directory_, rq, load, &why)) return *std::move(out);
  const fs::path fallback = fallback_directory();
  std::string fallback_why = "it is the configured cache itself";
  if (fallback != directory_) {
    if (auto out = lookup_in(fallback, rq, load, &fallback_why)) {
      out->entry.fallback_reason = fmt::format("module cache '{}' not used: {}", directory_.string(), why);
      return *std::move(out);
    }
  }
  throw CacheError(fmt::format("cannot use the module cache '{}' ({}) nor the private fallback '{}' ({})",
                               directory_.string(), why, fallback.string(), fallback_why));
}

CacheEntry ModuleCache::get_or_build(const std::string& name, const std::string& source,
                                     const CompilerConfig& config, const std::string& extra_key) {
  const std::string identity = compiler_identity(config.cxx);
  const Request rq{name, source, config, extra_key, identity, make_key(source, identity, config.flags, extra_key)};
  return lookup(rq, /*load=*/false).entry;
}

LoadedEntry ModuleCache::get_or_load(const std::string& name, const std::string& source,
                                     const CompilerConfig& config, const std::string& extra_key) {
  const std::string identity = compiler_identity(config.cxx);
  const Request rq{name, source, config, extra_key, identity, make_key(source, identity, config.flags, extra_key)};
  Outcome out = lookup(rq, /*load=*/true);
  return LoadedEntry{std::move(out.entry), std::move(*out.module)};
}

CacheEntry ModuleCache::get_or_build(const std::string& name, const std::string& source, const InProcessBuild& build,
                                     const std::string& extra_key) {
  const CompilerConfig config{"", build.flags};  // part of the key only: nothing is run
  Request rq{name, source, config, extra_key, build.identity, make_key(source, build.identity, build.flags, extra_key)};
  rq.in_process = &build;
  return lookup(rq, /*load=*/false).entry;
}

std::string ModuleCache::read_artifact(const CacheEntry& entry) {
  const int fd = open(entry.path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) throw CacheError(fmt::format("cannot open '{}': {}", entry.path.string(), std::strerror(errno)));
  CloseOnExit closer(fd);
  std::string bytes;
  char buffer[65536];
  for (ssize_t n; (n = read(fd, buffer, sizeof buffer)) != 0;) {
    if (n < 0) throw CacheError(fmt::format("cannot read '{}': {}", entry.path.string(), std::strerror(errno)));
    bytes.append(buffer, static_cast<std::size_t>(n));
  }
  return bytes;
}

std::size_t ModuleCache::remove_leftovers() {
  std::error_code ec;
  if (!fs::exists(directory_, ec)) return 0;
  return sweep(directory_, "");
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
  const std::string folder_problem = trust_problem();
  for (const fs::directory_iterator end; !ec && it != end; it.increment(ec)) {
    const fs::directory_entry& item = *it;
    const std::string key = item.path().filename().string();
    std::error_code type_ec;
    if (!is_key(key) || !item.is_directory(type_ec)) continue;
    CacheListing listing{key, "?", directory_size(item.path()), "", ""};
    if (const auto meta = read_json(item.path() / kMetaFile)) {
      listing.name = string_member(*meta, "name", "?");
      listing.created = string_member(*meta, "created", "");
    }
    listing.problem = folder_problem.empty() ? entry_problem(item.path(), key) : folder_problem;
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
  const std::string problem = entry_problem(entry, key);
  const bool cuda = artifact_of(*meta) == kCudaBinaryFile;
  // Bytes that are not UTF-8 (a damaged file) are shown as U+FFFD instead of making dump() throw.
  return fmt::format("{}\nsource: {}\nmodule: {}\n{}", meta->dump(2, ' ', false, json::error_handler_t::replace),
                     (entry / (cuda ? kCudaSourceFile : kSourceFile)).string(),
                     (entry / (cuda ? kCudaBinaryFile : kModuleFile)).string(),
                     problem.empty() ? "" : "not used: " + problem + "\n");
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
  // A "lock file" that is a symbolic link or a folder can be locked by nobody (KeyLock refuses it),
  // so nobody builds under it: remove the item itself (never what a link points to).
  for (const auto& path : items) {
    struct stat st {};
    const std::string name = path.filename().string();
    if (name.size() == 37 && name.ends_with(".lock") && is_key(name.substr(0, 32)) && owned_by_me(path) &&
        lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
      fs::remove_all(path, ec);
    }
  }
  for (const auto& path : items) {
    const std::string name = path.filename().string();
    // In a shared folder, only what this user made is theirs to remove (root removes everything).
    if (!owned_by_me(path)) continue;
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
    } else if (name == "failed" || name == kIndexFolder) {
      fs::remove_all(path, ec);
      continue;
    }
    if (!is_key(key)) continue;  // not ours: leave it alone
    // Taking the key's lock waits for a build or a load in progress, so its files are never pulled
    // away from under the compiler or dlopen.
    KeyLock lock(directory_ / (key + ".lock"));
    if (!lock.held()) {
      if (lock.foreign()) continue;  // someone else's key in a shared folder
      throw CacheError(fmt::format("cannot clear the module cache '{}': {}", directory_.string(), lock.why()));
    }
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
