#pragma once
// The distributed differential harness (docs/reliability.md): runs a FuzzCase over a Cartesian or
// mesh decomposition of MPI_COMM_WORLD for a few time steps and compares every rank's part of
// every field, inputs and outputs, bit for bit with the reference executor run over the global
// fields on the same rank. Used by fieldflow_fuzz_distributed (random programs) and by
// test_distributed (the minimal programs it found).
//
// Each rank's fields start with the halo poisoned (NaN, or a sentinel for integers), so a point
// the exchange misses shows up as a wrong value; between steps every field no statement writes is
// perturbed (its owned points here, every point there), so a halo left from the step before
// shows up too. Collective: every rank calls it with the same case and settings.
#include <array>
#include <cstdint>
#include <string>

#include "fieldflow/memory.h"
#include "fuzz/program_generator.h"

namespace fieldflow::fuzz {

// This process's rank in MPI_COMM_WORLD, and the number of ranks.
int world_rank();
int world_size();

// How one case runs distributed.
struct DistributedSettings {
  SizeSet sizes;                          // Cartesian ni, nj, nk; mesh nx, ny (torus or bounded, as the case says), nk
  std::array<int, 2> process_grid{0, 0};  // Cartesian: ranks along I and J (0: MPI_Dims_create's choice)
  // Cartesian: the grid wraps along I, J. The reference's fields then hold, past each periodic
  // edge, the wrapped points' values (the host fills them before each call, as on one rank),
  // which the distributed call must receive from its neighbours instead.
  std::array<bool, 2> periodic{false, false};
  Layout layout = Layout::vertical_fastest;
  TransientMemoryMode mode = TransientMemoryMode::pool;  // external: a host allocator callback
  int threads = 1;                        // OpenMP threads per rank; every piece takes the parallel path
  bool overlap = true;
  int steps = 3;
  std::string describe(bool mesh) const;
};

// The fuzzer's random settings for a case, the same on every rank: sizes of its own (blocks of at
// least 5 points along a decomposed axis, so most programs' halos fit: the generator's sizes are
// for one rank), the case's first layout, a mode, 1 or 2 threads, overlap or not.
DistributedSettings draw_settings(const FuzzCase& c, std::uint64_t seed);

struct DistributedOutcome {
  // refused: a program the decomposition cannot run (ProgramError), or a halo wider than a block.
  enum Kind { passed, refused, failed } kind = passed;
  std::string detail;
  std::string category = {};  // of a failure: "values differ", "error mismatch", "<kind> while setting up"
};

// Collective. A finding on any rank ends the case on every rank (no rank waits in a call the
// others will not make); `detail` says what this rank saw.
DistributedOutcome check_distributed(const FuzzCase& c, const DistributedSettings& settings);

}  // namespace fieldflow::fuzz
