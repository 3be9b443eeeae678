// Type rules: weak literals adopt the other operand's dtype, everything else must match exactly
// (convert with astype), and dims combine to their union (else broadcast, see the text).
#include <string>
#include <vector>

#include "fieldflow/dsl.h"
#include "fieldflow/errors.h"

using namespace fieldflow;

std::vector<std::string> type_rules() {
  const Dimension I = horizontal_dim("I"), K = vertical_dim("K");
  ProgramBuilder p("types");
  Expr t = p.field("t", {I, K}, DType::float32);
  Expr n = p.field("n", {I, K}, DType::int32);
  Expr col = p.field("col", {K}, DType::float64);
  std::vector<std::string> seen;
  seen.push_back((2.5 * t + 1).type().to_string());                     // float32[I, K]
  seen.push_back((n / 2 > 3).type().to_string());                       // bool[I, K]
  seen.push_back((astype(t, DType::float64) * col).type().to_string());  // float64[I, K]
  seen.push_back(broadcast(col, {I, K}).type().to_string());            // float64[I, K]
  try {
    t * col;  // float32 * float64: no implicit promotion
  } catch (const DTypeError& e) {
    seen.push_back(e.what());  // "operator *: operands of dtype float32 and float64 do not mix; ..."
  }
  try { n * 0.5; } catch (const DTypeError& e) { seen.push_back(e.what()); }  // 0.5 cannot become int32
  return seen;
}
