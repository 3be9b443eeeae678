#pragma once
#include "ir/schedule.h"

namespace fieldflow::passes {

// break_write_hazards: expects accesses inferred. A kernel that writes a field it also reads at
// another point (an in/out argument such as w = w + f(w(K+1))) would observe its own writes, so
// it writes into a transient double buffer instead, copied into the field by a kernel right after.
// Guarantees: no kernel reads an output it writes except at the point being written.
void break_write_hazards(ir::Schedule& s);

}  // namespace fieldflow::passes
