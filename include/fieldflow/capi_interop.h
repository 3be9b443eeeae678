#pragma once
// C++ side of the C API (include/fieldflow/fieldflow.h): a C++ host that compiles its own programs
// with the DSL hands them to C or Fortran code as ff_program handles.
#include "fieldflow/compile.h"
#include "fieldflow/fieldflow.h"

namespace fieldflow::capi {

// Takes ownership of `program` and returns a live handle for it, to be destroyed with
// ff_program_destroy. The program keeps the memory options it was compiled with: with an
// external_workspace for a device, ff_program_set_workspace can replace it.
ff_program* wrap(CompiledProgram program);

}  // namespace fieldflow::capi
