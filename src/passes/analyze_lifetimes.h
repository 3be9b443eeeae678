#pragma once
#include "ir/schedule.h"

namespace fieldflow::passes {

// analyze_lifetimes: expects the final kernel order, accesses and column groups. Sets every
// transient's live range [first_kernel, last_kernel]: from its producer to its last reader, widened
// to whole column groups, because a group runs all its kernels on one column before the next: a
// buffer any of its kernels touches is in use from the group's first kernel to its last. Memory
// planning packs transients whose ranges do not overlap into the same bytes.
void analyze_lifetimes(ir::Schedule& s);

}  // namespace fieldflow::passes
