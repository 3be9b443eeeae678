#pragma once
#include "ir/schedule.h"

namespace fieldflow::passes {

// fuse_scan_consumers (CUDA): expects hazards broken (final kernel order). A pointwise kernel
// right after a scan that reads the scan's results only at the point it computes, at every point
// of its box (a vertical solver's update: out = dtr * (x - u_pos)), runs inside the scan's level
// loop, right after each level's carry update: the thread that sweeps a column computes the
// consumer's column too, reading the results from the carry registers. A scan result nothing
// else reads is then never stored (Transient::in_registers, no bytes): vadv's backward sweep no
// longer writes x and the update no longer reads it back, two of its 13 field passes. On the CPU
// column groups (fuse_columns) keep such results in cache instead.
// Legal when the kernels loop over the same dimensions, the scan produces transients (its box
// is what its readers need, so it covers the consumer's), the consumer reads them only at its
// point and unconditionally, and the consumer writes nothing the scan reads or writes.
// Guarantees: results equal running the kernels one after the other.
void fuse_scan_consumers(ir::Schedule& s);

}  // namespace fieldflow::passes
