#pragma once
// A program whose statements run over a region given at call time: every range of a statement's
// domain along a decomposed dimension becomes [lo, hi) of two new int32 scalar parameters. One
// compiled module then serves a rank's whole part, its interior and its border pieces, and the
// runtime's extent inference works out each piece's reads as for any other call.
#include <string>
#include <vector>

#include "fieldflow/ir.h"

namespace fieldflow::distributed::detail {

struct RegionBound {
  int stmt = 0;
  Dimension dim;
  std::string lo_param, hi_param;
  ir::SymExpr original_lo, original_hi;  // the statement's own bounds, in the user's scalars
};

struct RegionProgram {
  ir::Program program;
  std::vector<RegionBound> bounds;
};

// Throws ProgramError when a new parameter's name is taken, or when a statement reads a field
// that an earlier statement writes at any other point than the one it computes (that read would
// need an exchange between the statements).
RegionProgram with_region_bounds(const ir::Program& p, const std::vector<Dimension>& decomposed);

}  // namespace fieldflow::distributed::detail
