// ProgramBuilder: declares parameters and appends verified operator calls.
#include <fmt/format.h>

#include "fieldflow/dsl.h"
#include "fieldflow/errors.h"

namespace fieldflow {

ir::SymExpr to_symbolic_bound(const Expr& x, std::string_view what);  // expr_builder.cpp

ProgramBuilder::ProgramBuilder(std::string name) {
  if (name.empty()) throw ProgramError("program: expected a name, given an empty string");
  program_.name = std::move(name);
}

Expr ProgramBuilder::field(const std::string& name, std::vector<Dimension> dims, DType dtype) {
  if (program_.find(name))
    throw ProgramError(fmt::format("program '{}': parameter '{}' declared twice", program_.name, name));
  auto sorted = ir::canonical_dims(dims);
  if (sorted.size() != dims.size())
    throw DimensionError(fmt::format("program '{}': field '{}' lists a dimension twice", program_.name, name));
  ir::Param p{name, ir::ParamKind::field, ir::Type{dtype, sorted, {}}, {}};
  program_.params.push_back(p);
  auto e = std::make_shared<ir::Expr>();
  e->kind = ir::ExprKind::field_ref;
  e->type = p.type;
  e->name = name;
  return Expr(e);
}

Expr ProgramBuilder::scalar(const std::string& name, DType dtype) {
  if (program_.find(name))
    throw ProgramError(fmt::format("program '{}': parameter '{}' declared twice", program_.name, name));
  program_.params.push_back({name, ir::ParamKind::scalar, ir::Type{dtype, {}, {}}, {}});
  auto e = std::make_shared<ir::Expr>();
  e->kind = ir::ExprKind::scalar_ref;
  e->type = ir::Type{dtype, {}, {}};
  e->name = name;
  return Expr(e);
}

void ProgramBuilder::connectivity(const Connectivity& c) {
  if (const ir::Param* p = program_.find(c.name)) {
    if (p->kind != ir::ParamKind::connectivity || !(p->conn == c))
      throw ProgramError(fmt::format("program '{}': '{}' is already a different parameter", program_.name, c.name));
    return;
  }
  program_.params.push_back({c.name, ir::ParamKind::connectivity, {}, c});
}

void ProgramBuilder::call(const std::string& op, const Expr& value, std::vector<Expr> outputs,
                          std::vector<Bound> domain) {
  ir::Stmt st;
  st.op = op;
  st.expr = value.node();
  for (const Expr& o : outputs) {
    if (o.node()->kind != ir::ExprKind::field_ref)
      throw ProgramError(fmt::format("program '{}', call '{}': outputs must be field parameters, given {}",
                                     program_.name, op, ir::print(*o.node())));
    st.outputs.push_back(o.node()->name);
  }
  for (const Bound& b : domain) {
    const std::string what = fmt::format("program '{}', call '{}', domain of {}", program_.name, op, b.dim.name);
    st.domain.push_back({b.dim, to_symbolic_bound(b.lo, what), to_symbolic_bound(b.hi, what)});
  }
  // Connectivities the value uses become parameters, so callers pass their tables by name.
  for (const ir::Expr* e : ir::post_order(st.expr))
    if (e->kind == ir::ExprKind::neighbor_shift || e->kind == ir::ExprKind::reduce) connectivity(e->conn);
  // Verify now, so a bad call is reported where it is written, and keep the program unchanged.
  ir::Program candidate = program_;
  candidate.stmts.push_back(st);
  ir::verify(candidate);
  program_ = std::move(candidate);
}

ir::Program ProgramBuilder::build() const {
  if (program_.stmts.empty())
    throw ProgramError(fmt::format("program '{}': expected at least one call, given none", program_.name));
  ir::verify(program_);
  return program_;
}

}  // namespace fieldflow
