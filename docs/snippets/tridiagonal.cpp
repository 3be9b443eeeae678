// A tridiagonal solve in every column, a x[k-1] + b x[k] + c x[k+1] = d (Thomas algorithm): a
// forward scan carrying the tuple (c', d'), then a backward scan computing x from the top down.
#include "fieldflow/dsl.h"

using namespace fieldflow;

Expr tridiagonal_solve(const Expr& a, const Expr& b, const Expr& c, const Expr& d) {
  const Expr cd = scan("forward_sweep", ScanDirection::forward, {Scalar(0.0), Scalar(0.0)},
                       [](const Expr& prev, const std::vector<Expr>& in) {
                         const Expr m = in[1] - in[0] * prev[0];  // b - a c'(k-1)
                         return make_tuple({in[2] / m, (in[3] - in[0] * prev[1]) / m});
                       },
                       {a, b, c, d});
  return scan("back_substitution", ScanDirection::backward, {Scalar(0.0)},
              [](const Expr& x, const std::vector<Expr>& in) { return in[1] - in[0] * x; },  // d' - c' x(k+1)
              {cd[0], cd[1]});
}

ir::Program tridiagonal_program() {
  const Dimension I = horizontal_dim("I"), K = vertical_dim("K");
  ProgramBuilder p("tridiagonal");
  Expr a = p.field("a", {I, K}, DType::float64), b = p.field("b", {I, K}, DType::float64);
  Expr c = p.field("c", {I, K}, DType::float64), d = p.field("d", {I, K}, DType::float64);
  Expr x = p.field("x", {I, K}, DType::float64);
  Expr ni = p.scalar("ni", DType::int32), nk = p.scalar("nk", DType::int32);
  p.call("solve", tridiagonal_solve(a, b, c, d), {x}, {{I, 0, ni}, {K, 0, nk}});
  return p.build();
}
