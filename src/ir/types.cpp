// IR basics: types, symbolic bounds, operator names, traversal.
#include <algorithm>
#include <fmt/format.h>
#include <unordered_set>

#include "fieldflow/abi.h"
#include "fieldflow/errors.h"
#include "fieldflow/ir.h"

namespace fieldflow::ir {

bool Type::has(const Dimension& d) const {
  return std::find(dims.begin(), dims.end(), d) != dims.end();
}

std::string Type::to_string() const {
  if (is_tuple()) {
    std::string s = "(";
    for (std::size_t i = 0; i < elements.size(); ++i) s += (i ? ", " : "") + elements[i].to_string();
    return s + ")";
  }
  std::string s = std::string(fieldflow::to_string(dtype));
  if (dims.empty()) return s;
  s += "[";
  for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + dims[i].name;
  return s + "]";
}

int Type::leaf_count() const {
  if (!is_tuple()) return 1;
  int n = 0;
  for (const auto& e : elements) n += e.leaf_count();
  return n;
}

const Type& Type::leaf(int i) const {
  if (!is_tuple()) return *this;
  for (const auto& e : elements) {
    const int n = e.leaf_count();
    if (i < n) return e.leaf(i);
    i -= n;
  }
  FIELDFLOW_UNREACHABLE(fmt::format("leaf {} of {} out of range", i, to_string()));
}

std::vector<Dimension> canonical_dims(std::vector<Dimension> dims) {
  auto group = [](const Dimension& d) { return d.kind == DimKind::horizontal ? 0 : d.kind == DimKind::local ? 1 : 2; };
  std::sort(dims.begin(), dims.end(), [&](const Dimension& a, const Dimension& b) {
    return group(a) != group(b) ? group(a) < group(b) : a.name < b.name;
  });
  dims.erase(std::unique(dims.begin(), dims.end()), dims.end());
  return dims;
}

SymExpr SymExpr::symbol(const std::string& name) {
  SymExpr s;
  s.terms.push_back({name, 1});
  return s;
}

namespace {
// Bounds are int64 arithmetic that wraps, like the language's integers (fieldflow/abi.h) and the
// generated code's evaluation of the same bounds (PointEmitter::sym): a bound far outside any
// field is then refused by the extent checks, never undefined behaviour.
std::int64_t wrap_add(std::int64_t a, std::int64_t b) {
  return static_cast<std::int64_t>(static_cast<std::uint64_t>(a) + static_cast<std::uint64_t>(b));
}
std::int64_t wrap_mul(std::int64_t a, std::int64_t b) {
  return static_cast<std::int64_t>(static_cast<std::uint64_t>(a) * static_cast<std::uint64_t>(b));
}
// |k| as printed after a sign: exact for INT64_MIN too.
std::uint64_t magnitude(std::int64_t k) {
  return k < 0 ? std::uint64_t(0) - static_cast<std::uint64_t>(k) : static_cast<std::uint64_t>(k);
}

// One non-affine step on int64 values, with the helpers generated code uses (generate_cpu's sym_op).
std::int64_t apply(SymOpKind kind, std::int64_t a, std::int64_t b) {
  switch (kind) {
    case SymOpKind::div: return abi::ff_div(a, b);
    case SymOpKind::floor_divide: return abi::ff_floordiv(a, b);
    case SymOpKind::mod: return abi::ff_mod(a, b);
    case SymOpKind::mul: return wrap_mul(a, b);
    case SymOpKind::min: return abi::ff_min(a, b);
    case SymOpKind::max: return abi::ff_max(a, b);
  }
  return 0;
}
}  // namespace

std::int64_t SymExpr::evaluate(const std::map<std::string, std::int64_t>& values) const {
  std::int64_t v = constant;
  for (const auto& [name, k] : terms) {
    if (auto op = ops.find(name); op != ops.end()) {
      v = wrap_add(v, wrap_mul(k, apply(op->second->kind, op->second->a.evaluate(values), op->second->b.evaluate(values))));
      continue;
    }
    auto it = values.find(name);
    if (it == values.end())
      throw ArgumentError(fmt::format("domain bound {} needs scalar parameter '{}', which was not given",
                                      to_string(), name));
    v = wrap_add(v, wrap_mul(k, it->second));
  }
  return v;
}

std::string SymExpr::to_string() const {
  std::string s;
  for (const auto& [name, k] : terms) {
    if (s.empty()) s = k == 1 ? name : k == -1 ? "-" + name : fmt::format("{}*{}", k, name);
    else s += k == 1 ? " + " + name : k == -1 ? " - " + name : fmt::format(" {} {}*{}", k < 0 ? '-' : '+', magnitude(k), name);
  }
  if (s.empty()) return fmt::format("{}", constant);
  if (constant > 0) s += fmt::format(" + {}", constant);
  if (constant < 0) s += fmt::format(" - {}", magnitude(constant));
  return s;
}

std::vector<std::string> SymExpr::parameters() const {
  std::vector<std::string> out;
  for (const auto& [name, k] : terms) {
    auto op = ops.find(name);
    if (op == ops.end()) {
      out.push_back(name);
      continue;
    }
    for (const SymExpr* x : {&op->second->a, &op->second->b})
      for (auto& p : x->parameters()) out.push_back(std::move(p));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

namespace {
SymExpr combine(SymExpr a, const SymExpr& b, std::int64_t sign) {
  a.ops.insert(b.ops.begin(), b.ops.end());
  a.constant = wrap_add(a.constant, wrap_mul(sign, b.constant));
  for (const auto& [name, k] : b.terms) {
    // Lambdas capture a copy of the binding's reference: clang before 16 cannot capture structured bindings.
    auto it = std::find_if(a.terms.begin(), a.terms.end(), [&term = name](auto& t) { return t.first == term; });
    if (it == a.terms.end()) a.terms.push_back({name, wrap_mul(sign, k)});
    else it->second = wrap_add(it->second, wrap_mul(sign, k));
  }
  std::erase_if(a.terms, [](auto& t) { return t.second == 0; });
  std::sort(a.terms.begin(), a.terms.end());
  return a;
}
}  // namespace

SymExpr operator+(SymExpr a, const SymExpr& b) { return combine(std::move(a), b, 1); }
SymExpr operator-(SymExpr a, const SymExpr& b) { return combine(std::move(a), b, -1); }
SymExpr operator*(SymExpr a, std::int64_t k) {
  a.constant = wrap_mul(a.constant, k);
  for (auto& t : a.terms) t.second = wrap_mul(t.second, k);
  std::erase_if(a.terms, [](auto& t) { return t.second == 0; });
  return a;
}

SymExpr sym_operation(SymOpKind kind, const SymExpr& a, const SymExpr& b) {
  if (a.is_constant() && b.is_constant()) return SymExpr(apply(kind, a.constant, b.constant));
  if (kind == SymOpKind::mul && a.is_constant()) return b * a.constant;
  if (kind == SymOpKind::mul && b.is_constant()) return a * b.constant;
  static const char* names[] = {"/", "//", "%", "*", "min", "max"};
  const char* n = names[static_cast<int>(kind)];
  const std::string name = kind == SymOpKind::min || kind == SymOpKind::max
                               ? fmt::format("{}({}, {})", n, a.to_string(), b.to_string())
                               : fmt::format("({} {} {})", a.to_string(), n, b.to_string());
  SymExpr s = SymExpr::symbol(name);
  s.ops[name] = std::make_shared<const SymOp>(SymOp{kind, a, b});
  return s;
}

std::string to_string(const Domain& d) {
  std::string s = "{";
  for (std::size_t i = 0; i < d.size(); ++i)
    s += fmt::format("{}{}: [{}, {})", i ? ", " : "", d[i].dim.name, d[i].lo.to_string(), d[i].hi.to_string());
  return s + "}";
}

std::string_view to_string(ExprKind k) {
  switch (k) {
    case ExprKind::field_ref: return "field_ref";
    case ExprKind::scalar_ref: return "scalar_ref";
    case ExprKind::literal: return "literal";
    case ExprKind::index: return "index";
    case ExprKind::unary: return "unary";
    case ExprKind::binary: return "binary";
    case ExprKind::where: return "where";
    case ExprKind::concat_where: return "concat_where";
    case ExprKind::cast: return "astype";
    case ExprKind::broadcast: return "broadcast";
    case ExprKind::shift: return "shift";
    case ExprKind::dynamic_shift: return "dynamic_shift";
    case ExprKind::neighbor_shift: return "neighbor_shift";
    case ExprKind::reduce: return "reduce";
    case ExprKind::make_tuple: return "make_tuple";
    case ExprKind::tuple_get: return "tuple_get";
    case ExprKind::scan: return "scan";
    case ExprKind::scan_arg: return "scan_arg";
    case ExprKind::carry: return "carry";
    case ExprKind::named: return "named";
    case ExprKind::local_slot: return "local_slot";
  }
  return "?";
}

std::string_view to_string(UnaryOp op) {
  static const char* names[] = {"neg", "not", "abs", "sqrt", "exp", "log", "sin", "cos", "tan", "arcsin", "arccos",
                                "arctan", "sinh", "cosh", "tanh", "floor", "ceil", "trunc", "isnan", "isinf", "isfinite",
                                "cbrt", "gamma"};
  return names[static_cast<int>(op)];
}

std::string_view to_string(BinaryOp op) {
  static const char* names[] = {"+", "-", "*", "/", "<", "<=", ">", ">=", "==", "!=", "&", "|",
                                "minimum", "maximum", "fmod", "power", "//", "%", "^"};
  return names[static_cast<int>(op)];
}

std::string_view to_string(ReduceOp op) {
  static const char* names[] = {"neighbor_sum", "max_over", "min_over"};
  return names[static_cast<int>(op)];
}

std::string_view to_string(CompareOp op) {
  static const char* names[] = {"<", "<=", ">", ">=", "==", "!="};
  return names[static_cast<int>(op)];
}

bool is_comparison(BinaryOp op) { return op >= BinaryOp::less && op <= BinaryOp::not_equal; }
bool is_logical(BinaryOp op) {
  return op == BinaryOp::logical_and || op == BinaryOp::logical_or || op == BinaryOp::logical_xor;
}
bool is_predicate(UnaryOp op) { return op == UnaryOp::isnan || op == UnaryOp::isinf || op == UnaryOp::isfinite; }

const Param* Program::find(const std::string& n) const {
  for (const auto& p : params)
    if (p.name == n) return &p;
  return nullptr;
}

int Program::index_of(const std::string& n) const {
  for (std::size_t i = 0; i < params.size(); ++i)
    if (params[i].name == n) return static_cast<int>(i);
  return -1;
}

std::vector<const Expr*> post_order(const ExprPtr& root, bool include_scan_bodies) {
  std::vector<const Expr*> out;
  std::unordered_set<const Expr*> seen;
  // Iterative DFS: deep expression chains (long operator pipelines) must not overflow the stack.
  std::vector<std::pair<const Expr*, bool>> stack{{root.get(), false}};
  while (!stack.empty()) {
    auto [e, expanded] = stack.back();
    stack.pop_back();
    if (expanded) {
      out.push_back(e);
      continue;
    }
    if (!seen.insert(e).second) continue;
    stack.push_back({e, true});
    if (e->body && include_scan_bodies) stack.push_back({e->body.get(), false});
    for (auto it = e->args.rbegin(); it != e->args.rend(); ++it) stack.push_back({it->get(), false});
  }
  return out;
}

}  // namespace fieldflow::ir
