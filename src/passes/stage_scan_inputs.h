#pragma once
#include "ir/schedule.h"

namespace fieldflow::passes {

// stage_scan_inputs: expects column groups formed (fuse_columns) and access summaries. In the
// vertical-fastest layout a scan of a group that takes blocks of columns sweeps the block's
// columns side by side, level by level; computing its inputs there would read every input of
// every column of the block at once (dozens of strided streams, which the prefetchers lose).
// So each computed input of such a scan (one over all of the scan's loop dimensions, not a plain
// load, scalar or literal) moves to a pointwise kernel placed just before it in the same group,
// which writes it into a column-local block buffer column by column, vectorised along the
// unit-stride vertical; the scan then reads its inputs from the block (in L1). Re-summarises the
// accesses of the kernels. Guarantees: the same values computed by the same operations.
void stage_scan_inputs(ir::Schedule& s);

}  // namespace fieldflow::passes
