// fieldflow_fuzz_distributed: differential fuzzing of distributed calls (docs/reliability.md).
// Every rank of `mpirun -np N` draws the same random programs (tests/fuzz's generator, in its
// decomposable form) and runs each through the distributed harness (distributed_differential.h)
// with settings drawn from the seed. The built-in programs of test_distributed only read what
// their authors thought of; these read at random reaches, through chains of tables and
// transients, write in/out fields and points beyond the grid. A program the decomposition refuses
// is counted, not a failure; a failing one is shrunk (every rank tries the same candidates) and
// printed with the command that reproduces it. Exit status 1 when any case failed.
//   mpirun -np 3 build/release/tests/distributed/fieldflow_fuzz_distributed --seed 1 --count 50
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "distributed/distributed_differential.h"
#include "fieldflow/ir.h"
#include "fuzz/program_generator.h"
#include "fuzz/shrink.h"

using namespace fieldflow;
using namespace fieldflow::fuzz;

namespace {

using Outcome = DistributedOutcome;

bool print_cases = false;  // --print: each case's settings and program before it runs

Outcome run_case(const FuzzCase& c, std::uint64_t seed) {
  const DistributedSettings settings = draw_settings(c, seed);
  if (print_cases && world_rank() == 0) fmt::print("  {}\n", settings.describe(c.mesh));
  return check_distributed(c, settings);
}

// Each rank's text (maybe none), printed in rank order.
void print_in_rank_order(const std::string& text) {
  for (int r = 0; r < world_size(); ++r) {
    if (r == world_rank()) fmt::print("{}", text);
    std::fflush(stdout);
    MPI_Barrier(MPI_COMM_WORLD);
  }
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  CLI::App app{"Differential fuzzing of distributed calls against the reference executor (run under mpirun)"};
  std::uint64_t start = 1, count = 20;
  double minutes = 0;
  bool verbose = false;
  std::uint64_t min_passed = 0;
  app.add_option("--seed", start, "first seed");
  app.add_option("--count", count, "number of seeds (ignored with --minutes)");
  app.add_option("--minutes", minutes, "run seeds from --seed on until this much time has passed");
  app.add_flag("--verbose", verbose, "print every case and why a refused one was refused");
  app.add_option("--min-passed", min_passed, "fail unless at least this many programs ran and passed (not refused)");
  std::vector<std::size_t> keep;
  app.add_option("--keep-statements", keep, "keep only these statements of each program (shrinking a crash by hand)");
  app.add_flag("--print", print_cases, "print each program before running it (for a case that crashes)");
  int shrink_attempts = 120;
  app.add_option("--shrink", shrink_attempts, "at most this many candidates when shrinking a failing program");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int status = app.exit(e);
    MPI_Finalize();
    return status;
  }
  const int rank = world_rank(), ranks = world_size();
  const auto began = std::chrono::steady_clock::now();
  auto elapsed_minutes = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count() / 60; };
  std::uint64_t cases[3] = {0, 0, 0};
  GenerateOptions generate;
  generate.decomposable = true;
  for (std::uint64_t seed = start;; ++seed) {
    int go = minutes > 0 ? elapsed_minutes() < minutes : seed < start + count;
    MPI_Bcast(&go, 1, MPI_INT, 0, MPI_COMM_WORLD);  // every rank stops after the same seed
    if (!go) break;
    generate.inside_the_grid = seed % 2 == 0;  // every other Cartesian program can run on a periodic grid
    FuzzCase c = generate_case(seed, generate);
    if (!keep.empty()) {
      std::vector<ir::Stmt> kept;
      for (std::size_t i : keep)
        if (i < c.program.stmts.size()) kept.push_back(c.program.stmts[i]);
      c.program.stmts = kept;
    }
    if (print_cases && rank == 0) fmt::print("seed {}:\n{}\n", seed, ir::print(c.program));
    std::fflush(stdout);
    const Outcome o = run_case(c, seed);
    int kind = o.kind, worst = 0;
    MPI_Allreduce(&kind, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    ++cases[worst];
    if (worst == Outcome::failed) {
      print_in_rank_order(o.kind == Outcome::failed ? fmt::format("seed {}: FAILED on rank {} of {}: {}\n", seed, rank, ranks, o.detail) : "");
      // Shrink: every rank tries the same candidates in the same order; a candidate still fails
      // when some rank fails it the way this rank failed the original (or any way, on a rank
      // that passed it).
      ShrinkStats stats;
      const FuzzCase small = shrink_case(c, [&](const FuzzCase& candidate) {
        const Outcome again = run_case(candidate, seed);
        int same = again.kind == Outcome::failed && (o.kind != Outcome::failed || again.category == o.category), any = 0;
        MPI_Allreduce(&same, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        return any != 0;
      }, shrink_attempts, stats);
      const Outcome last = run_case(small, seed);
      print_in_rank_order(last.kind == Outcome::failed ? fmt::format("  shrunk: rank {}: {}\n", rank, last.detail) : "");
      if (rank == 0)
        fmt::print("  shrunk in {} tries ({} kept):\n{}\n  reproduce: mpirun -np {} {} --seed {} --count 1 --verbose\n",
                   stats.attempts, stats.accepted, ir::print(small.program), ranks, argv[0], seed);
    } else if (rank == 0 && verbose) {
      fmt::print("seed {}: {} ({}){}\n", seed, worst == Outcome::refused ? "refused" : "passed",
                 draw_settings(c, seed).describe(c.mesh), worst == Outcome::refused ? ": " + o.detail : "");
    }
    std::fflush(stdout);
  }
  if (rank == 0)
    fmt::print("{} ranks: {} programs in {:.1f} min: {} passed, {} refused by the decomposition, {} failed\n", ranks,
               cases[0] + cases[1] + cases[2], elapsed_minutes(), cases[0], cases[1], cases[2]);
  const bool too_few = cases[Outcome::passed] < min_passed;
  if (too_few && rank == 0) fmt::print("only {} programs passed, fewer than --min-passed {}\n", cases[Outcome::passed], min_passed);
  MPI_Finalize();
  return cases[Outcome::failed] > 0 || too_few ? 1 : 0;
}
