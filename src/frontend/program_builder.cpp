// ProgramBuilder: declares parameters and appends verified operator calls.
#include <algorithm>
#include <fmt/format.h>
#include <functional>

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

Expr ProgramBuilder::tuple_field(const std::string& name, std::vector<FieldSpec> elements) {
  if (elements.empty())
    throw ProgramError(fmt::format("program '{}': tuple parameter '{}' needs at least one element, given none",
                                   program_.name, name));
  const bool taken = program_.find(name) || std::any_of(program_.params.begin(), program_.params.end(), [&](const ir::Param& q) {
    return q.name.rfind(name + ".", 0) == 0;  // an earlier tuple parameter of this name
  });
  if (taken) throw ProgramError(fmt::format("program '{}': parameter '{}' declared twice", program_.name, name));
  // Checked before any element is declared, so a rejected tuple leaves the builder unchanged.
  for (std::size_t i = 0; i < elements.size(); ++i)
    if (program_.find(fmt::format("{}.{}", name, i)))
      throw ProgramError(fmt::format("program '{}': parameter '{}.{}' declared twice", program_.name, name, i));
  const ir::Program before = program_;
  std::vector<Expr> fields;
  try {
    for (std::size_t i = 0; i < elements.size(); ++i)
      fields.push_back(field(fmt::format("{}.{}", name, i), elements[i].dims, elements[i].dtype));
  } catch (...) {
    program_ = before;
    throw;
  }
  return make_tuple(fields);
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
  // A nested tuple value is written as its leaves, one output each: the statement gets the flat
  // tuple of them (nesting is all make_tuple, see make_tuple), so passes and backends see flat tuples.
  const bool nested_value = std::any_of(value.type().elements.begin(), value.type().elements.end(),
                                        [](const ir::Type& e) { return e.is_tuple(); });
  if (nested_value) {
    std::vector<Expr> leaves;
    std::function<void(const Expr&)> collect = [&](const Expr& x) {
      if (!x.type().is_tuple()) return leaves.push_back(x);
      for (int i = 0; i < static_cast<int>(x.type().elements.size()); ++i) collect(x[i]);
    };
    collect(value);
    st.expr = make_tuple(leaves).node();
  }
  // A one-element tuple (a one-field tuple parameter, make_tuple of one value) is written as its
  // element: passes and backends take a statement's value to be a tuple exactly when it has
  // several outputs.
  if (Expr flat(st.expr); flat.type().is_tuple() && flat.type().elements.size() == 1) st.expr = flat[0].node();
  // Outputs may be tuples of fields (nested, or a tuple parameter): they stand for their leaves in
  // depth-first order, like the value's components; the structure must match the value's.
  std::function<void(const ir::ExprPtr&)> add_output = [&](const ir::ExprPtr& o) {
    if (o->kind == ir::ExprKind::make_tuple) {
      for (const auto& a : o->args) add_output(a);
      return;
    }
    if (o->kind != ir::ExprKind::field_ref)
      throw ProgramError(fmt::format("program '{}', call '{}': outputs must be field parameters, given {}",
                                     program_.name, op, ir::print(*o)));
    st.outputs.push_back(o->name);
  };
  for (const Expr& o : outputs) add_output(o.node());
  const bool nested_outputs = std::any_of(outputs.begin(), outputs.end(), [](const Expr& o) { return o.type().is_tuple(); });
  if (nested_outputs || nested_value) {
    // Compare structures: outputs {a, (b, c)} need a value of type (x, (y, z)).
    ir::Type want;
    for (const Expr& o : outputs) want.elements.push_back(o.type());
    if (outputs.size() == 1) want = outputs[0].type();
    std::function<bool(const ir::Type&, const ir::Type&)> same_shape = [&](const ir::Type& a, const ir::Type& b) {
      if (a.is_tuple() && a.elements.size() == 1) return same_shape(a.elements[0], b);  // (x) is x
      if (b.is_tuple() && b.elements.size() == 1) return same_shape(a, b.elements[0]);
      if (a.is_tuple() != b.is_tuple() || a.elements.size() != b.elements.size()) return false;
      for (std::size_t i = 0; i < a.elements.size(); ++i)
        if (!same_shape(a.elements[i], b.elements[i])) return false;
      return true;
    };
    if (!same_shape(want, value.type()))
      throw ProgramError(fmt::format("program '{}', call '{}': the value {} does not have the tuple structure of "
                                     "the outputs {}", program_.name, op, value.type().to_string(), want.to_string()));
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
