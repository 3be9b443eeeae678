#pragma once
#include "ir/schedule.h"

namespace fieldflow::passes {

// assign_storage: places every transient in the storage of the target (host heap for the CPU
// backend, GPU global memory for CUDA) and checks that the storage maps to a device, so a
// schedule never reaches code generation with memory nobody can allocate.
void assign_storage(ir::Schedule& s, Device target);

}  // namespace fieldflow::passes
