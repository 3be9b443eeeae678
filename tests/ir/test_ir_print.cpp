// The textual IR (one SSA line per node, shared subexpressions printed once), symbolic bounds
// (SymExpr arithmetic, printing, evaluation) and IR traversal.
#include <gtest/gtest.h>

#include <limits>

#include <algorithm>
#include <set>
#include <string>

#include "fieldflow/dsl.h"
#include "fieldflow/errors.h"
#include "fieldflow/ir.h"

namespace fieldflow {
namespace {

const Dimension I = horizontal_dim("I"), J = horizontal_dim("J"), K = vertical_dim("K");
const Dimension Edge = horizontal_dim("Edge"), Vertex = horizontal_dim("Vertex");

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (std::size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos || text.rfind(line + "\n", 0) == 0;
}

TEST(IrPrint, HeaderListsParametersWithTheirTypes) {
  ProgramBuilder pb("header");
  Expr a = pb.field("a", {J, I}, DType::float32);
  Expr s = pb.scalar("s", DType::int64);
  Expr fv = pb.field("fv", {Vertex}, DType::float64);
  Expr out = pb.field("out", {I, J}, DType::float32);
  Expr oe = pb.field("oe", {Edge}, DType::float64);
  pb.call("copy", a, {out}, {{I, 0, 2}, {J, 0, 2}});
  pb.call("gather", fv(make_connectivity("E2V", Edge, Vertex, 2)[0]), {oe}, {{Edge, 0, s}});
  const std::string text = ir::print(pb.build());
  EXPECT_EQ(text.substr(0, text.find('\n')),
            "program header(a: float32[I, J], s: int64, fv: float64[Vertex], out: float32[I, J], oe: float64[Edge], "
            "E2V: connectivity Edge->Vertex x2)");
  EXPECT_TRUE(has_line(text, "call copy -> (out) over {I: [0, 2), J: [0, 2)}")) << text;
  EXPECT_TRUE(has_line(text, "  result a")) << text;
  EXPECT_TRUE(has_line(text, "call gather -> (oe) over {Edge: [0, s)}")) << text;
  EXPECT_TRUE(has_line(text, "  %0 = fv(E2V[0]) : float64[Edge]")) << text;
}

TEST(IrPrint, SharedSubexpressionsArePrintedOnce) {
  ProgramBuilder pb("shared");
  Expr a = pb.field("a", {I, J}, DType::float64), b = pb.field("b", {I, J}, DType::float64);
  Expr out = pb.field("out", {I, J}, DType::float64);
  Expr t = a + b;
  pb.call("square", t * t - t, {out}, {{I, 0, 4}, {J, 0, 4}});
  const std::string text = ir::print(pb.build());
  EXPECT_EQ(count(text, "+(a, b)"), 1) << text;
  EXPECT_TRUE(has_line(text, "  %0 = +(a, b) : float64[I, J]")) << text;
  EXPECT_TRUE(has_line(text, "  %1 = *(%0, %0) : float64[I, J]")) << text;
  EXPECT_TRUE(has_line(text, "  %2 = -(%1, %0) : float64[I, J]")) << text;
  EXPECT_TRUE(has_line(text, "  result %2")) << text;
}

TEST(IrPrint, EqualButSeparatelyBuiltExpressionsAreDistinctNodes) {
  // Sharing is by node identity: building a + b twice gives two lines.
  ProgramBuilder pb("unshared");
  Expr a = pb.field("a", {I}, DType::float64), b = pb.field("b", {I}, DType::float64);
  Expr out = pb.field("out", {I}, DType::float64);
  pb.call("c", (a + b) * (a + b), {out}, {{I, 0, 4}});
  const std::string text = ir::print(pb.build());
  EXPECT_EQ(count(text, "+(a, b)"), 2) << text;
}

TEST(IrPrint, LiteralsScalarsShiftsAndBuiltins) {
  ProgramBuilder pb("misc");
  Expr a = pb.field("a", {I, K}, DType::float32);
  Expr off = pb.field("off", {I, K}, DType::int32);
  Expr s = pb.scalar("s", DType::float32);
  Expr out = pb.field("out", {I, K}, DType::float32);
  pb.call("c", sqrt(a(I + 1) * 2.5 + s) + a(K + off) * Expr::literal(Scalar(3.0f)), {out}, {{I, 1, 3}, {K, 0, 2}});
  const std::string text = ir::print(pb.build());
  EXPECT_TRUE(has_line(text, "  %0 = a(I+1) : float32[I, K]")) << text;
  EXPECT_TRUE(has_line(text, "  %1 = *(%0, 2.5f) : float32[I, K]")) << text;  // weak literal, now float32
  EXPECT_TRUE(has_line(text, "  %2 = +(%1, $s) : float32[I, K]")) << text;
  EXPECT_TRUE(has_line(text, "  %3 = sqrt(%2) : float32[I, K]")) << text;
  EXPECT_TRUE(has_line(text, "  %4 = a(K + off) : float32[I, K]")) << text;
  EXPECT_TRUE(has_line(text, "  %5 = *(%4, 3f:float32) : float32[I, K]")) << text;  // typed literal
}

TEST(IrPrint, WhereConcatWhereCastBroadcastAndLabels) {
  ProgramBuilder pb("forms");
  Expr col = pb.field("col", {K}, DType::float64);
  Expr nk = pb.scalar("nk", DType::int32);
  Expr out = pb.field("out", {I, K}, DType::int32);
  Expr c = concat_where(K >= nk - 1, col, named("zero", broadcast(0.0, {K})));
  pb.call("c", astype(materialize("b", broadcast(where(c > 0, c, -c), {I, K})), DType::int32), {out},
          {{I, 0, 2}, {K, 0, nk}});
  const std::string text = ir::print(pb.build());
  EXPECT_TRUE(has_line(text, "  %0 = broadcast(0) : float64[K]")) << text;
  EXPECT_TRUE(has_line(text, "  %1 = named('zero', %0) : float64[K]")) << text;
  EXPECT_TRUE(has_line(text, "  %2 = concat_where(K >= nk - 1, col, %1) : float64[K]")) << text;
  EXPECT_TRUE(has_line(text, "  %3 = >(%2, 0) : bool[K]")) << text;
  EXPECT_TRUE(has_line(text, "  %4 = neg(%2) : float64[K]")) << text;
  EXPECT_TRUE(has_line(text, "  %5 = where(%3, %2, %4) : float64[K]")) << text;
  EXPECT_TRUE(has_line(text, "  %6 = broadcast(%5) : float64[I, K]")) << text;
  EXPECT_TRUE(has_line(text, "  %7 = materialize('b', %6) : float64[I, K]")) << text;
  EXPECT_TRUE(has_line(text, "  %8 = astype(%7, int32) : int32[I, K]")) << text;
  EXPECT_TRUE(has_line(text, "call c -> (out) over {I: [0, 2), K: [0, nk)}")) << text;
}

TEST(IrPrint, TuplesAndReductions) {
  const Connectivity v2e = make_connectivity("V2E", Vertex, Edge, 6);
  ProgramBuilder pb("tuples");
  Expr fe = pb.field("fe", {Edge}, DType::float64);
  Expr o1 = pb.field("o1", {Vertex}, DType::float64), o2 = pb.field("o2", {Vertex}, DType::float64);
  Expr local = fe(v2e);
  pb.call("c", make_tuple({neighbor_sum(local, v2e), max_over(local, v2e)}), {o1, o2}, {{Vertex, 0, 9}});
  const std::string text = ir::print(pb.build());
  EXPECT_TRUE(has_line(text, "  %0 = fe(V2E) : float64[Vertex, V2EDim]")) << text;
  EXPECT_TRUE(has_line(text, "  %1 = neighbor_sum(%0, V2E) : float64[Vertex]")) << text;
  EXPECT_TRUE(has_line(text, "  %2 = max_over(%0, V2E) : float64[Vertex]")) << text;
  EXPECT_TRUE(has_line(text, "  %3 = tuple(%1, %2) : (float64[Vertex], float64[Vertex])")) << text;
  EXPECT_TRUE(has_line(text, "call c -> (o1, o2) over {Vertex: [0, 9)}")) << text;
}

TEST(IrPrint, ScanBodyIsNestedBeforeTheScanLine) {
  ProgramBuilder pb("scans");
  Expr a = pb.field("a", {K}, DType::float64);
  Expr o1 = pb.field("o1", {K}, DType::float64);
  Expr s = scan("sweep", ScanDirection::backward, {Scalar(0.0), Scalar(1.0)},
                [](const Expr& c, const std::vector<Expr>& in) { return make_tuple({c[0] + in[0], c[1] * in[0]}); },
                {a * 2});
  pb.call("c", s[0] + s[1], {o1}, {{K, 0, 5}});
  const std::string text = ir::print(pb.build());
  EXPECT_TRUE(has_line(text, "  %0 = *(a, 2) : float64[K]")) << text;
  EXPECT_TRUE(has_line(text, "  scan 'sweep' backward along K init (0, 1) body:")) << text;
  EXPECT_TRUE(has_line(text, "      %0 = +(carry0, input0) : float64")) << text;
  EXPECT_TRUE(has_line(text, "      %1 = *(carry1, input0) : float64")) << text;
  EXPECT_TRUE(has_line(text, "      %2 = tuple(%0, %1) : (float64, float64)")) << text;
  EXPECT_TRUE(has_line(text, "    yield %2")) << text;
  EXPECT_TRUE(has_line(text, "  %1 = scan 'sweep'(%0) : (float64[K], float64[K])")) << text;
  EXPECT_TRUE(has_line(text, "  %2 = %1[0] : float64[K]")) << text;
  EXPECT_TRUE(has_line(text, "  %3 = %1[1] : float64[K]")) << text;
  EXPECT_TRUE(has_line(text, "  %4 = +(%2, %3) : float64[K]")) << text;
}

TEST(IrPrint, StandaloneExpression) {
  ProgramBuilder pb("expr");
  Expr a = pb.field("a", {I}, DType::float64);
  EXPECT_EQ(ir::print(*(abs(a) + 1).node()), "  %0 = abs(a) : float64[I]\n  %1 = +(%0, 1) : float64[I]\n  result %1\n");
}

TEST(IrPrint, StandaloneLeafExpression) {
  ProgramBuilder pb("leaf");
  Expr a = pb.field("a", {I}, DType::float64);
  EXPECT_EQ(ir::print(*a.node()), "  result a\n");
  EXPECT_EQ(ir::print(*Expr(2.5).node()), "  result 2.5\n");
}

// --- traversal -------------------------------------------------------------------------------------------

TEST(IrPostOrder, ChildrenBeforeParentsEachNodeOnce) {
  ProgramBuilder pb("walk");
  Expr a = pb.field("a", {I}, DType::float64);
  Expr t = a * a;
  Expr e = t + t(I + 1);
  const auto order = ir::post_order(e.node());
  EXPECT_EQ(order.back(), e.node().get());
  std::set<const ir::Expr*> seen;
  for (const ir::Expr* n : order) {
    EXPECT_TRUE(seen.insert(n).second) << "node visited twice";
    for (const auto& c : n->args) EXPECT_TRUE(seen.count(c.get())) << "child after parent";
  }
  EXPECT_EQ(order.size(), 4u);  // a, a * a, shift, +
}

TEST(IrPostOrder, IncludesScanBodies) {
  ProgramBuilder pb("walk_scan");
  Expr a = pb.field("a", {K}, DType::float64);
  Expr s = scan("s", ScanDirection::forward, {Scalar(0.0)},
                [](const Expr& c, const std::vector<Expr>& in) { return c + in[0]; }, {a});
  const auto order = ir::post_order(s.node());
  int carries = 0, inputs = 0;
  for (const ir::Expr* n : order) {
    carries += n->kind == ir::ExprKind::carry;
    inputs += n->kind == ir::ExprKind::scan_arg;
  }
  EXPECT_EQ(carries, 1);
  EXPECT_EQ(inputs, 1);
  EXPECT_EQ(order.back(), s.node().get());
}

TEST(IrPostOrder, LongChains) {
  ProgramBuilder pb("deep");
  Expr a = pb.field("a", {I}, DType::float64);
  Expr e = a;
  for (int i = 0; i < 20000; ++i) e = e + 1.0;
  EXPECT_EQ(ir::post_order(e.node()).size(), 20000u * 2 + 1);  // a, and per step a literal and a +
}

// --- names ------------------------------------------------------------------------------------------------

TEST(IrNames, OperatorAndKindNames) {
  EXPECT_EQ(ir::to_string(ir::ExprKind::neighbor_shift), "neighbor_shift");
  EXPECT_EQ(ir::to_string(ir::ExprKind::cast), "astype");
  EXPECT_EQ(ir::to_string(ir::UnaryOp::logical_not), "not");
  EXPECT_EQ(ir::to_string(ir::UnaryOp::isfinite), "isfinite");
  EXPECT_EQ(ir::to_string(ir::BinaryOp::greater_equal), ">=");
  EXPECT_EQ(ir::to_string(ir::BinaryOp::power), "power");
  EXPECT_EQ(ir::to_string(ir::ReduceOp::min), "min_over");
  EXPECT_EQ(ir::to_string(ir::CompareOp::not_equal), "!=");
  EXPECT_TRUE(ir::is_comparison(ir::BinaryOp::equal));
  EXPECT_FALSE(ir::is_comparison(ir::BinaryOp::logical_and));
  EXPECT_TRUE(ir::is_logical(ir::BinaryOp::logical_or));
  EXPECT_TRUE(ir::is_predicate(ir::UnaryOp::isnan));
  EXPECT_FALSE(ir::is_predicate(ir::UnaryOp::abs));
}

TEST(IrTypes, ToStringAndCanonicalDims) {
  const Dimension local{"E2VDim", DimKind::local};
  EXPECT_EQ((ir::Type{DType::int64, {}, {}}.to_string()), "int64");
  EXPECT_EQ((ir::Type{DType::boolean, {Edge, local, K}, {}}.to_string()), "bool[Edge, E2VDim, K]");
  const auto dims = ir::canonical_dims({K, local, J, Edge, I, J});
  EXPECT_EQ(dims, (std::vector<Dimension>{Edge, I, J, local, K}));
}

// --- SymExpr ----------------------------------------------------------------------------------------------

TEST(SymExpr, ConstantsAndSymbols) {
  const ir::SymExpr c(7);
  EXPECT_TRUE(c.is_constant());
  EXPECT_EQ(c.to_string(), "7");
  EXPECT_EQ(ir::SymExpr(-3).to_string(), "-3");
  const ir::SymExpr n = ir::SymExpr::symbol("n");
  EXPECT_FALSE(n.is_constant());
  EXPECT_EQ(n.to_string(), "n");
  EXPECT_EQ(n.evaluate({{"n", 12}}), 12);
}

TEST(SymExpr, AffineArithmeticAndPrinting) {
  const ir::SymExpr n = ir::SymExpr::symbol("n"), m = ir::SymExpr::symbol("m");
  EXPECT_EQ((n - 1).to_string(), "n - 1");
  EXPECT_EQ((n + 2).to_string(), "n + 2");
  // Terms are sorted by name: -m first, then 2*n.
  EXPECT_EQ((n * 2 - m + 5).to_string(), "-m + 2*n + 5");
  EXPECT_EQ((n * -3 + m * 4 - 1).to_string(), "4*m - 3*n - 1");
  EXPECT_EQ((ir::SymExpr(0) - n).to_string(), "-n");
  EXPECT_EQ((n * 2 - m + 5).evaluate({{"n", 10}, {"m", 3}}), 22);
}

TEST(SymExpr, TermsCombineAndCancel) {
  const ir::SymExpr n = ir::SymExpr::symbol("n");
  const ir::SymExpr two_n = n + n;
  ASSERT_EQ(two_n.terms.size(), 1u);
  EXPECT_EQ(two_n.terms[0].second, 2);
  EXPECT_EQ(two_n, n * 2);
  const ir::SymExpr zero = n - n;
  EXPECT_TRUE(zero.is_constant());
  EXPECT_EQ(zero, ir::SymExpr(0));
  EXPECT_TRUE((n * 0 + 4).is_constant());
  EXPECT_EQ((n * 0 + 4).to_string(), "4");
  EXPECT_EQ((n + 1) - (n - 1), ir::SymExpr(2));
}

// Found by fuzz_program_builder (UBSan: signed overflow): bounds wrap like the language's int64
// arithmetic, in building, printing and evaluating alike.
TEST(SymExpr, ArithmeticWrapsLikeInt64) {
  constexpr std::int64_t big = std::int64_t(1) << 62, lowest = std::numeric_limits<std::int64_t>::min();
  const ir::SymExpr n = ir::SymExpr::symbol("n");
  const ir::SymExpr e = n + big + big;  // the constant wraps to 2^63 = INT64_MIN
  EXPECT_EQ(e.constant, lowest);
  EXPECT_EQ(e.to_string(), "n - 9223372036854775808");
  EXPECT_EQ(e.evaluate({{"n", 5}}), lowest + 5);
  EXPECT_EQ(e.evaluate({{"n", -1}}), std::numeric_limits<std::int64_t>::max());
  const ir::SymExpr scaled = n * big * 4;  // the coefficient wraps to 0: the term cancels
  EXPECT_TRUE(scaled.is_constant());
  const ir::SymExpr k = n * lowest;
  EXPECT_EQ(k.to_string(), "-9223372036854775808*n");
  EXPECT_EQ(k.evaluate({{"n", 3}}), lowest);  // 3 * 2^63 wraps to 2^63
}

TEST(SymExpr, EqualityIsStructural) {
  const ir::SymExpr a = ir::SymExpr::symbol("a"), b = ir::SymExpr::symbol("b");
  EXPECT_EQ(a + b, b + a);
  EXPECT_FALSE(a + 1 == a + 2);
  EXPECT_FALSE(a == b);
}

TEST(SymExpr, EvaluatingWithAMissingSymbolIsAnArgumentError) {
  const ir::SymExpr e = ir::SymExpr::symbol("nx") - 1;
  try {
    e.evaluate({{"ny", 3}});
    FAIL() << "expected ArgumentError";
  } catch (const ArgumentError& err) {
    const std::string msg = err.what();
    EXPECT_NE(msg.find("nx - 1"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'nx'"), std::string::npos) << msg;
  }
}

TEST(SymExpr, DomainToString) {
  const ir::Domain d{{I, 0, ir::SymExpr::symbol("nx") - 1}, {K, 1, ir::SymExpr::symbol("nk")}};
  EXPECT_EQ(ir::to_string(d), "{I: [0, nx - 1), K: [1, nk)}");
  EXPECT_EQ(ir::to_string(ir::Domain{}), "{}");
}

}  // namespace
}  // namespace fieldflow
