// fieldflow_fuzz_programs: differential fuzzing of the compiled CPU backend and the emulated CUDA
// kernels against the reference executor. Seeds start..start+count-1 (or until --minutes have
// passed); each seed is one random program with its own sizes and layouts. On the first failure
// of each kind the case is shrunk and printed with the command that reproduces it. Exit status 1
// when anything failed.
// Each check runs in a child process (fuzz/isolated.h), so a crash, a sanitizer's report or a
// hang of generated code is a failure like any other: shrunk, and the campaign goes on. This
// process generates and shrinks programs, and compiles their generated CUDA with NVRTC in
// batches (fuzz/nvrtc_check.h: text in, a cubin or a log out; nothing generated runs here).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <set>

#include "fieldflow/errors.h"
#include "fuzz/differential.h"
#include "fuzz/isolated.h"
#include "fuzz/nvrtc_check.h"
#include "fuzz/shrink.h"

using namespace fieldflow;
using namespace fieldflow::fuzz;

namespace {

// A crash of this process (with --in-process, a generated module reading far out of bounds, say;
// else the generator or the shrinker) kills the whole campaign before the seed is shrunk or even
// named: the progress lines come only every 10 s. The handler names the seed being run, with only
// async-signal-safe calls, then lets the signal end the process.
char crash_note[160] = "\nCRASH before the first seed\n";

std::atomic_flag crash_noted = ATOMIC_FLAG_INIT;  // several threads may fault at once: one note

extern "C" void on_fatal_signal(int sig) {
  if (!crash_noted.test_and_set()) (void)!write(STDOUT_FILENO, crash_note, std::strlen(crash_note));
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

constexpr int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
struct sigaction previous_actions[std::size(kFatalSignals)];  // a sanitizer's handlers, or the defaults

void install_crash_note() {
  struct sigaction note {};
  note.sa_handler = on_fatal_signal;
  sigemptyset(&note.sa_mask);
  for (std::size_t i = 0; i < std::size(kFatalSignals); ++i) sigaction(kFatalSignals[i], &note, &previous_actions[i]);
}

// In a child running a check: a crash there is reported by the parent, and a sanitizer's own
// handler (its report with a stack) is worth more than the note.
void restore_previous_handlers() {
  for (std::size_t i = 0; i < std::size(kFatalSignals); ++i) sigaction(kFatalSignals[i], &previous_actions[i], nullptr);
}

void note_seed(std::uint64_t seed) {
  std::snprintf(crash_note, sizeof crash_note,
                "\nCRASH in seed %llu (a fatal signal; not shrunk): reproduce with fieldflow_fuzz_programs --seed %llu "
                "--count 1 --in-process, under gdb for the stack\n",
                static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed));
}

void print_case(const FuzzCase& c) {
  fmt::print("{}", ir::print(c.program));
  std::string sizes;
  for (const SizeSet& s : c.sizes) sizes += (sizes.empty() ? "" : "; ") + s.to_string(c.mesh);
  fmt::print("  sizes: {}{}\n", sizes, c.mesh ? (c.bounded ? " (bounded mesh)" : " (torus)") : "");
  std::string layouts;
  for (Layout l : c.layouts) layouts += std::string(layouts.empty() ? "" : ", ") + std::string(to_string(l));
  fmt::print("  layouts: {}; short-field calls: {}\n", layouts, c.short_field_calls ? "yes" : "no");
  std::string ext;
  for (const ir::Param& p : c.program.params)
    if (p.kind == ir::ParamKind::field && c.extents.count(p.name) && !p.type.dims.empty())
      ext += fmt::format(" {}[-{}, n+{})", p.name, c.extents.at(p.name).lo_halo, c.extents.at(p.name).hi_halo);
  fmt::print("  horizontal extents:{}\n", ext);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Differential fuzzing of fieldflow's compiled backend against the reference executor"};
  std::uint64_t seed = 1;
  std::uint64_t count = 0;
  double minutes = 0;
  int shrink_attempts = 150;
  std::string cache_dir;
  bool all_threads = false;
  app.add_option("--seed", seed, "first seed (seeds seed, seed+1, ... are tried)");
  app.add_option("--count", count, "number of programs (0: until --minutes is up)");
  app.add_option("--minutes", minutes, "stop starting new programs after this many minutes (0: no limit)");
  app.add_option("--shrink-attempts", shrink_attempts, "predicate calls allowed per shrink (0: do not shrink)");
  app.add_option("--cache-dir", cache_dir, "compile cache (default: FIELDFLOW_CACHE_DIR or ~/.cache/fieldflow)");
  app.add_flag("--all-threads", all_threads, "every thread count 1-4 in every memory mode (slower)");
  bool both_layouts = false;
  app.add_flag("--both-layouts", both_layouts,
               "every program in both layouts (by default one in five is; the others in one, either)");
  bool no_cuda = false;
  CLI::Option* no_cuda_flag = app.add_flag("--no-cuda-emulation", no_cuda, "only the CPU backend, directly and through the C API (no emulated CUDA kernels or runner)");
  bool in_process = false;
  app.add_flag("--in-process", in_process, "run the checks in this process, not in a child each (to debug a crash under gdb)");
  std::size_t nvrtc_batch = 20;
  app.add_option("--nvrtc-batch", nvrtc_batch, "programs whose generated CUDA NVRTC compiles in one translation unit")
      ->check(CLI::PositiveNumber);
  bool nvrtc_only = false;
  app.add_flag("--nvrtc-only", nvrtc_only, "only compile the programs' generated CUDA with NVRTC (many programs quickly; nothing runs)")
      ->excludes(no_cuda_flag);
  int timeout_s = 600;
  app.add_option("--timeout", timeout_s, "seconds a check may run in its child before it is killed and reported as hung")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  if (nvrtc_only && !nvrtc_available()) {
    fmt::print(stderr, "--nvrtc-only: this fieldflow was built without the CUDA toolkit (no NVRTC)\n");
    return 2;
  }
  if (count == 0 && minutes <= 0) count = 100;

  install_crash_note();
  // Every check goes through here: in a child process unless --in-process. Shrink tries are quiet:
  // a crash's sanitizer report would otherwise be printed once per try.
  auto run_check = [&](const FuzzCase& t, const RunConfig& cfg, RunStats& st, bool quiet) -> std::optional<Failure> {
    if (in_process) return check_case(t, cfg, st);
    IsolationOptions options;
    options.timeout = std::chrono::seconds(timeout_s);
    options.quiet = quiet;
    options.in_child = restore_previous_handlers;
    return run_isolated([&](RunStats& child_stats) { return check_case(t, cfg, child_stats); }, st, options);
  };
  RunConfig config;
  config.cache_dir = cache_dir;
  config.every_thread_count_in_every_mode = all_threads;
  if (no_cuda) config.paths = {Path::cpu, Path::c_api};
  RunStats stats;
  std::map<std::string, std::uint64_t> failures_by_kind;
  std::uint64_t tried = 0;
  std::set<std::uint64_t> failed_seeds;
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  double last_report = 0;
  auto report = [&] {
    fmt::print("[{:7.1f} s] programs {}, compiled calls {} (emulated CUDA: {} kernels, {} runner; {} static scalars), "
               "reference calls {} ({} rejected), failing programs {}\n", elapsed(), tried, stats.compiled_calls,
               stats.cuda_kernel_calls, stats.cuda_runner_calls, stats.static_scalar_calls, stats.reference_calls,
               stats.rejected_calls, failed_seeds.size());
    std::fflush(stdout);
  };
  // Prints a failure; the first of its kind is shrunk with `still_fails` (whether a smaller case
  // fails the same way) and printed with the command that reproduces it.
  auto report_failure = [&](std::uint64_t s, const FuzzCase& c, const Failure& failure,
                            const std::function<std::optional<Failure>(const FuzzCase&)>& check) {
    failed_seeds.insert(s);
    const bool first_of_kind = failures_by_kind[failure.kind]++ == 0;
    fmt::print("\nFAIL seed {}: {}\n  {}\n", s, failure.kind, failure.detail);
    if (!first_of_kind || shrink_attempts <= 0) return;
    auto still_fails = [&](const FuzzCase& t) {
      const auto f = check(t);
      return f && f->kind == failure.kind;
    };
    ShrinkStats sh;
    FuzzCase small = still_fails(c) ? shrink_case(c, still_fails, shrink_attempts, sh) : c;
    const auto again = check(small);
    fmt::print("  minimal failing program ({} shrink attempts, {} accepted):\n", sh.attempts, sh.accepted);
    print_case(small);
    if (again) fmt::print("  fails with: {}: {}\n", again->kind, again->detail);
    fmt::print("  reproduce: fieldflow_fuzz_programs --seed {} --count 1 (add --in-process to debug it under gdb)\n\n", s);
  };
  // The generated CUDA of the cases checked since the last batch, compiled by NVRTC together.
  NvrtcStats nvrtc;
  std::vector<std::pair<std::uint64_t, FuzzCase>> nvrtc_pending;
  auto compile_pending_cuda = [&] {
    std::vector<const FuzzCase*> cases;
    for (const auto& [s, c] : nvrtc_pending) cases.push_back(&c);
    const auto failures = check_cuda_compiles(cases, nvrtc);
    for (std::size_t i = 0; i < failures.size(); ++i)
      if (failures[i])
        report_failure(nvrtc_pending[i].first, nvrtc_pending[i].second, *failures[i], [&](const FuzzCase& t) {
          NvrtcStats scratch;
          return check_cuda_compiles({&t}, scratch)[0];
        });
    nvrtc_pending.clear();
  };
  for (std::uint64_t s = seed; count == 0 || s < seed + count; ++s) {
    if (minutes > 0 && elapsed() > minutes * 60) break;
    // A program the generator cannot build is a bug of the generator (or of the DSL), reported
    // with its seed like any failure, never a crash of the whole campaign.
    std::fflush(stdout);  // the crash note must come after what was printed before
    note_seed(s);
    FuzzCase c;
    try {
      c = generate_case(s);
      if (both_layouts && c.layouts.size() == 1)
        c.layouts.push_back(c.layouts[0] == Layout::vertical_fastest ? Layout::horizontal_fastest : Layout::vertical_fastest);
    } catch (const std::exception& e) {
      ++tried;
      failed_seeds.insert(s);
      fmt::print("\nFAIL seed {}: the generator could not build its program: {}\n", s, e.what());
      continue;
    }
    ++tried;
    const auto failure = nvrtc_only ? std::nullopt : run_check(c, config, stats, false);
    if (failure) {
      // Shrink against the failing variant only (its mode, thread count and layout). A crashed
      // child did not say which variant it was running: shrink against all of them.
      RunConfig narrow = config;
      FuzzCase start_case = c;
      if (!is_process_failure(*failure)) {
        narrow.modes = {failure->mode};
        narrow.threads = {failure->threads};
        narrow.every_thread_count_in_every_mode = true;
        narrow.paths = {failure->path};
        start_case.layouts = {failure->layout};
      }
      RunStats scratch;
      report_failure(s, start_case, *failure, [&](const FuzzCase& t) { return run_check(t, narrow, scratch, true); });
    }
    if (config.runs(Path::cuda_kernels)) {
      nvrtc_pending.emplace_back(s, std::move(c));
      if (nvrtc_pending.size() == nvrtc_batch) compile_pending_cuda();
    }
    if (elapsed() - last_report > 10) {
      last_report = elapsed();
      report();
    }
  }
  compile_pending_cuda();
  if (elapsed() - last_report > 1) report();
  fmt::print("done: {} programs in {:.1f} min, {} compiles (most are cache hits), {} compiled calls (emulated CUDA: "
             "{} kernels, {} runner; {} static scalars, {} of them specialised; {} through the C API), {} programs' CUDA "
             "compiled by NVRTC ({} kernels), {} failing programs\n",
             tried, elapsed() / 60, stats.compiles, stats.compiled_calls, stats.cuda_kernel_calls, stats.cuda_runner_calls,
             stats.static_scalar_calls, stats.specialised_calls, stats.c_api_calls, nvrtc.programs, nvrtc.kernels,
             failed_seeds.size());
  for (const auto& [kind, n] : failures_by_kind) fmt::print("  {}: {} program(s)\n", kind, n);
  return failed_seeds.empty() ? 0 : 1;
}
