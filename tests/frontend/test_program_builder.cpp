// ProgramBuilder and ir::verify: parameters, calls, outputs, domains and the errors a malformed
// program raises where it is written (a failed call leaves the program unchanged).
#include <gtest/gtest.h>

#include "fieldflow/dsl.h"
#include "fieldflow/errors.h"
#include "reference/lang_test_util.h"

namespace fieldflow {
namespace {

using namespace langtest;

TEST(ProgramBuilder, EmptyNameIsAProgramError) { EXPECT_ERROR(ProgramError, ProgramBuilder(""), "expected a name"); }

TEST(ProgramBuilder, ParametersAreRecordedInDeclarationOrder) {
  ProgramBuilder pb("params");
  Expr a = pb.field("a", {J, I}, DType::float32);
  Expr s = pb.scalar("alpha", DType::float32);
  Expr out = pb.field("out", {I, J}, DType::float32);
  pb.call("scale", s * a, {out}, {{I, 0, 4}, {J, 0, 3}});
  ir::Program p = pb.build();
  EXPECT_EQ(p.name, "params");
  ASSERT_EQ(p.params.size(), 3u);
  EXPECT_EQ(p.params[0].name, "a");
  EXPECT_EQ(p.params[0].kind, ir::ParamKind::field);
  EXPECT_EQ(p.params[0].type, (ir::Type{DType::float32, {I, J}, {}}));
  EXPECT_EQ(p.params[1].kind, ir::ParamKind::scalar);
  EXPECT_EQ(p.params[1].type.dtype, DType::float32);
  EXPECT_EQ(p.index_of("out"), 2);
  EXPECT_EQ(p.index_of("nope"), -1);
  EXPECT_EQ(p.find("nope"), nullptr);
  ASSERT_EQ(p.stmts.size(), 1u);
  EXPECT_EQ(p.stmts[0].op, "scale");
  EXPECT_EQ(p.stmts[0].outputs, std::vector<std::string>{"out"});
  ASSERT_EQ(p.stmts[0].domain.size(), 2u);
  EXPECT_EQ(p.stmts[0].domain[0].dim, I);
  EXPECT_EQ(p.stmts[0].domain[0].hi, ir::SymExpr(4));
}

TEST(ProgramBuilder, DuplicateParameterNamesAreAProgramError) {
  ProgramBuilder pb("dup");
  pb.field("a", {I}, DType::float64);
  EXPECT_ERROR(ProgramError, pb.field("a", {I}, DType::float64), "program 'dup'", "parameter 'a'", "declared twice");
  EXPECT_ERROR(ProgramError, pb.scalar("a", DType::int32), "program 'dup'", "'a'", "declared twice");
  pb.scalar("n", DType::int32);
  EXPECT_ERROR(ProgramError, pb.field("n", {I}, DType::float64), "'n'", "declared twice");
}

TEST(ProgramBuilder, ConnectivityNameClashIsAProgramError) {
  ProgramBuilder pb("clash");
  pb.field("E2V", {Edge}, DType::float64);
  EXPECT_ERROR(ProgramError, pb.connectivity(make_connectivity("E2V", Edge, Vertex, 2)), "program 'clash'",
               "'E2V'", "different parameter");
}

TEST(ProgramBuilder, FieldListingADimensionTwiceIsADimensionError) {
  ProgramBuilder pb("twice");
  EXPECT_ERROR(DimensionError, pb.field("a", {I, K, I}, DType::float64), "program 'twice'", "field 'a'",
               "dimension twice");
}

TEST(ProgramBuilder, ProgramWithoutCallsIsAProgramError) {
  ProgramBuilder pb("empty");
  pb.field("a", {I}, DType::float64);
  EXPECT_ERROR(ProgramError, pb.build(), "program 'empty'", "at least one call", "none");
}

TEST(ProgramBuilder, OutputCountMustMatchTheValue) {
  ProgramBuilder pb("count");
  Expr a = pb.field("a", {I}, DType::float64);
  Expr o1 = pb.field("o1", {I}, DType::float64);
  Expr o2 = pb.field("o2", {I}, DType::float64);
  EXPECT_ERROR(ProgramError, pb.call("pair", make_tuple({a, a + 1}), {o1}, {{I, 0, 4}}), "program 'count'",
               "call 'pair'", "2 element(s)", "1 output(s)");
  EXPECT_ERROR(ProgramError, pb.call("single", a, {o1, o2}, {{I, 0, 4}}), "call 'single'", "1 element(s)",
               "2 output(s)");
  EXPECT_ERROR(ProgramError, pb.call("none", a, {}, {{I, 0, 4}}), "call 'none'", "at least one output");
}

TEST(ProgramBuilder, OutputDtypeMustMatchTheValue) {
  ProgramBuilder pb("dtype");
  Expr a = pb.field("a", {I}, DType::float64);
  Expr out = pb.field("out", {I}, DType::float32);
  EXPECT_ERROR(DTypeError, pb.call("copy", a, {out}, {{I, 0, 4}}), "program 'dtype'", "call 'copy'",
               "output 'out' is float32", "value is float64", "astype");
  pb.call("copy", astype(a, DType::float32), {out}, {{I, 0, 4}});
  EXPECT_EQ(pb.build().stmts.size(), 1u);
}

TEST(ProgramBuilder, TupleOutputDtypesAreCheckedPerElement) {
  ProgramBuilder pb("tuple_dtype");
  Expr a = pb.field("a", {I}, DType::float64);
  Expr o1 = pb.field("o1", {I}, DType::float64);
  Expr o2 = pb.field("o2", {I}, DType::float64);
  EXPECT_ERROR(DTypeError, pb.call("split", make_tuple({a, a > 0}), {o1, o2}, {{I, 0, 4}}), "output 'o2'",
               "float64", "bool");
}

TEST(ProgramBuilder, OutputMustHaveTheValueDims) {
  ProgramBuilder pb("dims");
  Expr a = pb.field("a", {I, K}, DType::float64);
  Expr out = pb.field("out", {I}, DType::float64);
  EXPECT_ERROR(DimensionError, pb.call("copy", a, {out}, {{I, 0, 4}}), "program 'dims'", "call 'copy'",
               "value has dims [I, K]", "output 'out' has [I]");
}

TEST(ProgramBuilder, ValueWithFewerDimsIsWrittenToEveryLevel) {
  ProgramBuilder pb("fewer");
  Expr col = pb.field("col", {K}, DType::float64);
  Expr out = pb.field("out", {I, K}, DType::float64);
  pb.call("spread", col, {out}, {{I, 0, 2}, {K, 0, 3}});
  EXPECT_NO_THROW(pb.build());
}

TEST(ProgramBuilder, DomainMustCoverExactlyTheOutputDims) {
  ProgramBuilder pb("domain");
  Expr a = pb.field("a", {I, K}, DType::float64);
  Expr out = pb.field("out", {I, K}, DType::float64);
  EXPECT_ERROR(DimensionError, pb.call("copy", a, {out}, {{I, 0, 4}}), "call 'copy'", "domain is over [I]",
               "output 'out' has dims [I, K]");
  EXPECT_ERROR(DimensionError, pb.call("copy", a, {out}, {{I, 0, 4}, {K, 0, 2}, {J, 0, 1}}), "domain is over");
  EXPECT_ERROR(DimensionError, pb.call("copy", a, {out}, {{I, 0, 4}, {K, 0, 2}, {K, 0, 2}}), "domain is over");
  pb.call("copy", a, {out}, {{K, 0, 2}, {I, 0, 4}});  // any order
  EXPECT_NO_THROW(pb.build());
}

TEST(ProgramBuilder, OutputsMustBeDistinctFieldParameters) {
  ProgramBuilder pb("outs");
  Expr a = pb.field("a", {I}, DType::float64);
  Expr o = pb.field("o", {I}, DType::float64);
  EXPECT_ERROR(ProgramError, pb.call("twice", make_tuple({a, a}), {o, o}, {{I, 0, 4}}), "output 'o' given twice");
  EXPECT_ERROR(ProgramError, pb.call("expr", a, {o + 1.0}, {{I, 0, 4}}), "call 'expr'",
               "outputs must be field parameters");
  Expr s = pb.scalar("s", DType::float64);
  EXPECT_ERROR(ProgramError, pb.call("scalar_out", a, {s}, {{I, 0, 4}}), "outputs must be field parameters");
}

TEST(ProgramBuilder, DomainBoundsAreAffineInIntScalars) {
  ProgramBuilder pb("bounds");
  Expr a = pb.field("a", {I}, DType::float64);
  Expr out = pb.field("out", {I}, DType::float64);
  Expr nx = pb.scalar("nx", DType::int32);
  Expr h = pb.scalar("h", DType::int32);
  pb.call("interior", a, {out}, {{I, h, 2 * nx - h - 1}});
  ir::Program p = pb.build();
  const auto& r = p.stmts[0].domain[0];
  EXPECT_EQ(r.lo, ir::SymExpr::symbol("h"));
  EXPECT_EQ(r.hi, ir::SymExpr::symbol("nx") * 2 - ir::SymExpr::symbol("h") - 1);
  EXPECT_EQ(r.hi.evaluate({{"nx", 10}, {"h", 2}}), 17);
}

TEST(ProgramBuilder, NonIntegerBoundsAreAProgramError) {
  ProgramBuilder pb("badbounds");
  Expr a = pb.field("a", {I}, DType::float64);
  Expr out = pb.field("out", {I}, DType::float64);
  Expr nx = pb.scalar("nx", DType::int32);
  Expr x = pb.scalar("x", DType::float64);
  EXPECT_ERROR(ProgramError, pb.call("c", a, {out}, {{I, 0, nx * nx + index(I)}}), "program 'badbounds'", "call 'c'",
               "domain of I", "integer expression of int scalar parameters", "index(I)");
  EXPECT_ERROR(ProgramError, pb.call("c", a, {out}, {{I, 0, x}}), "domain of I", "$x");
  EXPECT_ERROR(ProgramError, pb.call("c", a, {out}, {{I, 0.5, 4}}), "domain of I");
  EXPECT_ERROR(ProgramError, pb.call("c", a, {out}, {{I, 0, a}}), "domain of I");
}

TEST(ProgramBuilder, FailedCallLeavesTheProgramUnchanged) {
  ProgramBuilder pb("atomic");
  Expr a = pb.field("a", {I}, DType::float64);
  Expr out = pb.field("out", {I}, DType::float64);
  Expr bad = pb.field("bad", {I}, DType::int32);
  pb.call("first", a, {out}, {{I, 0, 4}});
  EXPECT_THROW(pb.call("second", a, {bad}, {{I, 0, 4}}), DTypeError);
  ir::Program p = pb.build();
  ASSERT_EQ(p.stmts.size(), 1u);
  EXPECT_EQ(p.stmts[0].op, "first");
}

TEST(ProgramBuilder, ConnectivitiesBecomeParametersAutomatically) {
  const Connectivity e2v = make_connectivity("E2V", Edge, Vertex, 2);
  const Connectivity v2e = make_connectivity("V2E", Vertex, Edge, 6);
  ProgramBuilder pb("auto_conn");
  Expr fv = pb.field("fv", {Vertex}, DType::float64);
  Expr out = pb.field("out", {Vertex}, DType::float64);
  pb.call("c", neighbor_sum(fv(e2v[0])(v2e), v2e), {out}, {{Vertex, 0, 9}});
  ir::Program p = pb.build();
  ASSERT_NE(p.find("E2V"), nullptr);
  ASSERT_NE(p.find("V2E"), nullptr);
  EXPECT_EQ(p.find("E2V")->kind, ir::ParamKind::connectivity);
  EXPECT_EQ(p.find("V2E")->conn, v2e);
  EXPECT_EQ(p.params.size(), 4u);
}

TEST(ProgramBuilder, ExplicitConnectivityIsDeclaredOnce) {
  const Connectivity e2v = make_connectivity("E2V", Edge, Vertex, 2);
  ProgramBuilder pb("explicit");
  pb.connectivity(e2v);
  pb.connectivity(e2v);
  Expr fv = pb.field("fv", {Vertex}, DType::float64);
  Expr out = pb.field("out", {Edge}, DType::float64);
  pb.call("c", fv(e2v[0]), {out}, {{Edge, 0, 5}});
  ir::Program p = pb.build();
  EXPECT_EQ(p.params.size(), 3u);
  EXPECT_ERROR(ProgramError, pb.connectivity(make_connectivity("E2V", Edge, Vertex, 3)), "'E2V'",
               "different parameter");
}

TEST(ProgramBuilder, TwoConnectivitiesWithOneNameAreAProgramError) {
  ProgramBuilder pb("two_e2v");
  Expr fv = pb.field("fv", {Vertex}, DType::float64);
  Expr out = pb.field("out", {Edge}, DType::float64);
  pb.call("c", fv(make_connectivity("E2V", Edge, Vertex, 2)[0]), {out}, {{Edge, 0, 5}});
  EXPECT_ERROR(ProgramError, pb.call("d", fv(make_connectivity("E2V", Edge, Vertex, 3)[0]), {out}, {{Edge, 0, 5}}),
               "'E2V'", "different parameter");
}

TEST(ProgramBuilder, ReadingAnotherProgramsFieldIsAProgramError) {
  ProgramBuilder other("other");
  Expr foreign = other.field("foreign", {I}, DType::float64);
  ProgramBuilder pb("mine");
  Expr out = pb.field("out", {I}, DType::float64);
  EXPECT_ERROR(ProgramError, pb.call("c", foreign, {out}, {{I, 0, 4}}), "program 'mine'", "call 'c'",
               "'foreign'", "not a field parameter");
}

TEST(ProgramBuilder, ReadingAParameterWithAnotherTypeIsAProgramError) {
  ProgramBuilder other("other");
  Expr a32 = other.field("a", {I}, DType::float32);
  Expr s32 = other.scalar("s", DType::float32);
  ProgramBuilder pb("mine");
  pb.field("a", {I}, DType::float64);
  pb.scalar("s", DType::float64);
  Expr out = pb.field("out", {I}, DType::float32);
  EXPECT_ERROR(ProgramError, pb.call("c", a32, {out}, {{I, 0, 4}}), "reads 'a' as float32[I]", "declared float64[I]");
  Expr out2 = pb.field("out2", {}, DType::float32);
  EXPECT_ERROR(ProgramError, pb.call("d", s32, {out2}, {}), "scalar 's'", "float32 scalar parameter");
}

TEST(ProgramBuilder, ForeignConcatWhereBoundIsAProgramError) {
  ProgramBuilder other("other");
  Expr nk_foreign = other.scalar("nk", DType::int32);
  ProgramBuilder pb("mine");
  Expr a = pb.field("a", {K}, DType::float64);
  Expr out = pb.field("out", {K}, DType::float64);
  EXPECT_ERROR(ProgramError, pb.call("c", concat_where(K < nk_foreign, a, 0.0), {out}, {{K, 0, 4}}),
               "bound uses 'nk'", "not an int scalar parameter");
}

TEST(ProgramBuilder, ForeignDomainBoundIsAProgramError) {
  ProgramBuilder other("other");
  Expr n_foreign = other.scalar("n", DType::int32);
  ProgramBuilder pb("mine");
  Expr a = pb.field("a", {K}, DType::float64);
  Expr out = pb.field("out", {K}, DType::float64);
  EXPECT_ERROR(ProgramError, pb.call("c", a, {out}, {{K, 0, n_foreign}}), "domain bound uses 'n'");
}

TEST(Verify, RejectsHandBuiltProgramsWithUnorderedDims) {
  ir::Program p;
  p.name = "hand";
  p.params.push_back({"a", ir::ParamKind::field, ir::Type{DType::float64, {K, I}, {}}, {}});
  EXPECT_ERROR(DimensionError, ir::verify(p), "program 'hand'", "field 'a'", "[K, I]");
}

TEST(Verify, RejectsDuplicateAndNamelessParameters) {
  ir::Program p;
  p.name = "hand";
  p.params.push_back({"a", ir::ParamKind::scalar, ir::Type{DType::float64, {}, {}}, {}});
  p.params.push_back({"a", ir::ParamKind::scalar, ir::Type{DType::float64, {}, {}}, {}});
  EXPECT_ERROR(ProgramError, ir::verify(p), "parameter 'a' declared twice");
  p.params[1].name = "";
  EXPECT_ERROR(ProgramError, ir::verify(p), "has no name");
}

TEST(Verify, RejectsAStatementWithoutAValue) {
  ir::Program p;
  p.name = "hand";
  p.params.push_back({"o", ir::ParamKind::field, ir::Type{DType::float64, {I}, {}}, {}});
  p.stmts.push_back({"empty", nullptr, {"o"}, {}});
  EXPECT_ERROR(ProgramError, ir::verify(p), "call 'empty'", "no value");
}

// A tuple `where` is built element by element, so the only tuples an element is taken of are
// tuple scans; a hand-built element of a whole tuple `where` (which the passes would only partly
// walk: docs/reliability.md class 26) is refused by name.
TEST(Verify, AnElementIsTakenOfATupleScanOnly) {
  ProgramBuilder pb("elements");
  Expr a = pb.field("a", {I}, DType::float64), b = pb.field("b", {I}, DType::float64);
  Expr out = pb.field("out", {I}, DType::float64);
  pb.call("c", where(a > 0.0, make_tuple({a, b}), make_tuple({b, a}))[1], {out}, {{I, 0, 4}});
  ir::Program p = pb.build();
  EXPECT_EQ(p.stmts[0].expr->kind, ir::ExprKind::where);
  EXPECT_FALSE(p.stmts[0].expr->type.is_tuple());
  EXPECT_EQ(p.stmts[0].expr->args[1]->name, "b");
  EXPECT_EQ(p.stmts[0].expr->args[2]->name, "a");

  auto pair = [&](const char* x, const char* y) {
    auto t = std::make_shared<ir::Expr>();
    t->kind = ir::ExprKind::make_tuple;
    t->args = {(x == std::string("a") ? a : b).node(), (y == std::string("a") ? a : b).node()};
    t->type.elements = {t->args[0]->type, t->args[1]->type};
    return t;
  };
  auto whole = std::make_shared<ir::Expr>(*p.stmts[0].expr);  // where(a > 0, (a, b), (b, a)) kept whole
  whole->args = {p.stmts[0].expr->args[0], pair("a", "b"), pair("b", "a")};
  whole->type = whole->args[1]->type;
  auto element = std::make_shared<ir::Expr>();
  element->kind = ir::ExprKind::tuple_get;
  element->type = whole->type.elements[1];
  element->offset = 1;
  element->args = {whole};
  p.stmts[0].expr = element;
  EXPECT_ERROR(ProgramError, ir::verify(p), "call 'c'", "element 1 of a where", "expected an element of a tuple scan");
}

}  // namespace
}  // namespace fieldflow

namespace fieldflow {
namespace {

// A 64-bit size (a mesh's element count) can bound a domain directly.
TEST(ProgramBuilderBounds, Int64DomainBoundFromAMeshSize) {
  const Dimension E = horizontal_dim("Edge");
  const std::int64_t n_edges = 12;
  ProgramBuilder pb("int64_bound");
  Expr a = pb.field("a", {E}, DType::float64), b = pb.field("b", {E}, DType::float64);
  pb.call("copy", a + 1, {b}, {{E, std::int64_t{0}, n_edges - 2}});
  const ir::Program p = pb.build();
  EXPECT_EQ(p.stmts[0].domain[0].hi.constant, 10);
  EXPECT_EQ(p.stmts[0].expr->type.dtype, DType::float64) << "the int literal adapted to the field";
}

}  // namespace
}  // namespace fieldflow
