// Vertical stencils: K shifts, concat_where choosing one-sided differences at the bottom and top
// levels (the other branch is never evaluated there), and a dynamic K offset from an int field.
#include "fieldflow/dsl.h"

using namespace fieldflow;

ir::Program vertical_program() {
  const Dimension I = horizontal_dim("I"), K = vertical_dim("K");
  ProgramBuilder p("vertical");
  Expr q = p.field("q", {I, K}, DType::float64);
  Expr lev = p.field("lev", {I, K}, DType::int32);  // relative level to read from
  Expr nk = p.scalar("nk", DType::int32);
  Expr dq = p.field("dq", {I, K}, DType::float64), g = p.field("g", {I, K}, DType::float64);
  const Expr centred = (q(K + 1) - q(K - 1)) / 2;
  p.call("dq", concat_where(K == 0, q(K + 1) - q, concat_where(K >= nk - 1, q - q(K - 1), centred)), {dq},
         {{I, 0, 4}, {K, 0, nk}});
  p.call("gather", q(K + lev), {g}, {{I, 0, 4}, {K, 0, nk}});
  return p.build();
}
