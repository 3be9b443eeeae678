// Greedy shrinking. The cheap reductions (layouts, size sets, sizes, statements) go first; then
// expressions, largest nodes first: each node is tried as each of its operands of the same type
// and as a literal broadcast to its type. A node shared by several statements is replaced
// everywhere at once, so sharing (and with it the transient it became) is preserved.
#include "fuzz/shrink.h"

#include <map>
#include <set>

#include "fieldflow/dsl.h"
#include "fieldflow/errors.h"

namespace fieldflow::fuzz {

namespace {

using ir::ExprPtr;

ExprPtr replace(const ExprPtr& e, const ir::Expr* target, const ExprPtr& with, std::map<const ir::Expr*, ExprPtr>& memo) {
  if (e == nullptr) return e;
  if (e.get() == target) return with;
  if (auto it = memo.find(e.get()); it != memo.end()) return it->second;
  bool changed = false;
  std::vector<ExprPtr> args;
  for (const ExprPtr& a : e->args) {
    args.push_back(replace(a, target, with, memo));
    changed |= args.back() != a;
  }
  ExprPtr body = replace(e->body, target, with, memo);
  changed |= body != e->body;
  ExprPtr out = e;
  if (changed) {
    auto copy = std::make_shared<ir::Expr>(*e);
    copy->args = std::move(args);
    copy->body = std::move(body);
    out = copy;
  }
  memo.emplace(e.get(), out);
  return out;
}

bool is_simplifiable(const ir::Expr& e) {
  switch (e.kind) {
    case ir::ExprKind::field_ref: case ir::ExprKind::scalar_ref: case ir::ExprKind::literal:
    case ir::ExprKind::index: case ir::ExprKind::carry: case ir::ExprKind::scan_arg:
    case ir::ExprKind::make_tuple:
      return false;
    case ir::ExprKind::broadcast:
      return e.args[0]->kind != ir::ExprKind::literal;  // what a previous step left: done
    default:
      return !e.type.is_tuple();
  }
}

// Candidate replacements of a node: its operands of the same type, then a literal.
std::vector<ExprPtr> simpler_forms(const ir::Expr& e) {
  std::vector<ExprPtr> out;
  for (const ExprPtr& a : e.args)
    if (a->type == e.type) out.push_back(a);
  try {
    const Scalar s = e.type.dtype == DType::boolean ? Scalar(true) : Scalar(1.0).cast(e.type.dtype);
    Expr lit = Expr::literal(s);
    out.push_back(e.type.dims.empty() ? lit.node() : broadcast(lit, e.type.dims).node());
  } catch (const Error&) {
  }
  return out;
}

class Shrinker {
 public:
  Shrinker(const StillFails& fails, int max_attempts, ShrinkStats& stats)
      : fails_(fails), max_(max_attempts), stats_(stats) {}

  FuzzCase run(FuzzCase c) {
    best_ = std::move(c);
    if (best_.layouts.size() > 1)
      for (Layout l : std::vector<Layout>(best_.layouts)) {
        FuzzCase t = best_;
        t.layouts = {l};
        if (accept(t)) break;
      }
    if (best_.short_field_calls) {
      FuzzCase t = best_;
      t.short_field_calls = false;
      accept(t);
    }
    if (best_.sizes.size() > 1)
      for (std::size_t i = 0; i < best_.sizes.size(); ++i) {
        FuzzCase t = best_;
        t.sizes = {best_.sizes[i]};
        if (accept(t)) break;
      }
    shrink_statements();
    shrink_sizes();
    shrink_expressions();
    shrink_statements();
    shrink_sizes();
    return best_;
  }

 private:
  bool budget_left() const { return stats_.attempts < max_; }

  bool accept(const FuzzCase& t) {
    if (!budget_left()) return false;
    try {
      ir::verify(t.program);
    } catch (const Error&) {
      return false;
    }
    ++stats_.attempts;
    if (!fails_(t)) return false;
    ++stats_.accepted;
    history_.push_back(best_.program);  // keeps replaced nodes alive: `tried` holds their addresses
    best_ = t;
    return true;
  }

  void shrink_statements() {
    for (std::size_t i = best_.program.stmts.size(); i-- > 0 && best_.program.stmts.size() > 1;) {
      FuzzCase t = best_;
      t.program.stmts.erase(t.program.stmts.begin() + static_cast<long>(i));
      accept(t);
    }
  }

  void shrink_sizes() {
    if (best_.sizes.size() != 1) return;
    const int min_mesh = best_.bounded ? 2 : 3;
    for (int field = 0; field < 5; ++field) {
      while (budget_left()) {
        FuzzCase t = best_;
        SizeSet& s = t.sizes[0];
        int* v = best_.mesh ? (field == 0 ? &s.nx : field == 1 ? &s.ny : field == 2 ? &s.nk : nullptr)
                            : (field == 0 ? &s.ni : field == 1 ? &s.nj : field == 2 ? &s.nk : nullptr);
        if (!v) break;
        const int floor = best_.mesh && field < 2 ? min_mesh : 1;
        if (*v <= floor) break;
        --*v;
        if (!accept(t)) break;
      }
    }
  }

  void shrink_expressions() {
    bool progress = true;
    std::set<std::pair<const ir::Expr*, int>> tried;  // (node, form) pairs that did not fail
    while (progress && budget_left()) {
      progress = false;
      for (std::size_t si = 0; si < best_.program.stmts.size() && !progress; ++si) {
        auto nodes = ir::post_order(best_.program.stmts[si].expr, true);
        for (auto it = nodes.rbegin(); it != nodes.rend() && !progress && budget_left(); ++it) {
          const ir::Expr* node = *it;
          if (!is_simplifiable(*node)) continue;
          const auto forms = simpler_forms(*node);
          for (std::size_t f = 0; f < forms.size() && !progress; ++f) {
            if (!tried.insert({node, static_cast<int>(f)}).second) continue;
            FuzzCase t = best_;
            std::map<const ir::Expr*, ExprPtr> memo;
            for (ir::Stmt& st : t.program.stmts) st.expr = replace(st.expr, node, forms[f], memo);
            progress = accept(t);
          }
        }
      }
    }
  }

  const StillFails& fails_;
  int max_;
  ShrinkStats& stats_;
  FuzzCase best_;
  std::vector<ir::Program> history_;
};

}  // namespace

FuzzCase shrink_case(const FuzzCase& failing, const StillFails& still_fails, int max_attempts, ShrinkStats& stats) {
  return Shrinker(still_fails, max_attempts, stats).run(failing);
}

}  // namespace fieldflow::fuzz
