// Building typed IR expressions from the DSL. Every rule of the type system lives here: operand
// dtypes must agree (weak literals adapt), dims broadcast only when one set contains the other,
// shifts need the dimension they shift along, reductions need a local dimension.
#include <fmt/format.h>

#include <optional>
#include <algorithm>
#include <functional>

#include "fieldflow/dsl.h"
#include "fieldflow/errors.h"

namespace fieldflow {

using ir::ExprKind;
using ir::ExprPtr;
using ir::Type;

namespace {

// Dimension names joined by ", "; messages put the brackets around them.
std::string dims_str(const std::vector<Dimension>& d) {
  std::string s;
  for (std::size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + d[i].name;
  return s;
}

std::shared_ptr<ir::Expr> make_node(ExprKind kind, Type type, std::vector<ExprPtr> args = {}) {
  auto e = std::make_shared<ir::Expr>();
  e->kind = kind;
  e->type = std::move(type);
  e->args = std::move(args);
  return e;
}

bool subset(const std::vector<Dimension>& a, const std::vector<Dimension>& b) {
  for (const auto& d : a)
    if (std::find(b.begin(), b.end(), d) == b.end()) return false;
  return true;
}

std::vector<Dimension> horizontal(const std::vector<Dimension>& d) {
  std::vector<Dimension> h;
  for (const auto& x : d)
    if (x.kind == DimKind::horizontal) h.push_back(x);
  return h;
}

// Dims of a pointwise combination: the union of the operands' dims, as GT4Py promotes them
// (edge_field * k_field is over (Edge, K)). Horizontal dims are not combined: two operands on
// different locations (Edge and Cell, or I and J alone) are a mistake, unless one's horizontal
// dims contain the other's.
std::vector<Dimension> unify_dims(const std::vector<Dimension>& a, const std::vector<Dimension>& b,
                                  std::string_view what) {
  if (subset(a, b)) return b;
  if (subset(b, a)) return a;
  const auto ha = horizontal(a), hb = horizontal(b);
  if (!subset(ha, hb) && !subset(hb, ha))
    throw DimensionError(fmt::format("dimension mismatch in {}: operands over [{}] and [{}] are on different "
                                     "horizontal locations ([{}] and [{}]); expected one operand's horizontal "
                                     "dims to contain the other's (use broadcast to combine them)",
                                     what, dims_str(a), dims_str(b), dims_str(ha), dims_str(hb)));
  std::vector<Dimension> u = a;
  for (const auto& d : b)
    if (std::find(u.begin(), u.end(), d) == u.end()) u.push_back(d);
  return ir::canonical_dims(std::move(u));
}

void require_field(const Expr& x, std::string_view what) {
  if (x.type().is_tuple())
    throw DTypeError(fmt::format("{}: expected a field, given a tuple {}", what, x.type().to_string()));
}

bool is_weak(const Expr& x) { return x.node()->kind == ExprKind::literal && x.node()->weak; }

Expr retype_literal(const Expr& lit, DType to, std::string_view what) {
  const Scalar v = lit.node()->literal;
  const DType from = v.dtype();
  const bool ok = from == to || (is_integral(from) && (is_integral(to) || is_floating(to))) ||
                  (is_floating(from) && is_floating(to));
  if (!ok)
    throw DTypeError(fmt::format("{}: literal {} of dtype {} cannot be used with a {} operand; use astype",
                                 what, v.to_string(), to_string(from), to_string(to)));
  auto e = make_node(ExprKind::literal, Type{to, {}, {}});
  e->literal = v.cast(to);
  e->weak = true;
  return Expr(e);
}

// Weak literals take the dtype of the other operand.
std::pair<Expr, Expr> adapt(const Expr& a, const Expr& b, std::string_view what) {
  if (is_weak(a) && !is_weak(b) && !b.type().is_tuple()) return {retype_literal(a, b.type().dtype, what), b};
  if (is_weak(b) && !is_weak(a) && !a.type().is_tuple()) return {a, retype_literal(b, a.type().dtype, what)};
  if (is_weak(a) && is_weak(b) && a.type().dtype != b.type().dtype) {
    const DType t = is_floating(a.type().dtype) || is_floating(b.type().dtype) ? DType::float64 : a.type().dtype;
    return {retype_literal(a, t, what), retype_literal(b, t, what)};
  }
  return {a, b};
}

void require_same_dtype(const Expr& a, const Expr& b, std::string_view what) {
  if (a.type().dtype != b.type().dtype)
    throw DTypeError(fmt::format("{}: operands of dtype {} and {} do not mix; convert one with astype",
                                 what, to_string(a.type().dtype), to_string(b.type().dtype)));
}

// Only make_tuple nodes have tuples among their elements: every other construct applies
// elementwise to nested tuples (below), so passes and backends see flat tuples. `where`,
// `concat_where`, `astype` and labels apply elementwise to flat tuples too: the only tuple values
// in the IR are make_tuple and tuple scans, so an element of any other tuple is its own
// expression, and an element nothing reads is not in the program at all (the passes find what a
// kernel computes by walking what it reads; an unread element holding a scan was never split off
// into its own kernel: fuzzer seed 186, docs/reliability.md class 26).

// f over the matching elements of two tuples of the same structure (f recurses into nested ones).
Expr elementwise(const Expr& a, const Expr& b, std::string_view what,
                 const std::function<Expr(const Expr&, const Expr&)>& f) {
  if (!a.type().is_tuple() || !b.type().is_tuple() || a.type().elements.size() != b.type().elements.size())
    throw DTypeError(fmt::format("{}: branches of types {} and {} do not match; expected tuples of the same "
                                 "structure", what, a.type().to_string(), b.type().to_string()));
  std::vector<Expr> parts;
  for (int i = 0; i < static_cast<int>(a.type().elements.size()); ++i) parts.push_back(f(a[i], b[i]));
  return make_tuple(parts);
}

Expr unary(ir::UnaryOp op, const Expr& x) {
  const std::string what = fmt::format("{}()", to_string(op));
  require_field(x, what);
  const DType t = x.type().dtype;
  DType result = t;
  switch (op) {
    case ir::UnaryOp::logical_not:
      if (t != DType::boolean)
        throw DTypeError(fmt::format("{}: expected a bool operand, given {}", what, to_string(t)));
      break;
    case ir::UnaryOp::neg:
    case ir::UnaryOp::abs:
      if (t == DType::boolean)
        throw DTypeError(fmt::format("{}: expected a numeric operand, given bool", what));
      break;
    default:
      if (!is_floating(t))
        throw DTypeError(fmt::format("{}: expected a float32 or float64 operand, given {}; convert with astype",
                                     what, to_string(t)));
      if (ir::is_predicate(op)) result = DType::boolean;
  }
  auto e = make_node(ExprKind::unary, Type{result, x.type().dims, {}}, {x.node()});
  e->uop = op;
  return Expr(e);
}

Expr binary(ir::BinaryOp op, const Expr& a0, const Expr& b0) {
  const std::string what = fmt::format("operator {}", to_string(op));
  require_field(a0, what);
  require_field(b0, what);
  auto [a, b] = adapt(a0, b0, what);
  require_same_dtype(a, b, what);
  const DType t = a.type().dtype;
  DType result = t;
  if (ir::is_logical(op)) {
    if (t != DType::boolean) throw DTypeError(fmt::format("{}: expected bool operands, given {}", what, to_string(t)));
  } else if (ir::is_comparison(op)) {
    if (t == DType::boolean && op != ir::BinaryOp::equal && op != ir::BinaryOp::not_equal)
      throw DTypeError(fmt::format("{}: bool operands can only be compared with == or !=", what));
    result = DType::boolean;
  } else {
    if (t == DType::boolean) throw DTypeError(fmt::format("{}: expected numeric operands, given bool", what));
    if (op == ir::BinaryOp::fmod && !is_floating(t))
      throw DTypeError(fmt::format("{}: expected float operands, given {}; convert with astype (or use % on integers)",
                                   what, to_string(t)));
    if ((op == ir::BinaryOp::floor_divide || op == ir::BinaryOp::mod) && !is_integral(t))
      throw DTypeError(fmt::format("{}: expected int32 or int64 operands, given {}; for floats use floor(a / b) or "
                                   "fmod", what, to_string(t)));
  }
  auto e = make_node(ExprKind::binary, Type{result, unify_dims(a.type().dims, b.type().dims, what), {}},
                {a.node(), b.node()});
  e->bop = op;
  return Expr(e);
}

ir::SymExpr to_sym(const Expr& x, std::string_view what) {
  const ir::Expr& n = *x.node();
  if (n.kind == ExprKind::literal && is_integral(n.literal.dtype())) return ir::SymExpr(n.literal.as_int());
  if (n.kind == ExprKind::scalar_ref && is_integral(n.type.dtype)) return ir::SymExpr::symbol(n.name);
  if (n.kind == ExprKind::binary && (n.bop == ir::BinaryOp::add || n.bop == ir::BinaryOp::sub)) {
    auto l = to_sym(Expr(n.args[0]), what), r = to_sym(Expr(n.args[1]), what);
    return n.bop == ir::BinaryOp::add ? l + r : l - r;
  }
  // Non-affine integer steps (n / 2, n * m, n % 4, minimum(n, m), ...) become operations of the
  // bound, evaluated with the language's integer semantics when the sizes are known.
  static const std::pair<ir::BinaryOp, ir::SymOpKind> ops[] = {
      {ir::BinaryOp::mul, ir::SymOpKind::mul},         {ir::BinaryOp::div, ir::SymOpKind::div},
      {ir::BinaryOp::floor_divide, ir::SymOpKind::floor_divide}, {ir::BinaryOp::mod, ir::SymOpKind::mod},
      {ir::BinaryOp::minimum, ir::SymOpKind::min},     {ir::BinaryOp::maximum, ir::SymOpKind::max}};
  if (n.kind == ExprKind::binary && is_integral(n.type.dtype))
    for (const auto& [bop, kind] : ops)
      if (n.bop == bop) return ir::sym_operation(kind, to_sym(Expr(n.args[0]), what), to_sym(Expr(n.args[1]), what));
  // astype between integer dtypes (an int64 size next to int32 ones): bounds are computed in int64.
  if (n.kind == ExprKind::cast && is_integral(n.type.dtype) && is_integral(n.args[0]->type.dtype))
    return to_sym(Expr(n.args[0]), what);
  if (n.kind == ExprKind::unary && n.uop == ir::UnaryOp::neg && is_integral(n.type.dtype))
    return to_sym(Expr(n.args[0]), what) * -1;
  throw ProgramError(fmt::format("{}: expected an integer expression of int scalar parameters and constants "
                                 "(+ - * / // % minimum maximum), given {}", what, ir::print(n)));
}

}  // namespace

ir::SymExpr to_symbolic_bound(const Expr& x, std::string_view what) { return to_sym(x, what); }

Expr::Expr(double v) {
  auto e = make_node(ExprKind::literal, Type{DType::float64, {}, {}});
  e->literal = Scalar(v);
  e->weak = true;
  node_ = e;
}

Expr::Expr(int v) {
  auto e = make_node(ExprKind::literal, Type{DType::int32, {}, {}});
  e->literal = Scalar(static_cast<std::int32_t>(v));
  e->weak = true;
  node_ = e;
}

Expr::Expr(std::int64_t v) {
  auto e = make_node(ExprKind::literal, Type{DType::int64, {}, {}});
  e->literal = Scalar(v);
  e->weak = true;
  node_ = e;
}

Expr::Expr(bool v) {
  auto e = make_node(ExprKind::literal, Type{DType::boolean, {}, {}});
  e->literal = Scalar(v);
  node_ = e;
}

Expr Expr::literal(Scalar v) {
  auto e = make_node(ExprKind::literal, Type{v.dtype(), {}, {}});
  e->literal = v;
  return Expr(e);
}

CartesianOffset operator+(const Dimension& d, std::int64_t k) { return {d, k}; }
CartesianOffset operator-(const Dimension& d, std::int64_t k) { return {d, -k}; }
DynamicOffset operator+(const Dimension& d, const Expr& offset) { return {d, offset}; }

Expr Expr::operator()(const CartesianOffset& o) const {
  const std::string what = fmt::format("shift by {}{:+d}", o.dim.name, o.offset);
  require_field(*this, what);
  if (o.dim.kind == DimKind::local)
    throw DimensionError(fmt::format("{}: cannot shift along the local dimension {}", what, o.dim.name));
  if (!type().has(o.dim))
    throw DimensionError(fmt::format("{}: the operand has dims [{}], which do not include {}", what,
                                     dims_str(type().dims), o.dim.name));
  if (o.offset == 0) return *this;
  auto e = make_node(ExprKind::shift, type(), {node_});
  e->dim = o.dim;
  e->offset = o.offset;
  return Expr(e);
}

Expr Expr::operator()(const DynamicOffset& o) const {
  const std::string what = fmt::format("shift by {} + <field>", o.dim.name);
  require_field(*this, what);
  require_field(o.offset, what);
  // Horizontal and vertical dims alike (a gather along I, or K); a local dimension is indexed by
  // its connectivity's table instead.
  if (o.dim.kind == DimKind::local)
    throw DimensionError(fmt::format("{}: dynamic offsets are supported along horizontal and vertical dimensions, "
                                     "given the local dimension {}", what, o.dim.name));
  if (!type().has(o.dim))
    throw DimensionError(fmt::format("{}: the operand has dims [{}], which do not include {}", what,
                                     dims_str(type().dims), o.dim.name));
  // A scan's columns are computed over the reading statement's horizontal range (a scan has no
  // pointwise form to evaluate at an arbitrary column), while a dynamic offset may read any
  // column: refused rather than failing or differing at call time.
  if (o.dim.kind == DimKind::horizontal)
    for (const ir::Expr* x : ir::post_order(node_))
      if (x->kind == ir::ExprKind::scan)
        throw DimensionError(fmt::format("{}: the operand contains the scan '{}'; a scan's value is read at dynamic "
                                         "offsets along the vertical dimension only (write it to a field in one "
                                         "call and gather from the field in the next)", what, x->name));
  if (!is_integral(o.offset.type().dtype))
    throw DTypeError(fmt::format("{}: expected an int32 or int64 offset, given {}", what,
                                 to_string(o.offset.type().dtype)));
  auto e = make_node(ExprKind::dynamic_shift, Type{type().dtype, unify_dims(type().dims, o.offset.type().dims, what), {}},
                {node_, o.offset.node()});
  e->dim = o.dim;
  return Expr(e);
}

Expr Expr::operator()(const NeighborOffset& o) const {
  const Connectivity& c = o.conn;
  const std::string what = o.index == -1 ? fmt::format("shift by {}", c.name) : fmt::format("shift by {}[{}]", c.name, o.index);
  require_field(*this, what);
  if (o.index >= c.max_neighbors || o.index < -1)
    throw DimensionError(fmt::format("{}: expected a neighbour index in [0, {}), given {}", what, c.max_neighbors, o.index));
  if (!type().has(c.target))
    throw DimensionError(fmt::format("{}: the operand has dims [{}], which do not include {} ({} maps {} to {})",
                                     what, dims_str(type().dims), c.target.name, c.name, c.source.name, c.target.name));
  // A connectivity within one location (C2E2CO: Cell -> Cell) replaces the dimension by itself.
  const bool has_source = type().has(c.source) && !(c.source == c.target);
  if (has_source || type().has(c.local))
    throw DimensionError(fmt::format("{}: the operand already has dimension {}", what,
                                     has_source ? c.source.name : c.local.name));
  std::vector<Dimension> dims;
  for (const auto& d : type().dims)
    if (!(d == c.target)) dims.push_back(d);
  dims.push_back(c.source);
  if (o.index < 0) dims.push_back(c.local);
  auto e = make_node(ExprKind::neighbor_shift, Type{type().dtype, ir::canonical_dims(dims), {}}, {node_});
  e->conn = c;
  e->offset = o.index;
  return Expr(e);
}

Expr Expr::operator()(const Connectivity& c) const { return (*this)(NeighborOffset{c, -1}); }

LocalSlot slot(const Connectivity& c, int index) { return {c, index}; }

namespace {
// Selecting a slot is pushed down to the reads that carry the local dimension: a local shift
// f(E2V) becomes the fixed shift f(E2V[i]) (so the runtime checks its table rows like any fixed
// shift) and a stored sparse field gets a local_slot read. Everything between is rebuilt
// without the local dimension, so no later stage sees a local value outside a reduction.
ExprPtr select_slot(const ExprPtr& e, const Connectivity& c, int i, const std::string& what) {
  if (!e->type.is_tuple() && !e->type.has(c.local)) return e;
  auto without_local = [&](const Type& t) {
    Type r = t;
    std::erase(r.dims, c.local);
    return r;
  };
  switch (e->kind) {
    case ExprKind::field_ref: {
      auto n = make_node(ExprKind::local_slot, without_local(e->type), {e});
      n->conn = c;
      n->dim = c.local;
      n->offset = i;
      return n;
    }
    case ExprKind::unary:
    case ExprKind::binary:
    case ExprKind::where:
    case ExprKind::concat_where:
    case ExprKind::cast:
    case ExprKind::broadcast:
    case ExprKind::named:
    case ExprKind::shift:
    case ExprKind::dynamic_shift:
    case ExprKind::neighbor_shift:
    case ExprKind::reduce:
    case ExprKind::local_slot: {
      if (e->type.is_tuple()) break;
      auto n = std::make_shared<ir::Expr>(*e);
      n->type = without_local(e->type);
      for (auto& a : n->args) a = select_slot(a, c, i, what);
      if (e->kind == ExprKind::neighbor_shift && e->offset < 0 && e->conn == c) n->offset = i;  // f(E2V) -> f(E2V[i])
      if (e->kind == ExprKind::broadcast && n->type == n->args[0]->type) return n->args[0];
      return n;
    }
    default: break;
  }
  throw DimensionError(fmt::format("{}: cannot select a slot of a {} value of type {}; select it from the local "
                                   "fields it is computed from", what, to_string(e->kind), e->type.to_string()));
}
}  // namespace

Expr Expr::operator()(const LocalSlot& s) const {
  const std::string what = fmt::format("slot({}, {})", s.conn.name, s.index);
  require_field(*this, what);
  if (!type().has(s.conn.local))
    throw DimensionError(fmt::format("{}: the operand has dims [{}], which do not include the local dimension {}",
                                     what, dims_str(type().dims), s.conn.local.name));
  if (s.index < 0 || s.index >= s.conn.max_neighbors)
    throw DimensionError(fmt::format("{}: expected a slot in [0, {}), given {}", what, s.conn.max_neighbors, s.index));
  return Expr(select_slot(node_, s.conn, s.index, what));
}

Expr Expr::operator[](int i) const {
  if (!type().is_tuple())
    throw DTypeError(fmt::format("tuple element [{}]: expected a tuple, given {}", i, type().to_string()));
  if (i < 0 || i >= static_cast<int>(type().elements.size()))
    throw DTypeError(fmt::format("tuple element [{}]: expected an index in [0, {}), given {}", i,
                                 type().elements.size(), i));
  if (node_->kind == ExprKind::make_tuple) return Expr(node_->args[i]);
  auto e = make_node(ExprKind::tuple_get, type().elements[i], {node_});
  e->offset = i;
  return Expr(e);
}

Expr operator-(const Expr& a) { return unary(ir::UnaryOp::neg, a); }
Expr operator!(const Expr& a) { return unary(ir::UnaryOp::logical_not, a); }
Expr operator~(const Expr& a) { return unary(ir::UnaryOp::logical_not, a); }
Expr operator+(const Expr& a, const Expr& b) { return binary(ir::BinaryOp::add, a, b); }
Expr operator-(const Expr& a, const Expr& b) { return binary(ir::BinaryOp::sub, a, b); }
Expr operator*(const Expr& a, const Expr& b) { return binary(ir::BinaryOp::mul, a, b); }
Expr operator/(const Expr& a, const Expr& b) { return binary(ir::BinaryOp::div, a, b); }
Expr operator<(const Expr& a, const Expr& b) { return binary(ir::BinaryOp::less, a, b); }
Expr operator<=(const Expr& a, const Expr& b) { return binary(ir::BinaryOp::less_equal, a, b); }
Expr operator>(const Expr& a, const Expr& b) { return binary(ir::BinaryOp::greater, a, b); }
Expr operator>=(const Expr& a, const Expr& b) { return binary(ir::BinaryOp::greater_equal, a, b); }
Expr operator==(const Expr& a, const Expr& b) { return binary(ir::BinaryOp::equal, a, b); }
Expr operator!=(const Expr& a, const Expr& b) { return binary(ir::BinaryOp::not_equal, a, b); }
Expr operator&(const Expr& a, const Expr& b) { return binary(ir::BinaryOp::logical_and, a, b); }
Expr operator|(const Expr& a, const Expr& b) { return binary(ir::BinaryOp::logical_or, a, b); }
Expr operator^(const Expr& a, const Expr& b) { return binary(ir::BinaryOp::logical_xor, a, b); }
Expr operator%(const Expr& a, const Expr& b) { return binary(ir::BinaryOp::mod, a, b); }
Expr floor_divide(const Expr& a, const Expr& b) { return binary(ir::BinaryOp::floor_divide, a, b); }

// Unary plus changes nothing, but is checked like minus so `+flag` on a bool is still a mistake.
Expr operator+(const Expr& a) {
  require_field(a, "operator + (unary)");
  if (a.type().dtype == DType::boolean) throw DTypeError("operator + (unary): expected a numeric operand, given bool");
  return a;
}

#define FIELDFLOW_UNARY_BUILTIN(name, op) \
  Expr name(const Expr& x) { return unary(ir::UnaryOp::op, x); }
FIELDFLOW_UNARY_BUILTIN(abs, abs)
FIELDFLOW_UNARY_BUILTIN(sqrt, sqrt)
FIELDFLOW_UNARY_BUILTIN(exp, exp)
FIELDFLOW_UNARY_BUILTIN(log, log)
FIELDFLOW_UNARY_BUILTIN(sin, sin)
FIELDFLOW_UNARY_BUILTIN(cos, cos)
FIELDFLOW_UNARY_BUILTIN(tan, tan)
FIELDFLOW_UNARY_BUILTIN(arcsin, arcsin)
FIELDFLOW_UNARY_BUILTIN(arccos, arccos)
FIELDFLOW_UNARY_BUILTIN(arctan, arctan)
FIELDFLOW_UNARY_BUILTIN(sinh, sinh)
FIELDFLOW_UNARY_BUILTIN(cosh, cosh)
FIELDFLOW_UNARY_BUILTIN(tanh, tanh)
FIELDFLOW_UNARY_BUILTIN(floor, floor)
FIELDFLOW_UNARY_BUILTIN(ceil, ceil)
FIELDFLOW_UNARY_BUILTIN(trunc, trunc)
FIELDFLOW_UNARY_BUILTIN(isnan, isnan)
FIELDFLOW_UNARY_BUILTIN(isinf, isinf)
FIELDFLOW_UNARY_BUILTIN(isfinite, isfinite)
FIELDFLOW_UNARY_BUILTIN(cbrt, cbrt)
FIELDFLOW_UNARY_BUILTIN(gamma, gamma)
#undef FIELDFLOW_UNARY_BUILTIN

Expr minimum(const Expr& a, const Expr& b) { return binary(ir::BinaryOp::minimum, a, b); }
Expr maximum(const Expr& a, const Expr& b) { return binary(ir::BinaryOp::maximum, a, b); }
Expr fmod(const Expr& a, const Expr& b) { return binary(ir::BinaryOp::fmod, a, b); }
Expr power(const Expr& a, const Expr& b) { return binary(ir::BinaryOp::power, a, b); }

Expr where(const Expr& cond, const Expr& a0, const Expr& b0) {
  require_field(cond, "where");
  if (cond.type().dtype != DType::boolean)
    throw DTypeError(fmt::format("where: expected a bool condition, given {}", to_string(cond.type().dtype)));
  if (a0.type().is_tuple() || b0.type().is_tuple()) {  // one choice per element
    int element = 0;
    return elementwise(a0, b0, "where", [&](const Expr& x, const Expr& y) {
      const int i = element++;
      if (!x.type().is_tuple() && !y.type().is_tuple() && !is_weak(x) && !is_weak(y) && x.type().dtype != y.type().dtype)
        throw DTypeError(fmt::format("where: tuple element {} has dtypes {} and {}", i, to_string(x.type().dtype),
                                     to_string(y.type().dtype)));
      return where(cond, x, y);
    });
  }
  auto [a, b] = adapt(a0, b0, "where");
  require_same_dtype(a, b, "where");
  const Type t{a.type().dtype, unify_dims(cond.type().dims, unify_dims(a.type().dims, b.type().dims, "where"), "where"), {}};
  return Expr(make_node(ExprKind::where, t, {cond.node(), a.node(), b.node()}));
}

Expr if_(const Expr& flag, const Expr& then_value, const Expr& else_value) {
  require_field(flag, "if_");
  if (flag.type().dtype != DType::boolean)
    throw DTypeError(fmt::format("if_: expected a bool condition, given {}", to_string(flag.type().dtype)));
  if (!flag.type().dims.empty())
    throw DimensionError(fmt::format("if_: expected a scalar condition (no dims), given a field over [{}]; a "
                                     "pointwise choice is where(cond, a, b)", dims_str(flag.type().dims)));
  return where(flag, then_value, else_value);
}

Expr broadcast(const Expr& x, std::vector<Dimension> dims) {
  require_field(x, "broadcast");
  dims = ir::canonical_dims(std::move(dims));
  if (!subset(x.type().dims, dims))
    throw DimensionError(fmt::format("broadcast: target dims [{}] must contain the operand's dims [{}]",
                                     dims_str(dims), dims_str(x.type().dims)));
  if (dims == x.type().dims) return x;
  return Expr(make_node(ExprKind::broadcast, Type{x.type().dtype, dims, {}}, {x.node()}));
}

Expr astype(const Expr& x, DType dtype) {
  if (x.type().is_tuple()) {  // every element converted
    std::vector<Expr> parts;
    for (int i = 0; i < static_cast<int>(x.type().elements.size()); ++i) parts.push_back(astype(x[i], dtype));
    return make_tuple(parts);
  }
  if (x.type().dtype == dtype) return x;
  return Expr(make_node(ExprKind::cast, Type{dtype, x.type().dims, {}}, {x.node()}));
}

Expr index(const Dimension& d) {
  if (d.kind == DimKind::local)
    throw DimensionError(fmt::format("index: expected a horizontal or vertical dimension, given local {}", d.name));
  auto e = make_node(ExprKind::index, Type{DType::int32, {d}, {}});
  e->dim = d;
  return Expr(e);
}

namespace {
// Values of a tuple type, nested tuples' elements included.
std::size_t tuple_values(const Type& t) {
  if (!t.is_tuple()) return 1;
  std::size_t n = 0;
  for (const Type& e : t.elements) n += tuple_values(e);
  return n;
}
// Tuples nested in tuples multiply: without a bound, a few dozen make_tuple calls build a type
// (and messages naming it) of billions of values. Real programs use a handful.
constexpr std::size_t kMaxTupleValues = 64;
}  // namespace

Expr make_tuple(std::vector<Expr> elements) {
  if (elements.empty()) throw DTypeError("make_tuple: expected at least one element, given none");
  std::size_t values = 0;
  for (const auto& x : elements) values += tuple_values(x.type());
  if (values > kMaxTupleValues) {
    throw DTypeError(fmt::format("make_tuple: expected a tuple of at most {} values (nested tuples' elements "
                                 "counted), given {}", kMaxTupleValues, values));
  }
  Type t;
  std::vector<ExprPtr> args;
  for (const auto& x : elements) {
    t.elements.push_back(x.type());
    if (x.type().is_tuple() && x.node()->kind != ExprKind::make_tuple) {
      // A tuple-valued operand (a tuple scan, a where over tuples) nests as the tuple of its
      // elements, so the nesting is all make_tuple and a call can flatten it to its leaves.
      std::vector<Expr> parts;
      for (int i = 0; i < static_cast<int>(x.type().elements.size()); ++i) parts.push_back(x[i]);
      args.push_back(make_tuple(parts).node());
    } else {
      args.push_back(x.node());
    }
  }
  return Expr(make_node(ExprKind::make_tuple, t, args));
}

namespace {
Expr reduce(ir::ReduceOp op, const Expr& x, const Connectivity& c) {
  const std::string what = fmt::format("{}(.., {})", to_string(op), c.name);
  require_field(x, what);
  if (!x.type().has(c.local))
    throw DimensionError(fmt::format("{}: the operand has dims [{}], which do not include the local dimension {}; "
                                     "common cause: the operand was not shifted with {} (write f({}))",
                                     what, dims_str(x.type().dims), c.local.name, c.name, c.name));
  if (x.type().dtype == DType::boolean)
    throw DTypeError(fmt::format("{}: expected a numeric operand, given bool", what));
  std::vector<Dimension> dims;
  for (const auto& d : x.type().dims)
    if (!(d == c.local)) dims.push_back(d);
  auto e = make_node(ExprKind::reduce, Type{x.type().dtype, dims, {}}, {x.node()});
  e->rop = op;
  e->conn = c;
  return Expr(e);
}
}  // namespace

Expr neighbor_sum(const Expr& x, const Connectivity& c) { return reduce(ir::ReduceOp::sum, x, c); }
Expr max_over(const Expr& x, const Connectivity& c) { return reduce(ir::ReduceOp::max, x, c); }
Expr min_over(const Expr& x, const Connectivity& c) { return reduce(ir::ReduceOp::min, x, c); }

Expr neighbor_sum(const Expr& x, const Dimension& axis) {
  if (axis.kind != DimKind::local)
    throw DimensionError(fmt::format("neighbor_sum: cannot reduce over {} dimension {}; expected a local "
                                     "(neighbour) dimension", to_string(axis.kind), axis.name));
  (void)x;
  throw DimensionError(fmt::format("neighbor_sum over {}: pass the connectivity that owns it instead, "
                                   "e.g. neighbor_sum(x, {})", axis.name, axis.name.substr(0, axis.name.size() - 3)));
}

namespace {
IndexCondition comparison(const Dimension& d, ir::CompareOp cmp, const Expr& bound) {
  IndexCondition c;
  c.dim = d;
  c.cmp = cmp;
  c.bound = bound;
  return c;
}
}  // namespace

#define FIELDFLOW_INDEX_CONDITION(op, cmp) \
  IndexCondition operator op(const Dimension& d, const Expr& bound) { return comparison(d, ir::CompareOp::cmp, bound); }
FIELDFLOW_INDEX_CONDITION(==, equal)
FIELDFLOW_INDEX_CONDITION(!=, not_equal)
FIELDFLOW_INDEX_CONDITION(<, less)
FIELDFLOW_INDEX_CONDITION(<=, less_equal)
FIELDFLOW_INDEX_CONDITION(>, greater)
FIELDFLOW_INDEX_CONDITION(>=, greater_equal)
#undef FIELDFLOW_INDEX_CONDITION

#define FIELDFLOW_INDEX_CONDITION_FLIPPED(op, cmp) \
  IndexCondition operator op(const Expr& bound, const Dimension& d) { return comparison(d, ir::CompareOp::cmp, bound); }
FIELDFLOW_INDEX_CONDITION_FLIPPED(==, equal)
FIELDFLOW_INDEX_CONDITION_FLIPPED(!=, not_equal)
FIELDFLOW_INDEX_CONDITION_FLIPPED(<, greater)
FIELDFLOW_INDEX_CONDITION_FLIPPED(<=, greater_equal)
FIELDFLOW_INDEX_CONDITION_FLIPPED(>, less)
FIELDFLOW_INDEX_CONDITION_FLIPPED(>=, less_equal)
#undef FIELDFLOW_INDEX_CONDITION_FLIPPED

IndexCondition operator&(const IndexCondition& a, const IndexCondition& b) {
  IndexCondition c;
  c.op = IndexCondition::Op::all;
  c.parts = {a, b};
  return c;
}
IndexCondition operator|(const IndexCondition& a, const IndexCondition& b) {
  IndexCondition c;
  c.op = IndexCondition::Op::any;
  c.parts = {a, b};
  return c;
}
IndexCondition operator~(const IndexCondition& a) {
  IndexCondition c;
  c.op = IndexCondition::Op::negate;
  c.parts = {a};
  return c;
}

namespace {
Expr concat_where_compare(const IndexCondition& cond, const Expr& a0, const Expr& b0);

// A bound that is minimum/maximum(x, y) becomes a combination of comparisons with x and y
// (K < min(x, y) is K < x & K < y, ...); nullopt when the bound is neither.
std::optional<IndexCondition> expand_min_max(const IndexCondition& c) {
  const ir::Expr& n = *c.bound.node();
  if (n.kind != ExprKind::binary || (n.bop != ir::BinaryOp::minimum && n.bop != ir::BinaryOp::maximum))
    return std::nullopt;
  const Expr x(n.args[0]), y(n.args[1]);
  const bool is_min = n.bop == ir::BinaryOp::minimum;
  const IndexCondition cx = comparison(c.dim, c.cmp, x), cy = comparison(c.dim, c.cmp, y);
  using ir::CompareOp;
  switch (c.cmp) {
    case CompareOp::less:
    case CompareOp::less_equal: return is_min ? (cx & cy) : (cx | cy);
    case CompareOp::greater:
    case CompareOp::greater_equal: return is_min ? (cx | cy) : (cx & cy);
    case CompareOp::equal:
    case CompareOp::not_equal: {
      // K == max(x, y): K == x where x is the larger one, or K == y where y is.
      const CompareOp other = is_min ? CompareOp::less_equal : CompareOp::greater_equal;
      const IndexCondition eq = (comparison(c.dim, CompareOp::equal, x) & comparison(c.dim, other, y)) |
                                (comparison(c.dim, CompareOp::equal, y) & comparison(c.dim, other, x));
      return c.cmp == CompareOp::equal ? eq : ~eq;
    }
  }
  return std::nullopt;
}
}  // namespace

// Compound conditions become nested concat_where nodes, each on one comparison: extent
// inference and code generation then see only the conditions they already reason about
// exactly (each branch's reads are constrained by every comparison on its path).
Expr concat_where(const IndexCondition& cond, const Expr& a, const Expr& b) {
  switch (cond.op) {
    case IndexCondition::Op::compare:
      if (auto expanded = expand_min_max(cond)) return concat_where(*expanded, a, b);
      return concat_where_compare(cond, a, b);
    case IndexCondition::Op::all: return concat_where(cond.parts.at(0), concat_where(cond.parts.at(1), a, b), b);
    case IndexCondition::Op::any: return concat_where(cond.parts.at(0), a, concat_where(cond.parts.at(1), a, b));
    case IndexCondition::Op::negate: return concat_where(cond.parts.at(0), b, a);
  }
  return a;
}

namespace {
Expr concat_where_compare(const IndexCondition& cond, const Expr& a0, const Expr& b0) {
  const std::string what = fmt::format("concat_where({} {} ..)", cond.dim.name, to_string(cond.cmp));
  if (a0.type().is_tuple() || b0.type().is_tuple())  // one region choice per element
    return elementwise(a0, b0, what, [&](const Expr& x, const Expr& y) { return concat_where(cond, x, y); });
  require_field(a0, what);
  require_field(b0, what);
  if (cond.dim.kind == DimKind::local)
    throw DimensionError(fmt::format("{}: expected a horizontal or vertical dimension, given local", what));
  auto [a, b] = adapt(a0, b0, what);
  require_same_dtype(a, b, what);
  auto dims = unify_dims(a.type().dims, b.type().dims, what);
  if (std::find(dims.begin(), dims.end(), cond.dim) == dims.end())
    dims = ir::canonical_dims([&] { auto d = dims; d.push_back(cond.dim); return d; }());
  auto e = make_node(ExprKind::concat_where, Type{a.type().dtype, dims, {}}, {a.node(), b.node()});
  e->dim = cond.dim;
  e->cmp = cond.cmp;
  e->bound = to_sym(cond.bound, what + " bound");
  return Expr(e);
}
}  // namespace

namespace {
// `axis` is the swept dimension of a scan without inputs (nullptr: taken from the inputs).
Expr make_scan(const std::string& name, ScanDirection direction, std::vector<Scalar> init, const ScanBody& body,
               std::vector<Expr> inputs, const Dimension* axis) {
  const std::string what = fmt::format("scan '{}'", name);
  if (init.empty()) throw DTypeError(fmt::format("{}: expected at least one init value, given none", what));
  // The body sees dimensionless placeholders: it computes one level, so it cannot shift.
  std::vector<Expr> carries;
  for (std::size_t i = 0; i < init.size(); ++i) {
    auto c = make_node(ExprKind::carry, Type{init[i].dtype(), {}, {}});
    c->offset = static_cast<std::int64_t>(i);
    carries.push_back(Expr(c));
  }
  std::vector<Expr> args;
  // Without inputs, the carry alone is swept along `axis`: the value is a column over [axis], written
  // to every column of an output that has more dims (its shape comes from the call's domain).
  std::vector<Dimension> dims;
  if (axis) dims.push_back(*axis);
  std::vector<ExprPtr> arg_nodes;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    require_field(inputs[i], what + " input");
    auto a = make_node(ExprKind::scan_arg, Type{inputs[i].type().dtype, {}, {}});
    a->offset = static_cast<std::int64_t>(i);
    args.push_back(Expr(a));
    dims = unify_dims(dims, inputs[i].type().dims, what);
    arg_nodes.push_back(inputs[i].node());
  }
  const Expr carry = carries.size() == 1 ? carries[0] : make_tuple(carries);
  Expr result = body(carry, args);
  // Weak literals in the result take the carry's dtype; anything else must match it exactly.
  std::vector<Expr> parts;
  if (carries.size() == 1) parts.push_back(result);
  else {
    if (!result.type().is_tuple() || result.type().elements.size() != carries.size())
      throw DTypeError(fmt::format("{}: the body must return a tuple of {} values like its carry, returned {}",
                                   what, carries.size(), result.type().to_string()));
    for (std::size_t i = 0; i < carries.size(); ++i) parts.push_back(result[static_cast<int>(i)]);
  }
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (is_weak(parts[i])) parts[i] = retype_literal(parts[i], init[i].dtype(), what);
    if (parts[i].type().dtype != init[i].dtype())
      throw DTypeError(fmt::format("{}: carry component {} has dtype {} but the body returns {}", what, i,
                                   to_string(init[i].dtype()), to_string(parts[i].type().dtype)));
  }
  const Expr final_body = parts.size() == 1 ? parts[0] : make_tuple(parts);
  Dimension vertical;
  int n_vertical = 0;
  for (const auto& d : dims)
    if (d.kind == DimKind::vertical) { vertical = d; ++n_vertical; }
  if (n_vertical != 1)
    throw DimensionError(fmt::format("{}: expected inputs over exactly one vertical dimension to sweep, given [{}]",
                                     what, dims_str(dims)));
  Type t;
  if (init.size() == 1) t = Type{init[0].dtype(), dims, {}};
  else
    for (const auto& v : init) t.elements.push_back(Type{v.dtype(), dims, {}});
  auto e = make_node(ExprKind::scan, t, arg_nodes);
  e->name = name;
  e->dim = vertical;
  e->forward = direction == ScanDirection::forward;
  e->init = init;
  e->body = final_body.node();
  return Expr(e);
}
}  // namespace

Expr scan(const std::string& name, ScanDirection direction, std::vector<Scalar> init, const ScanBody& body,
          std::vector<Expr> inputs) {
  if (inputs.empty())
    throw DimensionError(fmt::format("scan '{}': expected inputs to sweep, given none; a scan whose only state "
                                     "is its carry names the dimension it sweeps: scan(name, direction, init, "
                                     "body, K)", name));
  return make_scan(name, direction, std::move(init), body, std::move(inputs), nullptr);
}

Expr scan(const std::string& name, ScanDirection direction, std::vector<Scalar> init, const ScanBody& body,
          const Dimension& axis) {
  if (axis.kind != DimKind::vertical)
    throw DimensionError(fmt::format("scan '{}': expected a vertical dimension to sweep, given {} ({})", name,
                                     axis.name, to_string(axis.kind)));
  return make_scan(name, direction, std::move(init), body, {}, &axis);
}

Expr named(const std::string& label, const Expr& x) {
  if (x.type().is_tuple()) {  // the label goes to every element
    std::vector<Expr> parts;
    for (int i = 0; i < static_cast<int>(x.type().elements.size()); ++i) parts.push_back(named(label, x[i]));
    return make_tuple(parts);
  }
  auto e = make_node(ExprKind::named, x.type(), {x.node()});
  e->name = label;
  return Expr(e);
}

Expr materialize(const std::string& label, const Expr& x) {
  require_field(x, fmt::format("materialize('{}')", label));
  auto e = make_node(ExprKind::named, x.type(), {x.node()});
  e->name = label;
  e->materialize = true;
  return Expr(e);
}

}  // namespace fieldflow
