#pragma once
#include "ir/schedule.h"

namespace fieldflow::passes {

// fuse_columns: expects hazards broken (final kernel order). Groups consecutive kernels over
// the same horizontal domain (typically a vertical solver: a forward scan, a backward scan and a
// pointwise update) so they run column by column: each thread takes a block of columns and runs
// every kernel of the group on it before the next block. A transient produced and read only
// inside the group, and only in the same column, then lives in a per-thread block buffer
// (threads x block x levels) instead of a whole field: a fraction of the memory and of the
// memory traffic. Legal only when every buffer the group writes is read inside the group at
// horizontal offset 0.
// - vertical_fastest: any such group; one with a scan takes blocks of `scan_column_block`
//   neighbouring columns (along the innermost horizontal dimension) and sweeps them side by
//   side, so the recurrences of the block overlap; otherwise one column at a time.
// - horizontal_fastest: groups with a scan only, in blocks of `row_block` columns along the
//   unit-stride dimension, level-major inside the block, so every level is a vector loop along
//   the row and the scan results stay in the block (L2) instead of going to memory.
// - any: no groups.
// Guarantees: results equal running the kernels one by one.
inline constexpr int scan_column_block = 8;
inline constexpr int row_block = 256;
void fuse_columns(ir::Schedule& s);

}  // namespace fieldflow::passes
