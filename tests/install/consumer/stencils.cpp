// The consumer's own program, for its ahead-of-time library (fieldflow_add_library in CMakeLists.txt).
#include <fieldflow/aot.h>
#include <fieldflow/dsl.h>

FIELDFLOW_AOT_PROGRAMS(programs) {
  using namespace fieldflow;
  const Dimension I = horizontal_dim("I");
  ProgramBuilder pb("twice");
  Expr a = pb.field("a", {I}, DType::float64), b = pb.field("b", {I}, DType::float64);
  pb.call("twice", a * 2.0, {b}, {{I, 0, 3}});
  programs.add(pb.build());
}
