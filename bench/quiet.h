#pragma once
// The quiet-run protocol of `fieldflow bench` (docs/performance.md): on a machine shared with
// other work a timing says as much about the neighbours as about the code. So the run waits
// until the machine is idle (for a bounded time, and says when it could not), and every
// repetition of every case records how much CPU time other processes took while it ran; the
// report drops the disturbed repetitions before it takes medians.
//
// "Other processes" = CPU time the whole machine spent busy (/proc/stat: user, nice, system, irq,
// softirq, and steal, the time a hypervisor gave our virtual CPUs to someone else) minus the CPU
// time of this process and its waited-for children (getrusage). /proc/stat counts in clock ticks
// (10 ms), so short repetitions are judged coarsely; Linux only (elsewhere nothing is rejected).
#include <benchmark/benchmark.h>

#include <optional>
#include <string>

namespace fieldflow::bench {

// Seconds of CPU time so far: the machine's busy time and this process's own.
struct CpuSnapshot {
  double wall = 0;           // steady clock, seconds
  double machine_busy = -1;  // all CPUs together, including steal; < 0 where /proc/stat is absent
  double own = 0;            // this process and its waited-for children
};
CpuSnapshot cpu_snapshot();

// CPU-seconds per wall-second that other processes used between two snapshots (0 = none,
// 1 = one whole CPU); nullopt when the machine's busy time is unknown.
std::optional<double> others_cpu(const CpuSnapshot& from, const CpuSnapshot& to);

struct IdleWait {
  bool idle = false;       // the machine was idle when the run started
  double waited_s = 0;     // how long the run waited for that
  double others_cpu = -1;  // other processes' CPU use in the last 1-second sample (CPUs); < 0 unknown
  std::string message;     // what happened, for the console and the report
};

// Samples the machine in 1-second windows until other processes use less than `threshold` CPUs,
// for at most `max_wait_s` seconds (0: one sample, no waiting).
IdleWait wait_until_idle(double max_wait_s, double threshold);

// Brackets the timed loop of one repetition: start() before it, stop() after; stop() records the
// counters the report reads ("others_cpu": CPUs used by other processes during the repetition).
class RepetitionProbe {
 public:
  void start() { from_ = cpu_snapshot(); }
  void stop(benchmark::State& st) const;

 private:
  CpuSnapshot from_;
};

inline constexpr const char* others_cpu_counter = "others_cpu";

}  // namespace fieldflow::bench
