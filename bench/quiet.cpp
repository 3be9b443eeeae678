// The quiet-run protocol (see quiet.h).
#include "quiet.h"

#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

namespace fieldflow::bench {

namespace {

double seconds(const timeval& t) { return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec); }

double own_cpu_seconds() {
  double s = 0;
  for (int who : {RUSAGE_SELF, RUSAGE_CHILDREN}) {
    rusage u{};
    if (getrusage(who, &u) == 0) s += seconds(u.ru_utime) + seconds(u.ru_stime);
  }
  return s;
}

// Busy time of all CPUs from the first line of /proc/stat: "cpu user nice system idle iowait irq
// softirq steal ...". Idle and iowait are not busy; steal is time taken from us, so it counts.
double machine_busy_seconds() {
  std::ifstream in("/proc/stat");
  std::string line;
  if (!std::getline(in, line) || line.rfind("cpu ", 0) != 0) return -1;
  std::istringstream fields(line.substr(4));
  double v[8] = {};
  for (double& x : v)
    if (!(fields >> x)) x = 0;
  static const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  return (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / ticks;
}

}  // namespace

CpuSnapshot cpu_snapshot() {
  CpuSnapshot s;
  s.wall = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  s.machine_busy = machine_busy_seconds();
  s.own = own_cpu_seconds();
  return s;
}

std::optional<double> others_cpu(const CpuSnapshot& from, const CpuSnapshot& to) {
  if (from.machine_busy < 0 || to.machine_busy < 0 || to.wall <= from.wall) return std::nullopt;
  const double others = (to.machine_busy - from.machine_busy) - (to.own - from.own);
  return std::max(0.0, others) / (to.wall - from.wall);
}

IdleWait wait_until_idle(double max_wait_s, double threshold) {
  IdleWait w;
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    const CpuSnapshot a = cpu_snapshot();
    std::this_thread::sleep_for(std::chrono::seconds(1));
    const auto use = others_cpu(a, cpu_snapshot());
    w.waited_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!use) {
      w.message = "cannot tell whether the machine is idle (no /proc/stat): measuring anyway";
      return w;
    }
    w.others_cpu = *use;
    if (*use < threshold) {
      w.idle = true;
      w.message = fmt::format("machine idle after {:.0f} s (other processes use {:.2f} CPUs)", w.waited_s, *use);
      return w;
    }
    if (w.waited_s >= max_wait_s) {
      w.message = fmt::format("machine NOT idle after waiting {:.0f} s: other processes use {:.2f} CPUs (threshold "
                              "{:.2f}); measuring anyway, disturbed repetitions will be rejected",
                              w.waited_s, *use, threshold);
      return w;
    }
  }
}

void RepetitionProbe::stop(benchmark::State& st) const {
  const auto use = others_cpu(from_, cpu_snapshot());
  st.counters[others_cpu_counter] = benchmark::Counter(use ? *use : -1.0);
}

}  // namespace fieldflow::bench
