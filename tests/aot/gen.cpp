// The generator file of the test libraries (fieldflow_add_library in CMakeLists.txt): four built-in
// examples, whose argument factories the tests reuse, and one program written here with the DSL and
// registered with a static scalar.
#include <string>

#include "fieldflow/aot.h"
#include "fieldflow/dsl.h"
#include "fieldflow/examples.h"

namespace {

fieldflow::ir::Program clipped_scale() {
  using namespace fieldflow;
  const Dimension I = horizontal_dim("I"), K = vertical_dim("K");
  ProgramBuilder p("clipped_scale");
  Expr in = p.field("in", {I, K}, DType::float64), out = p.field("out", {I, K}, DType::float64);
  Expr alpha = p.scalar("alpha", DType::float64), limit = p.scalar("limit", DType::float64);
  Expr ni = p.scalar("ni", DType::int32), nk = p.scalar("nk", DType::int32);
  p.call("clip", where(in > limit, limit, in) * alpha + in(K - 1), {out}, {{I, 0, ni}, {K, 1, nk}});
  return p.build();
}

}  // namespace

FIELDFLOW_AOT_PROGRAMS(programs) {
  for (const std::string name : {"hdiff", "vadv", "fvm_nabla", "c2e2co_sum"})
    programs.add(name, [name] { return fieldflow::examples::example(name).program; });
  programs.add(clipped_scale(), {{"limit", fieldflow::Scalar(0.75)}});
}
