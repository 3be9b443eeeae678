#pragma once
#include "ir/schedule.h"

namespace fieldflow::passes {

// build_kernels: expects a verified program and an empty schedule; makes one kernel per
// statement, over the statement's domain, writing its outputs (a statement whose value is a
// scan becomes a scan kernel). Guarantees kernels appear in program order.
void build_kernels(ir::Schedule& s);

}  // namespace fieldflow::passes
