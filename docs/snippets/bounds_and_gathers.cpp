// Domain bounds need not be affine: `n / 2` (and *, //, %, minimum, maximum of int scalars) is
// evaluated for each call's sizes. Dynamic offsets work along horizontal dimensions too: `f(I +
// perm)` reads f at i + perm(i), checked against f's extent.
#include "fieldflow/dsl.h"
#include "fieldflow/reference.h"

using namespace fieldflow;

// out(i) = f(mirror(i)) on the upper half [n / 2, n) of the grid, where mirror(i) = n - 1 - i.
void mirror_upper_half(Field& f, Field& out, int n) {
  const Dimension I = horizontal_dim("I");
  ProgramBuilder p("mirror");
  Expr F = p.field("f", {I}, DType::float64), o = p.field("out", {I}, DType::float64);
  Expr N = p.scalar("n", DType::int32);
  const Expr offset = (N - 1 - index(I)) - index(I);  // an int32 field over [I]: mirror(i) - i
  p.call("mirror", F(I + offset), {o}, {{I, N / 2, N}});
  run_reference(p.build(), Arguments().field("f", f).field("out", out).scalar("n", n));
}
