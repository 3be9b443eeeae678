#include "toolchain/secure_fs.h"

#include <elf.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "fieldflow/errors.h"

namespace fieldflow::toolchain::secure_fs {
namespace fs = std::filesystem;

namespace {

#if defined(__x86_64__)
constexpr int kMachine = EM_X86_64;
#elif defined(__aarch64__)
constexpr int kMachine = EM_AARCH64;
#elif defined(__powerpc64__)
constexpr int kMachine = EM_PPC64;
#else
constexpr int kMachine = -1;  // unknown here: the machine field is not checked
#endif

bool read_exactly(int fd, void* buffer, std::size_t bytes, std::uint64_t offset) {
  auto* out = static_cast<char*>(buffer);
  while (bytes > 0) {
    const ssize_t n = pread(fd, out, bytes, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    out += n;
    bytes -= static_cast<std::size_t>(n);
    offset += static_cast<std::uint64_t>(n);
  }
  return true;
}

// end = offset + count * entry_size without overflowing; false when it does.
bool table_end(std::uint64_t offset, std::uint64_t count, std::uint64_t entry_size, std::uint64_t* end) {
  if (entry_size != 0 && count > (UINT64_MAX - offset) / entry_size) return false;
  *end = offset + count * entry_size;
  return true;
}

// Whether group `gid` is the private group of user `uid` (Debian's user private groups, where
// umask 002 makes files group-writable): its only member is that user -- listed alone, or, with no
// member listed, the user's primary group. The same rule as Debian's OpenSSH for StrictModes.
bool is_private_group(uid_t uid, gid_t gid) {
  static std::mutex mutex;
  static std::map<std::pair<uid_t, gid_t>, bool> known;  // NSS lookups can be slow (LDAP)
  std::lock_guard lock(mutex);
  if (auto it = known.find({uid, gid}); it != known.end()) return it->second;
  bool result = false;
  std::vector<char> buffer(1 << 16);
  struct passwd pw {}, *pw_result = nullptr;
  struct group gr {}, *gr_result = nullptr;
  if (getpwuid_r(uid, &pw, buffer.data(), buffer.size() / 2, &pw_result) == 0 && pw_result != nullptr &&
      getgrgid_r(gid, &gr, buffer.data() + buffer.size() / 2, buffer.size() / 2, &gr_result) == 0 &&
      gr_result != nullptr) {
    if (gr.gr_mem == nullptr || gr.gr_mem[0] == nullptr) {
      result = pw.pw_gid == gid;
    } else {
      result = gr.gr_mem[1] == nullptr && std::strcmp(gr.gr_mem[0], pw.pw_name) == 0;
    }
  }
  known.emplace(std::make_pair(uid, gid), result);
  return result;
}

}  // namespace

std::string trust_problem(const struct stat& st, const fs::path& path) {
  const uid_t me = geteuid();
  if (st.st_uid != me && st.st_uid != 0) {
    return fmt::format("'{}' is owned by uid {} (expected uid {}{})", path.string(), st.st_uid, me,
                       me == 0 ? "" : " or root");
  }
  const bool sticky_folder = S_ISDIR(st.st_mode) && (st.st_mode & S_ISVTX) != 0;
  const bool group_is_owner = (st.st_mode & S_IWGRP) != 0 && is_private_group(st.st_uid, st.st_gid);
  const mode_t risky = group_is_owner ? S_IWOTH : (S_IWGRP | S_IWOTH);
  if ((st.st_mode & risky) != 0 && !sticky_folder) {
    return fmt::format("'{}' is writable by {} (mode {:04o}; expected no group or other write permission)",
                       path.string(), (st.st_mode & S_IWOTH) != 0 ? "others" : "its group",
                       st.st_mode & 07777);
  }
  return "";
}

std::string folder_trust_problem(const fs::path& dir) {
  std::error_code ec;
  const fs::path resolved = fs::canonical(dir, ec);
  if (ec) return fmt::format("cannot resolve '{}': {}", dir.string(), ec.message());
  for (fs::path p = resolved;; p = p.parent_path()) {
    struct stat st {};
    if (lstat(p.c_str(), &st) != 0) return fmt::format("cannot inspect '{}': {}", p.string(), std::strerror(errno));
    if (!S_ISDIR(st.st_mode)) return fmt::format("'{}' is not a folder", p.string());
    if (std::string problem = trust_problem(st, p); !problem.empty()) {
      return p == resolved ? problem : fmt::format("{}, a folder above '{}'", problem, resolved.string());
    }
    if (p == p.parent_path()) break;
  }
  return "";
}

int open_folder(const fs::path& dir) {
  return open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

void make_private_folders(const fs::path& dir) {
  const fs::path target = fs::absolute(dir).lexically_normal();
  fs::path prefix;
  for (const auto& part : target) {
    prefix /= part;
    if (part.empty() || prefix == prefix.root_path()) continue;
    if (mkdir(prefix.c_str(), 0700) == 0) {
      // The umask may have taken bits away (umask 0777 leaves 0000): set exactly 0700, on the
      // folder just made (O_NOFOLLOW: never on what a link swapped in its place points to).
      const int fd = open_folder(prefix);
      if (fd >= 0) {
        fchmod(fd, 0700);
        close(fd);
      }
    } else if (errno != EEXIST) {
      if (is_no_space(errno)) {
        throw CacheError(fmt::format("no space left on the device holding '{}' ({} bytes free) while creating the "
                                     "module cache directory '{}'", prefix.parent_path().string(),
                                     free_bytes(prefix.parent_path()), target.string()));
      }
      throw CacheError(fmt::format("cannot create the module cache directory '{}': creating '{}' failed: {}",
                                   target.string(), prefix.string(), std::strerror(errno)));
    }
  }
  struct stat st {};
  if (stat(target.c_str(), &st) != 0) {
    throw CacheError(fmt::format("cannot create the module cache directory '{}': {}", target.string(),
                                 std::strerror(errno)));
  }
  if (!S_ISDIR(st.st_mode)) {
    throw CacheError(fmt::format("cannot create the module cache directory '{}': expected a folder, found another "
                                 "kind of file", target.string()));
  }
}

bool is_no_space(int error) { return error == ENOSPC || error == EDQUOT; }

std::uintmax_t free_bytes(const fs::path& path) {
  struct statvfs vfs {};
  if (statvfs(path.c_str(), &vfs) != 0) return 0;
  return static_cast<std::uintmax_t>(vfs.f_bavail) * vfs.f_frsize;
}

void write_file_at(int dirfd, const std::string& name, const std::string& content, const fs::path& shown_dir) {
  std::random_device random;
  const std::string temp = fmt::format(".tmp-{}-{}-{:08x}", name, getpid(), random());
  auto fail = [&](const char* doing, int error) {
    unlinkat(dirfd, temp.c_str(), 0);
    if (is_no_space(error)) {
      throw CacheError(fmt::format("no space left on the device holding '{}' ({} bytes free) while writing '{}': {}",
                                   shown_dir.string(), free_bytes(shown_dir), name, std::strerror(error)));
    }
    throw CacheError(fmt::format("cannot write '{}' in '{}': {} failed: {}", name, shown_dir.string(), doing,
                                 std::strerror(error)));
  };
  const int fd = openat(dirfd, temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) fail("creating it", errno);
  fchmod(fd, 0600);
  std::size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = n < 0 ? errno : EIO;
      close(fd);
      fail("writing", error);
    }
    done += static_cast<std::size_t>(n);
  }
  if (close(fd) != 0) fail("closing", errno);
  // rename replaces a directory entry: a symbolic link at `name` is replaced, not followed.
  if (renameat(dirfd, temp.c_str(), dirfd, name.c_str()) != 0) fail("renaming it into place", errno);
}

std::string shared_object_problem(int fd, std::uintmax_t size) {
  Elf64_Ehdr header{};
  if (size < sizeof header || !read_exactly(fd, &header, sizeof header, 0)) {
    return fmt::format("expected an ELF shared object of at least {} bytes, found {} bytes", sizeof header, size);
  }
  if (std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0) {
    return "expected an ELF shared object, found a file without the ELF signature";
  }
  if (header.e_ident[EI_CLASS] != ELFCLASS64) {
    return fmt::format("expected a 64-bit ELF object, found ELF class {}", header.e_ident[EI_CLASS]);
  }
  if (header.e_type != ET_DYN) {
    return fmt::format("expected an ELF shared object (type {}), found type {}", ET_DYN, header.e_type);
  }
  if (kMachine >= 0 && header.e_machine != kMachine) {
    return fmt::format("expected an ELF object for machine {}, found machine {}", kMachine, header.e_machine);
  }
  std::uint64_t end = 0;
  if (header.e_phentsize != sizeof(Elf64_Phdr) || header.e_phnum == 0 ||
      !table_end(header.e_phoff, header.e_phnum, sizeof(Elf64_Phdr), &end) || end > size) {
    return fmt::format("expected {} program headers of {} bytes from byte {} inside the file, found a file of {} bytes",
                       header.e_phnum, header.e_phentsize, header.e_phoff, size);
  }
  for (unsigned i = 0; i < header.e_phnum; ++i) {
    Elf64_Phdr segment{};
    if (!read_exactly(fd, &segment, sizeof segment, header.e_phoff + i * sizeof segment)) {
      return fmt::format("cannot read program header {} of {}", i, header.e_phnum);
    }
    if (segment.p_type != PT_LOAD) continue;
    if (!table_end(segment.p_offset, 1, segment.p_filesz, &end) || end > size) {
      return fmt::format("expected loadable segment {} to end inside the file (at byte {}), found a file of {} bytes "
                         "(truncated)", i, segment.p_offset + segment.p_filesz, size);
    }
  }
  if (header.e_shoff != 0 &&
      (!table_end(header.e_shoff, header.e_shnum, header.e_shentsize, &end) || end > size)) {
    return fmt::format("expected the section headers to end inside the file (at byte {}), found a file of {} bytes "
                       "(truncated)", header.e_shoff + std::uint64_t{header.e_shnum} * header.e_shentsize, size);
  }
  return "";
}

std::string cuda_binary_problem(int fd, std::uintmax_t size) {
  Elf64_Ehdr header{};
  if (size < sizeof header || !read_exactly(fd, &header, sizeof header, 0)) {
    return fmt::format("expected a CUDA binary (cubin) of at least {} bytes, found {} bytes", sizeof header, size);
  }
  if (std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 || header.e_ident[EI_CLASS] != ELFCLASS64) {
    return "expected a CUDA binary (a 64-bit ELF image), found a file without that signature";
  }
  constexpr unsigned kCudaMachine = 190;  // EM_CUDA
  if (header.e_machine != kCudaMachine) {
    return fmt::format("expected a CUDA binary (ELF machine {}), found machine {}", kCudaMachine, header.e_machine);
  }
  std::uint64_t end = 0;
  if (header.e_shoff != 0 &&
      (!table_end(header.e_shoff, header.e_shnum, header.e_shentsize, &end) || end > size)) {
    return fmt::format("expected the section headers to end inside the file (at byte {}), found a file of {} bytes "
                       "(truncated)", header.e_shoff + std::uint64_t{header.e_shnum} * header.e_shentsize, size);
  }
  return "";
}

}  // namespace fieldflow::toolchain::secure_fs
