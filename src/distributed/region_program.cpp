// Statement domains bounded by call-time region parameters (see region_program.h).
#include "distributed/region_program.h"

#include <fmt/format.h>

#include <algorithm>

#include "fieldflow/errors.h"

namespace fieldflow::distributed::detail {

RegionProgram with_region_bounds(const ir::Program& p, const std::vector<Dimension>& decomposed) {
  RegionProgram out;
  out.program = p;
  for (std::size_t s = 0; s < p.stmts.size(); ++s) {
    for (auto& range : out.program.stmts[s].domain) {
      if (std::find(decomposed.begin(), decomposed.end(), range.dim) == decomposed.end()) continue;
      RegionBound b{static_cast<int>(s), range.dim, fmt::format("ff_region_lo_{}_{}", s, range.dim.name),
                    fmt::format("ff_region_hi_{}_{}", s, range.dim.name), range.lo, range.hi};
      for (const auto& name : {b.lo_param, b.hi_param}) {
        if (p.find(name))
          throw ProgramError(fmt::format("program '{}': parameter '{}' is reserved for distributed calls", p.name, name));
        ir::Param prm;
        prm.name = name;
        prm.kind = ir::ParamKind::scalar;
        prm.type.dtype = DType::int32;
        out.program.params.push_back(prm);
      }
      range.lo = ir::SymExpr::symbol(b.lo_param);
      range.hi = ir::SymExpr::symbol(b.hi_param);
      out.bounds.push_back(std::move(b));
    }
  }
  // A later statement reading an earlier one's output elsewhere than at its own point would need
  // that output's halo between the two statements.
  for (std::size_t s = 1; s < p.stmts.size(); ++s)
    for (const ir::Expr* e : ir::post_order(p.stmts[s].expr)) {
      if (e->kind != ir::ExprKind::shift && e->kind != ir::ExprKind::neighbor_shift) continue;
      if (e->kind == ir::ExprKind::shift && e->dim.kind != DimKind::horizontal) continue;
      for (const ir::Expr* x : ir::post_order(e->args[0]))
        if (x->kind == ir::ExprKind::field_ref)
          for (std::size_t w = 0; w < s; ++w)
            for (const auto& o : p.stmts[w].outputs)
              if (o == x->name)
                throw ProgramError(fmt::format("program '{}': call '{}' reads '{}', written by call '{}', at other "
                                               "points than its own; distributed, that needs a halo exchange "
                                               "between the two calls: split the program there",
                                               p.name, p.stmts[s].op, o, p.stmts[w].op));
    }
  return out;
}

}  // namespace fieldflow::distributed::detail
