// ir::structural_key: equal programs (built twice) get equal keys, and a change to any member of
// any node, parameter or statement -- or to how nodes are shared -- gives another key. Compiled
// sources are found by this key (driver::cpu_source_key), so a missed member would hand one
// program another's code.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "fieldflow/dsl.h"
#include "ir/structural_key.h"

namespace fieldflow {
namespace {

const Dimension I = horizontal_dim("I");
const Dimension K = vertical_dim("K");

ir::Program sample(double weight) {
  ProgramBuilder pb("sample");
  Expr in = pb.field("in", {I, K}, DType::float64);
  Expr out = pb.field("out", {I, K}, DType::float64);
  Expr n = pb.scalar("n", DType::int32);
  pb.call("smooth", in(I + 1) * weight + in(I - 1), {out}, {{I, 1, n}, {K, 0, 4}});
  return pb.build();
}

TEST(StructuralKey, EqualProgramsBuiltTwiceHaveEqualKeys) {
  EXPECT_EQ(ir::structural_key(sample(0.5)), ir::structural_key(sample(0.5)));
  EXPECT_NE(ir::structural_key(sample(0.5)), ir::structural_key(sample(std::nextafter(0.5, 1.0))));
  EXPECT_NE(ir::structural_key(sample(0.0)), ir::structural_key(sample(-0.0)));
  const double nan1 = std::numeric_limits<double>::quiet_NaN();
  const double nan2 = std::bit_cast<double>(std::bit_cast<std::uint64_t>(nan1) | 1u);
  EXPECT_NE(ir::structural_key(sample(nan1)), ir::structural_key(sample(nan2)));
}

// One node of every kind of member, each mutated in turn: every mutation gives a key of its own.
TEST(StructuralKey, EveryMemberOfANodeIsInTheKey) {
  const ir::Program base = sample(0.5);
  const auto root = base.stmts[0].expr;
  using Mutation = std::function<void(ir::Expr&)>;
  const Connectivity c2e = make_connectivity("C2E", horizontal_dim("Cell"), horizontal_dim("Edge"), 3);
  const std::vector<Mutation> mutations = {
      [](ir::Expr& e) { e.kind = ir::ExprKind::where; },
      [](ir::Expr& e) { e.type.dtype = DType::float32; },
      [](ir::Expr& e) { e.type.dims.pop_back(); },
      [&](ir::Expr& e) { e.type.elements = {e.type}; },
      [](ir::Expr& e) { e.args.pop_back(); },
      [](ir::Expr& e) { std::swap(e.args[0], e.args[1]); },
      [](ir::Expr& e) { e.name = "x"; },
      [](ir::Expr& e) { e.literal = Scalar(1.0); },
      [](ir::Expr& e) { e.literal = Scalar(std::int64_t{0}); },
      [](ir::Expr& e) { e.weak = !e.weak; },
      [](ir::Expr& e) { e.uop = ir::UnaryOp::sqrt; },
      [](ir::Expr& e) { e.bop = ir::BinaryOp::sub; },
      [](ir::Expr& e) { e.rop = ir::ReduceOp::max; },
      [](ir::Expr& e) { e.cmp = ir::CompareOp::less; },
      [](ir::Expr& e) { e.dim = K; },
      [](ir::Expr& e) { e.dim = Dimension{"K", DimKind::horizontal}; },
      [](ir::Expr& e) { e.offset = 1; },
      [&](ir::Expr& e) { e.conn = c2e; },
      [&](ir::Expr& e) { e.conn = c2e, e.conn.max_neighbors = 4; },
      [&](ir::Expr& e) { e.conn = c2e, e.conn.local.name = "C2E_other"; },
      [](ir::Expr& e) { e.bound = ir::SymExpr(1); },
      [](ir::Expr& e) { e.bound = ir::SymExpr::symbol("n"); },
      [](ir::Expr& e) { e.bound = ir::sym_operation(ir::SymOpKind::div, ir::SymExpr::symbol("n"), ir::SymExpr(2)); },
      [](ir::Expr& e) { e.bound = ir::sym_operation(ir::SymOpKind::mod, ir::SymExpr::symbol("n"), ir::SymExpr(2)); },
      [](ir::Expr& e) { e.forward = !e.forward; },
      [](ir::Expr& e) { e.materialize = !e.materialize; },
      [](ir::Expr& e) { e.init = {Scalar(0.0)}; },
      [](ir::Expr& e) { e.init = {Scalar(-0.0)}; },
      [&](ir::Expr& e) { e.body = e.args[0]; },
  };
  std::set<std::string> keys = {ir::structural_key(base)};
  for (std::size_t m = 0; m < mutations.size(); ++m) {
    auto changed = std::make_shared<ir::Expr>(*root);
    mutations[m](*changed);
    ir::Program p = base;
    p.stmts[0].expr = changed;
    EXPECT_TRUE(keys.insert(ir::structural_key(p)).second) << "mutation " << m << " did not change the key";
  }
}

TEST(StructuralKey, ParametersStatementsAndSharingAreInTheKey) {
  const ir::Program base = sample(0.5);
  using Mutation = std::function<void(ir::Program&)>;
  const std::vector<Mutation> mutations = {
      [](ir::Program& p) { p.name = "other"; },
      [](ir::Program& p) { p.params[0].name = "in2"; },
      [](ir::Program& p) { p.params[0].kind = ir::ParamKind::scalar; },
      [](ir::Program& p) { p.params[0].type.dtype = DType::float32; },
      [](ir::Program& p) { p.params[0].conn.max_neighbors = 2; },
      [](ir::Program& p) { std::swap(p.params[0], p.params[1]); },
      [](ir::Program& p) { p.stmts[0].op = "other"; },
      [](ir::Program& p) { p.stmts[0].outputs = {"in"}; },
      [](ir::Program& p) { p.stmts[0].domain[1].hi = ir::SymExpr(5); },
      [](ir::Program& p) { p.stmts[0].domain[0].lo = ir::SymExpr(0); },
      [](ir::Program& p) { p.stmts[0].domain.pop_back(); },
      [](ir::Program& p) { p.stmts.push_back(p.stmts[0]); },
      // The same tree with its two operands one shared node instead of two equal ones.
      [](ir::Program& p) {
        auto e = std::make_shared<ir::Expr>(*p.stmts[0].expr);
        e->args[1] = e->args[0];
        p.stmts[0].expr = e;
      },
      [](ir::Program& p) {
        auto e = std::make_shared<ir::Expr>(*p.stmts[0].expr);
        e->args[1] = std::make_shared<ir::Expr>(*e->args[0]);
        p.stmts[0].expr = e;
      },
  };
  std::set<std::string> keys = {ir::structural_key(base)};
  for (std::size_t m = 0; m < mutations.size(); ++m) {
    ir::Program p = base;
    mutations[m](p);
    EXPECT_TRUE(keys.insert(ir::structural_key(p)).second) << "mutation " << m << " did not change the key";
  }
}

}  // namespace
}  // namespace fieldflow
