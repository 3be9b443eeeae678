// Textual form of the IR: one SSA-style line per node so shared subexpressions are visible.
#include <fmt/format.h>
#include <unordered_map>

#include "fieldflow/ir.h"

namespace fieldflow::ir {

namespace {

class Printer {
 public:
  explicit Printer(std::string indent) : indent_(std::move(indent)) {}

  std::string ref(const Expr* e) {
    switch (e->kind) {
      case ExprKind::field_ref: return e->name;
      case ExprKind::scalar_ref: return "$" + e->name;
      case ExprKind::literal: return e->literal.to_string() + (e->weak ? "" : std::string(":") + std::string(to_string(e->type.dtype)));
      case ExprKind::scan_arg: return fmt::format("input{}", e->offset);
      case ExprKind::carry: return fmt::format("carry{}", e->offset);
      default: break;
    }
    auto it = ids_.find(e);
    return it == ids_.end() ? "?" : fmt::format("%{}", it->second);
  }

  void emit(const ExprPtr& root) {
    for (const Expr* e : post_order(root, /*include_scan_bodies=*/false)) {
      if (ids_.count(e) || is_leaf(e)) continue;
      if (e->kind == ExprKind::scan) {
        // The body is printed nested, with its own numbering scope, right before the scan line.
        Printer inner(indent_ + "    ");
        inner.emit(e->body);
        std::string init;
        for (std::size_t i = 0; i < e->init.size(); ++i) init += (i ? ", " : "") + e->init[i].to_string();
        out_ += fmt::format("{}  scan '{}' {} along {} init ({}) body:\n{}{}    yield {}\n", indent_, e->name,
                            e->forward ? "forward" : "backward", e->dim.name, init, inner.out_, indent_,
                            inner.ref(e->body.get()));
      }
      const int id = next_++;
      ids_[e] = id;
      out_ += fmt::format("{}  %{} = {} : {}\n", indent_, id, describe(e), e->type.to_string());
    }
  }

  std::string out_;

 private:
  static bool is_leaf(const Expr* e) {
    return e->kind == ExprKind::field_ref || e->kind == ExprKind::scalar_ref || e->kind == ExprKind::literal ||
           e->kind == ExprKind::scan_arg || e->kind == ExprKind::carry;
  }

  std::string args(const Expr* e) {
    std::string s;
    for (std::size_t i = 0; i < e->args.size(); ++i) s += (i ? ", " : "") + ref(e->args[i].get());
    return s;
  }

  std::string describe(const Expr* e) {
    switch (e->kind) {
      case ExprKind::index: return fmt::format("index({})", e->dim.name);
      case ExprKind::unary: return fmt::format("{}({})", to_string(e->uop), args(e));
      case ExprKind::binary: return fmt::format("{}({})", to_string(e->bop), args(e));
      case ExprKind::where: return fmt::format("where({})", args(e));
      case ExprKind::concat_where:
        return fmt::format("concat_where({} {} {}, {})", e->dim.name, to_string(e->cmp), e->bound.to_string(), args(e));
      case ExprKind::cast: return fmt::format("astype({}, {})", args(e), to_string(e->type.dtype));
      case ExprKind::broadcast: return fmt::format("broadcast({})", args(e));
      case ExprKind::shift: return fmt::format("{}({}{:+d})", ref(e->args[0].get()), e->dim.name, e->offset);
      case ExprKind::dynamic_shift:
        return fmt::format("{}({} + {})", ref(e->args[0].get()), e->dim.name, ref(e->args[1].get()));
      case ExprKind::neighbor_shift:
        return e->offset < 0 ? fmt::format("{}({})", ref(e->args[0].get()), e->conn.name)
                             : fmt::format("{}({}[{}])", ref(e->args[0].get()), e->conn.name, e->offset);
      case ExprKind::reduce: return fmt::format("{}({}, {})", to_string(e->rop), args(e), e->conn.name);
      case ExprKind::make_tuple: return fmt::format("tuple({})", args(e));
      case ExprKind::tuple_get: return fmt::format("{}[{}]", args(e), e->offset);
      case ExprKind::scan: return fmt::format("scan '{}'({})", e->name, args(e));
      case ExprKind::named: return fmt::format("{}('{}', {})", e->materialize ? "materialize" : "named", e->name, args(e));
      case ExprKind::local_slot:
        return fmt::format("{}(slot({}, {}))", ref(e->args[0].get()), e->conn.name, e->offset);
      default: return ref(e);
    }
  }

  std::string indent_;
  std::unordered_map<const Expr*, int> ids_;
  int next_ = 0;
};

}  // namespace

std::string print(const Expr& e) {
  // Wrap without ownership: the printer only walks the nodes.
  ExprPtr alias(ExprPtr{}, &e);
  Printer p("");
  p.emit(alias);
  return p.out_ + "  result " + p.ref(&e) + "\n";
}

std::string print(const Program& prog) {
  std::string s = fmt::format("program {}(", prog.name);
  for (std::size_t i = 0; i < prog.params.size(); ++i) {
    const Param& p = prog.params[i];
    std::string t = p.kind == ParamKind::connectivity
                        ? fmt::format("connectivity {}->{} x{}", p.conn.source.name, p.conn.target.name, p.conn.max_neighbors)
                        : p.type.to_string();
    s += fmt::format("{}{}: {}", i ? ", " : "", p.name, t);
  }
  s += ")\n";
  for (const Stmt& st : prog.stmts) {
    Printer p("");
    p.emit(st.expr);
    std::string outs;
    for (std::size_t i = 0; i < st.outputs.size(); ++i) outs += (i ? ", " : "") + st.outputs[i];
    s += fmt::format("call {} -> ({}) over {}\n{}  result {}\n", st.op, outs, to_string(st.domain), p.out_,
                     p.ref(st.expr.get()));
  }
  return s;
}

}  // namespace fieldflow::ir
