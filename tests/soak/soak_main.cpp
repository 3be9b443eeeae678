// The soak run (scripts/soak.sh, docs/reliability.md): calls a mix of compiled programs for a
// given time, the way a model's time loop does, and checks that nothing drifts.
//
// Programs: several built-in examples (Cartesian with transients, a vertical scan, unstructured),
// each compiled in every transient-memory mode and with 1, 2 and 4 threads; the external
// instances of all programs share one caller workspace sized for the largest of them. Calls
// rotate over programs, instances and two grid sizes (so memory is re-planned and pools reused).
// Every few seconds another process (this binary, started with --compile-one) compiles into the
// same cache: a hit, or one of a few small programs of its own.
//
// Checked after a warm-up: every output equals the reference executor's, bit for bit; fieldflow's
// allocation counters do not grow (no system allocation per call in pool, persistent and external
// modes; scoped frees what it allocates); resident memory, open file descriptors and cache entries
// stay flat. Prints a summary; exit status 1 on any failure.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "fieldflow/compile.h"
#include "fieldflow/dsl.h"
#include "fieldflow/examples.h"
#include "fieldflow/reference.h"

extern char** environ;

namespace ff = fieldflow;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

const char* const kPrograms[] = {"hdiff", "lap_of_lap", "vadv", "fvm_nabla", "nabla4"};
const ff::examples::ExampleSize kSizes[] = {{24, 20, 12, false}, {40, 32, 16, false}};

long resident_kib() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

long open_fds() {
  long n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

struct CacheCount {
  long entries = 0, leftovers = 0, locks = 0;
};
CacheCount count_cache(const fs::path& dir) {
  CacheCount c;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.starts_with("tmp-") || name.starts_with("stale-")) ++c.leftovers;
    else if (name.ends_with(".lock")) ++c.locks;
    else if (e.is_directory() && name.size() == 32) ++c.entries;
  }
  return c;
}

// A small program of the helper process's own: `variant` changes a constant, so each of the few
// variants is its own cache entry (compiled once, then hits).
ff::ir::Program helper_program(int variant) {
  const ff::Dimension I = ff::horizontal_dim("I"), K = ff::vertical_dim("K");
  ff::ProgramBuilder pb(fmt::format("soak_helper_{}", variant));
  ff::Expr in = pb.field("in", {I, K}, ff::DType::float64);
  ff::Expr out = pb.field("out", {I, K}, ff::DType::float64);
  ff::Expr n = pb.scalar("n", ff::DType::int32), nk = pb.scalar("nk", ff::DType::int32);
  pb.call("helper", in * (1.0 + variant) + in(I + 1), {out}, {{I, 0, n}, {K, 0, nk}});
  return pb.build();
}

int compile_one(int variant) {
  const auto& ex = ff::examples::example(kPrograms[variant % std::size(kPrograms)]);
  ff::CompileOptions options;
  options.layout = ff::Layout::horizontal_fastest;
  (void)ff::compile(ex.program, options);
  (void)ff::compile(helper_program(variant % 4));
  return 0;
}

// Runs this binary with --compile-one in the background; returns its pid.
pid_t start_helper(int variant) {
  const std::string self = fs::read_symlink("/proc/self/exe").string(), arg = std::to_string(variant);
  std::vector<char*> argv = {const_cast<char*>(self.c_str()), const_cast<char*>("--compile-one"),
                             const_cast<char*>(arg.c_str()), nullptr};
  pid_t pid = 0;
  if (posix_spawn(&pid, self.c_str(), nullptr, nullptr, argv.data(), environ) != 0) return -1;
  return pid;
}

struct Case {
  const ff::examples::Example* example;
  int size_index;
  ff::examples::ExampleInstance data, pristine, expected;
  ff::Arguments args;
};

struct Instance {
  std::string label;
  const ff::examples::Example* example;
  ff::TransientMemoryMode mode;
  std::unique_ptr<ff::CompiledProgram> program;
  ff::MemoryStats after_warmup;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--compile-one") return compile_one(std::atoi(argv[2]));
  double seconds = 600;
  if (argc == 3 && std::string(argv[1]) == "--seconds") seconds = std::atof(argv[2]);
  else if (argc != 1) {
    std::fprintf(stderr, "usage: %s [--seconds S]\n", argv[0]);
    return 2;
  }
  const char* cache_env = std::getenv("FIELDFLOW_CACHE_DIR");
  const fs::path cache_dir = cache_env != nullptr ? fs::path(cache_env) : fs::path();

  // Inputs, pristine outputs and reference results per program and size, made once.
  std::vector<std::unique_ptr<Case>> cases;
  for (const char* name : kPrograms) {
    const auto& ex = ff::examples::example(name);
    for (int s = 0; s < 2; ++s) {
      auto c = std::make_unique<Case>();
      c->example = &ex;
      c->size_index = s;
      c->data = ex.make_instance(kSizes[s], ff::Layout::vertical_fastest, 5);
      c->pristine = ex.make_instance(kSizes[s], ff::Layout::vertical_fastest, 5);
      c->expected = ex.make_instance(kSizes[s], ff::Layout::vertical_fastest, 5);
      ff::run_reference(ex.program, c->expected.arguments());
      c->args = c->data.arguments();
      cases.push_back(std::move(c));
    }
  }

  // One caller workspace for every external instance: the maximum over programs and sizes.
  std::vector<std::vector<ff::WorkspaceRequirement>> needs;
  for (const char* name : kPrograms) {
    const auto& ex = ff::examples::example(name);
    ff::CompileOptions probe;
    probe.num_threads = 4;
    const ff::CompiledProgram p = ff::compile(ex.program, probe);
    for (auto& c : cases) {
      if (c->example == &ex) needs.push_back(p.workspace_requirements(ff::size_symbols(ex.program, c->args)));
    }
  }
  std::size_t shared_bytes = 0;
  for (const auto& r : ff::max_requirements(needs)) shared_bytes = std::max(shared_bytes, r.bytes);
  // Thread counts change how much a program needs (per-thread buffers): room for 4 threads.
  auto shared = std::unique_ptr<std::byte, decltype(&std::free)>(
      static_cast<std::byte*>(std::aligned_alloc(256, (shared_bytes + 255) / 256 * 256 + 256)), &std::free);

  std::vector<Instance> instances;
  const int thread_counts[] = {1, 2, 4};
  int t = 0;
  for (const char* name : kPrograms) {
    const auto& ex = ff::examples::example(name);
    for (ff::TransientMemoryMode mode : {ff::TransientMemoryMode::pool, ff::TransientMemoryMode::persistent,
                                         ff::TransientMemoryMode::scoped, ff::TransientMemoryMode::external}) {
      ff::CompileOptions options;
      options.memory.mode = mode;
      options.num_threads = thread_counts[t++ % 3];
      options.parallel_threshold = 0;
      if (mode == ff::TransientMemoryMode::external) {
        options.num_threads = 4;
        options.memory.external_workspace[ff::Device::cpu] = {shared.get(), shared_bytes, ff::Device::cpu, {}};
      }
      instances.push_back({fmt::format("{}/{}/{} threads", name, ff::to_string(mode), options.num_threads), &ex, mode,
                           std::make_unique<ff::CompiledProgram>(ff::compile(ex.program, options)), {}});
    }
  }

  long calls = 0, failures = 0, helpers = 0, helper_failures = 0;
  auto fail = [&](const std::string& what) {
    if (failures++ < 10) std::fprintf(stderr, "FAIL: %s\n", what.c_str());
  };
  auto one_round = [&] {
    for (auto& inst : instances) {
      for (auto& c : cases) {
        if (c->example != inst.example) continue;
        for (const std::string& out : c->data.outputs) c->data.fields.at(out).copy_values_from(c->pristine.fields.at(out));
        try {
          (*inst.program)(c->args);
        } catch (const std::exception& e) {
          fail(fmt::format("{} size {}: {}", inst.label, c->size_index, e.what()));
          continue;
        }
        ++calls;
        for (const std::string& out : c->data.outputs) {
          const ff::Field& got = c->data.fields.at(out);
          if (std::memcmp(got.data(), c->expected.fields.at(out).data(), got.bytes()) != 0) {
            fail(fmt::format("{} size {}: output {} differs from the reference", inst.label, c->size_index, out));
          }
        }
      }
    }
  };

  // Warm-up: two rounds (every instance at both sizes), then the baselines.
  one_round();
  one_round();
  for (auto& inst : instances) inst.after_warmup = inst.program->memory_stats();
  const long rss_warm = resident_kib(), fds_warm = open_fds();
  const CacheCount cache_warm = count_cache(cache_dir);
  long rss_peak = rss_warm;

  const auto start = Clock::now();
  auto last_helper = start;
  pid_t helper = -1;
  int variant = 0;
  while (std::chrono::duration<double>(Clock::now() - start).count() < seconds) {
    one_round();
    rss_peak = std::max(rss_peak, resident_kib());
    if (helper < 0 && Clock::now() - last_helper > std::chrono::seconds(5)) {
      helper = start_helper(variant++);
      last_helper = Clock::now();
    }
    if (helper > 0) {
      int status = 0;
      if (waitpid(helper, &status, WNOHANG) == helper) {
        ++helpers;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++helper_failures;
        helper = -1;
      }
    }
  }
  if (helper > 0) {
    int status = 0;
    waitpid(helper, &status, 0);
    ++helpers;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++helper_failures;
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();

  // Allocation counters: nothing allocated per call after warm-up except scoped's own blocks,
  // which are all freed again.
  long counter_problems = 0;
  for (auto& inst : instances) {
    const ff::MemoryStats now = inst.program->memory_stats();
    const auto allocated = now.system_allocations - inst.after_warmup.system_allocations;
    const auto freed = now.system_frees - inst.after_warmup.system_frees;
    const bool ok = inst.mode == ff::TransientMemoryMode::scoped
                        ? allocated == freed
                        : allocated == 0 && now.allocator_calls == inst.after_warmup.allocator_calls &&
                              now.last_call_system_allocations == 0;
    if (!ok) {
      ++counter_problems;
      fail(fmt::format("{}: {} system allocations and {} frees after warm-up", inst.label, allocated, freed));
    }
  }
  const long rss_end = resident_kib(), fds_end = open_fds();
  const CacheCount cache_end = count_cache(cache_dir);
  // Resident memory may move by allocator noise (a few MiB), never grow with the number of calls.
  const long rss_slack_kib = 16 * 1024;
  if (rss_end - rss_warm > rss_slack_kib) fail(fmt::format("resident memory grew by {} KiB", rss_end - rss_warm));
  if (fds_end != fds_warm) fail(fmt::format("open file descriptors: {} after warm-up, {} at the end", fds_warm, fds_end));
  // The helper adds at most its 4 own programs and the horizontal_fastest variants of ours.
  const long entries_allowed = cache_warm.entries + 4 + static_cast<long>(std::size(kPrograms));
  if (!cache_dir.empty() && (cache_end.entries > entries_allowed || cache_end.leftovers > 0)) {
    fail(fmt::format("cache: {} entries after warm-up, {} at the end (at most {}), {} leftovers", cache_warm.entries,
                     cache_end.entries, entries_allowed, cache_end.leftovers));
  }
  if (helper_failures > 0) fail(fmt::format("{} of {} helper compiles failed", helper_failures, helpers));

  std::printf("soak: %.1f s, %ld calls (%zu instances: %zu programs x 4 modes, 1/2/4 threads, 2 sizes), %ld failures\n",
              elapsed, calls, instances.size(), std::size(kPrograms), failures);
  std::printf("  resident memory: %ld KiB after warm-up, peak %ld KiB, %ld KiB at the end\n", rss_warm, rss_peak, rss_end);
  std::printf("  open fds: %ld after warm-up, %ld at the end\n", fds_warm, fds_end);
  std::printf("  cache (%s): %ld entries after warm-up, %ld at the end; %ld lock files; %ld leftovers\n",
              cache_dir.empty() ? "default" : cache_dir.c_str(), cache_warm.entries, cache_end.entries, cache_end.locks,
              cache_end.leftovers);
  std::printf("  compiles from another process: %ld (%ld failed)\n", helpers, helper_failures);
  std::printf("  allocation counters: %ld instances grew after warm-up\n", counter_problems);
  std::printf("%s\n", failures == 0 ? "PASS" : "FAIL");
  return failures == 0 ? 0 : 1;
}
