#pragma once
#include "ir/schedule.h"

namespace fieldflow::passes {

// select_transients: expects kernels from build_kernels. Decides which intermediate values are
// stored instead of recomputed where they are read: scan results read by other expressions,
// values the user marked with materialize(), and values read at several positions (through
// shifts or neighbour tables) whose recomputation costs more than a store and reloads. Each
// becomes a transient produced by a new kernel placed right before its consumer; the consumer
// then reads it like a field. Everything else stays inlined into its consumer (fusion by
// construction). Guarantees: every non-root scan has been replaced by transient reads.
void select_transients(ir::Schedule& s);

// Cost (in arithmetic-operation units) above which recomputing a value at extra positions is
// judged dearer than storing it once: a store plus a reload from memory is ~64 ops' worth of time
// on a bandwidth-bound machine.
inline constexpr double recompute_threshold = 64.0;

}  // namespace fieldflow::passes
