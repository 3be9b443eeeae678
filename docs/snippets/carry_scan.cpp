// A scan whose only state is its carry: no input fields, so it names the dimension it sweeps.
// Its value is a column over [K]; the call writes it to every column of its [I, K] output, over
// the call's K range (here the reference pressure of an atmosphere thinning by 10% per level).
#include "fieldflow/dsl.h"
#include "fieldflow/reference.h"

using namespace fieldflow;

void reference_pressure(Field& p_ref, int nk) {
  const Dimension I = horizontal_dim("I"), K = vertical_dim("K");
  ProgramBuilder p("reference_pressure");
  Expr out = p.field("p_ref", {I, K}, DType::float64);
  Expr ni = p.scalar("ni", DType::int32), levels = p.scalar("nk", DType::int32);
  const Expr column = scan("thin_out", ScanDirection::forward, {Scalar(1000.0 / 0.9)},
                           [](const Expr& above, const std::vector<Expr>&) { return above * 0.9; }, K);
  p.call("p_ref", column, {out}, {{I, 0, ni}, {K, 0, levels}});  // level 0: 1000 hPa
  run_reference(p.build(), Arguments().field("p_ref", p_ref).scalar("ni", p_ref.shape()[0]).scalar("nk", nk));
}
