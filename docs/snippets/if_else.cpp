// if/else on a runtime bool scalar: if_(flag, a, b) picks one expression per call (both are
// evaluated, like where). Chained if_s read like an if / else-if cascade.
#include "fieldflow/dsl.h"
#include "fieldflow/reference.h"

using namespace fieldflow;

Expr advect(const Expr& q, const Expr& c, const Dimension& I, const Expr& upwind, const Expr& order) {
  const Expr first_order = if_(c > 0, c * (q - q(I - 1)), c * (q(I + 1) - q));
  const Expr centred = 0.5 * c * (q(I + 1) - q(I - 1));
  return if_(upwind, first_order, if_(order == 2, centred, 0.0));
}

double advect_at(Field& q, double c, bool upwind, int order, int i) {
  const Dimension I = horizontal_dim("I");
  ProgramBuilder p("advect");
  Expr Q = p.field("q", {I}, DType::float64), out = p.field("out", {I}, DType::float64);
  Expr C = p.scalar("c", DType::float64), up = p.scalar("upwind", DType::boolean);
  Expr ord = p.scalar("order", DType::int32);
  p.call("advect", advect(Q, C, I, up, ord), {out}, {{I, 1, i + 1}});
  Field result({I}, DType::float64, {i + 1});
  run_reference(p.build(), Arguments()
                               .field("q", q).field("out", result).scalar("c", c)
                               .scalar("upwind", upwind).scalar("order", order));
  return result.at<double>({i});
}
