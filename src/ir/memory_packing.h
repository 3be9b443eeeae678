#pragma once
// Liveness-based packing of transients into one workspace per device (design §3; the idea of XLA's
// buffer assignment). Expects transients with a device, a byte size and an inclusive live range
// [first_kernel, last_kernel] in kernel order. Fills each transient's offset and the plan's sizes.
// Guarantees: every offset is a multiple of transient_alignment (256) and every size is rounded up
// to it; two transients on one device whose live ranges overlap never share a byte; the result
// depends only on the input (same input, same offsets); packed_bytes >= lower_bound_bytes, with
// equality on interval-graph cases such as equal sizes. Transients keep their input order.
#include <vector>

#include "fieldflow/memory.h"

namespace fieldflow::ir {

// Throws InternalError for a live range that ends before it starts (a bug in the planning pass).
MemoryPlan pack_transients(std::vector<PlannedTransient> items);

}  // namespace fieldflow::ir
