#pragma once
#include "ir/schedule.h"

namespace fieldflow::passes {

// fuse_columns: expects hazards broken (final kernel order). For the vertical_fastest layout,
// groups consecutive kernels over the same horizontal domain (typically a vertical solver: a
// forward scan, a backward scan and a pointwise update) so they run column by column: each
// thread takes a column and runs every kernel of the group on it before the next column. A
// transient produced and read only inside the group, and only in the same column, then lives in
// a per-thread column buffer (threads x levels) instead of a whole field: a fraction of the
// memory and of the memory traffic. Legal only when every buffer the group writes is read inside
// the group at horizontal offset 0. Guarantees: results equal running the kernels one by one.
void fuse_columns(ir::Schedule& s);

}  // namespace fieldflow::passes
