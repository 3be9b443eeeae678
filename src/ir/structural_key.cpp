#include "ir/structural_key.h"

#include <bit>
#include <cstdint>
#include <string_view>
#include <unordered_map>

namespace fieldflow::ir {

// A new member of these structs must be written below as well, or two programs that differ only
// in it would share compiled code. Their sizes (x86-64, libstdc++) trip when a member is added
// (one that fits into padding does not: include/fieldflow/ir.h says so next to the structs).
#if defined(__x86_64__) && defined(__GLIBCXX__)
static_assert(sizeof(Dimension) == 40 && sizeof(Connectivity) == 160 && sizeof(Type) == 56 &&
                  sizeof(SymExpr) == 80 && sizeof(SymOp) == 168 && sizeof(DomainRange) == 200 &&
                  sizeof(Scalar) == 24 && sizeof(Expr) == 488 && sizeof(Param) == 256 && sizeof(Stmt) == 96 &&
                  sizeof(Program) == 80,
              "a member was added to an IR struct: write it in structural_key.cpp, then update these sizes");
#endif

namespace {

class KeyWriter {
 public:
  std::string take() { return std::move(out_); }

  void integer(std::int64_t v) { out_.append(reinterpret_cast<const char*>(&v), sizeof v); }
  // Length-prefixed, so ("ab", "c") and ("a", "bc") differ.
  void text(std::string_view s) {
    integer(static_cast<std::int64_t>(s.size()));
    out_.append(s);
  }
  void dimension(const Dimension& d) {
    text(d.name);
    integer(static_cast<std::int64_t>(d.kind));
  }
  void dimensions(const std::vector<Dimension>& dims) {
    integer(static_cast<std::int64_t>(dims.size()));
    for (const auto& d : dims) dimension(d);
  }
  void connectivity(const Connectivity& c) {
    text(c.name);
    dimension(c.source);
    dimension(c.target);
    dimension(c.local);
    integer(c.max_neighbors);
  }
  void type(const Type& t) {
    integer(static_cast<std::int64_t>(t.dtype));
    dimensions(t.dims);
    integer(static_cast<std::int64_t>(t.elements.size()));
    for (const auto& e : t.elements) type(e);
  }
  void scalar(const Scalar& s) {
    integer(static_cast<std::int64_t>(s.dtype()));
    // The bits of a floating value: -0.0 and 0.0, and NaN payloads, stay apart.
    integer(is_floating(s.dtype()) ? std::bit_cast<std::int64_t>(s.as_double()) : s.as_int());
  }
  void sym(const SymExpr& e) {
    integer(e.constant);
    integer(static_cast<std::int64_t>(e.terms.size()));
    for (const auto& [name, coefficient] : e.terms) {
      text(name);
      integer(coefficient);
    }
    integer(static_cast<std::int64_t>(e.ops.size()));
    for (const auto& [name, op] : e.ops) {
      text(name);
      integer(static_cast<std::int64_t>(op->kind));
      sym(op->a);
      sym(op->b);
    }
  }
  void domain(const Domain& d) {
    integer(static_cast<std::int64_t>(d.size()));
    for (const auto& r : d) {
      dimension(r.dim);
      sym(r.lo);
      sym(r.hi);
    }
  }
  // A node seen before is written as a back reference, so a shared subexpression and two equal
  // copies of it give different keys (later stages may treat them differently).
  void expr(const ExprPtr& e) {
    if (!e) {
      integer(-1);
      return;
    }
    if (auto it = ids_.find(e.get()); it != ids_.end()) {
      integer(-2);
      integer(it->second);
      return;
    }
    ids_.emplace(e.get(), static_cast<std::int64_t>(ids_.size()));
    integer(static_cast<std::int64_t>(e->kind));
    type(e->type);
    integer(static_cast<std::int64_t>(e->args.size()));
    for (const auto& a : e->args) expr(a);
    text(e->name);
    scalar(e->literal);
    integer(e->weak);
    integer(static_cast<std::int64_t>(e->uop));
    integer(static_cast<std::int64_t>(e->bop));
    integer(static_cast<std::int64_t>(e->rop));
    integer(static_cast<std::int64_t>(e->cmp));
    dimension(e->dim);
    integer(e->offset);
    connectivity(e->conn);
    sym(e->bound);
    integer(e->forward);
    integer(e->materialize);
    integer(static_cast<std::int64_t>(e->init.size()));
    for (const auto& s : e->init) scalar(s);
    expr(e->body);
  }

 private:
  std::string out_;
  std::unordered_map<const Expr*, std::int64_t> ids_;
};

}  // namespace

std::string structural_key(const Program& p) {
  KeyWriter w;
  w.text(p.name);
  w.integer(static_cast<std::int64_t>(p.params.size()));
  for (const auto& prm : p.params) {
    w.text(prm.name);
    w.integer(static_cast<std::int64_t>(prm.kind));
    w.type(prm.type);
    w.connectivity(prm.conn);
  }
  w.integer(static_cast<std::int64_t>(p.stmts.size()));
  for (const auto& s : p.stmts) {
    w.text(s.op);
    w.expr(s.expr);
    w.integer(static_cast<std::int64_t>(s.outputs.size()));
    for (const auto& o : s.outputs) w.text(o);
    w.domain(s.domain);
  }
  return w.take();
}

}  // namespace fieldflow::ir
