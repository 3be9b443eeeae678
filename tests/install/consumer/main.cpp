// A program outside fieldflow's tree, built against the installed package: the exported target,
// its public headers, the shared library and the CMake functions for ahead-of-time libraries must
// be enough. Exits 0 only on the right results.
#include <fieldflow/aot.h>
#include <fieldflow/dsl.h>
#include <fieldflow/examples.h>
#include <fieldflow/reference.h>

#include <cstdio>
#include <cstring>

#include "fieldflow_aot_consumer_examples_c2e2co_sum.h"
#include "fieldflow_aot_consumer_examples_vadv.h"
#include "fieldflow_aot_consumer_stencils_twice.h"

namespace {

// The AOT program (from `fieldflow aot`) against the reference executor, every field bit for bit.
bool same_as_reference(const ff_aot_program* descriptor, const char* name) {
  using namespace fieldflow;
  const auto& ex = examples::example(name);
  CompileOptions options;
  options.layout = Layout::horizontal_fastest;
  options.parallel_threshold = 0;
  CompiledProgram program = load_aot(descriptor, options);
  auto ref = ex.make_instance({11, 9, 6}, program.layout(), 2), got = ex.make_instance({11, 9, 6}, program.layout(), 2);
  run_reference(ex.program, ref.arguments());
  program(got.arguments());
  for (auto& [field_name, field] : ref.fields)
    if (std::memcmp(field.data(), got.fields.at(field_name).data(), field.bytes()) != 0) {
      std::printf("%s.%s differs from the reference\n", name, field_name.c_str());
      return false;
    }
  return true;
}

}  // namespace

int main() {
  using namespace fieldflow;
  const Dimension I = horizontal_dim("I");
  ProgramBuilder pb("twice");
  Expr a = pb.field("a", {I}, DType::float64), b = pb.field("b", {I}, DType::float64);
  pb.call("twice", a * 2.0, {b}, {{I, 0, 3}});
  Field fa({I}, DType::float64, {3}), fb({I}, DType::float64, {3}), fc({I}, DType::float64, {3});
  fa.fill(1.5);
  Arguments args;
  args.field("a", fa).field("b", fb);
  run_reference(pb.build(), args);
  // The same program from the consumer's AOT library.
  CompiledProgram twice = load_aot(fieldflow_aot_consumer_stencils_twice(), CompileOptions{});
  twice(Arguments().field("a", fa).field("b", fc));
  const bool ok = fb.at<double>({2}) == 3.0 && fc.at<double>({2}) == 3.0 &&
                  same_as_reference(fieldflow_aot_consumer_examples_vadv(), "vadv") &&
                  same_as_reference(fieldflow_aot_consumer_examples_c2e2co_sum(), "c2e2co_sum");
  return ok ? 0 : 1;
}
