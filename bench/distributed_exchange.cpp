// Halo exchange on MPI (docs/distributed.md), on a 200,000-cell torus mesh x 80 levels split by
// METIS between the ranks (run with 2):
//   exchange            DistributedProgram::exchange of c2e2co_sum's halo (pack, send, receive, unpack)
//   sendrecv_same_bytes one MPI_Sendrecv of the same bytes per peer, contiguous (the baseline)
//   compute_alone       the rank's part of c2e2co_sum compiled and called without any exchange
//   step_overlapped     a distributed call: interior while the messages travel, then the border
//   step_sequential     a distributed call without overlap: exchange, then all points
// Every iteration starts at a barrier and takes the slowest rank's time. Targets: exchange within
// 1.5x sendrecv_same_bytes, step_overlapped within 1.1x compute_alone (printed at the end with
// the medians, followed by the scaling model of docs/distributed.md from these measurements).
//   OMP_NUM_THREADS=1 mpirun -np 2 --mca btl self,vader build/release/bench/fieldflow_bench_distributed
#include <benchmark/benchmark.h>
#include <metis.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "fieldflow/distributed.h"
#include "fieldflow/examples.h"

using namespace fieldflow;

namespace {

constexpr int levels = 80, side = 316;  // 2 x 316 x 316 = 199,712 cells
int rank = 0, ranks = 1;

double seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Times `op` on every rank from a common start; the iteration takes the slowest rank's time.
template <class Op>
void timed(benchmark::State& state, Op op) {
  for (auto _ : state) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = seconds();
    op();
    double mine = seconds() - t0, slowest = 0;
    MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    state.SetIterationTime(slowest);
  }
}

struct Setup {
  Mesh global = make_torus_mesh(side, side);
  const examples::Example& ex = examples::example("c2e2co_sum");
  distributed::MeshDecomposition parts{MPI_COMM_WORLD, global, {ex.program}};
  const Dimension cell = horizontal_dim("Cell"), k = vertical_dim("K");
  Field in{{cell, k}, DType::float64, {parts.local("Cell"), levels}};
  Field weights{{cell, make_connectivity("C2E2CO", cell, cell, 4).local}, DType::float64, {parts.local("Cell"), 4}};
  Field out{{cell, k}, DType::float64, {parts.local("Cell"), levels}};
  distributed::DistributedProgram overlapped{ex.program, parts, {}, {true, {}}};
  distributed::DistributedProgram sequential{ex.program, parts, {}, {false, {}}};
  CompiledProgram alone = compile(ex.program);
  Arguments args, local_args;

  Setup() {
    in.fill(1.0);
    weights.fill(0.25);
    for (Arguments* a : {&args, &local_args}) {
      a->field("in", in).field("weights", weights).field("out", out).scalar("nk", levels);
      a->connectivity("C2E2CO", parts.local_mesh().table("C2E2CO"));
    }
    args.scalar("n_cells", static_cast<std::int32_t>(global.n_cells));
    local_args.scalar("n_cells", static_cast<std::int32_t>(parts.owned("Cell")));  // the rank's own cells
  }
};
Setup* setup = nullptr;

void exchange(benchmark::State& state) {
  timed(state, [] { setup->sequential.exchange(setup->args); });
}

void sendrecv_same_bytes(benchmark::State& state) {
  // The bytes the exchange sends to the other rank, and those it receives from it.
  const auto before = setup->sequential.exchange_stats();
  setup->sequential.exchange(setup->args);
  const long mine = static_cast<long>(setup->sequential.exchange_stats().bytes_sent - before.bytes_sent);
  long theirs = 0;
  const int peer = (rank + 1) % ranks;
  MPI_Sendrecv(&mine, 1, MPI_LONG, peer, 7, &theirs, 1, MPI_LONG, peer, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  std::vector<char> send(static_cast<std::size_t>(mine), 1), receive(static_cast<std::size_t>(theirs));
  timed(state, [&] {
    MPI_Sendrecv(send.data(), static_cast<int>(mine), MPI_BYTE, peer, 8, receive.data(), static_cast<int>(theirs),
                 MPI_BYTE, peer, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  });
  state.counters["bytes_per_rank"] = static_cast<double>(mine);
}

void compute_alone(benchmark::State& state) { timed(state, [] { setup->alone(setup->local_args); }); }
void step_overlapped(benchmark::State& state) { timed(state, [] { setup->overlapped(setup->args); }); }
void step_sequential(benchmark::State& state) { timed(state, [] { setup->sequential(setup->args); }); }

// Rank 0 prints and keeps every median; the other ranks run the same iterations silently.
class MedianReporter : public benchmark::ConsoleReporter {
 public:
  std::map<std::string, double> median_ms, median_cpu_ms;
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& r : runs)
      if (r.aggregate_name == "median") {
        median_ms[r.run_name.function_name] = r.GetAdjustedRealTime();  // in the unit: ms
        median_cpu_ms[r.run_name.function_name] = r.GetAdjustedCPUTime();
      }
    ConsoleReporter::ReportRuns(runs);
  }
};
class SilentReporter : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

// Halo cells (read across an edge, not owned) per part when METIS splits the mesh into `parts`:
// the surface-to-volume constant of the scaling model, measured rather than assumed.
std::pair<double, double> halo_cells_per_part(const Mesh& m, int parts) {
  const NeighborTable& c2e2c = m.table("C2E2C");
  std::vector<idx_t> xadj{0}, adjncy;
  for (std::int64_t c = 0; c < m.n_cells; ++c) {
    for (int n = 0; n < 3; ++n)
      if (c2e2c(c, n) >= 0) adjncy.push_back(c2e2c(c, n));
    xadj.push_back(static_cast<idx_t>(adjncy.size()));
  }
  idx_t n = static_cast<idx_t>(m.n_cells), one = 1, p = parts, cut = 0;
  std::vector<idx_t> part(static_cast<std::size_t>(m.n_cells));
  METIS_PartGraphKway(&n, &one, xadj.data(), adjncy.data(), nullptr, nullptr, nullptr, &p, nullptr, nullptr, nullptr,
                      &cut, part.data());
  std::vector<std::set<std::int64_t>> halo(static_cast<std::size_t>(parts));
  std::vector<std::set<int>> neighbours(static_cast<std::size_t>(parts));
  for (std::int64_t c = 0; c < m.n_cells; ++c)
    for (int k = 0; k < 3; ++k)
      if (const auto d = c2e2c(c, k); d >= 0 && part[d] != part[c]) {
        halo[part[c]].insert(d);
        neighbours[part[c]].insert(static_cast<int>(part[d]));
      }
  double h = 0, nb = 0;
  for (int q = 0; q < parts; ++q) {
    h += static_cast<double>(halo[q].size()) / parts;
    nb += static_cast<double>(neighbours[q].size()) / parts;
  }
  return {h, nb};
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  // Network parameters of the model (the measured values here are loopback shared memory).
  double bandwidth_gbs = 12.5, latency_us = 2.0, cores_per_node = 64;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--bandwidth-gbs=", 0) == 0) bandwidth_gbs = std::stod(a.substr(16));
    if (a.rfind("--latency-us=", 0) == 0) latency_us = std::stod(a.substr(13));
    if (a.rfind("--cores-per-node=", 0) == 0) cores_per_node = std::stod(a.substr(17));
  }
  benchmark::Initialize(&argc, argv);
  {
    Setup s;
    setup = &s;
    for (auto [name, fn] : std::vector<std::pair<const char*, void (*)(benchmark::State&)>>{
             {"exchange", exchange}, {"sendrecv_same_bytes", sendrecv_same_bytes}, {"compute_alone", compute_alone},
             {"step_overlapped", step_overlapped}, {"step_sequential", step_sequential}})
      // Fixed counts: every rank must run exactly the same iterations (they meet in barriers).
      benchmark::RegisterBenchmark(name, fn)->UseManualTime()->Iterations(20)->Repetitions(7)
          ->ReportAggregatesOnly(true)->Unit(benchmark::kMillisecond);
    MedianReporter report;
    SilentReporter silent;
    if (rank == 0) benchmark::RunSpecifiedBenchmarks(&report); else benchmark::RunSpecifiedBenchmarks(&silent);

    // Per-call breakdown of the exchange (this rank), for the model.
    const auto st = s.sequential.exchange_stats();
    const double calls = static_cast<double>(st.calls);
    s.sequential(s.args);
    if (rank == 0) {
      auto& m = report.median_ms;
      std::printf("\nmedians (ms): exchange %.3f, sendrecv %.3f -> %.2fx (target <= 1.5); overlapped step %.3f, "
                  "compute alone %.3f -> %.2fx (target <= 1.10); sequential step %.3f\n"
                  "CPU-time medians of rank 0 (ms): overlapped step %.3f, compute alone %.3f -> %.2fx\n",
                  m["exchange"], m["sendrecv_same_bytes"], m["exchange"] / m["sendrecv_same_bytes"],
                  m["step_overlapped"], m["compute_alone"], m["step_overlapped"] / m["compute_alone"],
                  m["step_sequential"], report.median_cpu_ms["step_overlapped"], report.median_cpu_ms["compute_alone"],
                  report.median_cpu_ms["step_overlapped"] / report.median_cpu_ms["compute_alone"]);
      const double bytes = static_cast<double>(st.bytes_sent) / calls;
      const double pack_ms = 1e3 * st.pack_seconds / calls, unpack_ms = 1e3 * st.unpack_seconds / calls;
      const double owned_points = static_cast<double>(s.parts.owned("Cell")) * levels;
      // Compute cost per point from the CPU time (on a shared machine the wall time also counts
      // the time other processes held the core).
      const double point_ns = report.median_cpu_ms["compute_alone"] * 1e6 / owned_points;
      const double pack_gbs = bytes / ((pack_ms + unpack_ms) / 2 * 1e-3) * 1e-9;
      const double wire_gbs = bytes / (m["sendrecv_same_bytes"] * 1e-3) * 1e-9;
      std::printf("rank 0 per exchange: %.0f bytes sent, pack %.3f ms, unpack %.3f ms (%.1f GB/s), compute %.2f ns "
                  "(CPU) per cell-level, loopback Sendrecv %.1f GB/s\n",
                  bytes, pack_ms, unpack_ms, pack_gbs, point_ns, wire_gbs);

      // The scaling model: an R2B9-like grid, one rank per node of `cores_per_node` cores.
      std::vector<std::pair<double, double>> fit;  // (cells per part, halo cells per part)
      double neighbours = 0;
      for (int parts : {4, 16, 64}) {
        const auto [h, nb] = halo_cells_per_part(s.global, parts);
        fit.push_back({static_cast<double>(s.global.n_cells) / parts, h});
        neighbours = nb;
      }
      double k = 0;
      for (auto [c, h] : fit) k += h / std::sqrt(c) / static_cast<double>(fit.size());
      std::printf("\nhalo cells per part ~ %.2f sqrt(cells per part) (METIS, 4/16/64 parts), %.1f neighbours per part\n"
                  "model: 20,971,520 cells x %d levels, %.0f cores per node at %.2f ns per cell-level per core, "
                  "network %.1f GB/s and %.1f us per message, pack and unpack at %.1f GB/s on one core\n",
                  k, neighbours, levels, cores_per_node, point_ns, bandwidth_gbs, latency_us, pack_gbs);
      std::printf("%6s %12s %12s %12s %12s %12s %12s %8s\n", "nodes", "cells/node", "halo MB", "compute ms",
                  "exchange ms", "step ms", "overlap ms", "overlap eff");
      const double cells = 20971520;
      for (int nodes : {1, 10, 30, 100, 300, 1000}) {
        const double c = cells / nodes, halo = nodes == 1 ? 0 : k * std::sqrt(c);
        const double halo_bytes = halo * levels * 8;
        const double compute = c * levels * point_ns * 1e-6 / cores_per_node;
        const double copy = 2 * halo_bytes / (pack_gbs * 1e9) * 1e3;
        const double wire = nodes == 1 ? 0 : neighbours * latency_us * 1e-3 + halo_bytes / (bandwidth_gbs * 1e9) * 1e3;
        const double step = compute + copy + wire, overlap = copy + std::max(compute, wire);
        std::printf("%6d %12.0f %12.2f %12.3f %12.3f %12.3f %12.3f %7.0f%%\n", nodes, c, halo_bytes / 1e6, compute,
                    copy + wire, step, overlap, 100 * compute / overlap);
      }
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  benchmark::Shutdown();
  MPI_Finalize();
  return 0;
}
