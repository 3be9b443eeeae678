// The generator file of an ahead-of-time library: its programs, written with the DSL and
// registered by name. Built into the generator (at build time) and into the library (load_aot
// rebuilds each program from it, without a compiler).
#include <fieldflow/aot.h>
#include <fieldflow/dsl.h>

using namespace fieldflow;

FIELDFLOW_AOT_PROGRAMS(programs) {
  const Dimension I = horizontal_dim("I"), K = vertical_dim("K");
  ProgramBuilder p("smooth");
  Expr u = p.field("u", {I, K}, DType::float64), out = p.field("out", {I, K}, DType::float64);
  Expr ni = p.scalar("ni", DType::int32), nk = p.scalar("nk", DType::int32);
  p.call("smooth", 0.25 * u(I - 1) + 0.5 * u + 0.25 * u(I + 1), {out}, {{I, 1, ni - 1}, {K, 0, nk}});
  programs.add(p.build());
}
