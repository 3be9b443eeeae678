// test_reference: the language suite on the reference executor alone (run_program.h).
#include "reference/run_program.h"

namespace fieldflow::langtest {

void run_program(const ir::Program& p, const Arguments& args) { run_reference(p, args); }

double math_library_tolerance(DType) { return 0; }

Backend suite_backend() { return Backend::reference; }

}  // namespace fieldflow::langtest
