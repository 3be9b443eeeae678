// Operators calling operators (plain C++ functions), where, and a tuple written to two outputs.
#include "fieldflow/dsl.h"
#include "fieldflow/reference.h"

using namespace fieldflow;

Expr minmod(const Expr& a, const Expr& b) {
  return where(a * b <= 0, 0.0, where(abs(a) < abs(b), a, b));
}

// (limited slope, is it steeper than threshold?)
Expr limited_slope(const Expr& f, const Dimension& I, const Expr& threshold) {
  const Expr s = minmod(f(I + 1) - f, f - f(I - 1));
  return make_tuple({s, abs(s) > threshold});
}

void slopes(Field& f, Field& slope, Field& steep) {
  const Dimension I = horizontal_dim("I");
  ProgramBuilder p("slopes");
  Expr in = p.field("f", {I}, DType::float64), thr = p.scalar("threshold", DType::float64);
  Expr s = p.field("slope", {I}, DType::float64), st = p.field("steep", {I}, DType::boolean);
  Expr n = p.scalar("n", DType::int32);
  p.call("slopes", limited_slope(in, I, thr), {s, st}, {{I, 1, n - 1}});
  run_reference(p.build(), Arguments()
                               .field("f", f).field("slope", slope).field("steep", steep)
                               .scalar("threshold", 0.5)
                               .scalar("n", f.shape()[0]));  // an int64 value fits the int32 n
}
