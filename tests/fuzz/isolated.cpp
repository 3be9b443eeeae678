#include "fuzz/isolated.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>

namespace fieldflow::fuzz {

namespace {

// The child's answer travels through a pipe as bytes: both ends are the same binary, so RunStats
// is copied as it lies in memory, and strings carry their length.
static_assert(std::is_trivially_copyable_v<RunStats>);
constexpr std::string_view kMagic = "fieldflow-isolated-1";

template <typename T>
void put(std::string& out, const T& v) {
  static_assert(std::is_trivially_copyable_v<T>);
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}
void put(std::string& out, const std::string& s) {
  put(out, static_cast<std::uint64_t>(s.size()));
  out += s;
}

struct Reader {
  std::string_view in;
  bool ok = true;
  template <typename T>
  T get() {
    T v{};
    if (in.size() < sizeof v) { ok = false; return v; }
    std::memcpy(&v, in.data(), sizeof v);
    in.remove_prefix(sizeof v);
    return v;
  }
  std::string get_string() {
    const auto n = get<std::uint64_t>();
    if (!ok || in.size() < n) { ok = false; return {}; }
    std::string s(in.substr(0, n));
    in.remove_prefix(n);
    return s;
  }
};

std::string encode(const RunStats& stats, const std::optional<Failure>& f) {
  std::string out(kMagic);
  put(out, stats);
  put(out, static_cast<std::uint8_t>(f.has_value()));
  if (f) {
    put(out, f->kind);
    put(out, f->detail);
    put(out, static_cast<std::int32_t>(f->path));
    put(out, static_cast<std::int32_t>(f->mode));
    put(out, static_cast<std::int32_t>(f->threads));
    put(out, static_cast<std::int32_t>(f->layout));
  }
  return out;
}

// False when the message is cut short or malformed (a child that died while writing it).
bool decode(std::string_view in, RunStats& stats, std::optional<Failure>& f) {
  if (in.substr(0, kMagic.size()) != kMagic) return false;
  Reader r{in.substr(kMagic.size())};
  const auto s = r.get<RunStats>();
  const bool failed = r.get<std::uint8_t>() != 0;
  std::optional<Failure> result;
  if (failed) {
    Failure g;
    g.kind = r.get_string();
    g.detail = r.get_string();
    g.path = static_cast<Path>(r.get<std::int32_t>());
    g.mode = static_cast<TransientMemoryMode>(r.get<std::int32_t>());
    g.threads = r.get<std::int32_t>();
    g.layout = static_cast<Layout>(r.get<std::int32_t>());
    result = g;
  }
  if (!r.ok || !r.in.empty()) return false;
  stats = s;
  f = result;
  return true;
}

void write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the parent is gone or gave up: nothing to report to
    data.remove_prefix(static_cast<std::size_t>(n));
  }
}

// `stats` is the child's copy of the parent's counts: the check adds to it, and it goes back whole.
[[noreturn]] void run_child(int fd, pid_t parent, const std::function<std::optional<Failure>(RunStats&)>& check,
                            RunStats& stats, const IsolationOptions& options) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // a killed supervisor takes its child with it
  if (::getppid() != parent) ::_exit(127);
  if (options.quiet) {
    const int null = ::open("/dev/null", O_WRONLY);
    if (null >= 0) {
      ::dup2(null, STDOUT_FILENO);
      ::dup2(null, STDERR_FILENO);
      ::close(null);
    }
  }
  if (options.in_child) options.in_child();
  std::optional<Failure> f;
  try {
    f = check(stats);
  } catch (const std::exception& e) {
    f = Failure{"uncaught exception", e.what()};
  } catch (...) {
    f = Failure{"uncaught exception", "not a std::exception"};
  }
  std::fflush(nullptr);
  write_all(fd, encode(stats, f));
  ::close(fd);
  ::_exit(0);  // no atexit handlers or static destructors: they belong to the parent's state
}

}  // namespace

bool is_process_failure(const Failure& f) {
  return f.kind.starts_with("crashed") || f.kind.starts_with("died") || f.kind == "hung";
}

std::optional<Failure> run_isolated(const std::function<std::optional<Failure>(RunStats&)>& check,
                                    RunStats& stats, const IsolationOptions& options) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(fmt::format("pipe2: {}", std::strerror(errno)));
  std::fflush(nullptr);  // else the child flushes the parent's buffered output a second time
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    throw std::runtime_error(fmt::format("fork: {}", std::strerror(err)));
  }
  if (pid == 0) {
    ::close(fds[0]);
    run_child(fds[1], parent, check, stats, options);
  }
  ::close(fds[1]);

  // Read until the child closes its end (it reported, or died), or until the deadline.
  std::string message;
  bool timed_out = false;
  const auto deadline = std::chrono::steady_clock::now() + options.timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) { timed_out = true; break; }
    pollfd p{fds[0], POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 1000)));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    char buf[4096];
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    message.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }

  if (timed_out)
    return Failure{"hung", fmt::format("the child running the check was still running after {} s and was killed",
                                       options.timeout.count())};
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* abbrev = ::sigabbrev_np(sig);
    return Failure{fmt::format("crashed: SIG{}", abbrev ? abbrev : std::to_string(sig)),
                   fmt::format("the child running the check was killed by signal {} ({})", sig, ::strsignal(sig))};
  }
  RunStats child_stats;
  std::optional<Failure> f;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && decode(message, child_stats, f)) {
    stats = child_stats;
    return f;
  }
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return Failure{fmt::format("died: exit status {}", code),
                 fmt::format("the child running the check exited with status {} without reporting "
                             "(a sanitizer's report, or std::exit, is in its output above)", code)};
}

}  // namespace fieldflow::fuzz
