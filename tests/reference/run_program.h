#pragma once
// One test body, three backends. The language tests call run_program(); their sources are compiled
// once (the object library language_suite) and linked into three binaries, each with its own
// definition of the functions below:
//   test_reference       the reference executor (run_on_reference.cpp)
//   test_reference_cpu   the compiled CPU backend checked against the reference (run_on_cpu.cpp)
//   test_reference_cuda  the generated CUDA kernels checked against the reference, emulated on the
//                        host or on a device (run_on_cuda.cpp)
// A link-time choice rather than a macro per binary, so the six sources are compiled once per
// build instead of three times (under AddressSanitizer they are the build's slowest objects).
#include "fieldflow/compile.h"
#include "fieldflow/reference.h"

namespace fieldflow::langtest {

// Runs `p` on `args` through this binary's backend. The fields of `args` end up holding the
// reference's results, or the error the reference raises is thrown (after the backend was checked
// to raise the same kind of error).
void run_program(const ir::Program& p, const Arguments& args);

// The relative tolerance (matches' rel_tol) of results of the math library's functions (exp, sin,
// pow, ...) that a test checks itself: 0, exact, unless its outputs came from a GPU
// (test_reference_cuda on a device with FIELDFLOW_TEST_NO_EMULATION, as scripts/gpu-check.sh runs
// it), whose math library is not the host's libm (support/cuda_harness.h, device_math_ulps).
double math_library_tolerance(DType dt);

// The backend a test compiles for when it calls compile() itself (to inspect a module or a
// schedule): Backend::cpu in test_reference_cpu, the reference executor in the other two.
Backend suite_backend();

}  // namespace fieldflow::langtest
