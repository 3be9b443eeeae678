// Structural verification of a whole program. The DSL already type-checks every node as it is
// built; this re-checks what only the whole program knows (names resolve to parameters of the
// right kind and type, outputs match values and domains) and guards passes that rewrite the IR.
#include <fmt/format.h>
#include <set>

#include "fieldflow/errors.h"
#include "fieldflow/ir.h"

namespace fieldflow::ir {

namespace {

std::string dim_names(const std::vector<Dimension>& dims) {
  std::string s;
  for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + dims[i].name;
  return s;
}

void verify_expr(const Program& p, const Stmt& st, const ExprPtr& root) {
  const std::string where_ = fmt::format("program '{}', call '{}'", p.name, st.op);
  for (const Expr* e : post_order(root)) {
    switch (e->kind) {
      case ExprKind::field_ref: {
        const Param* prm = p.find(e->name);
        if (!prm || prm->kind != ParamKind::field)
          throw ProgramError(fmt::format("{}: reads '{}', which is not a field parameter of the program", where_, e->name));
        if (!(prm->type == e->type))
          throw ProgramError(fmt::format("{}: reads '{}' as {}, but the parameter is declared {}", where_, e->name,
                                         e->type.to_string(), prm->type.to_string()));
        break;
      }
      case ExprKind::scalar_ref: {
        const Param* prm = p.find(e->name);
        if (!prm || prm->kind != ParamKind::scalar || prm->type.dtype != e->type.dtype)
          throw ProgramError(fmt::format("{}: reads scalar '{}', which is not a {} scalar parameter of the program",
                                         where_, e->name, to_string(e->type.dtype)));
        break;
      }
      case ExprKind::neighbor_shift:
      case ExprKind::reduce: {
        const Param* prm = p.find(e->conn.name);
        if (!prm || prm->kind != ParamKind::connectivity || !(prm->conn == e->conn))
          throw ProgramError(fmt::format("{}: uses connectivity '{}', which is not a matching connectivity parameter",
                                         where_, e->conn.name));
        break;
      }
      case ExprKind::tuple_get:
        // The DSL selects an element of any other tuple as its own expression (where, labels,
        // ...: frontend/expr_builder.cpp), and the passes rely on it: they find a kernel's scans
        // by walking what it reads, and the unread elements of a tuple kept whole are not walked.
        if (e->args[0]->kind != ExprKind::scan)
          throw ProgramError(fmt::format("{}: reads element {} of a {} of type {}; expected an element of a tuple "
                                         "scan (select the elements of other tuples before combining them)",
                                         where_, e->offset, to_string(e->args[0]->kind), e->args[0]->type.to_string()));
        break;
      case ExprKind::concat_where:
        for (const auto& sym : e->bound.parameters()) {
          const Param* prm = p.find(sym);
          if (!prm || prm->kind != ParamKind::scalar || !is_integral(prm->type.dtype))
            throw ProgramError(fmt::format("{}: bound uses '{}', which is not an int scalar parameter", where_, sym));
        }
        break;
      default:
        break;
    }
  }
}

void verify_bound(const Program& p, const Stmt& st, const SymExpr& b) {
  for (const auto& sym : b.parameters()) {
    const Param* prm = p.find(sym);
    if (!prm || prm->kind != ParamKind::scalar || !is_integral(prm->type.dtype))
      throw ProgramError(fmt::format("program '{}', call '{}': domain bound uses '{}', which is not an int scalar "
                                     "parameter", p.name, st.op, sym));
  }
}

}  // namespace

void verify(const Program& p) {
  std::set<std::string> names;
  for (const Param& prm : p.params) {
    if (prm.name.empty()) throw ProgramError(fmt::format("program '{}': a parameter has no name", p.name));
    if (!names.insert(prm.name).second)
      throw ProgramError(fmt::format("program '{}': parameter '{}' declared twice", p.name, prm.name));
    if (prm.kind == ParamKind::field && prm.type.dims != canonical_dims(prm.type.dims))
      throw DimensionError(fmt::format("program '{}': field '{}' has repeated or unordered dimensions [{}]", p.name,
                                       prm.name, dim_names(prm.type.dims)));
  }
  for (const Stmt& st : p.stmts) {
    const std::string where_ = fmt::format("program '{}', call '{}'", p.name, st.op);
    if (!st.expr) throw ProgramError(fmt::format("{}: no value", where_));
    if (st.outputs.empty()) throw ProgramError(fmt::format("{}: expected at least one output, given none", where_));
    const Type& t = st.expr->type;
    const std::size_t n_values = t.is_tuple() ? t.elements.size() : 1;
    if (n_values != st.outputs.size())
      throw ProgramError(fmt::format("{}: the value has {} element(s) ({}) but {} output(s) were given", where_,
                                     n_values, t.to_string(), st.outputs.size()));
    std::set<std::string> outs;
    for (std::size_t i = 0; i < st.outputs.size(); ++i) {
      const Param* out = p.find(st.outputs[i]);
      if (!out || out->kind != ParamKind::field)
        throw ProgramError(fmt::format("{}: output '{}' is not a field parameter", where_, st.outputs[i]));
      if (!outs.insert(st.outputs[i]).second)
        throw ProgramError(fmt::format("{}: output '{}' given twice", where_, st.outputs[i]));
      const Type& vt = t.is_tuple() ? t.elements[i] : t;
      if (vt.dtype != out->type.dtype)
        throw DTypeError(fmt::format("{}: output '{}' is {} but the value is {}; convert with astype", where_,
                                     out->name, to_string(out->type.dtype), to_string(vt.dtype)));
      for (const auto& d : vt.dims)
        if (!out->type.has(d))
          throw DimensionError(fmt::format("{}: the value has dims [{}] but output '{}' has [{}]", where_,
                                           dim_names(vt.dims), out->name, dim_names(out->type.dims)));
      std::vector<Dimension> dom;
      for (const auto& r : st.domain) dom.push_back(r.dim);
      if (canonical_dims(dom) != out->type.dims || dom.size() != out->type.dims.size())
        throw DimensionError(fmt::format("{}: the domain is over [{}] but output '{}' has dims [{}]", where_,
                                         dim_names(dom), out->name, dim_names(out->type.dims)));
    }
    for (const auto& r : st.domain) {
      verify_bound(p, st, r.lo);
      verify_bound(p, st, r.hi);
    }
    verify_expr(p, st, st.expr);
  }
}

}  // namespace fieldflow::ir
