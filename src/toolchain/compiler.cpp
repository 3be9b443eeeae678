#include "toolchain/compiler.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <unordered_map>

#include <fmt/format.h>

#include "fieldflow/errors.h"

// Both are defined for the library target by the top-level CMakeLists.txt.
#if !defined(FIELDFLOW_SOURCE_INCLUDE_DIR) || !defined(FIELDFLOW_INSTALL_INCLUDE_DIR)
#error "FIELDFLOW_SOURCE_INCLUDE_DIR and FIELDFLOW_INSTALL_INCLUDE_DIR must be defined"
#endif

extern char** environ;

namespace fieldflow::toolchain {
namespace fs = std::filesystem;

namespace {

// Diagnostics beyond this are cut from error messages: the first errors are the informative ones,
// and a template-heavy failure can produce megabytes. The full log stays on disk.
constexpr std::size_t kMaxDiagnosticBytes = 8 * 1024;

std::string env_or_empty(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::string(value) : std::string();
}

fs::path jit_include_dir() {
  if (std::string dir = env_or_empty("FIELDFLOW_INCLUDE_DIR"); !dir.empty()) return dir;
  // Prefer the source tree so a build-tree binary compiles against the headers it was built from;
  // an installed library whose source tree is gone falls back to the install prefix.
  std::error_code ec;
  if (fs::is_directory(FIELDFLOW_SOURCE_INCLUDE_DIR, ec)) return FIELDFLOW_SOURCE_INCLUDE_DIR;
  return FIELDFLOW_INSTALL_INCLUDE_DIR;
}

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

// Runs argv and returns its stdout+stderr; used for the short `--version` query.
std::string run_and_capture(const std::vector<std::string>& argv, int* status) {
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
  char buffer[4096];
  for (;;) {
    const ssize_t n = read(fds[0], buffer, sizeof buffer);
    if (n > 0) {
      output.append(buffer, static_cast<std::size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  close(fds[0]);
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

std::string read_prefix(const fs::path& file, std::size_t max_bytes, std::uintmax_t* total) {
  std::error_code ec;
  *total = fs::file_size(file, ec);
  if (ec) *total = 0;
  std::ifstream in(file, std::ios::binary);
  std::string text(max_bytes, '\0');
  in.read(text.data(), static_cast<std::streamsize>(max_bytes));
  text.resize(static_cast<std::size_t>(in.gcount()));
  return text;
}

}  // namespace

CompilerConfig default_compiler_config(bool openmp) {
  CompilerConfig config;
  config.cxx = env_or_empty("FIELDFLOW_CXX");
  if (config.cxx.empty()) config.cxx = env_or_empty("CXX");
  if (config.cxx.empty()) config.cxx = "c++";
  // -fno-math-errno lets sqrt & co. become single instructions without changing any result;
  // -ffast-math would (reassociation, flushed denormals) and is therefore never used.
  config.flags = {"-std=c++20", "-O3", "-march=native", "-fPIC", "-shared", "-fno-math-errno",
                  // No FMA contraction: results must equal the reference executor bit for bit.
                  "-ffp-contract=off",
                  // Lets selects of floating-point values be if-converted (vectorised neighbour
                  // reductions); values are unchanged, we never enable floating-point traps.
                  "-fno-trapping-math"};
  if (openmp) config.flags.emplace_back("-fopenmp");
  config.flags.push_back("-I" + jit_include_dir().string());
  return config;
}

std::string compiler_identity(const std::string& cxx) {
  // Spawning the compiler costs milliseconds, and this runs on every cache lookup; the answer
  // cannot change within a process for the same command (short of replacing the binary).
  static std::mutex mutex;
  static std::unordered_map<std::string, std::string> identities;
  std::lock_guard lock(mutex);
  if (auto it = identities.find(cxx); it != identities.end()) return it->second;

  const fs::path resolved = resolve_executable(cxx);
  if (resolved.empty()) {
    throw CompileError(fmt::format(
        "C++ compiler '{}' not found (not an executable file, nor in PATH); set FIELDFLOW_CXX or "
        "CXX to a working compiler",
        cxx));
  }
  int status = 0;
  const std::string output = run_and_capture({cxx, "--version"}, &status);
  if (!succeeded(status)) {
    throw CompileError(fmt::format("'{} --version' failed ({}): {}", cxx,
                                   describe_wait_status(status), output.substr(0, 1024)));
  }
  const std::string first_line = output.substr(0, output.find('\n'));
  std::string identity = fmt::format("{} [{}]", first_line, resolved.string());
  identities.emplace(cxx, identity);
  return identity;
}

void compile_shared_object(const fs::path& source, const fs::path& output,
                           const CompilerConfig& config, const fs::path& keep_source_on_failure) {
  std::vector<std::string> argv;
  argv.reserve(config.flags.size() + 4);
  argv.push_back(config.cxx);
  argv.insert(argv.end(), config.flags.begin(), config.flags.end());
  argv.push_back(source.string());
  argv.push_back("-o");
  argv.push_back(output.string());

  const fs::path log = fs::path(output).replace_extension(".log");
  const int log_fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    throw CompileError(fmt::format("cannot create the compiler log '{}': {}", log.string(),
                                   std::strerror(errno)));
  }
  pid_t pid = 0;
  try {
    pid = spawn(argv, log_fd);
  } catch (...) {
    close(log_fd);
    throw;
  }
  close(log_fd);
  const int status = wait_for(pid, config.cxx);

  std::error_code ec;
  if (succeeded(status) && fs::is_regular_file(output, ec)) {
    if (fs::file_size(log, ec) == 0 && !ec) fs::remove(log, ec);  // keep only logs with warnings
    return;
  }

  // Failure: never leave a half-written object behind, and point the user at a source that still
  // exists when they read the message.
  fs::remove(output, ec);
  fs::path kept_source = source;
  fs::path kept_log = log;
  if (!keep_source_on_failure.empty()) {
    fs::create_directories(keep_source_on_failure.parent_path(), ec);
    fs::copy_file(source, keep_source_on_failure, fs::copy_options::overwrite_existing, ec);
    if (!ec) kept_source = keep_source_on_failure;
    fs::path log_copy = fs::path(keep_source_on_failure).replace_extension(".log");
    fs::copy_file(log, log_copy, fs::copy_options::overwrite_existing, ec);
    if (!ec) kept_log = log_copy;
  }
  std::uintmax_t total = 0;
  std::string diagnostics = read_prefix(kept_log, kMaxDiagnosticBytes, &total);
  if (total > diagnostics.size()) {
    diagnostics += fmt::format("\n[... truncated: {} bytes in total, see {}]", total,
                               kept_log.string());
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
  throw CompileError(fmt::format(
      "the C++ compiler failed on generated code ({})\n  command: {}\n  source kept at: {}\n"
      "  full log: {}\ndiagnostics:\n{}",
      what, command_line(argv), kept_source.string(), kept_log.string(), diagnostics));
}

}  // namespace fieldflow::toolchain
