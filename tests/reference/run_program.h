#pragma once
// One test body, two backends: the language tests call run_program(), which is the reference
// executor in test_reference and, in test_reference_cpu (built from the same sources with
// FIELDFLOW_TEST_CPU_BACKEND), the compiled CPU backend checked against the reference: same
// results bit for bit, or the same kind of error, on the serial path and on the parallel path at
// 2, 3 and 4 threads.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <list>
#include <typeinfo>

#include "fieldflow/compile.h"
#include "fieldflow/reference.h"
#include "support/backend_harness.h"

#ifdef FIELDFLOW_TEST_CUDA_BACKEND
#include "support/cuda_harness.h"
#endif

namespace fieldflow::langtest {

// The relative tolerance (matches' rel_tol) of results of the math library's functions (exp,
// sin, pow, ...) that a test checks itself: 0, exact, unless its outputs came from a GPU
// (test_reference_cuda on a device with FIELDFLOW_TEST_NO_EMULATION, as scripts/gpu-check.sh
// runs it), whose math library is not the host's libm (support/cuda_harness.h, device_math_ulps).
inline double math_library_tolerance(DType dt) {
#if defined(FIELDFLOW_TEST_CUDA_BACKEND)
  if (testing_support::device_present() && std::getenv("FIELDFLOW_TEST_NO_EMULATION") != nullptr)
    return static_cast<double>(testing_support::device_math_ulps) *
           (dt == DType::float32 ? std::numeric_limits<float>::epsilon() : std::numeric_limits<double>::epsilon());
#endif
  (void)dt;
  return 0;
}

#if defined(FIELDFLOW_TEST_CUDA_BACKEND)

// test_reference_cuda: the CUDA kernels of each program run under host emulation (no device
// needed) and are compared with the reference like the CPU backend; each program's CUDA source is
// also compiled with NVRTC, all of them in one batch when the run ends (support/cuda_harness.h).
inline void run_program(const ir::Program& p, const Arguments& args) {
  testing_support::compare_cuda_emulation_with_reference(p, args);
}

#elif !defined(FIELDFLOW_TEST_CPU_BACKEND)

inline void run_program(const ir::Program& p, const Arguments& args) { run_reference(p, args); }

#else

inline void run_program(const ir::Program& p, const Arguments& args) {
  using testing_support::copy_arguments;
  // The reference runs on copies of every field first, so both start from the same data.
  const testing_support::ReferenceOutcome ref = testing_support::run_reference_on_copies(p, args);
  const auto& pairs = ref.pairs;
  const std::type_info* ref_error = ref.error;
  const std::exception_ptr ref_exception = ref.exception;
  // Compiled for the layout the test's fields use (the reference accepts any layout). A compiled
  // variant has one layout: fields of mixed layouts are refused with a LayoutError, and then only
  // the reference's results can be checked.
  CompileOptions options;
  const std::optional<Layout> layout = testing_support::common_layout(args);
  const bool mixed = !layout;
  if (layout) options.layout = *layout;
  if (mixed) {
    EXPECT_THROW(compile(p, options)(args), LayoutError) << "fields of mixed layouts must be refused";
    run_reference(p, args);
    return;
  }
  // The parallel path (threads started however small the call), at thread counts that split the
  // work evenly and unevenly, on copies: the same bits or the same kind of error.
  for (int threads : {2, 3, 4}) {
    CompileOptions parallel = options;
    parallel.num_threads = threads;
    parallel.parallel_threshold = 0;
    std::list<Field> mine;
    std::vector<std::pair<const Field*, const Field*>> my_pairs;
    Arguments my_args = copy_arguments(args, mine, my_pairs);
    try {
      compile(p, parallel)(my_args);
      EXPECT_EQ(ref_error, nullptr) << "the reference raised an error but the compiled backend at " << threads
                                    << " threads succeeded";
      for (std::size_t f = 0; f < pairs.size() && !ref_error; ++f)
        EXPECT_EQ(std::memcmp(my_pairs[f].second->data(), pairs[f].second->data(), pairs[f].second->bytes()), 0)
            << "compiled result at " << threads << " threads differs from the reference in field "
            << pairs[f].first->describe();
    } catch (const Error& e) {
      EXPECT_TRUE(ref_error && *ref_error == typeid(e))
          << "compiled backend at " << threads << " threads raised " << typeid(e).name() << " (" << e.what() << ")";
    }
  }
  try {
    compile(p, options)(args);
  } catch (const Error& e) {
    EXPECT_TRUE(ref_error && *ref_error == typeid(e))
        << "compiled backend raised " << typeid(e).name() << " (" << e.what() << ") but the reference "
        << (ref_error ? std::string("raised ") + ref_error->name() : std::string("succeeded"));
    // Same kind of error: the test checks the reference's wording, which names the exact point.
    if (ref_exception) std::rethrow_exception(ref_exception);
    throw;
  }
  EXPECT_EQ(ref_error, nullptr) << "the reference raised " << (ref_error ? ref_error->name() : "")
                                << " but the compiled backend succeeded";
  for (const auto& [cpu, ref] : pairs)
    EXPECT_EQ(std::memcmp(cpu->data(), ref->data(), cpu->bytes()), 0)
        << "compiled result differs from the reference in field " << cpu->describe();
}

#endif

}  // namespace fieldflow::langtest
