#include "passes/fold_static_scalars.h"

#include <memory>
#include <optional>
#include <unordered_map>

#include "fieldflow/errors.h"

namespace fieldflow::passes {

namespace {

using ir::Expr;
using ir::ExprKind;
using ir::ExprPtr;

ExprPtr literal(const Scalar& v, const ir::Type& type) {
  auto e = std::make_shared<Expr>();
  e->kind = ExprKind::literal;
  e->type = type;
  e->literal = v.cast(type.dtype);
  return e;
}

bool is_literal(const ExprPtr& e) { return e->kind == ExprKind::literal && e->type.dims.empty(); }

// Comparisons and logic of two literals, in the operands' own arithmetic (int64 or double), so
// the result is the one the generated code would compute.
std::optional<bool> fold_predicate(const Expr& e) {
  if (e.kind == ExprKind::unary && e.uop == ir::UnaryOp::logical_not && is_literal(e.args[0]))
    return e.args[0]->literal.as_int() == 0;
  if (e.kind != ExprKind::binary || !is_literal(e.args[0]) || !is_literal(e.args[1])) return std::nullopt;
  const Scalar &a = e.args[0]->literal, &b = e.args[1]->literal;
  if (ir::is_logical(e.bop)) {
    const bool x = a.as_int() != 0, y = b.as_int() != 0;
    switch (e.bop) {
      case ir::BinaryOp::logical_and: return x && y;
      case ir::BinaryOp::logical_or: return x || y;
      case ir::BinaryOp::logical_xor: return x != y;
      default: FIELDFLOW_UNREACHABLE("a logical operator other than and, or, xor");
    }
  }
  if (!ir::is_comparison(e.bop)) return std::nullopt;
  const bool fl = is_floating(a.dtype());
  const int c = fl ? (a.as_double() < b.as_double() ? -1 : a.as_double() > b.as_double() ? 1 : 0)
                   : (a.as_int() < b.as_int() ? -1 : a.as_int() > b.as_int() ? 1 : 0);
  if (fl && (a.as_double() != a.as_double() || b.as_double() != b.as_double()))  // NaN: only != holds
    return e.bop == ir::BinaryOp::not_equal;
  switch (e.bop) {
    case ir::BinaryOp::less: return c < 0;
    case ir::BinaryOp::less_equal: return c <= 0;
    case ir::BinaryOp::greater: return c > 0;
    case ir::BinaryOp::greater_equal: return c >= 0;
    case ir::BinaryOp::equal: return c == 0;
    case ir::BinaryOp::not_equal: return c != 0;
    default: return std::nullopt;
  }
}

class Folder {
 public:
  explicit Folder(const std::map<std::string, Scalar>& values) : values_(values) {}

  // A bound with the static values put in, inside its operations too (`n / 2`, `min(n, 8)`):
  // an operation of constants becomes one, and one that still reads a parameter is rebuilt
  // around the folded operands (its name and its definition must agree).
  ir::SymExpr fold(const ir::SymExpr& s) const {
    ir::SymExpr out(s.constant);
    for (const auto& [name, k] : s.terms) {
      if (auto op = s.ops.find(name); op != s.ops.end()) {
        out = out + ir::sym_operation(op->second->kind, fold(op->second->a), fold(op->second->b)) * k;
        continue;
      }
      auto it = values_.find(name);
      out = it != values_.end() ? out + ir::SymExpr(it->second.as_int() * k) : out + ir::SymExpr::symbol(name) * k;
    }
    return out;
  }

  ExprPtr fold(const ExprPtr& e) {
    if (auto it = done_.find(e.get()); it != done_.end()) return it->second;
    ExprPtr out = fold_uncached(e);
    done_[e.get()] = out;
    return out;
  }

 private:
  ExprPtr fold_uncached(const ExprPtr& e) {
    if (e->kind == ExprKind::scalar_ref) {
      auto it = values_.find(e->name);
      return it == values_.end() ? e : literal(it->second, e->type);
    }
    // Scan bodies are scalar code over carries and inputs; they may read scalars too.
    bool changed = false;
    std::vector<ExprPtr> args;
    for (const auto& a : e->args) {
      args.push_back(fold(a));
      changed |= args.back() != a;
    }
    ExprPtr body = e->body ? fold(e->body) : nullptr;
    changed |= body != e->body;
    ir::SymExpr bound = e->kind == ExprKind::concat_where ? fold(e->bound) : e->bound;
    changed |= !(bound == e->bound);
    ExprPtr out = e;
    if (changed) {
      auto copy = std::make_shared<Expr>(*e);
      copy->args = std::move(args);
      copy->body = body;
      copy->bound = bound;
      out = copy;
    }
    if (auto v = fold_predicate(*out)) return literal(Scalar(*v), out->type);
    if (out->kind == ExprKind::where && is_literal(out->args[0])) {
      // The dead branch is gone; a branch over fewer dims than the where is broadcast back.
      const ExprPtr& taken = out->args[0]->literal.as_int() != 0 ? out->args[1] : out->args[2];
      if (taken->type == out->type) return taken;
      if (!out->type.is_tuple() && taken->type.dtype == out->type.dtype) {
        auto b = std::make_shared<Expr>();
        b->kind = ExprKind::broadcast;
        b->type = out->type;
        b->args = {taken};
        return b;
      }
    }
    return out;
  }

  const std::map<std::string, Scalar>& values_;
  std::unordered_map<const Expr*, ExprPtr> done_;
};

}  // namespace

void fold_static_scalars(ir::Schedule& s, const std::map<std::string, Scalar>& values) {
  if (values.empty()) return;
  ir::Program& p = s.program;
  Folder folder(values);
  for (ir::Stmt& st : p.stmts) {
    st.expr = folder.fold(st.expr);
    for (auto& r : st.domain) {
      r.lo = folder.fold(r.lo);
      r.hi = folder.fold(r.hi);
    }
  }
  ir::verify(p);
}

}  // namespace fieldflow::passes
