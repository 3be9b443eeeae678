#pragma once
#include "ir/schedule.h"

namespace fieldflow::passes {

// infer_accesses: expects transients selected. Summarises, per kernel, every buffer read: per
// dimension the loop offsets (Cartesian halos from shifts), table-indexed or neighbour-slot
// ranges (unstructured), and the concat_where branch it happens in. These summaries are the
// symbolic form of extent inference: compute_extents turns them into boxes for given sizes.
// Also records the connectivities each kernel reads and whether it needs in-kernel checks.
void infer_accesses(ir::Schedule& s);

}  // namespace fieldflow::passes
