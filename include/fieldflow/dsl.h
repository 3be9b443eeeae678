#pragma once
// The C++ DSL for field programs (user guide: docs/language.md).
//
// Field operators are plain C++ functions from Expr to Expr; calling one from another is a C++
// call, and every Expr is typed (dims + dtype) and checked as it is built, so mistakes surface
// at construction with a DimensionError / DTypeError. A ProgramBuilder declares parameters and
// the ordered operator calls writing `out` fields over explicit domains.
#include <functional>
#include <string>
#include <vector>

#include "fieldflow/ir.h"

namespace fieldflow {

struct CartesianOffset { Dimension dim; std::int64_t offset; };
struct DynamicOffset;
// One neighbour slot of a connectivity's local dimension: w(slot(E2C2V, 2)) reads slot 2 of a
// sparse field w over (Edge, E2C2VDim, K), a field over (Edge, K) (GT4Py: w[E2C2VDim(2)]).
struct LocalSlot { Connectivity conn; int index; };
LocalSlot slot(const Connectivity& c, int index);

CartesianOffset operator+(const Dimension& d, std::int64_t k);
CartesianOffset operator-(const Dimension& d, std::int64_t k);

class Expr {
 public:
  Expr(ir::ExprPtr node) : node_(std::move(node)) {}
  // Literals are weakly typed: 2.0 * f keeps f's float32, 2 * f works for any numeric f.
  Expr(double v);
  Expr(int v);
  Expr(std::int64_t v);  // e.g. a mesh size as a domain bound
  Expr(bool v);
  // Typed literals: exactly this dtype.
  static Expr literal(Scalar v);

  Expr operator()(const CartesianOffset& o) const;  // f(I+1), f(K-1)
  Expr operator()(const DynamicOffset& o) const;    // f(K + offset_field)
  Expr operator()(const NeighborOffset& o) const;   // f(E2V[0])
  Expr operator()(const Connectivity& c) const;     // f(E2V): local field over E2V's neighbours
  Expr operator()(const LocalSlot& s) const;        // w(slot(E2V, 1)): one slot of a local field
  Expr operator[](int i) const;                     // tuple element

  const ir::Type& type() const { return node_->type; }
  const ir::ExprPtr& node() const { return node_; }

 private:
  ir::ExprPtr node_;
};

struct DynamicOffset { Dimension dim; Expr offset; };
DynamicOffset operator+(const Dimension& d, const Expr& offset);

Expr operator-(const Expr& a);
Expr operator!(const Expr& a);
Expr operator~(const Expr& a);
Expr operator+(const Expr& a, const Expr& b);
Expr operator-(const Expr& a, const Expr& b);
Expr operator*(const Expr& a, const Expr& b);
Expr operator/(const Expr& a, const Expr& b);
Expr operator<(const Expr& a, const Expr& b);
Expr operator<=(const Expr& a, const Expr& b);
Expr operator>(const Expr& a, const Expr& b);
Expr operator>=(const Expr& a, const Expr& b);
Expr operator==(const Expr& a, const Expr& b);
Expr operator!=(const Expr& a, const Expr& b);
Expr operator&(const Expr& a, const Expr& b);
Expr operator|(const Expr& a, const Expr& b);
Expr operator^(const Expr& a, const Expr& b);  // bool xor
Expr operator+(const Expr& a);                 // unary plus: the operand itself (numeric)
// Integer floor division (Python's //) and modulo (Python's %, the sign of the divisor); by zero
// both give 0. `/` on integers truncates toward zero like C++.
Expr floor_divide(const Expr& a, const Expr& b);
Expr operator%(const Expr& a, const Expr& b);

// Math builtins.
Expr abs(const Expr& x);
Expr sqrt(const Expr& x);
Expr exp(const Expr& x);
Expr log(const Expr& x);
Expr sin(const Expr& x);
Expr cos(const Expr& x);
Expr tan(const Expr& x);
Expr arcsin(const Expr& x);
Expr arccos(const Expr& x);
Expr arctan(const Expr& x);
Expr sinh(const Expr& x);
Expr cosh(const Expr& x);
Expr tanh(const Expr& x);
Expr floor(const Expr& x);
Expr ceil(const Expr& x);
Expr trunc(const Expr& x);
Expr isnan(const Expr& x);
Expr isinf(const Expr& x);
Expr isfinite(const Expr& x);
Expr cbrt(const Expr& x);   // cube root, also of negative numbers
Expr gamma(const Expr& x);  // the gamma function (std::tgamma): gamma(n + 1) == n!
Expr minimum(const Expr& a, const Expr& b);
Expr maximum(const Expr& a, const Expr& b);
Expr fmod(const Expr& a, const Expr& b);
Expr power(const Expr& a, const Expr& b);

Expr where(const Expr& cond, const Expr& a, const Expr& b);
// if/else on a runtime bool scalar (a scalar parameter or an expression of them, no dims):
// if_(flag, a, b) is a where whose condition is one value per call. Both branches are computed,
// so both must be readable; a and b may be tuples. A field condition is a DimensionError (use where).
Expr if_(const Expr& flag, const Expr& then_value, const Expr& else_value);
Expr broadcast(const Expr& x, std::vector<Dimension> dims);
Expr astype(const Expr& x, DType dtype);
Expr index(const Dimension& d);  // the current index along d (int32)
Expr make_tuple(std::vector<Expr> elements);

// Neighbour reductions over a connectivity's local dimension; missing neighbours (-1) are skipped.
// An element with no neighbour at all gets 0 (sum), the lowest (max) or highest (min) value.
Expr neighbor_sum(const Expr& x, const Connectivity& over);
Expr max_over(const Expr& x, const Connectivity& over);
Expr min_over(const Expr& x, const Connectivity& over);
// Naming a non-local dimension as the reduction axis is a DimensionError.
Expr neighbor_sum(const Expr& x, const Dimension& axis);

// concat_where on index conditions: K == 0, K < n, K >= nk - 1, and their combinations with
// & (both), | (either) and ~ (not), e.g. (maximum(2, nk - 2) <= K) & (K < nk - 1). Bounds are
// integer constants, affine expressions of int scalar parameters, or minimum/maximum of those.
struct IndexCondition {
  enum class Op { compare, all, any, negate };
  Dimension dim;  // compare: dim cmp bound
  ir::CompareOp cmp = ir::CompareOp::equal;
  Expr bound = 0;
  Op op = Op::compare;
  std::vector<IndexCondition> parts;  // all / any: two conditions; negate: one
};
IndexCondition operator==(const Dimension& d, const Expr& bound);
IndexCondition operator!=(const Dimension& d, const Expr& bound);
IndexCondition operator<(const Dimension& d, const Expr& bound);
IndexCondition operator<=(const Dimension& d, const Expr& bound);
IndexCondition operator>(const Dimension& d, const Expr& bound);
IndexCondition operator>=(const Dimension& d, const Expr& bound);
IndexCondition operator==(const Expr& bound, const Dimension& d);  // 2 <= K is K >= 2
IndexCondition operator!=(const Expr& bound, const Dimension& d);
IndexCondition operator<(const Expr& bound, const Dimension& d);
IndexCondition operator<=(const Expr& bound, const Dimension& d);
IndexCondition operator>(const Expr& bound, const Dimension& d);
IndexCondition operator>=(const Expr& bound, const Dimension& d);
IndexCondition operator&(const IndexCondition& a, const IndexCondition& b);
IndexCondition operator|(const IndexCondition& a, const IndexCondition& b);
IndexCondition operator~(const IndexCondition& c);
Expr concat_where(const IndexCondition& cond, const Expr& a, const Expr& b);

// Scan operator: sweeps the vertical dimension of its inputs, forward (increasing index) or
// backward, starting from `init` (one value per carry component). `body(carry, inputs)` computes
// the new carry at one level from the previous one (carry[i] for tuple carries) and the inputs'
// values at that level. The result (the carry at every level) has the carry's dtype(s).
enum class ScanDirection { forward, backward };
using ScanBody = std::function<Expr(const Expr& carry, const std::vector<Expr>& inputs)>;
Expr scan(const std::string& name, ScanDirection direction, std::vector<Scalar> init,
          const ScanBody& body, std::vector<Expr> inputs);
// A scan without inputs, whose only state is the carry (body(carry, {})): it sweeps the vertical
// dimension `axis` and its value is over [axis]; a call writes it to every column of its output.
Expr scan(const std::string& name, ScanDirection direction, std::vector<Scalar> init,
          const ScanBody& body, const Dimension& axis);

// Labels a value (transients are named after labels); materialize() also asks the compiler
// to store it as a transient instead of recomputing it where it is read.
Expr named(const std::string& label, const Expr& x);
Expr materialize(const std::string& label, const Expr& x);

class ProgramBuilder {
 public:
  explicit ProgramBuilder(std::string name);
  Expr field(const std::string& name, std::vector<Dimension> dims, DType dtype);
  Expr scalar(const std::string& name, DType dtype);
  // A tuple of fields as one parameter: its elements are the field parameters "name.0",
  // "name.1", ... (pass them with Arguments::tuple), and the returned Expr is their tuple; it may
  // be read like any tuple and given as an output (filling one field per element).
  struct FieldSpec { std::vector<Dimension> dims; DType dtype; };
  Expr tuple_field(const std::string& name, std::vector<FieldSpec> elements);
  // Connectivities used by expressions become parameters automatically (named like the
  // connectivity); declaring one explicitly is only needed for a program that reads none.
  void connectivity(const Connectivity& c);
  // Domain bounds are integer constants or affine expressions of int scalar parameters.
  struct Bound { Dimension dim; Expr lo, hi; };
  void call(const std::string& op, const Expr& value, std::vector<Expr> outputs, std::vector<Bound> domain);
  ir::Program build() const;  // verifies; throws on any inconsistency

 private:
  ir::Program program_;
};

}  // namespace fieldflow
