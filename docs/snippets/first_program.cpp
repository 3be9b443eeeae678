// A first program: a 5-point Laplacian on the interior of a 2-D grid, run by the reference
// executor. Points of `out` outside the call's domain keep their values.
#include "fieldflow/dsl.h"
#include "fieldflow/reference.h"

using namespace fieldflow;

// A field operator is a plain C++ function from Expr to Expr.
Expr lap5(const Expr& f, const Dimension& I, const Dimension& J) {
  return -4.0 * f + f(I + 1) + f(I - 1) + f(J + 1) + f(J - 1);
}

double first_program() {
  const Dimension I = horizontal_dim("I"), J = horizontal_dim("J");
  ProgramBuilder p("laplacian");
  Expr in = p.field("in", {I, J}, DType::float64);
  Expr out = p.field("out", {I, J}, DType::float64);
  Expr nx = p.scalar("nx", DType::int32), ny = p.scalar("ny", DType::int32);
  p.call("lap", lap5(in, I, J), {out}, {{I, 1, nx - 1}, {J, 1, ny - 1}});
  const ir::Program program = p.build();  // verified; reusable for any nx, ny

  Field a({I, J}, DType::float64, {6, 5}), b({I, J}, DType::float64, {6, 5});  // zero-filled
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 5; ++j) a.at<double>({i, j}) = i * i + 10.0 * j;
  run_reference(program, Arguments().field("in", a).field("out", b).scalar("nx", 6).scalar("ny", 5));
  return b.at<double>({2, 3});  // 2.0 (the Laplacian of i^2 + 10 j); b(0, 0) is still 0
}
