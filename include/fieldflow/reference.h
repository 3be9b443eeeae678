#pragma once
// The reference executor: interprets an ir::Program point by point, exactly as the language is
// defined. Simple and obviously correct rather than fast, it is the oracle every compiled
// backend is tested against.
#include "fieldflow/field.h"
#include "fieldflow/ir.h"

namespace fieldflow {

// Runs `program` on host fields. Checks every argument first; any error (bad argument, a read
// outside an input's extent, a missing neighbour read by a fixed-index shift, ...) is thrown
// before any output is modified: outputs are written only when the whole call succeeds.
void run_reference(const ir::Program& program, const Arguments& args);

}  // namespace fieldflow
