// A field with a halo (non-zero origin), a domain from a scalar parameter, a second call reading
// the first one's output, and an in/out argument (its update reads the old values).
#include "fieldflow/dsl.h"
#include "fieldflow/reference.h"

using namespace fieldflow;

void diffuse(Field& u, Field& flux, int n) {
  const Dimension I = horizontal_dim("I");
  ProgramBuilder p("diffuse");
  Expr U = p.field("u", {I}, DType::float64), F = p.field("flux", {I}, DType::float64);
  Expr N = p.scalar("n", DType::int32);
  p.call("flux", U - U(I - 1), {F}, {{I, 0, N + 1}});              // reads u on [-1, n + 1)
  p.call("update", U + 0.25 * (F(I + 1) - F), {U}, {{I, 0, N}});  // u is read and written
  run_reference(p.build(), Arguments().field("u", u).field("flux", flux).scalar("n", n));
}

double diffuse_example() {
  const Dimension I = horizontal_dim("I");
  const int n = 8;
  Field u({I}, DType::float64, {n + 2}, {-1});  // covers [-1, n + 1): one halo point per side
  Field flux({I}, DType::float64, {n + 1});     // covers [0, n + 1)
  u.at<double>({n / 2}) = 1.0;
  diffuse(u, flux, n);  // u(-1) and u(n), the halo, are only read
  return u.at<double>({n / 2});  // 0.5 = 1 + 0.25 * (0 - 2 * 1 + 0)
}
