#pragma once
// The typed IR of field programs. Built by the DSL (fieldflow/dsl.h), checked by ir::verify,
// interpreted by the reference executor and lowered by the passes. Expressions are immutable DAG
// nodes shared through shared_ptr; a node's type is computed once, when it is built.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fieldflow/field.h"

namespace fieldflow::ir {

// The type of an expression: a field (dims + dtype; no dims = a scalar value) or a tuple, whose
// elements may be tuples again. A call writes a nested tuple as its leaves (fields) in
// depth-first order, and the frontend hands passes and backends flat tuples only.
struct Type {
  DType dtype = DType::float64;
  std::vector<Dimension> dims;  // canonical order: horizontal, local, vertical (then by name)
  std::vector<Type> elements;   // non-empty: a tuple
  bool is_tuple() const { return !elements.empty(); }
  int leaf_count() const;                 // 1 for a field
  const Type& leaf(int i) const;          // the i-th field, depth first; the type itself for a field
  bool has(const Dimension& d) const;
  std::string to_string() const;
  friend bool operator==(const Type& a, const Type& b) {
    return a.dtype == b.dtype && a.dims == b.dims && a.elements == b.elements;
  }
};
std::vector<Dimension> canonical_dims(std::vector<Dimension> dims);

struct SymOp;

// An integer expression over int scalar parameters: the language of domain bounds, so one
// compiled program serves every size. It is affine in its terms; a term is an int scalar
// parameter or, for bounds like `n / 2`, a non-affine operation on two SymExprs whose name (its
// printed form, e.g. "(n / 2)") is a key of `ops`. Passes add and subtract bounds affinely and
// never look inside an operation; evaluation does.
struct SymExpr {
  std::int64_t constant = 0;
  std::vector<std::pair<std::string, std::int64_t>> terms;  // (scalar parameter or operation, coefficient), sorted
  std::map<std::string, std::shared_ptr<const SymOp>> ops;   // the operations among the terms' names
  SymExpr() = default;
  SymExpr(std::int64_t c) : constant(c) {}
  static SymExpr symbol(const std::string& name);
  bool is_constant() const { return terms.empty(); }
  std::int64_t evaluate(const std::map<std::string, std::int64_t>& values) const;  // ArgumentError if missing
  std::string to_string() const;
  std::vector<std::string> parameters() const;  // every scalar parameter it reads, also inside operations
  friend SymExpr operator+(SymExpr a, const SymExpr& b);
  friend SymExpr operator-(SymExpr a, const SymExpr& b);
  friend SymExpr operator*(SymExpr a, std::int64_t k);
  friend bool operator==(const SymExpr& a, const SymExpr& b) {
    return a.constant == b.constant && a.terms == b.terms;
  }
};

// A non-affine step of a bound, with the integer semantics of the language (fieldflow/abi.h):
// `/` truncates, floor_divide and mod follow Python, division by zero gives 0.
enum class SymOpKind : std::uint8_t { div, floor_divide, mod, mul, min, max };
struct SymOp {
  SymOpKind kind;
  SymExpr a, b;
};
// a op b, folded when both are constants; an affine result stays affine (k * n, n * k).
SymExpr sym_operation(SymOpKind kind, const SymExpr& a, const SymExpr& b);

struct DomainRange {
  Dimension dim;
  SymExpr lo, hi;  // half-open [lo, hi), absolute indices
};
using Domain = std::vector<DomainRange>;
std::string to_string(const Domain& d);

enum class ExprKind : std::uint8_t {
  field_ref,       // name: a field parameter
  scalar_ref,      // name: a scalar parameter
  literal,         // literal (weak: adopts the other operand's dtype, see dsl.h)
  index,           // dim: the current index along dim, int32
  unary,           // uop(args[0])
  binary,          // bop(args[0], args[1])
  where,           // args[0] ? args[1] : args[2], pointwise
  concat_where,    // (index along dim) cmp bound ? args[0] : args[1]
  cast,            // args[0] as type.dtype
  broadcast,       // args[0] seen over type.dims
  shift,           // args[0] read at index + offset along dim (Cartesian / vertical)
  dynamic_shift,   // args[0] read at index + args[1] along dim (vertical, integer offsets)
  neighbor_shift,  // args[0] read at conn's neighbour `offset` (offset -1: all, local field)
  reduce,          // rop over conn.local of args[0], skipping missing neighbours
  make_tuple,      // (args...)
  tuple_get,       // args[0][offset]
  scan,            // sweep body along dim (forward?) from init; args: the per-level inputs
  scan_arg,        // inside a scan body: the value of the scan's input #offset at this level
  carry,           // inside a scan body: component #offset of the previous level's result
  named,           // args[0], labelled `name` (materialize: the user asks for a transient)
  local_slot,      // args[0] (over conn.local) read at neighbour slot `offset`: drops the local dim
};
std::string_view to_string(ExprKind k);

enum class UnaryOp : std::uint8_t {
  neg, logical_not, abs, sqrt, exp, log, sin, cos, tan, arcsin, arccos, arctan, sinh, cosh, tanh,
  floor, ceil, trunc, isnan, isinf, isfinite,
  cbrt, gamma  // gamma is the gamma function (std::tgamma), not its logarithm
};
enum class BinaryOp : std::uint8_t {
  add, sub, mul, div, less, less_equal, greater, greater_equal, equal, not_equal,
  logical_and, logical_or, minimum, maximum, fmod, power,
  floor_divide, mod, logical_xor  // integer // and % (Python semantics, abi.h), bool ^
};
enum class ReduceOp : std::uint8_t { sum, max, min };
enum class CompareOp : std::uint8_t { less, less_equal, greater, greater_equal, equal, not_equal };
std::string_view to_string(UnaryOp op);
std::string_view to_string(BinaryOp op);
std::string_view to_string(ReduceOp op);
std::string_view to_string(CompareOp op);
bool is_comparison(BinaryOp op);
bool is_logical(BinaryOp op);
bool is_predicate(UnaryOp op);  // isnan, isinf, isfinite: bool result

struct Expr;
using ExprPtr = std::shared_ptr<const Expr>;

// A member added to Expr, Param, Stmt, Program (or the types they hold) must also be written by
// ir::structural_key (src/ir/structural_key.cpp): compiled sources are found by that key.
struct Expr {
  ExprKind kind;
  Type type;
  std::vector<ExprPtr> args;
  std::string name;            // field_ref, scalar_ref, named, scan (operator name)
  Scalar literal;              // literal
  bool weak = false;           // literal written without a dtype in user code
  UnaryOp uop = UnaryOp::neg;
  BinaryOp bop = BinaryOp::add;
  ReduceOp rop = ReduceOp::sum;
  CompareOp cmp = CompareOp::equal;
  Dimension dim;               // index, concat_where, shift, dynamic_shift, scan
  std::int64_t offset = 0;     // shift offset, neighbour index, tuple/carry/scan-arg index
  Connectivity conn;           // neighbor_shift, reduce
  SymExpr bound;               // concat_where
  bool forward = true;         // scan
  bool materialize = false;    // named
  std::vector<Scalar> init;    // scan: initial carry, one per component
  ExprPtr body;                // scan: built from carry / scan_arg nodes
};

enum class ParamKind : std::uint8_t { field, scalar, connectivity };

struct Param {
  std::string name;
  ParamKind kind = ParamKind::field;
  Type type;          // field: dims + dtype; scalar: dtype, no dims
  Connectivity conn;  // connectivity
};

// One field-operator call of a program: evaluates `expr` over `domain` into `outputs`
// (one per tuple element). Points of an output outside the domain are left untouched.
struct Stmt {
  std::string op;  // the called operator's name, for messages and printing
  ExprPtr expr;
  std::vector<std::string> outputs;
  Domain domain;
};

struct Program {
  std::string name;
  std::vector<Param> params;
  std::vector<Stmt> stmts;
  const Param* find(const std::string& name) const;
  int index_of(const std::string& name) const;  // -1 if absent
};

// Structural checks on a whole program (names resolve, types agree, domains match outputs).
// Throws the matching fieldflow::Error subclass naming the program and the offender.
void verify(const Program& p);

std::string print(const Expr& e);
std::string print(const Program& p);

// Every node reachable from e, each once, children before parents; scan bodies are included
// unless include_scan_bodies is false.
std::vector<const Expr*> post_order(const ExprPtr& e, bool include_scan_bodies = true);

}  // namespace fieldflow::ir
