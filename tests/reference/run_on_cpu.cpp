// test_reference_cpu: the language suite through the compiled CPU backend (run_program.h). Same
// results bit for bit as the reference, or the same kind of error, on the serial path and on the
// parallel path at 2, 3 and 4 threads.
#include "reference/run_program.h"

#include <gtest/gtest.h>

#include <cstring>
#include <exception>
#include <list>
#include <typeinfo>

#include "support/backend_harness.h"

namespace fieldflow::langtest {

double math_library_tolerance(DType) { return 0; }

Backend suite_backend() { return Backend::cpu; }

void run_program(const ir::Program& p, const Arguments& args) {
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

}  // namespace fieldflow::langtest
