// concat_where on a band of levels: comparisons combined with & (and | and ~), bounds clamped
// with maximum/minimum. The branch reading q(K - 1) and q(K + 1) is evaluated only inside the band,
// so q needs no level outside [0, nk).
#include "fieldflow/dsl.h"

using namespace fieldflow;

ir::Program band_program() {
  const Dimension I = horizontal_dim("I"), K = vertical_dim("K");
  ProgramBuilder p("band");
  Expr q = p.field("q", {I, K}, DType::float64), out = p.field("out", {I, K}, DType::float64);
  Expr nk = p.scalar("nk", DType::int32);
  const IndexCondition band = (maximum(2, nk - 6) <= K) & (K < nk - 1);  // GT4Py: max(2, nk-6) <= K < nk-1
  p.call("smooth", concat_where(band, (q(K - 1) + q(K + 1)) / 2, q), {out}, {{I, 0, 4}, {K, 0, nk}});
  return p.build();
}
