#pragma once
#include "ir/schedule.h"

namespace fieldflow::passes {

// fuse_kernels: expects accesses inferred. Merges a pointwise kernel into the pointwise kernel
// right before it when both loop over the same domain and the later one reads what the earlier
// writes only at the point being computed (and neither writes what the other reads elsewhere):
// one loop nest instead of two, and a value passed between them is computed in registers
// instead of going through memory (a transient only they used disappears). Guarantees: results
// are those of running the kernels one after the other; accesses are re-inferred.
void fuse_kernels(ir::Schedule& s);

}  // namespace fieldflow::passes
