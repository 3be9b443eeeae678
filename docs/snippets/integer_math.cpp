// Integer arithmetic as in Python (GT4Py): floor division and a modulo with the sign of the
// divisor, so index arithmetic on a periodic ring needs no case for negative indices; integer
// power; bool xor; and the float builtins cbrt and gamma.
#include "fieldflow/dsl.h"
#include "fieldflow/reference.h"

using namespace fieldflow;

// Every field is over [I] and covers [0, n); x is the input.
void ring(int n, Field& left, Field& lap, Field& pow2, Field& flips, Field& x, Field& cube_root, Field& factorial) {
  const Dimension I = horizontal_dim("I");
  ProgramBuilder p("ring");
  Expr N = p.scalar("n", DType::int32);
  Expr l = p.field("left", {I}, DType::int32), k = p.field("lap", {I}, DType::int32);
  Expr p2 = p.field("pow2", {I}, DType::int64), fl = p.field("flips", {I}, DType::boolean);
  Expr xs = p.field("x", {I}, DType::float64);
  Expr r = p.field("cube_root", {I}, DType::float64), g = p.field("factorial", {I}, DType::float64);
  const Expr i = index(I);
  p.call("ring", make_tuple({(i - 1) % N,               // 0 -> n - 1: the left neighbour wraps around
                             floor_divide(i - 1, N)}),  // -1 at i = 0, else 0 (/ would give 0 everywhere)
         {l, k}, {{I, 0, N}});
  p.call("powers", power(Expr::literal(Scalar(std::int64_t{2})), astype(i, DType::int64)), {p2}, {{I, 0, N}});
  p.call("flips", (i % 2 == 1) ^ (i >= N / 2), {fl}, {{I, 0, N}});  // odd or in the upper half, not both
  p.call("float_builtins", make_tuple({cbrt(xs), gamma(xs + 1)}), {r, g}, {{I, 0, N}});  // gamma(x + 1) = x!
  run_reference(p.build(), Arguments()
                               .scalar("n", n).field("left", left).field("lap", lap).field("pow2", pow2)
                               .field("flips", flips).field("x", x).field("cube_root", cube_root)
                               .field("factorial", factorial));
}
