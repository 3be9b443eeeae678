// Construction-time typing of DSL expressions: every rule of the type system (dtype agreement,
// weak literals, dimension broadcasting, shifts, reductions, concat_where, scans) and the error
// each violation raises, checked by type and by the key words of its message.
#include <gtest/gtest.h>

#include <functional>

#include "fieldflow/dsl.h"
#include "fieldflow/errors.h"
#include "reference/lang_test_util.h"

namespace fieldflow {
namespace {

using namespace langtest;
using ir::ExprKind;
using ir::Type;

Type T(DType t, std::vector<Dimension> dims) { return Type{t, std::move(dims), {}}; }

class ExprTypes : public ::testing::Test {
 protected:
  ProgramBuilder pb{"types"};
  Expr a = pb.field("a", {I, J, K}, DType::float64);
  Expr b = pb.field("b", {I, J, K}, DType::float64);
  Expr ij = pb.field("ij", {I, J}, DType::float64);
  Expr col = pb.field("col", {K}, DType::float64);
  Expr f32 = pb.field("f32", {I, J, K}, DType::float32);
  Expr i32 = pb.field("i32", {I, J, K}, DType::int32);
  Expr i64 = pb.field("i64", {I, J, K}, DType::int64);
  Expr mask = pb.field("mask", {I, J, K}, DType::boolean);
  Expr s64 = pb.scalar("s64", DType::float64);
  Expr s32 = pb.scalar("s32", DType::float32);
  Expr n = pb.scalar("n", DType::int32);
};

// --- parameters and dims -----------------------------------------------------------------------

TEST_F(ExprTypes, FieldDimsAreCanonicalHorizontalThenVertical) {
  ProgramBuilder p("canon");
  Expr x = p.field("x", {K, J, I}, DType::float32);
  EXPECT_EQ(x.type(), T(DType::float32, {I, J, K}));
  EXPECT_EQ(x.node()->kind, ExprKind::field_ref);
  EXPECT_EQ(x.type().to_string(), "float32[I, J, K]");
}

TEST_F(ExprTypes, ScalarParameterHasNoDims) {
  EXPECT_EQ(s32.type(), T(DType::float32, {}));
  EXPECT_EQ(s32.node()->kind, ExprKind::scalar_ref);
}

TEST_F(ExprTypes, SameDimsAddKeepsDimsAndDtype) { EXPECT_EQ((a + b).type(), T(DType::float64, {I, J, K})); }

TEST_F(ExprTypes, SubsetDimsBroadcastToTheLargerSet) {
  EXPECT_EQ((a + col).type(), T(DType::float64, {I, J, K}));
  EXPECT_EQ((col * a).type(), T(DType::float64, {I, J, K}));
  EXPECT_EQ((ij - a).type(), T(DType::float64, {I, J, K}));
}

TEST_F(ExprTypes, DisjointDimsArePromotedToTheirUnion) {
  EXPECT_EQ((ij + col).type(), T(DType::float64, {I, J, K}));
  EXPECT_EQ((col * ij).type(), T(DType::float64, {I, J, K}));
  EXPECT_EQ((ij < col).type(), T(DType::boolean, {I, J, K}));
}

TEST_F(ExprTypes, DifferentHorizontalDimsAreADimensionErrorNamingBothSets) {
  Expr i_only = pb.field("i_only", {I}, DType::float64), jk = pb.field("jk", {J, K}, DType::float64);
  EXPECT_ERROR(DimensionError, i_only + jk, "dimension mismatch", "[I]", "[J, K]", "horizontal", "broadcast");
}

TEST_F(ExprTypes, DimensionListsInMessagesAreBracketedOnce) {
  for (auto build : {std::function<void()>([&] { index(I) + index(J); }), std::function<void()>([&] { col(I + 1); }),
                     std::function<void()>([&] { broadcast(a, {I}); })}) {
    try {
      build();
      ADD_FAILURE() << "expected a DimensionError";
    } catch (const DimensionError& e) {
      EXPECT_EQ(std::string(e.what()).find("[["), std::string::npos) << e.what();
    }
  }
}

TEST_F(ExprTypes, ScalarParameterBroadcastsOverAField) {
  EXPECT_EQ((s64 * a).type(), T(DType::float64, {I, J, K}));
  EXPECT_EQ((n + i32).type(), T(DType::int32, {I, J, K}));
}

// --- weak literals and dtype rules --------------------------------------------------------------

TEST_F(ExprTypes, WeakFloatLiteralAdoptsFloat32) {
  Expr e = 2.5 * f32;
  EXPECT_EQ(e.type(), T(DType::float32, {I, J, K}));
  const auto& lit = *e.node()->args[0];
  EXPECT_EQ(lit.kind, ExprKind::literal);
  EXPECT_EQ(lit.literal, Scalar(2.5f));
}

TEST_F(ExprTypes, WeakIntLiteralAdoptsEveryNumericDtype) {
  EXPECT_EQ((f32 + 1).type().dtype, DType::float32);
  EXPECT_EQ((a + 1).type().dtype, DType::float64);
  EXPECT_EQ((i64 * 3).type().dtype, DType::int64);
  EXPECT_EQ((1 - i32).type().dtype, DType::int32);
  EXPECT_EQ((s32 + 1).type().dtype, DType::float32);
}

TEST_F(ExprTypes, WeakIntLiteralIsConvertedExactlyToInt64) {
  Expr e = i64 + 7;
  EXPECT_EQ(e.node()->args[1]->literal, Scalar(std::int64_t{7}));
}

TEST_F(ExprTypes, FloatLiteralWithIntFieldIsADTypeError) {
  EXPECT_ERROR(DTypeError, i32 * 2.5, "literal 2.5", "float64", "int32", "astype");
  EXPECT_ERROR(DTypeError, 0.5 + i64, "float64", "int64", "astype");
}

TEST_F(ExprTypes, TwoWeakLiteralsOfDifferentKindsPromoteToFloat64) {
  Expr e = Expr(1) + Expr(2.5);
  EXPECT_EQ(e.type(), T(DType::float64, {}));
}

TEST_F(ExprTypes, TypedLiteralIsNotWeak) {
  EXPECT_ERROR(DTypeError, f32 * Expr::literal(Scalar(2.0)), "float32", "float64", "astype");
  EXPECT_EQ((f32 * Expr::literal(Scalar(2.0f))).type().dtype, DType::float32);
}

TEST_F(ExprTypes, BoolLiteralIsNotNumeric) { EXPECT_ERROR(DTypeError, a + Expr(true), "bool", "float64"); }

TEST_F(ExprTypes, Float32PlusFloat64FieldNeedsAstype) {
  EXPECT_ERROR(DTypeError, f32 + a, "operator +", "float32", "float64", "astype");
  EXPECT_EQ((astype(f32, DType::float64) + a).type().dtype, DType::float64);
}

TEST_F(ExprTypes, IntPlusFloatFieldNeedsAstype) {
  EXPECT_ERROR(DTypeError, i32 + a, "int32", "float64", "astype");
  EXPECT_ERROR(DTypeError, i32 + i64, "int32", "int64", "astype");
}

TEST_F(ExprTypes, ScalarParameterDtypeIsStrong) {
  EXPECT_ERROR(DTypeError, s64 * f32, "float64", "float32");
  EXPECT_EQ((s32 * f32).type().dtype, DType::float32);
}

TEST_F(ExprTypes, ComparisonsYieldBool) {
  for (Expr e : {a < b, a <= b, a > b, a >= b, a == b, a != b, i32 < 3, f32 >= 0.5}) {
    EXPECT_EQ(e.type(), T(DType::boolean, {I, J, K}));
  }
}

TEST_F(ExprTypes, BoolOrderingComparisonIsADTypeError) {
  EXPECT_ERROR(DTypeError, mask < mask, "bool", "== or !=");
  EXPECT_EQ((mask == mask).type().dtype, DType::boolean);
}

TEST_F(ExprTypes, LogicalOperatorsNeedBool) {
  EXPECT_EQ((mask & (a > 0)).type(), T(DType::boolean, {I, J, K}));
  EXPECT_EQ((mask | !mask).type().dtype, DType::boolean);
  EXPECT_EQ((~mask).type().dtype, DType::boolean);
  EXPECT_ERROR(DTypeError, a & b, "bool operands", "float64");
  EXPECT_ERROR(DTypeError, !a, "bool operand", "float64");
}

TEST_F(ExprTypes, ArithmeticOnBoolIsADTypeError) {
  EXPECT_ERROR(DTypeError, mask + mask, "numeric", "bool");
  EXPECT_ERROR(DTypeError, -mask, "numeric", "bool");
}

TEST_F(ExprTypes, FloatBuiltinsRejectIntegersAndKeepFloatDtype) {
  using Fn = Expr (*)(const Expr&);
  for (Fn fn : {Fn(sqrt), Fn(exp), Fn(log), Fn(sin), Fn(cos), Fn(tan), Fn(arcsin), Fn(arccos), Fn(arctan), Fn(sinh),
                Fn(cosh), Fn(tanh), Fn(floor), Fn(ceil), Fn(trunc), Fn(cbrt), Fn(gamma)}) {
    EXPECT_EQ(fn(f32).type(), T(DType::float32, {I, J, K}));
    EXPECT_EQ(fn(a).type(), T(DType::float64, {I, J, K}));
    EXPECT_ERROR(DTypeError, fn(i32), "float32 or float64", "int32", "astype");
  }
}

TEST_F(ExprTypes, PredicatesYieldBool) {
  EXPECT_EQ(isnan(f32).type(), T(DType::boolean, {I, J, K}));
  EXPECT_EQ(isinf(a).type().dtype, DType::boolean);
  EXPECT_EQ(isfinite(a).type().dtype, DType::boolean);
  EXPECT_ERROR(DTypeError, isnan(i64), "int64");
}

TEST_F(ExprTypes, AbsAndNegWorkOnIntegers) {
  EXPECT_EQ(abs(i32).type().dtype, DType::int32);
  EXPECT_EQ((-i64).type().dtype, DType::int64);
}

TEST_F(ExprTypes, MinimumMaximumPowerOnAnyNumericFmodOnFloatsOnly) {
  EXPECT_EQ(minimum(i32, 0).type().dtype, DType::int32);
  EXPECT_EQ(maximum(a, col).type(), T(DType::float64, {I, J, K}));
  EXPECT_EQ(power(f32, 2).type().dtype, DType::float32);
  EXPECT_EQ(power(i32, 2).type().dtype, DType::int32);
  EXPECT_ERROR(DTypeError, power(mask, mask), "power", "numeric", "bool");
  EXPECT_ERROR(DTypeError, power(i32, 0.5), "literal 0.5", "int32");
  EXPECT_ERROR(DTypeError, fmod(i64, i64), "fmod", "int64", "%");
}

TEST_F(ExprTypes, FloorDivisionAndModuloNeedIntegers) {
  EXPECT_EQ(floor_divide(i32, 2).type(), T(DType::int32, {I, J, K}));
  EXPECT_EQ((i64 % i64).type(), T(DType::int64, {I, J, K}));
  EXPECT_EQ((n % 3).type(), T(DType::int32, {}));
  EXPECT_ERROR(DTypeError, floor_divide(a, b), "operator //", "int32 or int64", "float64", "floor(a / b)");
  EXPECT_ERROR(DTypeError, f32 % 2, "operator %", "int32 or int64", "float32", "fmod");
  EXPECT_ERROR(DTypeError, i32 % i64, "operator %", "int32 and int64");
  EXPECT_ERROR(DTypeError, mask % mask, "operator %", "bool");
}

TEST_F(ExprTypes, XorNeedsBoolAndUnaryPlusNeedsANumber) {
  EXPECT_EQ((mask ^ (a > 0)).type(), T(DType::boolean, {I, J, K}));
  EXPECT_ERROR(DTypeError, i32 ^ i32, "operator ^", "bool", "int32");
  EXPECT_EQ((+a).node(), a.node());  // nothing to compute
  EXPECT_EQ((+i64).type(), i64.type());
  EXPECT_ERROR(DTypeError, +mask, "unary", "numeric", "bool");
  EXPECT_ERROR(DTypeError, +make_tuple({a, b}), "unary", "expected a field", "tuple");
}

// --- where / broadcast / astype / index / tuples -------------------------------------------------

TEST_F(ExprTypes, WhereUnifiesConditionAndBranchDims) {
  Expr cond = pb.field("c_ij", {I, J}, DType::boolean);
  EXPECT_EQ(where(cond, a, 0.0).type(), T(DType::float64, {I, J, K}));
  EXPECT_EQ(where(cond, 1.0, 0.0).type(), T(DType::float64, {I, J}));
  // [I, J] and [K]: promoted to their union, as an explicit broadcast would.
  EXPECT_EQ(where(cond, col, 0.0).type(), T(DType::float64, {I, J, K}));
  EXPECT_EQ(where(broadcast(cond, {I, J, K}), col, 0.0).type(), T(DType::float64, {I, J, K}));
  EXPECT_EQ(where(mask, f32, 1).type(), T(DType::float32, {I, J, K}));
}

TEST_F(ExprTypes, WhereNeedsABoolCondition) {
  EXPECT_ERROR(DTypeError, where(a, a, b), "where", "bool condition", "float64");
  EXPECT_ERROR(DTypeError, where(i32, a, b), "bool condition", "int32");
}

TEST_F(ExprTypes, WhereBranchDtypesMustAgree) { EXPECT_ERROR(DTypeError, where(mask, a, f32), "where", "float64", "float32"); }

TEST_F(ExprTypes, WhereOverTuplesIsElementwise) {
  Expr e = where(mask, make_tuple({a, i32}), make_tuple({col, i32 + 1}));
  ASSERT_TRUE(e.type().is_tuple());
  EXPECT_EQ(e.type().elements[0], T(DType::float64, {I, J, K}));
  EXPECT_EQ(e.type().elements[1], T(DType::int32, {I, J, K}));
  EXPECT_ERROR(DTypeError, where(mask, make_tuple({a, b}), a), "branches", "do not match");
  EXPECT_ERROR(DTypeError, where(mask, make_tuple({a, b}), make_tuple({a, b, b})), "do not match");
  EXPECT_ERROR(DTypeError, where(mask, make_tuple({a, b}), make_tuple({a, i32})), "tuple element 1", "float64", "int32");
}

TEST_F(ExprTypes, BroadcastAddsDims) {
  Expr e = broadcast(col, {I, J, K});
  EXPECT_EQ(e.type(), T(DType::float64, {I, J, K}));
  EXPECT_EQ(e.node()->kind, ExprKind::broadcast);
  EXPECT_EQ(broadcast(Expr(1.0), {K}).type(), T(DType::float64, {K}));
}

TEST_F(ExprTypes, BroadcastToTheSameDimsIsTheOperandItself) { EXPECT_EQ(broadcast(a, {K, J, I}).node(), a.node()); }

TEST_F(ExprTypes, BroadcastCannotDropDims) {
  EXPECT_ERROR(DimensionError, broadcast(a, {I, J}), "broadcast", "[I, J]", "[I, J, K]");
}

TEST_F(ExprTypes, AstypeChangesOnlyTheDtype) {
  EXPECT_EQ(astype(i32, DType::float32).type(), T(DType::float32, {I, J, K}));
  EXPECT_EQ(astype(a, DType::int64).type(), T(DType::int64, {I, J, K}));
  EXPECT_EQ(astype(mask, DType::float64).type().dtype, DType::float64);
  EXPECT_EQ(astype(a, DType::float64).node(), a.node());
}

TEST_F(ExprTypes, IndexIsInt32OverItsDimension) {
  EXPECT_EQ(index(K).type(), T(DType::int32, {K}));
  EXPECT_EQ((broadcast(index(I), {I, J}) + index(J)).type(), T(DType::int32, {I, J}));
  EXPECT_ERROR(DimensionError, index(I) + index(J), "dimension mismatch", "[I]", "[J]");
  Connectivity e2v = make_connectivity("E2V", Edge, Vertex, 2);
  EXPECT_ERROR(DimensionError, index(e2v.local), "index", "local", "E2VDim");
}

TEST_F(ExprTypes, TuplesNestAndAreIndexable) {
  Expr t = make_tuple({a, i32, col});
  ASSERT_EQ(t.type().elements.size(), 3u);
  EXPECT_EQ(t[1].type(), T(DType::int32, {I, J, K}));
  EXPECT_EQ(t[2].node(), col.node());
  EXPECT_EQ(t.type().to_string(), "(float64[I, J, K], int32[I, J, K], float64[K])");
  const Expr nested = make_tuple({t, a});
  EXPECT_EQ(nested.type().to_string(), "((float64[I, J, K], int32[I, J, K], float64[K]), float64[I, J, K])");
  EXPECT_EQ(nested.type().leaf_count(), 4);
  EXPECT_EQ(nested.type().leaf(2), T(DType::float64, {K}));
  EXPECT_EQ(nested[0][2].node(), col.node());
  EXPECT_ERROR(DTypeError, make_tuple({}), "at least one element");
  EXPECT_ERROR(DTypeError, t[3], "tuple element [3]", "[0, 3)");
  EXPECT_ERROR(DTypeError, a[0], "expected a tuple");
  EXPECT_ERROR(DTypeError, t + a, "expected a field", "tuple");
}

TEST_F(ExprTypes, NamedAndMaterializeKeepTheType) {
  EXPECT_EQ(named("x", a + b).type(), (a + b).type());
  Expr m = materialize("tmp", f32 * 2);
  EXPECT_EQ(m.type(), T(DType::float32, {I, J, K}));
  EXPECT_TRUE(m.node()->materialize);
  EXPECT_EQ(m.node()->name, "tmp");
  EXPECT_FALSE(named("x", a).node()->materialize);
  EXPECT_EQ(named("pair", make_tuple({a, b})).type().elements.size(), 2u);
  EXPECT_ERROR(DTypeError, materialize("pair", make_tuple({a, b})), "materialize('pair')", "tuple");
}

// --- shifts ---------------------------------------------------------------------------------------

TEST_F(ExprTypes, CartesianShiftKeepsTheType) {
  Expr e = a(I + 1);
  EXPECT_EQ(e.type(), a.type());
  EXPECT_EQ(e.node()->kind, ExprKind::shift);
  EXPECT_EQ(e.node()->offset, 1);
  EXPECT_EQ(a(K - 2).node()->offset, -2);
  EXPECT_EQ(a(J + 0).node(), a.node());
}

TEST_F(ExprTypes, ShiftAlongAMissingDimensionIsADimensionError) {
  EXPECT_ERROR(DimensionError, col(I + 1), "shift by I+1", "[K]", "do not include I");
  EXPECT_ERROR(DimensionError, ij(K - 1), "shift by K-1", "do not include K");
}

TEST_F(ExprTypes, ShiftAlongALocalDimensionIsADimensionError) {
  Connectivity e2v = make_connectivity("E2V", Edge, Vertex, 2);
  ProgramBuilder p("local_shift");
  Expr w = p.field("w", {Edge, e2v.local}, DType::float64);
  EXPECT_ERROR(DimensionError, w(e2v.local + 1), "local dimension E2VDim");
}

TEST_F(ExprTypes, DynamicShiftNeedsANonLocalDimAndAnIntOffset) {
  Expr off = pb.field("off", {I, J, K}, DType::int32);
  EXPECT_EQ(a(K + off).type(), a.type());
  EXPECT_EQ(a(K + off).node()->kind, ExprKind::dynamic_shift);
  EXPECT_EQ(col(K + off).type(), T(DType::float64, {I, J, K}));  // the offset's dims join in
  EXPECT_EQ(a(I + off).type(), a.type());                         // horizontal too
  EXPECT_EQ(a(I + off).node()->dim, I);
  Connectivity e2v = make_connectivity("E2V", Edge, Vertex, 2);
  ProgramBuilder p("local_dynamic");
  Expr w = p.field("w", {Edge, e2v.local}, DType::float64), woff = p.field("woff", {Edge}, DType::int32);
  EXPECT_ERROR(DimensionError, w(e2v.local + woff), "dynamic offsets", "horizontal and vertical", "local", "E2VDim");
  EXPECT_ERROR(DTypeError, a(K + b), "int32 or int64 offset", "float64");
  EXPECT_ERROR(DimensionError, ij(K + off), "do not include K");
}

// --- unstructured ---------------------------------------------------------------------------------

class Unstructured : public ::testing::Test {
 protected:
  Connectivity E2V = make_connectivity("E2V", Edge, Vertex, 2);
  Connectivity V2E = make_connectivity("V2E", Vertex, Edge, 6);
  Connectivity C2E2CO = make_connectivity("C2E2CO", Cell, Cell, 4);
  ProgramBuilder pb{"unstructured"};
  Expr fv = pb.field("fv", {Vertex}, DType::float64);
  Expr fvk = pb.field("fvk", {Vertex, K}, DType::float32);
  Expr fe = pb.field("fe", {Edge}, DType::float64);
  Expr fc = pb.field("fc", {Cell}, DType::float64);
  Expr w = pb.field("w", {Edge, E2V.local}, DType::float64);
  Expr flag = pb.field("flag", {Vertex}, DType::boolean);
};

TEST_F(Unstructured, ConnectivityDeclaresItsLocalDimension) {
  EXPECT_EQ(E2V.local.name, "E2VDim");
  EXPECT_EQ(E2V.local.kind, DimKind::local);
  EXPECT_EQ(E2V.max_neighbors, 2);
  EXPECT_ERROR(DimensionError, make_connectivity("X", Edge, Vertex, 0), "'X'", "max_neighbors > 0", "0");
  EXPECT_ERROR(DimensionError, make_connectivity("E2K", Edge, K, 2), "'E2K'", "horizontal", "vertical");
}

TEST_F(Unstructured, NeighbourShiftMovesToTheSourceLocation) {
  Expr e = fv(E2V[0]);
  EXPECT_EQ(e.type(), T(DType::float64, {Edge}));
  EXPECT_EQ(e.node()->kind, ExprKind::neighbor_shift);
  EXPECT_EQ(e.node()->offset, 0);
  EXPECT_EQ(fvk(E2V[1]).type(), T(DType::float32, {Edge, K}));
}

TEST_F(Unstructured, LocalFieldAddsTheLocalDimension) {
  EXPECT_EQ(fv(E2V).type(), T(DType::float64, {Edge, E2V.local}));
  EXPECT_EQ(fvk(E2V).type(), T(DType::float32, {Edge, E2V.local, K}));
  EXPECT_EQ(fv(E2V).node()->offset, -1);
}

TEST_F(Unstructured, NeighbourShiftNeedsTheTargetDimension) {
  EXPECT_ERROR(DimensionError, fe(E2V[0]), "shift by E2V[0]", "[Edge]", "do not include Vertex", "maps Edge to Vertex");
  EXPECT_ERROR(DimensionError, fe(E2V), "shift by E2V", "do not include Vertex");
}

TEST_F(Unstructured, NeighbourIndexMustBeInRange) {
  EXPECT_ERROR(DimensionError, fv(E2V[2]), "E2V[2]", "[0, 2)");
  EXPECT_ERROR(DimensionError, fv(E2V[-2]), "E2V[-2]");
}

TEST_F(Unstructured, ShiftOntoAnExistingSourceDimIsADimensionError) {
  ProgramBuilder p("both");
  Expr ev = p.field("ev", {Edge, Vertex}, DType::float64);
  EXPECT_ERROR(DimensionError, ev(E2V[0]), "already has dimension Edge");
}

TEST_F(Unstructured, SameLocationConnectivityShifts) {
  // C2E2CO maps cells to cells (self first): shifting a cell field keeps it a cell field.
  EXPECT_EQ(fc(C2E2CO[1]).type(), T(DType::float64, {Cell}));
  EXPECT_EQ(fc(C2E2CO).type(), T(DType::float64, {Cell, C2E2CO.local}));
  EXPECT_EQ(neighbor_sum(fc(C2E2CO), C2E2CO).type(), T(DType::float64, {Cell}));
}

TEST_F(Unstructured, ChainedShifts) {
  // Edge -> its first vertex -> that vertex's edges.
  EXPECT_EQ(fe(V2E)(E2V[0]).type(), T(DType::float64, {Edge, V2E.local}));
  EXPECT_EQ(fe(V2E[0])(E2V[1]).type(), T(DType::float64, {Edge}));
  EXPECT_EQ(fv(E2V[0])(V2E).type(), T(DType::float64, {Vertex, V2E.local}));
}

TEST_F(Unstructured, ReductionsRemoveTheLocalDimension) {
  EXPECT_EQ(neighbor_sum(fv(E2V), E2V).type(), T(DType::float64, {Edge}));
  EXPECT_EQ(max_over(fvk(E2V), E2V).type(), T(DType::float32, {Edge, K}));
  EXPECT_EQ(min_over(w, E2V).type(), T(DType::float64, {Edge}));
  EXPECT_EQ(neighbor_sum(w * fv(E2V), E2V).type(), T(DType::float64, {Edge}));
  EXPECT_EQ(neighbor_sum(fv(E2V), E2V).node()->rop, ir::ReduceOp::sum);
  EXPECT_EQ(max_over(fv(E2V), E2V).node()->rop, ir::ReduceOp::max);
}

TEST_F(Unstructured, ReducingAFieldWithoutTheLocalDimIsADimensionError) {
  EXPECT_ERROR(DimensionError, neighbor_sum(fe, E2V), "neighbor_sum(.., E2V)", "[Edge]", "E2VDim", "write f(E2V)");
}

TEST_F(Unstructured, ReducingWithTheWrongConnectivityIsADimensionError) {
  EXPECT_ERROR(DimensionError, max_over(fe(V2E), E2V), "max_over(.., E2V)", "[Vertex, V2EDim]", "E2VDim");
}

TEST_F(Unstructured, ReducingOverANonLocalDimensionIsADimensionError) {
  EXPECT_ERROR(DimensionError, neighbor_sum(fvk, K), "cannot reduce over vertical dimension K", "local");
  EXPECT_ERROR(DimensionError, neighbor_sum(fv, Vertex), "horizontal dimension Vertex");
  EXPECT_ERROR(DimensionError, neighbor_sum(fv(E2V), E2V.local), "E2VDim", "neighbor_sum(x, E2V)");
}

TEST_F(Unstructured, ReducingBoolIsADTypeError) {
  EXPECT_ERROR(DTypeError, neighbor_sum(flag(E2V), E2V), "neighbor_sum", "numeric", "bool");
}

TEST_F(Unstructured, LocalFieldMixesWithSparseField) {
  EXPECT_EQ((w + fv(E2V)).type(), T(DType::float64, {Edge, E2V.local}));
  EXPECT_ERROR(DimensionError, w + fv(E2V[0]) + fe(V2E), "dimension mismatch");
}

// --- concat_where -----------------------------------------------------------------------------------

TEST_F(ExprTypes, ConcatWhereAddsItsDimension) {
  Expr e = concat_where(K == 0, 0.0, col);
  EXPECT_EQ(e.type(), T(DType::float64, {K}));
  EXPECT_EQ(concat_where(K == 0, 1.0, 2.0).type(), T(DType::float64, {K}));
  EXPECT_EQ(concat_where(I < 2, ij, a).type(), T(DType::float64, {I, J, K}));
  EXPECT_EQ(concat_where(K == 0, f32, 0).type().dtype, DType::float32);
}

TEST_F(ExprTypes, ConcatWhereBoundIsSymbolic) {
  Expr e = concat_where(K >= n - 1, a, b);
  EXPECT_EQ(e.node()->cmp, ir::CompareOp::greater_equal);
  EXPECT_EQ(e.node()->bound, ir::SymExpr::symbol("n") - 1);
  EXPECT_EQ(concat_where(K < 2 * n + 1, a, b).node()->bound, ir::SymExpr::symbol("n") * 2 + 1);
}

TEST_F(ExprTypes, ConcatWhereBranchesMustAgree) {
  EXPECT_ERROR(DTypeError, concat_where(K == 0, a, f32), "concat_where(K ==", "float64", "float32");
  EXPECT_EQ(concat_where(K == 0, ij, col).type(), T(DType::float64, {I, J, K}));
  EXPECT_ERROR(DTypeError, concat_where(K == 0, make_tuple({a, b}), a), "do not match", "same structure");
}

TEST_F(ExprTypes, ConcatWhereBoundMustBeAnIntExpression) {
  EXPECT_ERROR(ProgramError, concat_where(K < 1.5, a, b), "bound", "integer expression", "int scalar");
  EXPECT_ERROR(ProgramError, concat_where(K < s64, a, b), "bound", "$s64");
  EXPECT_ERROR(ProgramError, concat_where(K < n * index(K), a, b), "bound", "index(K)");
  EXPECT_EQ(concat_where(K < n * n, a, b).node()->bound.to_string(), "(n * n)");
  Connectivity e2v = make_connectivity("E2V", Edge, Vertex, 2);
  EXPECT_ERROR(DimensionError, concat_where(e2v.local == 0, a, b), "local");
}

// --- scans -----------------------------------------------------------------------------------------

TEST_F(ExprTypes, ScanHasTheCarryDtypeAndTheInputsDims) {
  Expr s = scan("cumsum", ScanDirection::forward, {Scalar(0.0f)},
                [](const Expr& c, const std::vector<Expr>& in) { return c + in[0]; }, {f32});
  EXPECT_EQ(s.type(), T(DType::float32, {I, J, K}));
  EXPECT_EQ(s.node()->kind, ExprKind::scan);
  EXPECT_EQ(s.node()->dim, K);
  EXPECT_TRUE(s.node()->forward);
  EXPECT_EQ(s.node()->init, std::vector<Scalar>{Scalar(0.0f)});
}

TEST_F(ExprTypes, TupleScanCarriesOneTypePerComponent) {
  Expr s = scan("pair", ScanDirection::backward, {Scalar(0.0), Scalar(std::int32_t{1})},
                [](const Expr& c, const std::vector<Expr>& in) { return make_tuple({c[0] + in[0], c[1] * 2}); },
                {col, a});
  ASSERT_TRUE(s.type().is_tuple());
  EXPECT_EQ(s.type().elements[0], T(DType::float64, {I, J, K}));
  EXPECT_EQ(s.type().elements[1], T(DType::int32, {I, J, K}));
  EXPECT_FALSE(s.node()->forward);
  EXPECT_EQ(s[1].type().dtype, DType::int32);
}

TEST_F(ExprTypes, ScanBodyWeakLiteralAdoptsTheCarryDtype) {
  Expr s = scan("const", ScanDirection::forward, {Scalar(std::int64_t{0})},
                [](const Expr&, const std::vector<Expr>&) { return Expr(3); }, {col});
  EXPECT_EQ(s.type(), T(DType::int64, {K}));
  EXPECT_EQ(s.node()->body->literal, Scalar(std::int64_t{3}));
}

TEST_F(ExprTypes, ScanBodyDtypeMustMatchTheCarry) {
  auto body = [](const Expr& c, const std::vector<Expr>& in) { return c + in[0]; };
  EXPECT_ERROR(DTypeError, scan("s", ScanDirection::forward, {Scalar(0.0f)}, body, {a}), "float32", "float64");
  EXPECT_ERROR(DTypeError,
               scan("s", ScanDirection::forward, {Scalar(0.0)},
                    [](const Expr& c, const std::vector<Expr>&) { return c > 0.0; }, {a}),
               "scan 's'", "carry component 0", "float64", "bool");
}

TEST_F(ExprTypes, TupleScanBodyMustReturnAMatchingTuple) {
  EXPECT_ERROR(DTypeError,
               scan("t", ScanDirection::forward, {Scalar(0.0), Scalar(0.0)},
                    [](const Expr& c, const std::vector<Expr>&) { return c[0]; }, {a}),
               "scan 't'", "tuple of 2 values");
}

TEST_F(ExprTypes, ScanNeedsExactlyOneVerticalDimAndAnInit) {
  auto body = [](const Expr& c, const std::vector<Expr>& in) { return c + in[0]; };
  EXPECT_ERROR(DimensionError, scan("s", ScanDirection::forward, {Scalar(0.0)}, body, {ij}), "scan 's'",
               "exactly one vertical dimension", "[I, J]");
  EXPECT_ERROR(DTypeError, scan("s", ScanDirection::forward, {}, body, {a}), "at least one init value");
  Connectivity e2v = make_connectivity("E2V", Edge, Vertex, 2);
  ProgramBuilder p("scan_local");
  Expr vk = p.field("vk", {Vertex, K}, DType::float64);
  EXPECT_EQ(scan("s", ScanDirection::forward, {Scalar(0.0)}, body, {vk(e2v)}).type(),
            T(DType::float64, {Edge, e2v.local, K}));
}

// Found by fuzz_program_builder: tuples of tuples multiply, and 16 levels of make_tuple(t, t, t)
// built a type of 3^16 values whose error message took minutes. Tuples are bounded at 64 values.
TEST_F(ExprTypes, NestedTuplesAreBounded) {
  Expr t = make_tuple({a, b, a, b});
  t = make_tuple({t, t, t, t});
  EXPECT_EQ(make_tuple({t, t, t, t}).type().elements.size(), 4u);  // 64 values: allowed
  const Expr wide = make_tuple({t, t, t, t});
  EXPECT_ERROR(DTypeError, make_tuple({wide, a}), "at most 64 values", "given 65");
  Expr deep = a;
  bool refused = false;
  for (int level = 0; level < 30 && !refused; ++level) {
    try {
      deep = make_tuple({deep, deep, deep});
    } catch (const DTypeError&) {
      refused = true;
    }
  }
  EXPECT_TRUE(refused);
}

TEST_F(ExprTypes, ScanInputsMustBroadcastTogether) {
  ProgramBuilder p("scan_dims");
  Expr ik = p.field("ik", {I, K}, DType::float64);
  Expr jk = p.field("jk", {J, K}, DType::float64);
  EXPECT_ERROR(DimensionError,
               scan("s", ScanDirection::forward, {Scalar(0.0)},
                    [](const Expr& c, const std::vector<Expr>& in) { return c + in[0] + in[1]; }, {ik, jk}),
               "scan 's'", "dimension mismatch");
}

TEST_F(ExprTypes, ScanBodyValuesAreDimensionless) {
  // The body computes one level: its inputs have no dims, so it cannot shift.
  EXPECT_ERROR(DimensionError,
               scan("s", ScanDirection::forward, {Scalar(0.0)},
                    [](const Expr& c, const std::vector<Expr>& in) { return c + in[0](K - 1); }, {a}),
               "do not include K");
}

}  // namespace
}  // namespace fieldflow
