#include "toolchain/compiler.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <unordered_map>

#include <fmt/format.h>

#include "fieldflow/errors.h"
#include "toolchain/secure_fs.h"

// Defined for this file only: the paths by the top-level CMakeLists.txt, the module sanitizers by
// src/toolchain/CMakeLists.txt.
#if !defined(FIELDFLOW_SOURCE_INCLUDE_DIR) || !defined(FIELDFLOW_INSTALL_INCLUDE_DIR) || \
    !defined(FIELDFLOW_JIT_SANITIZE) || !defined(FIELDFLOW_JIT_DEFAULT_CXX)
#error "FIELDFLOW_SOURCE_INCLUDE_DIR, FIELDFLOW_INSTALL_INCLUDE_DIR, FIELDFLOW_JIT_SANITIZE and FIELDFLOW_JIT_DEFAULT_CXX must be defined"
#endif

extern char** environ;

namespace fieldflow::toolchain {
namespace fs = std::filesystem;

namespace {

// Diagnostics beyond this are cut from error messages: the first errors are the informative ones,
// and a template-heavy failure can produce megabytes. The full log stays on disk.
constexpr std::size_t kMaxDiagnosticBytes = 8 * 1024;
// What is kept of the compiler's output in memory (and so in the log): enough for any real
// diagnostic, bounded for a runaway one.
constexpr std::size_t kMaxCapturedBytes = 4 * 1024 * 1024;
// A failed compile with less than this left beside the output is reported as a full disk: the
// linker's own "No space left" message is often lost or reworded.
constexpr std::uintmax_t kLowSpaceBytes = 1024 * 1024;

std::string env_or_empty(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::string(value) : std::string();
}

}  // namespace

fs::path jit_include_dir() {
  if (std::string dir = env_or_empty("FIELDFLOW_INCLUDE_DIR"); !dir.empty()) return dir;
  // Prefer the source tree so a build-tree binary compiles against the headers it was built from;
  // an installed library whose source tree is gone falls back to the install prefix.
  std::error_code ec;
  if (fs::is_directory(FIELDFLOW_SOURCE_INCLUDE_DIR, ec)) return FIELDFLOW_SOURCE_INCLUDE_DIR;
  return FIELDFLOW_INSTALL_INCLUDE_DIR;
}

namespace {

// Quotes an argument for display only (error messages a user may copy into a terminal); the
// compiler itself is started with an argv vector and never sees a shell.
std::string shell_quote(const std::string& arg) {
  const bool plain = !arg.empty() && arg.find_first_not_of(
                                         "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                         "0123456789_-+=./:,@%") == std::string::npos;
  if (plain) return arg;
  std::string quoted = "'";
  for (char c : arg) quoted += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string command_line(const std::vector<std::string>& argv) {
  std::string line;
  for (const auto& arg : argv) {
    if (!line.empty()) line += ' ';
    line += shell_quote(arg);
  }
  return line;
}

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return fmt::format("exit status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return fmt::format("killed by signal {} ({})", WTERMSIG(status),
                                             strsignal(WTERMSIG(status)));
  return fmt::format("wait status {}", status);
}

bool succeeded(int status) { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

// Starts argv[0] (searched in PATH like a shell would) with stdin from /dev/null and stdout+stderr
// on `out_fd`. posix_spawnp reports a missing or non-executable program as an error code, which
// becomes a CompileError naming the program.
pid_t spawn(const std::vector<std::string>& argv, int out_fd) {
  std::vector<char*> c_argv;
  c_argv.reserve(argv.size() + 1);
  for (const auto& arg : argv) c_argv.push_back(const_cast<char*>(arg.c_str()));
  c_argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_fd, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out_fd, STDERR_FILENO);

  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, c_argv[0], &actions, nullptr, c_argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    throw CompileError(fmt::format(
        "cannot run the C++ compiler '{}': {} (command: {}); set FIELDFLOW_CXX or CXX to a "
        "working compiler",
        argv[0], std::strerror(rc), command_line(argv)));
  }
  return pid;
}

// Waits for `pid` and returns its raw wait status.
int wait_for(pid_t pid, const std::string& program) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      throw CompileError(fmt::format("waiting for the C++ compiler '{}' failed: {}", program,
                                     std::strerror(errno)));
    }
  }
  return status;
}

// Runs argv and returns its stdout+stderr (the first `max_bytes` of it; `*total` gets the full
// length when not null).
std::string run_and_capture(const std::vector<std::string>& argv, int* status,
                            std::size_t max_bytes = kMaxCapturedBytes, std::uintmax_t* total = nullptr) {
  int fds[2];
  // O_CLOEXEC: a compiler spawned concurrently by another thread must not inherit the write end,
  // or our read below would not see EOF until that unrelated compiler exits.
  if (pipe2(fds, O_CLOEXEC) != 0) {
    throw CompileError(fmt::format("cannot create a pipe to run '{}': {}", argv[0],
                                   std::strerror(errno)));
  }
  pid_t pid = 0;
  try {
    pid = spawn(argv, fds[1]);
  } catch (...) {
    close(fds[0]);
    close(fds[1]);
    throw;
  }
  close(fds[1]);
  // Drain before reaping: a child writing more than the pipe buffer would otherwise block forever.
  std::string output;
  std::uintmax_t seen = 0;
  char buffer[4096];
  for (;;) {
    const ssize_t n = read(fds[0], buffer, sizeof buffer);
    if (n > 0) {
      seen += static_cast<std::uintmax_t>(n);
      if (output.size() < max_bytes) {
        output.append(buffer, std::min(static_cast<std::size_t>(n), max_bytes - output.size()));
      }
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  close(fds[0]);
  if (total != nullptr) *total = seen;
  *status = wait_for(pid, argv[0]);
  return output;
}

// The binary `cxx` denotes, with symlinks resolved (/usr/bin/c++ -> .../g++-12), so that switching
// the system default compiler changes the identity even if the version line looks alike.
fs::path resolve_executable(const std::string& cxx) {
  std::error_code ec;
  auto usable = [](const fs::path& p) { return access(p.c_str(), X_OK) == 0 && !fs::is_directory(p); };
  if (cxx.find('/') != std::string::npos) {
    if (usable(cxx)) return fs::canonical(cxx, ec);
    return {};
  }
  const std::string path_var = env_or_empty("PATH");
  std::size_t begin = 0;
  while (begin <= path_var.size()) {
    std::size_t end = path_var.find(':', begin);
    if (end == std::string::npos) end = path_var.size();
    const fs::path dir = end > begin ? fs::path(path_var.substr(begin, end - begin)) : fs::path(".");
    const fs::path candidate = dir / cxx;
    if (usable(candidate)) {
      fs::path resolved = fs::canonical(candidate, ec);
      return ec ? candidate : resolved;
    }
    begin = end + 1;
  }
  return {};
}

// -march=native unless FIELDFLOW_JIT_MARCH names another target: x86-64-v3 (AVX2) lets valgrind,
// which decodes no AVX-512, count a module's instructions on a machine that has it
// (scripts/where-time-goes.sh). Part of the flags, hence of the cache key.
std::string jit_march_flag() {
  const std::string march = env_or_empty("FIELDFLOW_JIT_MARCH");
  if (march.empty()) return "-march=native";
  const bool word = std::all_of(march.begin(), march.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
  if (!word)
    throw OptionError(fmt::format("FIELDFLOW_JIT_MARCH is '{}': expected a -march target such as native or x86-64-v3 "
                                  "(letters, digits, '-', '_', '.')", march));
  return "-march=" + march;
}

}  // namespace

CompilerConfig default_compiler_config(bool openmp) {
  CompilerConfig config;
  config.cxx = env_or_empty("FIELDFLOW_CXX");
  if (config.cxx.empty()) config.cxx = env_or_empty("CXX");
  if (config.cxx.empty()) config.cxx = FIELDFLOW_JIT_DEFAULT_CXX;  // c++, or a TSan clang build's own clang
  // -fno-math-errno lets sqrt & co. become single instructions without changing any result;
  // -ffast-math would (reassociation, flushed denormals) and is therefore never used.
  config.flags = {"-std=c++20", "-O3", jit_march_flag(), "-fPIC", "-shared", "-fno-math-errno",
                  // No FMA contraction: results must equal the reference executor bit for bit.
                  "-ffp-contract=off",
                  // Lets selects of floating-point values be if-converted (vectorised neighbour
                  // reductions); values are unchanged, we never enable floating-point traps.
                  "-fno-trapping-math"};
  if (openmp) config.flags.emplace_back("-fopenmp");
  // A sanitized library compiles sanitized modules: their out-of-bounds writes, leaks and undefined
  // behaviour are then reported like the library's own. The flags are part of the cache key.
  if (const std::string_view sanitizers = FIELDFLOW_JIT_SANITIZE; !sanitizers.empty()) {
    config.flags.push_back(fmt::format("-fsanitize={}", sanitizers));
    config.flags.emplace_back("-fno-omit-frame-pointer");
  }
  config.flags.push_back("-I" + jit_include_dir().string());
  return config;
}

std::vector<std::string> command_words(const std::string& cxx) {
  if (cxx.find_first_of(" \t\n'\"\\") == std::string::npos && !cxx.empty()) return {cxx};
  // An existing compiler whose path has spaces (set before commands were split) keeps working.
  std::error_code ec;
  if (cxx.find('/') != std::string::npos && access(cxx.c_str(), X_OK) == 0 && fs::is_regular_file(cxx, ec)) {
    return {cxx};
  }
  // sh word splitting without expansions: blanks separate words; '...' keeps everything literal;
  // "..." keeps everything but \" \\ \$ \` and \newline; a backslash outside quotes escapes the
  // next character.
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (std::size_t i = 0; i < cxx.size(); ++i) {
    const char c = cxx[i];
    if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
    } else if (c == '\'') {
      const std::size_t close = cxx.find('\'', i + 1);
      if (close == std::string::npos) {
        throw CompileError(fmt::format("compiler command '{}' (FIELDFLOW_CXX or CXX) has an unterminated single "
                                       "quote: expected a command split into words like a shell does", cxx));
      }
      word.append(cxx, i + 1, close - i - 1);
      in_word = true;
      i = close;
    } else if (c == '"') {
      std::size_t j = i + 1;
      for (; j < cxx.size() && cxx[j] != '"'; ++j) {
        if (cxx[j] == '\\' && j + 1 < cxx.size() && std::string_view("\"\\$`\n").find(cxx[j + 1]) != std::string_view::npos) {
          ++j;
          if (cxx[j] == '\n') continue;
        }
        word.push_back(cxx[j]);
      }
      if (j >= cxx.size()) {
        throw CompileError(fmt::format("compiler command '{}' (FIELDFLOW_CXX or CXX) has an unterminated double "
                                       "quote: expected a command split into words like a shell does", cxx));
      }
      in_word = true;
      i = j;
    } else if (c == '\\' && i + 1 < cxx.size()) {
      ++i;
      if (cxx[i] != '\n') word.push_back(cxx[i]);
      in_word = true;
    } else {
      word.push_back(c);
      in_word = true;
    }
  }
  if (in_word) words.push_back(std::move(word));
  if (words.empty()) {
    throw CompileError(fmt::format("compiler command '{}' (FIELDFLOW_CXX or CXX) is empty: expected a compiler name "
                                   "or path, optionally followed by arguments", cxx));
  }
  return words;
}

std::string compiler_identity(const std::string& cxx) {
  // Spawning the compiler costs milliseconds, and this runs on every cache lookup; the answer
  // cannot change within a process for the same command (short of replacing the binary).
  static std::mutex mutex;
  static std::unordered_map<std::string, std::string> identities;
  std::lock_guard lock(mutex);
  if (auto it = identities.find(cxx); it != identities.end()) return it->second;

  const std::vector<std::string> words = command_words(cxx);
  const fs::path resolved = resolve_executable(words[0]);
  if (resolved.empty()) {
    throw CompileError(fmt::format(
        "C++ compiler '{}' not found (not an executable file, nor in PATH){}; set FIELDFLOW_CXX or "
        "CXX to a working compiler",
        words[0], words.size() > 1 ? fmt::format(" in the command '{}'", cxx) : std::string()));
  }
  std::vector<std::string> argv = words;
  argv.push_back("--version");
  int status = 0;
  const std::string output = run_and_capture(argv, &status);
  if (!succeeded(status)) {
    throw CompileError(fmt::format("'{}' failed ({}): {}", command_line(argv), describe_wait_status(status),
                                   output.substr(0, 1024)));
  }
  const std::string first_line = output.substr(0, output.find('\n'));
  std::string identity = fmt::format("{} [{}]", first_line, resolved.string());
  // A wrapper (ccache g++) or extra arguments (c++ -O0) change what is built: part of the identity.
  if (words.size() > 1) identity += " " + command_line(std::vector<std::string>(words.begin() + 1, words.end()));
  identities.emplace(cxx, identity);
  return identity;
}

namespace {

// Writes the compiler's output next to `output` (a private file; best effort: a log that cannot be
// written must not hide the compiler's verdict). Returns the errno of a failed write, 0 on success.
int write_log(const fs::path& log, const std::string& text) {
  const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return errno;
  std::size_t done = 0;
  int error = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      error = n < 0 ? errno : EIO;
      break;
    }
    done += static_cast<std::size_t>(n);
  }
  if (close(fd) != 0 && error == 0) error = errno;
  return error;
}

// Copies the failed source and its log to `keep` and `keep`.log, as private files written through a
// checked folder (never through a symbolic link someone placed there). Returns "" or why not.
std::string keep_failed(const fs::path& source, const std::string& log_text, const fs::path& keep) {
  try {
    const fs::path folder = keep.parent_path();
    secure_fs::make_private_folders(folder);
    const int dirfd = secure_fs::open_folder(folder);
    if (dirfd < 0) return fmt::format("cannot open '{}': {}", folder.string(), std::strerror(errno));
    struct stat st {};
    std::string problem = fstat(dirfd, &st) == 0 ? secure_fs::trust_problem(st, folder) : std::strerror(errno);
    if (problem.empty()) {
      std::ifstream in(source, std::ios::binary);
      const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
      try {
        secure_fs::write_file_at(dirfd, keep.filename().string(), text, folder);
        secure_fs::write_file_at(dirfd, fs::path(keep).replace_extension(".log").filename().string(), log_text, folder);
      } catch (const CacheError& e) {
        problem = e.what();
      }
    }
    close(dirfd);
    return problem;
  } catch (const CacheError& e) {
    return e.what();
  }
}

bool mentions_full_disk(const std::string& text) {
  return text.find("No space left on device") != std::string::npos ||
         text.find("Disk quota exceeded") != std::string::npos;
}

}  // namespace

void compile_shared_object(const fs::path& source_in, const fs::path& output_in,
                           const CompilerConfig& config, const fs::path& keep_source_on_failure) {
  // Absolute: a relative path starting with '-' would be an option to the compiler.
  const fs::path source = fs::absolute(source_in), output = fs::absolute(output_in);
  std::vector<std::string> argv = command_words(config.cxx);
  argv.reserve(argv.size() + config.flags.size() + 3);
  argv.insert(argv.end(), config.flags.begin(), config.flags.end());
  argv.push_back(source.string());
  argv.push_back("-o");
  argv.push_back(output.string());

  // Captured in memory rather than sent to a file beside the output: on a full disk that file
  // would lose exactly the message that says so.
  int status = 0;
  std::uintmax_t total = 0;
  const std::string captured = run_and_capture(argv, &status, kMaxCapturedBytes, &total);
  const fs::path log = fs::path(output).replace_extension(".log");
  const int log_error = captured.empty() ? 0 : write_log(log, captured);

  std::error_code ec;
  if (succeeded(status) && fs::is_regular_file(output, ec)) return;

  // Failure: never leave a half-written object behind, and point the user at a source that still
  // exists when they read the message.
  fs::remove(output, ec);
  fs::path kept_source = source;
  fs::path kept_log = log;
  std::string keep_problem;
  if (!keep_source_on_failure.empty()) {
    keep_problem = keep_failed(source, captured, keep_source_on_failure);
    if (keep_problem.empty()) {
      kept_source = keep_source_on_failure;
      kept_log = fs::path(keep_source_on_failure).replace_extension(".log");
    }
  }
  std::string diagnostics = captured.substr(0, kMaxDiagnosticBytes);
  if (total > diagnostics.size()) {
    diagnostics += fmt::format("\n[... truncated: {} bytes in total, see {}]", total, kept_log.string());
  }
  if (kept_source != source) {
    // The compiler named the temporary copy, which the caller is about to delete; point the
    // diagnostics at the kept one so "file:line" references can be opened.
    const std::string from = source.string(), to = kept_source.string();
    for (std::size_t at = diagnostics.find(from); at != std::string::npos;
         at = diagnostics.find(from, at + to.size())) {
      diagnostics.replace(at, from.size(), to);
    }
  }
  const std::string what = succeeded(status) ? "reported success but produced no output file"
                                             : describe_wait_status(status);
  // A caller that asks for a kept copy removes `source` (and the log beside `output`) itself: when
  // the copy failed, naming them would send the user to files that are gone.
  const std::string kept = keep_problem.empty()
                               ? fmt::format("source kept at: {}\n  full log: {}", kept_source.string(), kept_log.string())
                               : fmt::format("source and full log not kept (could not keep a copy: {})", keep_problem);
  const fs::path folder = output.parent_path();
  const std::uintmax_t free_here = secure_fs::free_bytes(folder);
  if (mentions_full_disk(captured) || secure_fs::is_no_space(log_error) || free_here < kLowSpaceBytes) {
    const fs::path temp = fs::temp_directory_path(ec);
    throw CacheError(fmt::format(
        "no space left on device: the C++ compiler failed ({}) with {} bytes free in '{}' (where the module is "
        "written) and {} bytes free in '{}' (its temporary files); expected room for the module, free some space or "
        "point FIELDFLOW_CACHE_DIR / TMPDIR elsewhere\n  command: {}\ndiagnostics:\n{}",
        what, free_here, folder.string(), secure_fs::free_bytes(temp), temp.string(), command_line(argv),
        diagnostics.empty() ? "(none)" : diagnostics));
  }
  throw CompileError(fmt::format(
      "the C++ compiler failed on generated code ({})\n  command: {}\n  {}\ndiagnostics:\n{}", what,
      command_line(argv), kept, diagnostics));
}

}  // namespace fieldflow::toolchain
