// test_reference_cuda: the CUDA kernels of each program run under host emulation (no device
// needed) and are compared with the reference like the CPU backend; on a device they run there
// too. Each program's CUDA source is also compiled with NVRTC, all of them in one batch when the
// run ends (support/cuda_harness.h).
#include "reference/run_program.h"

#include <cstdlib>
#include <limits>

#include "support/cuda_harness.h"

namespace fieldflow::langtest {

void run_program(const ir::Program& p, const Arguments& args) {
  testing_support::compare_cuda_emulation_with_reference(p, args);
}

double math_library_tolerance(DType dt) {
  if (testing_support::device_present() && std::getenv("FIELDFLOW_TEST_NO_EMULATION") != nullptr)
    return static_cast<double>(testing_support::device_math_ulps) *
           (dt == DType::float32 ? std::numeric_limits<float>::epsilon() : std::numeric_limits<double>::epsilon());
  return 0;
}

Backend suite_backend() { return Backend::reference; }

}  // namespace fieldflow::langtest
