#pragma once
#include "ir/schedule.h"

namespace fieldflow::passes {

// analyze_lifetimes: expects the final kernel order and accesses. Sets every transient's live
// range [first_kernel, last_kernel]: from its producer to its last reader. Memory planning packs
// transients whose ranges do not overlap into the same bytes.
void analyze_lifetimes(ir::Schedule& s);

}  // namespace fieldflow::passes
