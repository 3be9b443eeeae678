// Tuples nest: an operator returns (value, (lower, upper)), which is passed on, chosen from by
// where / concat_where / astype element by element, and written to a nested tuple of outputs. A
// tuple parameter (tuple_field) is one argument holding several fields.
#include "fieldflow/dsl.h"
#include "fieldflow/reference.h"

using namespace fieldflow;

// (mean of the two neighbours, (smaller one, larger one))
Expr neighbour_stats(const Expr& f, const Dimension& I) {
  const Expr l = f(I - 1), r = f(I + 1);
  return make_tuple({0.5 * (l + r), make_tuple({minimum(l, r), maximum(l, r)})});
}

void bounded_means(Field& u, Field& v, Field& mean, Field& lo, Field& hi, Field& rounded_lo, Field& rounded_hi, int n) {
  const Dimension I = horizontal_dim("I");
  ProgramBuilder p("bounded_means");
  Expr uv = p.tuple_field("uv", {{{I}, DType::float64}, {{I}, DType::float64}});  // params "uv.0", "uv.1"
  Expr m = p.field("mean", {I}, DType::float64), l = p.field("lo", {I}, DType::float64);
  Expr h = p.field("hi", {I}, DType::float64);
  Expr rounded = p.tuple_field("rounded", {{{I}, DType::int32}, {{I}, DType::int32}});
  Expr N = p.scalar("n", DType::int32);
  const Expr own = uv[0] - uv[1];
  const Expr stats = neighbour_stats(own, I);  // (mean, (lo, hi))
  // The first point has no left neighbour: its own value stands in for all three there.
  const Expr chosen = concat_where(I == 0, make_tuple({own, make_tuple({own, own})}), stats);
  p.call("stats", chosen, {m, make_tuple({l, h})}, {{I, 0, N - 1}});
  p.call("round", astype(chosen[1], DType::int32), {rounded}, {{I, 0, N - 1}});  // both bounds, truncated
  run_reference(p.build(), Arguments()
                               .tuple("uv", {&u, &v}).field("mean", mean).field("lo", lo)
                               .field("hi", hi).tuple("rounded", {&rounded_lo, &rounded_hi}).scalar("n", n));
}
