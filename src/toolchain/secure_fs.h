#pragma once
// File-system primitives for the module cache, written against other users of a shared machine.
//
// A cached module is code that runs with the rights of whoever loads it, so the cache trusts a file
// only if nobody but the current user (or root) could have written it or swapped it out: the file,
// its folder and every folder above must be owned by the current user or root and not writable by
// others, nor by a group other than the owner's private one (a sticky folder such as /tmp is fine:
// others cannot rename or delete our entries in it). Everything the cache creates is private (folders 0700, files 0600) whatever the umask,
// is created without following symbolic links, and is written under a fresh name first and then
// renamed into place, so that a link planted by someone else is replaced, never written through.
#include <sys/stat.h>

#include <cstdint>
#include <filesystem>
#include <string>

namespace fieldflow::toolchain::secure_fs {

// "" when a file or folder with status `st` at `path` is trusted (owned by the current effective
// user or root; no other-write bit, and no group-write bit unless the group is the owner's private
// group -- Debian's umask 002 -- , unless it is a folder with the sticky bit), otherwise what is
// wrong with it, e.g. "'/c/k' is owned by uid 65534 (expected uid 0 or root)".
std::string trust_problem(const struct stat& st, const std::filesystem::path& path);

// "" when `dir` is an existing folder that is trusted together with every folder above it (after
// resolving symbolic links: the resolved path is what gets checked), otherwise what is wrong.
std::string folder_trust_problem(const std::filesystem::path& dir);

// Creates `dir` and the missing folders above it with mode 0700 (whatever the umask). Throws
// CacheError naming `dir` when that fails.
void make_private_folders(const std::filesystem::path& dir);

// Opens a folder without following a symbolic link in its last component; -1 with errno set.
int open_folder(const std::filesystem::path& dir);

// Writes `content` to `<dirfd>/<name>` with mode 0600: to a fresh name opened with
// O_CREAT|O_EXCL|O_NOFOLLOW first, then renamed over `name`, so an existing file or symbolic link
// named `name` is replaced and never written through. Throws CacheError (naming `shown_dir`, and
// saying "no space left" for ENOSPC/EDQUOT).
void write_file_at(int dirfd, const std::string& name, const std::string& content,
                   const std::filesystem::path& shown_dir);

// True for errno values meaning the file system is full (ENOSPC, EDQUOT).
bool is_no_space(int error);

// Free bytes for unprivileged users on the file system holding `path` (0 when unknown).
std::uintmax_t free_bytes(const std::filesystem::path& path);

// "" when the open file `fd` (of `size` bytes) is a complete ELF shared object for this machine:
// header, program headers, every loadable segment and the section headers lie inside the file.
// Otherwise what was expected and what was found. A module cut short passes dlopen's own checks and
// then dies with SIGBUS at the first touch of a missing page, so this runs before every load.
std::string shared_object_problem(int fd, std::uintmax_t size);
// The same for a CUDA binary (cubin, what NVRTC builds): a 64-bit ELF image for machine EM_CUDA
// whose section headers lie inside the file.
std::string cuda_binary_problem(int fd, std::uintmax_t size);

}  // namespace fieldflow::toolchain::secure_fs
