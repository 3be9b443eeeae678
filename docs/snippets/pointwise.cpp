// Pointwise building blocks: math builtins, comparisons and logical operators, where, astype,
// index, and labels (named / materialize never change a result).
#include "fieldflow/dsl.h"

using namespace fieldflow;

// Saturation vapour pressure over water (hPa), T in kelvin.
Expr saturation_pressure(const Expr& T) { return 6.112 * exp(17.67 * (T - 273.15) / (T - 29.65)); }

ir::Program pointwise_program() {
  const Dimension I = horizontal_dim("I"), K = vertical_dim("K");
  ProgramBuilder p("pointwise");
  Expr T = p.field("T", {I, K}, DType::float32), q = p.field("q", {I, K}, DType::float32);
  Expr rh = p.field("rh", {I, K}, DType::float32), cloudy = p.field("cloudy", {I, K}, DType::boolean);
  Expr height = p.field("height", {I, K}, DType::float32);
  const Expr es = materialize("es", saturation_pressure(T));  // a compiled program stores it
  const Expr ratio = named("ratio", q * 1013.25 / (0.622 * es));
  const Expr valid = ~isnan(ratio) & (T > 200) & (T < 330);  // ~: ! before & draws a GCC warning
  p.call("humidity", make_tuple({where(valid, minimum(maximum(ratio, 0), 1), 0.0), valid & (ratio > 0.95)}),
         {rh, cloudy}, {{I, 0, 8}, {K, 0, 4}});
  // A [K] value written to an [I, K] output: every column gets the same levels.
  p.call("height", 250 * sqrt(astype(index(K), DType::float32) + 0.5), {height}, {{I, 0, 8}, {K, 0, 4}});
  return p.build();
}
