#pragma once
#include <map>
#include <string>

#include "ir/schedule.h"

namespace fieldflow::passes {

// fold_static_scalars: expects a verified program in s.program and the values of its static
// scalar parameters (CompileOptions::static_scalars, already checked to name scalar parameters).
// Replaces every read of a static scalar by a literal of the parameter's dtype, in values,
// domain bounds and concat_where bounds, folds comparisons and logic on literals, and removes
// the branch of a where whose condition became a literal. The parameters stay in the program
// (callers still pass them; the runtime checks the value). Guarantees a verified program.
void fold_static_scalars(ir::Schedule& s, const std::map<std::string, Scalar>& values);

}  // namespace fieldflow::passes
