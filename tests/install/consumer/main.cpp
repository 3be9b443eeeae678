// A program outside fieldflow's tree, built against the installed package: the exported target,
// its public headers and the shared library must be enough. Exits 0 only on the right result.
#include <fieldflow/dsl.h>
#include <fieldflow/reference.h>

int main() {
  using namespace fieldflow;
  const Dimension I = horizontal_dim("I");
  ProgramBuilder pb("twice");
  Expr a = pb.field("a", {I}, DType::float64), b = pb.field("b", {I}, DType::float64);
  pb.call("twice", a * 2.0, {b}, {{I, 0, 3}});
  Field fa({I}, DType::float64, {3}), fb({I}, DType::float64, {3});
  fa.fill(1.5);
  Arguments args;
  args.field("a", fa).field("b", fb);
  run_reference(pb.build(), args);
  return fb.at<double>({2}) == 3.0 ? 0 : 1;
}
