// Reference executor on Cartesian grids: pointwise arithmetic, builtins, dtypes, where, broadcast,
// astype, index, tuples, shifts, origins, sub-domains, in/out arguments and call sequences.
// Every expected value is computed here with plain loops over the inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <type_traits>

#include "fieldflow/dsl.h"
#include "fieldflow/errors.h"
#include "fieldflow/reference.h"
#include "reference/lang_test_util.h"
#include "reference/run_program.h"

namespace fieldflow {
namespace {

using namespace langtest;

constexpr int NX = 5, NY = 4, NK = 3;

Field ijk(DType t, int seed = -1, double sentinel = 0) {
  Field f({I, J, K}, t, {NX, NY, NK});
  if (seed >= 0) fill_pattern(f, seed);
  else f.fill(sentinel);
  return f;
}
Field out_ijk(DType t = DType::float64) { return ijk(t, -1, kSentinel); }
std::vector<ProgramBuilder::Bound> full() { return {{I, 0, NX}, {J, 0, NY}, {K, 0, NK}}; }
double v(const Field& f, const Index& idx) { return f.get_as_double(f.offset_of(idx)); }

// --- arithmetic and broadcasting ------------------------------------------------------------------

TEST(Pointwise, AddTwoFields) {
  ProgramBuilder pb("add");
  Expr a = pb.field("a", {I, J, K}, DType::float64), b = pb.field("b", {I, J, K}, DType::float64);
  Expr out = pb.field("out", {I, J, K}, DType::float64);
  pb.call("add", a + b, {out}, full());
  Field fa = ijk(DType::float64, 1), fb = ijk(DType::float64, 2), fo = out_ijk();
  run_program(pb.build(), Arguments().field("a", fa).field("b", fb).field("out", fo));
  EXPECT_TRUE(matches(fo, [&](const Index& x) { return v(fa, x) + v(fb, x); }));
}

TEST(Pointwise, ScalarParametersAndWeakLiteralsBroadcast) {
  ProgramBuilder pb("axpy");
  Expr a = pb.field("a", {I, J, K}, DType::float64), b = pb.field("b", {I, J, K}, DType::float64);
  Expr alpha = pb.scalar("alpha", DType::float64);
  Expr out = pb.field("out", {I, J, K}, DType::float64);
  pb.call("axpy", alpha * a + 2.0 * b - 1 + a / 4, {out}, full());
  Field fa = ijk(DType::float64, 3), fb = ijk(DType::float64, 4), fo = out_ijk();
  run_program(pb.build(), Arguments().field("a", fa).field("b", fb).scalar("alpha", 0.75).field("out", fo));
  EXPECT_TRUE(matches(fo, [&](const Index& x) { return 0.75 * v(fa, x) + 2.0 * v(fb, x) - 1.0 + v(fa, x) / 4.0; }));
}

TEST(Pointwise, Float32ScalarAndLiteralsStayFloat32) {
  ProgramBuilder pb("axpy32");
  Expr a = pb.field("a", {I, J, K}, DType::float32);
  Expr s = pb.scalar("s", DType::float32);
  Expr out = pb.field("out", {I, J, K}, DType::float32);
  pb.call("axpy", s * a + 0.1 - a / 3, {out}, full());
  Field fa = ijk(DType::float32, 5), fo = out_ijk(DType::float32);
  run_program(pb.build(), Arguments().field("a", fa).scalar("s", 1.3f).field("out", fo));
  EXPECT_TRUE(matches(
      fo,
      [&](const Index& x) {
        const float av = fa.at<float>({x[0], x[1], x[2]});
        return static_cast<double>(1.3f * av + 0.1f - av / 3.0f);
      },
      {}, 0));
}

TEST(Pointwise, ScalarOnlyExpressionIsWrittenEverywhere) {
  ProgramBuilder pb("const");
  Expr s = pb.scalar("s", DType::float64);
  Expr out = pb.field("out", {I, J, K}, DType::float64);
  pb.call("fill", s * 2 + 1, {out}, full());
  Field fo = out_ijk();
  run_program(pb.build(), Arguments().scalar("s", 4.25).field("out", fo));
  EXPECT_TRUE(matches(fo, [](const Index&) { return 9.5; }));
}

TEST(Pointwise, ZeroDimensionalOutput) {
  ProgramBuilder pb("zero_dim");
  Expr s = pb.scalar("s", DType::int64);
  Expr out = pb.field("out", {}, DType::int64);
  pb.call("twice", s * 2, {out}, {});
  Field fo({}, DType::int64, {});
  run_program(pb.build(), Arguments().scalar("s", std::int64_t{21}).field("out", fo));
  EXPECT_EQ(fo.get_as_double(0), 42.0);
}

struct CmpCase {
  const char* name;
  Expr (*dsl)(const Expr&, const Expr&);
  bool (*ref)(double, double);
};

class Comparison : public ::testing::TestWithParam<CmpCase> {};

TEST_P(Comparison, FieldVsFieldAndFieldVsLiteral) {
  const CmpCase& c = GetParam();
  ProgramBuilder pb(std::string("cmp_") + c.name);
  Expr a = pb.field("a", {I, J, K}, DType::float64), b = pb.field("b", {I, J, K}, DType::float64);
  Expr o1 = pb.field("o1", {I, J, K}, DType::boolean), o2 = pb.field("o2", {I, J, K}, DType::boolean);
  pb.call("cmp", make_tuple({c.dsl(a, b), c.dsl(a, 0.5)}), {o1, o2}, full());
  Field fa = ijk(DType::float64, 6), fb = ijk(DType::float64, 7);
  // Make some elements equal so ==, <=, >= see ties.
  fb.at<double>({0, 0, 0}) = fa.at<double>({0, 0, 0});
  fb.at<double>({2, 1, 1}) = fa.at<double>({2, 1, 1});
  fa.at<double>({1, 1, 1}) = 0.5;
  Field f1 = out_ijk(DType::boolean), f2 = out_ijk(DType::boolean);
  run_program(pb.build(), Arguments().field("a", fa).field("b", fb).field("o1", f1).field("o2", f2));
  EXPECT_TRUE(matches(f1, [&](const Index& x) { return c.ref(v(fa, x), v(fb, x)) ? 1.0 : 0.0; }));
  EXPECT_TRUE(matches(f2, [&](const Index& x) { return c.ref(v(fa, x), 0.5) ? 1.0 : 0.0; }));
}

INSTANTIATE_TEST_SUITE_P(
    AllOps, Comparison,
    ::testing::Values(CmpCase{"lt", [](const Expr& a, const Expr& b) { return a < b; }, [](double a, double b) { return a < b; }},
                      CmpCase{"le", [](const Expr& a, const Expr& b) { return a <= b; }, [](double a, double b) { return a <= b; }},
                      CmpCase{"gt", [](const Expr& a, const Expr& b) { return a > b; }, [](double a, double b) { return a > b; }},
                      CmpCase{"ge", [](const Expr& a, const Expr& b) { return a >= b; }, [](double a, double b) { return a >= b; }},
                      CmpCase{"eq", [](const Expr& a, const Expr& b) { return a == b; }, [](double a, double b) { return a == b; }},
                      CmpCase{"ne", [](const Expr& a, const Expr& b) { return a != b; }, [](double a, double b) { return a != b; }}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(Pointwise, IntComparisonWithWeakLiteral) {
  ProgramBuilder pb("icmp");
  Expr a = pb.field("a", {I, J, K}, DType::int32);
  Expr out = pb.field("out", {I, J, K}, DType::boolean);
  pb.call("ge", (a >= 2) | (a == -3), {out}, full());
  Field fa({I, J, K}, DType::int32, {NX, NY, NK});
  fill_with(fa, [](const Index& x) { return static_cast<double>((x[0] * 3 + x[1] * 5 + x[2]) % 9 - 4); });
  Field fo = out_ijk(DType::boolean);
  run_program(pb.build(), Arguments().field("a", fa).field("out", fo));
  EXPECT_TRUE(matches(fo, [&](const Index& x) {
    const auto av = fa.at<std::int32_t>({x[0], x[1], x[2]});
    return (av >= 2 || av == -3) ? 1.0 : 0.0;
  }));
}

TEST(Pointwise, LogicalOperators) {
  ProgramBuilder pb("logic");
  Expr a = pb.field("a", {I, J, K}, DType::float64), b = pb.field("b", {I, J, K}, DType::float64);
  Expr m = pb.field("m", {I, J, K}, DType::boolean);
  Expr o1 = pb.field("o1", {I, J, K}, DType::boolean), o2 = pb.field("o2", {I, J, K}, DType::boolean);
  Expr o3 = pb.field("o3", {I, J, K}, DType::boolean);
  pb.call("logic", make_tuple({(a > 0) & (b < 0), (a > 0) | m, (!m) & ~(b > 1.0)}), {o1, o2, o3}, full());
  Field fa = ijk(DType::float64, 8), fb = ijk(DType::float64, 9);
  Field fm({I, J, K}, DType::boolean, {NX, NY, NK});
  fill_with(fm, [](const Index& x) { return (x[0] + x[1] * x[2]) % 3 == 0; });
  Field f1 = out_ijk(DType::boolean), f2 = out_ijk(DType::boolean), f3 = out_ijk(DType::boolean);
  run_program(pb.build(),
                Arguments().field("a", fa).field("b", fb).field("m", fm).field("o1", f1).field("o2", f2).field("o3", f3));
  EXPECT_TRUE(matches(f1, [&](const Index& x) { return (v(fa, x) > 0 && v(fb, x) < 0) ? 1.0 : 0.0; }));
  EXPECT_TRUE(matches(f2, [&](const Index& x) { return (v(fa, x) > 0 || v(fm, x) != 0) ? 1.0 : 0.0; }));
  EXPECT_TRUE(matches(f3, [&](const Index& x) { return (v(fm, x) == 0 && !(v(fb, x) > 1.0)) ? 1.0 : 0.0; }));
}

TEST(Pointwise, BoolEquality) {
  ProgramBuilder pb("beq");
  Expr m = pb.field("m", {I, J, K}, DType::boolean);
  Expr a = pb.field("a", {I, J, K}, DType::float64);
  Expr out = pb.field("out", {I, J, K}, DType::boolean);
  pb.call("beq", (m == (a > 0)) != Expr(false), {out}, full());
  Field fm({I, J, K}, DType::boolean, {NX, NY, NK}), fa = ijk(DType::float64, 10), fo = out_ijk(DType::boolean);
  fill_with(fm, [](const Index& x) { return (x[0] + x[2]) % 2 == 0; });
  run_program(pb.build(), Arguments().field("m", fm).field("a", fa).field("out", fo));
  EXPECT_TRUE(matches(fo, [&](const Index& x) { return ((v(fm, x) != 0) == (v(fa, x) > 0)) ? 1.0 : 0.0; }));
}

// --- math builtins ------------------------------------------------------------------------------------

struct UnaryCase {
  const char* name;
  Expr (*dsl)(const Expr&);
  double (*f64)(double);
  float (*f32)(float);
  double lo, hi;
};

#define UNARY_CASE(fn, stdfn, lo, hi)                                                                  \
  UnaryCase {                                                                                           \
    #fn, [](const Expr& x) { return fieldflow::fn(x); }, [](double x) { return std::stdfn(x); },         \
        [](float x) { return std::stdfn(x); }, lo, hi                                                   \
  }

const UnaryCase kUnary[] = {
    UNARY_CASE(abs, abs, -3.0, 3.0),     UNARY_CASE(sqrt, sqrt, 0.0, 9.0),    UNARY_CASE(exp, exp, -4.0, 4.0),
    UNARY_CASE(log, log, 0.01, 50.0),    UNARY_CASE(sin, sin, -7.0, 7.0),     UNARY_CASE(cos, cos, -7.0, 7.0),
    UNARY_CASE(tan, tan, -1.4, 1.4),     UNARY_CASE(arcsin, asin, -1.0, 1.0), UNARY_CASE(arccos, acos, -1.0, 1.0),
    UNARY_CASE(arctan, atan, -20.0, 20.0), UNARY_CASE(sinh, sinh, -3.0, 3.0), UNARY_CASE(cosh, cosh, -3.0, 3.0),
    UNARY_CASE(tanh, tanh, -3.0, 3.0),   UNARY_CASE(floor, floor, -2.5, 2.5), UNARY_CASE(ceil, ceil, -2.5, 2.5),
    UNARY_CASE(trunc, trunc, -2.5, 2.5), UNARY_CASE(cbrt, cbrt, -8.0, 27.0), UNARY_CASE(gamma, tgamma, -2.5, 6.0),
};
#undef UNARY_CASE

// Inputs spread over [lo, hi] with irregular steps (17 distinct values).
double spread(const Index& x, double lo, double hi) {
  return lo + (hi - lo) * static_cast<double>((x[0] * 7 + x[1] * 3 + x[2] * 11) % 17) / 16.0;
}

class UnaryBuiltin : public ::testing::TestWithParam<std::tuple<UnaryCase, DType>> {};

TEST_P(UnaryBuiltin, MatchesTheStdFunctionInItsOwnPrecision) {
  const auto& [c, dt] = GetParam();
  ProgramBuilder pb(std::string("unary_") + c.name);
  Expr x = pb.field("x", {I, J, K}, dt);
  Expr out = pb.field("out", {I, J, K}, dt);
  pb.call(c.name, c.dsl(x), {out}, full());
  Field fx = ijk(dt), fo = out_ijk(dt);
  fill_with(fx, [&](const Index& i) { return spread(i, c.lo, c.hi); });
  run_program(pb.build(), Arguments().field("x", fx).field("out", fo));
  // float32 must compute in float (std:: float overloads), float64 in double: exact equality
  // (within a few ulps where a GPU computed: its math library is not libm).
  EXPECT_TRUE(matches(
      fo,
      [&](const Index& i) {
        return dt == DType::float32 ? static_cast<double>(c.f32(fx.at<float>({i[0], i[1], i[2]})))
                                    : c.f64(fx.at<double>({i[0], i[1], i[2]}));
      },
      {}, math_library_tolerance(dt)));
}

INSTANTIATE_TEST_SUITE_P(AllBuiltins, UnaryBuiltin,
                         ::testing::Combine(::testing::ValuesIn(kUnary),
                                            ::testing::Values(DType::float32, DType::float64)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param).name) + "_" +
                                  std::string(to_string(std::get<1>(info.param)));
                         });

struct BinaryCase {
  const char* name;
  Expr (*dsl)(const Expr&, const Expr&);
  double (*f64)(double, double);
  float (*f32)(float, float);
};

const BinaryCase kBinary[] = {
    {"minimum", [](const Expr& a, const Expr& b) { return minimum(a, b); }, [](double a, double b) { return a < b ? a : b; },
     [](float a, float b) { return a < b ? a : b; }},
    {"maximum", [](const Expr& a, const Expr& b) { return maximum(a, b); }, [](double a, double b) { return a > b ? a : b; },
     [](float a, float b) { return a > b ? a : b; }},
    {"fmod", [](const Expr& a, const Expr& b) { return fmod(a, b); }, [](double a, double b) { return std::fmod(a, b); },
     [](float a, float b) { return std::fmod(a, b); }},
    {"power", [](const Expr& a, const Expr& b) { return power(a, b); }, [](double a, double b) { return std::pow(a, b); },
     [](float a, float b) { return std::pow(a, b); }},
};

class BinaryBuiltin : public ::testing::TestWithParam<std::tuple<BinaryCase, DType>> {};

TEST_P(BinaryBuiltin, MatchesTheStdFunctionInItsOwnPrecision) {
  const auto& [c, dt] = GetParam();
  ProgramBuilder pb(std::string("binary_") + c.name);
  Expr a = pb.field("a", {I, J, K}, dt), b = pb.field("b", {I, J, K}, dt);
  Expr out = pb.field("out", {I, J, K}, dt);
  pb.call(c.name, c.dsl(a, b), {out}, full());
  Field fa = ijk(dt), fb = ijk(dt), fo = out_ijk(dt);
  fill_with(fa, [](const Index& i) { return spread(i, 0.1, 5.0); });
  fill_with(fb, [](const Index& i) { return spread({i[2], i[0], i[1]}, 0.3, 2.7); });
  run_program(pb.build(), Arguments().field("a", fa).field("b", fb).field("out", fo));
  EXPECT_TRUE(matches(
      fo,
      [&](const Index& i) {
        if (dt == DType::float32)
          return static_cast<double>(c.f32(fa.at<float>({i[0], i[1], i[2]}), fb.at<float>({i[0], i[1], i[2]})));
        return c.f64(fa.at<double>({i[0], i[1], i[2]}), fb.at<double>({i[0], i[1], i[2]}));
      },
      {}, std::string(c.name) == "power" ? math_library_tolerance(dt) : 0));
}

INSTANTIATE_TEST_SUITE_P(AllBuiltins, BinaryBuiltin,
                         ::testing::Combine(::testing::ValuesIn(kBinary),
                                            ::testing::Values(DType::float32, DType::float64)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param).name) + "_" +
                                  std::string(to_string(std::get<1>(info.param)));
                         });

class Predicates : public ::testing::TestWithParam<DType> {};

TEST_P(Predicates, IsnanIsinfIsfinite) {
  const DType dt = GetParam();
  ProgramBuilder pb("predicates");
  Expr x = pb.field("x", {I}, dt);
  Expr o1 = pb.field("o1", {I}, DType::boolean), o2 = pb.field("o2", {I}, DType::boolean);
  Expr o3 = pb.field("o3", {I}, DType::boolean);
  pb.call("pred", make_tuple({isnan(x), isinf(x), isfinite(x)}), {o1, o2, o3}, {{I, 0, 6}});
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const std::vector<double> in{1.5, nan, inf, -inf, 0.0, -2e30};
  Field fx({I}, dt, {6});
  for (int i = 0; i < 6; ++i) fx.set_from_double(i, in[i]);
  Field f1({I}, DType::boolean, {6}), f2({I}, DType::boolean, {6}), f3({I}, DType::boolean, {6});
  run_program(pb.build(), Arguments().field("x", fx).field("o1", f1).field("o2", f2).field("o3", f3));
  for (int i = 0; i < 6; ++i) {
    const double xv = fx.get_as_double(i);  // float32: -2e30 stays finite
    EXPECT_EQ(f1.at<bool>({i}), std::isnan(xv)) << i;
    EXPECT_EQ(f2.at<bool>({i}), std::isinf(xv)) << i;
    EXPECT_EQ(f3.at<bool>({i}), std::isfinite(xv)) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(FloatDtypes, Predicates, ::testing::Values(DType::float32, DType::float64),
                         [](const auto& info) { return std::string(to_string(info.param)); });

TEST(Pointwise, Float32ArithmeticRoundsInFloat) {
  // (a + b) - a with a = 1, b = 1e-8 is 0 in float but 1e-8 in double; a chain of float
  // operations must round after every step.
  ProgramBuilder pb("float_rounding");
  Expr a = pb.field("a", {I}, DType::float32), b = pb.field("b", {I}, DType::float32);
  Expr o1 = pb.field("o1", {I}, DType::float32), o2 = pb.field("o2", {I}, DType::float32);
  pb.call("round", make_tuple({(a + b) - a, sqrt(a * 3) * sqrt(a * 3) - a * 3 + exp(b) - 1}), {o1, o2}, {{I, 0, 4}});
  Field fa({I}, DType::float32, {4}), fb({I}, DType::float32, {4});
  for (int i = 0; i < 4; ++i) {
    fa.at<float>({i}) = 1.0f + static_cast<float>(i) / 3.0f;
    fb.at<float>({i}) = 1e-8f * static_cast<float>(i + 1);
  }
  Field f1({I}, DType::float32, {4}), f2({I}, DType::float32, {4});
  run_program(pb.build(), Arguments().field("a", fa).field("b", fb).field("o1", f1).field("o2", f2));
  for (int i = 0; i < 4; ++i) {
    const float av = fa.at<float>({i}), bv = fb.at<float>({i});
    const float r1 = (av + bv) - av;
    const float s = std::sqrt(av * 3.0f);
    const float r2 = s * s - av * 3.0f + std::exp(bv) - 1.0f;
    EXPECT_EQ(f1.at<float>({i}), r1) << i;
    // exp: exact, or within a few ulps of its value (about 1) where a GPU's math library computed it.
    EXPECT_NEAR(f2.at<float>({i}), r2, math_library_tolerance(DType::float32)) << i;
  }
  EXPECT_EQ(f1.at<float>({0}), 0.0f);  // in double it would be 1e-8
}

// --- integers ------------------------------------------------------------------------------------------

template <class T>
void check_int_arithmetic(DType dt, T scale) {
  ProgramBuilder pb(std::string("int_") + std::string(to_string(dt)));
  Expr a = pb.field("a", {I, J}, dt), b = pb.field("b", {I, J}, dt);
  Expr add = pb.field("add", {I, J}, dt), sub = pb.field("sub", {I, J}, dt), mul = pb.field("mul", {I, J}, dt),
       div = pb.field("div", {I, J}, dt), neg = pb.field("neg", {I, J}, dt);
  pb.call("arith", make_tuple({a + b, a - b * 2, a * b, a / b, abs(-a) + 1}), {add, sub, mul, div, neg},
          {{I, 0, 7}, {J, 0, 5}});
  Field fa({I, J}, dt, {7, 5}), fb({I, J}, dt, {7, 5});
  for (int i = 0; i < 7; ++i)
    for (int j = 0; j < 5; ++j) {
      fa.at<T>({i, j}) = static_cast<T>((i * 5 + j * 3) % 23 - 11) * scale;
      fb.at<T>({i, j}) = static_cast<T>((i + 2 * j) % 7 - 3);  // includes 0 and negatives
    }
  std::vector<Field> outs;
  for (int o = 0; o < 5; ++o) outs.emplace_back(std::vector<Dimension>{I, J}, dt, std::vector<std::int64_t>{7, 5});
  run_program(pb.build(), Arguments()
                                .field("a", fa)
                                .field("b", fb)
                                .field("add", outs[0])
                                .field("sub", outs[1])
                                .field("mul", outs[2])
                                .field("div", outs[3])
                                .field("neg", outs[4]));
  int zero_divisions = 0;
  for (int i = 0; i < 7; ++i)
    for (int j = 0; j < 5; ++j) {
      const T x = fa.at<T>({i, j}), y = fb.at<T>({i, j});
      EXPECT_EQ(outs[0].at<T>({i, j}), static_cast<T>(x + y));
      EXPECT_EQ(outs[1].at<T>({i, j}), static_cast<T>(x - y * 2));
      EXPECT_EQ(outs[2].at<T>({i, j}), static_cast<T>(x * y));
      EXPECT_EQ(outs[3].at<T>({i, j}), y == 0 ? T(0) : static_cast<T>(x / y)) << "a=" << x << " b=" << y;
      EXPECT_EQ(outs[4].at<T>({i, j}), static_cast<T>((x < 0 ? -x : x) + 1));
      zero_divisions += y == 0;
    }
  EXPECT_GT(zero_divisions, 0);
}

TEST(Integers, Int32ArithmeticAndDivisionByZeroIsZero) { check_int_arithmetic<std::int32_t>(DType::int32, 1); }

TEST(Integers, Int64ArithmeticBeyondInt32Range) {
  check_int_arithmetic<std::int64_t>(DType::int64, std::int64_t{1} << 33);
}

// Integer +, - and * wrap around in two's complement, as NumPy's fixed-width integers do (C++'s
// signed overflow would be undefined). Expected values: the same operations on the unsigned type,
// and a few facts of two's complement checked by name.
template <class T> void check_wrap_around(DType dt) {
  using U = std::make_unsigned_t<T>;
  constexpr T lo = std::numeric_limits<T>::min(), hi = std::numeric_limits<T>::max();
  constexpr T half = static_cast<T>(T(1) << (sizeof(T) * 4));  // 2^(bits / 2): half * half == 0
  const std::vector<T> as{hi, lo, hi, lo, half, static_cast<T>(hi / 3 + 1), -1, 7, hi, lo};
  const std::vector<T> bs{1, -1, hi, lo, half, 3, lo, -5, -1, 1};
  const int n = static_cast<int>(as.size());
  ProgramBuilder pb(std::string("wrap_") + std::string(to_string(dt)));
  Expr a = pb.field("a", {I}, dt), b = pb.field("b", {I}, dt);
  Expr add = pb.field("add", {I}, dt), sub = pb.field("sub", {I}, dt), mul = pb.field("mul", {I}, dt),
       mix = pb.field("mix", {I}, dt);
  pb.call("wrap", make_tuple({a + b, a - b, a * b, (a + 1) * 2 - b}), {add, sub, mul, mix}, {{I, 0, n}});
  Field fa({I}, dt, {n}), fb({I}, dt, {n});
  for (int i = 0; i < n; ++i) fa.at<T>({i}) = as[i], fb.at<T>({i}) = bs[i];
  std::vector<Field> outs;
  outs.reserve(4);  // args keeps references to its fields
  Arguments args = Arguments().field("a", fa).field("b", fb);
  for (const char* name : {"add", "sub", "mul", "mix"})
    args.field(name, outs.emplace_back(std::vector<Dimension>{I}, dt, std::vector<std::int64_t>{n}));
  run_program(pb.build(), args);
  for (int i = 0; i < n; ++i) {
    const U x = static_cast<U>(as[i]), y = static_cast<U>(bs[i]);
    EXPECT_EQ(outs[0].at<T>({i}), static_cast<T>(x + y)) << as[i] << " + " << bs[i];
    EXPECT_EQ(outs[1].at<T>({i}), static_cast<T>(x - y)) << as[i] << " - " << bs[i];
    EXPECT_EQ(outs[2].at<T>({i}), static_cast<T>(x * y)) << as[i] << " * " << bs[i];
    EXPECT_EQ(outs[3].at<T>({i}), static_cast<T>((x + 1) * 2 - y)) << as[i] << ", " << bs[i];
  }
  EXPECT_EQ(outs[0].at<T>({0}), lo);      // max + 1
  EXPECT_EQ(outs[1].at<T>({1}), lo + 1);  // min - -1 is min + 1, no overflow
  EXPECT_EQ(outs[0].at<T>({1}), hi);      // min + -1
  EXPECT_EQ(outs[2].at<T>({2}), 1);       // max * max
  EXPECT_EQ(outs[2].at<T>({4}), 0);       // 2^(bits/2) squared
  EXPECT_EQ(outs[2].at<T>({6}), lo);      // -1 * min
}

TEST(Integers, Int32AddSubtractMultiplyWrapAround) { check_wrap_around<std::int32_t>(DType::int32); }
TEST(Integers, Int64AddSubtractMultiplyWrapAround) { check_wrap_around<std::int64_t>(DType::int64); }

TEST(Integers, DivisionTruncatesTowardZeroAndMinOverMinusOneWraps) {
  ProgramBuilder pb("idiv");
  Expr a = pb.field("a", {I}, DType::int32), b = pb.field("b", {I}, DType::int32);
  Expr out = pb.field("out", {I}, DType::int32);
  pb.call("div", a / b, {out}, {{I, 0, 5}});
  Field fa({I}, DType::int32, {5}), fb({I}, DType::int32, {5}), fo({I}, DType::int32, {5});
  const std::int32_t as[] = {-7, 7, -7, std::numeric_limits<std::int32_t>::min(), 0};
  const std::int32_t bs[] = {2, -2, -2, -1, 0};
  for (int i = 0; i < 5; ++i) fa.at<std::int32_t>({i}) = as[i], fb.at<std::int32_t>({i}) = bs[i];
  run_program(pb.build(), Arguments().field("a", fa).field("b", fb).field("out", fo));
  EXPECT_EQ(fo.at<std::int32_t>({0}), -3);
  EXPECT_EQ(fo.at<std::int32_t>({1}), -3);
  EXPECT_EQ(fo.at<std::int32_t>({2}), 3);
  EXPECT_EQ(fo.at<std::int32_t>({3}), std::numeric_limits<std::int32_t>::min());  // two's complement wrap, no trap
  EXPECT_EQ(fo.at<std::int32_t>({4}), 0);
}

// Python's // and % computed the long way: floor of the exact quotient, remainder from it.
template <class T> void check_floor_division_and_modulo(DType dt) {
  ProgramBuilder pb("ifloordiv");
  Expr a = pb.field("a", {I}, dt), b = pb.field("b", {I}, dt);
  Expr q = pb.field("q", {I}, dt), r = pb.field("r", {I}, dt), q3 = pb.field("q3", {I}, dt);
  pb.call("floordiv", make_tuple({floor_divide(a, b), a % b, floor_divide(a, 3) + a % -3}), {q, r, q3},
          {{I, 0, 12}});
  constexpr T lo = std::numeric_limits<T>::min();
  const std::vector<T> as{7, -7, 7, -7, 6, -6, 0, 5, -5, lo, lo, 9};
  const std::vector<T> bs{2, 2, -2, -2, 3, 3, 4, 0, 0, -1, 1, -1};
  Field fa({I}, dt, {12}), fb({I}, dt, {12}), fq({I}, dt, {12}), fr({I}, dt, {12}), fq3({I}, dt, {12});
  for (int i = 0; i < 12; ++i) fa.at<T>({i}) = as[i], fb.at<T>({i}) = bs[i];
  run_program(pb.build(), Arguments().field("a", fa).field("b", fb).field("q", fq).field("r", fr).field("q3", fq3));
  for (int i = 0; i < 12; ++i) {
    const long double x = as[i], y = bs[i];
    T want_q = 0, want_r = 0;
    if (as[i] == lo && bs[i] == -1) want_q = lo;  // wraps like INT_MIN / -1
    else if (y != 0) {
      want_q = static_cast<T>(std::floor(x / y));
      want_r = static_cast<T>(x - y * std::floor(x / y));
    }
    EXPECT_EQ(fq.at<T>({i}), want_q) << as[i] << " // " << bs[i];
    EXPECT_EQ(fr.at<T>({i}), want_r) << as[i] << " % " << bs[i];
    const T by3 = static_cast<T>(std::floor(x / 3)), mod_m3 = static_cast<T>(x + 3 * std::floor(x / -3));
    EXPECT_EQ(fq3.at<T>({i}), static_cast<T>(by3 + mod_m3)) << as[i];
  }
}

TEST(Integers, FloorDivisionAndModuloFollowPythonInt32) { check_floor_division_and_modulo<std::int32_t>(DType::int32); }
TEST(Integers, FloorDivisionAndModuloFollowPythonInt64) { check_floor_division_and_modulo<std::int64_t>(DType::int64); }

template <class T> void check_integer_power(DType dt) {
  ProgramBuilder pb("ipow");
  Expr a = pb.field("a", {I}, dt), b = pb.field("b", {I}, dt);
  Expr out = pb.field("out", {I}, dt), sq = pb.field("sq", {I}, dt);
  pb.call("pow", make_tuple({power(a, b), power(a, 2)}), {out, sq}, {{I, 0, 11}});
  const std::vector<T> as{3, -3, 2, 0, 0, 7, 1, -1, -1, 5, 2};
  const std::vector<T> bs{4, 3, 0, 0, 5, 1, -3, -3, -4, -2, sizeof(T) * 8 + 2};
  Field fa({I}, dt, {11}), fb({I}, dt, {11}), fo({I}, dt, {11}), fs({I}, dt, {11});
  for (int i = 0; i < 11; ++i) fa.at<T>({i}) = as[i], fb.at<T>({i}) = bs[i];
  run_program(pb.build(), Arguments().field("a", fa).field("b", fb).field("out", fo).field("sq", fs));
  for (int i = 0; i < 11; ++i) {
    // Repeated multiplication, wrapping like unsigned arithmetic; a negative exponent is 1 / a^-b
    // truncated toward zero.
    T want;
    if (bs[i] < 0) want = as[i] == 1 ? 1 : as[i] == -1 ? ((-bs[i]) % 2 ? -1 : 1) : 0;
    else {
      std::uint64_t p = 1;
      for (T e = 0; e < bs[i]; ++e) p *= static_cast<std::uint64_t>(as[i]);
      want = static_cast<T>(p);
    }
    EXPECT_EQ(fo.at<T>({i}), want) << as[i] << " ** " << bs[i];
    EXPECT_EQ(fs.at<T>({i}), static_cast<T>(as[i] * as[i])) << as[i];
  }
  EXPECT_EQ(fo.at<T>({10}), 0);  // 2 ** (bits + 2) overflows to 0
}

TEST(Integers, PowerInt32) { check_integer_power<std::int32_t>(DType::int32); }
TEST(Integers, PowerInt64) { check_integer_power<std::int64_t>(DType::int64); }

TEST(Pointwise, XorAndUnaryPlus) {
  ProgramBuilder pb("xor");
  Expr a = pb.field("a", {I, J, K}, DType::float64), b = pb.field("b", {I, J, K}, DType::float64);
  Expr x = pb.field("x", {I, J, K}, DType::boolean), y = pb.field("y", {I, J, K}, DType::float64);
  pb.call("xor", make_tuple({(a > 0) ^ (b > 0), +a - +b}), {x, y}, full());
  Field fa = ijk(DType::float64, 21), fb = ijk(DType::float64, 22), fx = out_ijk(DType::boolean), fy = out_ijk();
  run_program(pb.build(), Arguments().field("a", fa).field("b", fb).field("x", fx).field("y", fy));
  int both = 0, one = 0;
  EXPECT_TRUE(matches(fx, [&](const Index& i) {
    const bool p = v(fa, i) > 0, q = v(fb, i) > 0;
    both += p && q;
    one += p != q;
    return (p != q) ? 1.0 : 0.0;
  }));
  EXPECT_GT(both, 0);  // true ^ true occurs and is false
  EXPECT_GT(one, 0);
  EXPECT_TRUE(matches(fy, [&](const Index& i) { return v(fa, i) - v(fb, i); }));
}

TEST(Integers, ScalarIntParameterAndMinimumMaximum) {
  ProgramBuilder pb("iclamp");
  Expr a = pb.field("a", {I}, DType::int64);
  Expr lo = pb.scalar("lo", DType::int64);
  Expr out = pb.field("out", {I}, DType::int64);
  pb.call("clamp", minimum(maximum(a, lo), lo + 5), {out}, {{I, 0, 10}});
  Field fa({I}, DType::int64, {10}), fo({I}, DType::int64, {10});
  for (int i = 0; i < 10; ++i) fa.at<std::int64_t>({i}) = i * 3 - 8;
  run_program(pb.build(), Arguments().field("a", fa).scalar("lo", std::int64_t{-2}).field("out", fo));
  for (int i = 0; i < 10; ++i) EXPECT_EQ(fo.at<std::int64_t>({i}), std::clamp<std::int64_t>(i * 3 - 8, -2, 3)) << i;
}

// --- where, broadcast, astype, index -------------------------------------------------------------

TEST(Where, SelectsPerPointWithBroadcastBranches) {
  ProgramBuilder pb("where");
  Expr a = pb.field("a", {I, J, K}, DType::float64);
  Expr col = pb.field("col", {K}, DType::float64);
  Expr s = pb.scalar("s", DType::float64);
  Expr out = pb.field("out", {I, J, K}, DType::float64);
  pb.call("where", where(a > 0, col * 2, s - a), {out}, full());
  Field fa = ijk(DType::float64, 11), fc({K}, DType::float64, {NK}), fo = out_ijk();
  fill_pattern(fc, 12);
  run_program(pb.build(), Arguments().field("a", fa).field("col", fc).scalar("s", 0.5).field("out", fo));
  EXPECT_TRUE(matches(fo, [&](const Index& x) { return v(fa, x) > 0 ? v(fc, {x[2]}) * 2 : 0.5 - v(fa, x); }));
}

TEST(Where, ConditionOverFewerDimsAndLiteralBranches) {
  ProgramBuilder pb("where_ij");
  Expr m = pb.field("m", {I, J}, DType::boolean);
  Expr out = pb.field("out", {I, J, K}, DType::float32);
  Expr a = pb.field("a", {I, J, K}, DType::float32);
  // [I, J] and [K] do not broadcast together implicitly (neither contains the other): broadcast first.
  pb.call("where", where(m, a, 1) + where(broadcast(m, {I, J, K}), 0.0, 2.0 * astype(index(K), DType::float32)),
          {out}, full());
  Field fm({I, J}, DType::boolean, {NX, NY}), fa = ijk(DType::float32, 13), fo = out_ijk(DType::float32);
  fill_with(fm, [](const Index& x) { return (x[0] * x[1]) % 2 == 1; });
  run_program(pb.build(), Arguments().field("m", fm).field("a", fa).field("out", fo));
  EXPECT_TRUE(matches(fo, [&](const Index& x) {
    const bool c = fm.at<bool>({x[0], x[1]});
    const float av = fa.at<float>({x[0], x[1], x[2]});
    return static_cast<double>((c ? av : 1.0f) + (c ? 0.0f : 2.0f * static_cast<float>(x[2])));
  }));
}

TEST(Where, TupleWhereWritesBothOutputs) {
  ProgramBuilder pb("tuple_where");
  Expr a = pb.field("a", {I, J, K}, DType::float64), b = pb.field("b", {I, J, K}, DType::float64);
  Expr o1 = pb.field("o1", {I, J, K}, DType::float64), o2 = pb.field("o2", {I, J, K}, DType::float64);
  pb.call("sort2", where(a < b, make_tuple({a, b}), make_tuple({b, a})), {o1, o2}, full());
  Field fa = ijk(DType::float64, 14), fb = ijk(DType::float64, 15), f1 = out_ijk(), f2 = out_ijk();
  run_program(pb.build(), Arguments().field("a", fa).field("b", fb).field("o1", f1).field("o2", f2));
  EXPECT_TRUE(matches(f1, [&](const Index& x) { return std::min(v(fa, x), v(fb, x)); }));
  EXPECT_TRUE(matches(f2, [&](const Index& x) { return std::max(v(fa, x), v(fb, x)); }));
}

TEST(Where, TupleElementOfWhere) {
  ProgramBuilder pb("tuple_where_get");
  Expr a = pb.field("a", {I, J, K}, DType::float64), b = pb.field("b", {I, J, K}, DType::float64);
  Expr out = pb.field("out", {I, J, K}, DType::float64);
  Expr t = where(a < b, make_tuple({a, b}), make_tuple({b, a}));
  pb.call("range", t[1] - t[0], {out}, full());
  Field fa = ijk(DType::float64, 16), fb = ijk(DType::float64, 17), fo = out_ijk();
  run_program(pb.build(), Arguments().field("a", fa).field("b", fb).field("out", fo));
  EXPECT_TRUE(matches(fo, [&](const Index& x) { return std::abs(v(fa, x) - v(fb, x)); }));
}

TEST(Broadcast, ColumnToFullGrid) {
  ProgramBuilder pb("bcast");
  Expr col = pb.field("col", {K}, DType::float64);
  Expr a = pb.field("a", {I, J, K}, DType::float64);
  Expr o1 = pb.field("o1", {I, J, K}, DType::float64), o2 = pb.field("o2", {I, J, K}, DType::float64);
  pb.call("bcast", make_tuple({broadcast(col, {I, J, K}), a * col}), {o1, o2}, full());
  Field fc({K}, DType::float64, {NK}), fa = ijk(DType::float64, 18), f1 = out_ijk(), f2 = out_ijk();
  fill_pattern(fc, 19);
  run_program(pb.build(), Arguments().field("col", fc).field("a", fa).field("o1", f1).field("o2", f2));
  EXPECT_TRUE(matches(f1, [&](const Index& x) { return v(fc, {x[2]}); }));
  EXPECT_TRUE(matches(f2, [&](const Index& x) { return v(fa, x) * v(fc, {x[2]}); }));
}

TEST(Broadcast, LiteralToAFieldAndPlaneToVolume) {
  ProgramBuilder pb("bcast2");
  Expr plane = pb.field("plane", {I, J}, DType::float64);
  Expr o1 = pb.field("o1", {I, J, K}, DType::float64);
  pb.call("bcast", broadcast(3.5, {I, J, K}) + broadcast(plane, {I, J, K}), {o1}, full());
  Field fp({I, J}, DType::float64, {NX, NY}), f1 = out_ijk();
  fill_pattern(fp, 20);
  run_program(pb.build(), Arguments().field("plane", fp).field("o1", f1));
  EXPECT_TRUE(matches(f1, [&](const Index& x) { return 3.5 + v(fp, {x[0], x[1]}); }));
}

TEST(Astype, FloatToIntTruncatesTowardZero) {
  ProgramBuilder pb("f2i");
  Expr a = pb.field("a", {I}, DType::float64);
  Expr o1 = pb.field("o1", {I}, DType::int32), o2 = pb.field("o2", {I}, DType::int64);
  pb.call("cast", make_tuple({astype(a, DType::int32), astype(a * 1e9, DType::int64)}), {o1, o2}, {{I, 0, 6}});
  const double in[] = {-2.7, -0.5, 0.0, 0.5, 2.7, 41.999};
  Field fa({I}, DType::float64, {6}), f1({I}, DType::int32, {6}), f2({I}, DType::int64, {6});
  for (int i = 0; i < 6; ++i) fa.at<double>({i}) = in[i];
  run_program(pb.build(), Arguments().field("a", fa).field("o1", f1).field("o2", f2));
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(f1.at<std::int32_t>({i}), static_cast<std::int32_t>(in[i])) << i;
    EXPECT_EQ(f2.at<std::int64_t>({i}), static_cast<std::int64_t>(in[i] * 1e9)) << i;
  }
}

// Beyond a plain C++ cast (undefined there): NaN converts to 0, out-of-range values saturate at
// the integer type's limits, in both backends; a round trip through an integer gives +0 for
// small negative values (compilers would fold it into a truncation keeping the sign).
TEST(Astype, FloatToIntSaturatesAndMapsNaNToZero) {
  ProgramBuilder pb("f2i_edges");
  Expr a = pb.field("a", {I}, DType::float64);
  Expr o1 = pb.field("o1", {I}, DType::int32), o2 = pb.field("o2", {I}, DType::int64);
  Expr o3 = pb.field("o3", {I}, DType::float64);
  pb.call("cast", make_tuple({astype(a, DType::int32), astype(a, DType::int64), astype(astype(a, DType::int32), DType::float64)}),
          {o1, o2, o3}, {{I, 0, 8}});
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const double in[] = {nan, 3e9, -3e9, 1e19, -1e19, inf, -inf, -0.25};
  const std::int32_t want32[] = {0, 2147483647, -2147483647 - 1, 2147483647, -2147483647 - 1, 2147483647,
                                 -2147483647 - 1, 0};
  const std::int64_t want64[] = {0, 3000000000LL, -3000000000LL, std::numeric_limits<std::int64_t>::max(),
                                 std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max(),
                                 std::numeric_limits<std::int64_t>::min(), 0};
  Field fa({I}, DType::float64, {8}), f1({I}, DType::int32, {8}), f2({I}, DType::int64, {8}), f3({I}, DType::float64, {8});
  for (int i = 0; i < 8; ++i) fa.at<double>({i}) = in[i];
  run_program(pb.build(), Arguments().field("a", fa).field("o1", f1).field("o2", f2).field("o3", f3));
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(f1.at<std::int32_t>({i}), want32[i]) << i;
    EXPECT_EQ(f2.at<std::int64_t>({i}), want64[i]) << i;
    EXPECT_EQ(f3.at<double>({i}), static_cast<double>(want32[i])) << i;
    EXPECT_EQ(std::signbit(f3.at<double>({i})), want32[i] < 0) << i;  // +0, never -0
  }
}

TEST(Astype, IntToFloatAndBetweenFloatWidths) {
  ProgramBuilder pb("i2f");
  Expr a = pb.field("a", {I}, DType::int64), d = pb.field("d", {I}, DType::float64);
  Expr o1 = pb.field("o1", {I}, DType::float64), o2 = pb.field("o2", {I}, DType::float32);
  pb.call("cast", make_tuple({astype(a, DType::float64) / 2, astype(d, DType::float32) * 3}), {o1, o2}, {{I, 0, 5}});
  Field fa({I}, DType::int64, {5}), fd({I}, DType::float64, {5}), f1({I}, DType::float64, {5}),
      f2({I}, DType::float32, {5});
  for (int i = 0; i < 5; ++i) {
    fa.at<std::int64_t>({i}) = (std::int64_t{1} << 40) + i * 7 - 9;
    fd.at<double>({i}) = 0.1 + i / 7.0;
  }
  run_program(pb.build(), Arguments().field("a", fa).field("d", fd).field("o1", f1).field("o2", f2));
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(f1.at<double>({i}), static_cast<double>(fa.at<std::int64_t>({i})) / 2.0);
    EXPECT_EQ(f2.at<float>({i}), static_cast<float>(fd.at<double>({i})) * 3.0f);
  }
}

TEST(Astype, BoolToNumberAndBack) {
  ProgramBuilder pb("bool_cast");
  Expr a = pb.field("a", {I}, DType::float64);
  Expr o1 = pb.field("o1", {I}, DType::int32), o2 = pb.field("o2", {I}, DType::boolean);
  pb.call("cast", make_tuple({astype(a > 0, DType::int32) * 10, astype(a, DType::boolean)}), {o1, o2}, {{I, 0, 4}});
  const double in[] = {-1.5, 0.0, 0.25, 3.0};
  Field fa({I}, DType::float64, {4}), f1({I}, DType::int32, {4}), f2({I}, DType::boolean, {4});
  for (int i = 0; i < 4; ++i) fa.at<double>({i}) = in[i];
  run_program(pb.build(), Arguments().field("a", fa).field("o1", f1).field("o2", f2));
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(f1.at<std::int32_t>({i}), in[i] > 0 ? 10 : 0);
    EXPECT_EQ(f2.at<bool>({i}), in[i] != 0.0);
  }
}

TEST(Index, IsTheAbsoluteIndexAlongEachDimension) {
  ProgramBuilder pb("index");
  Expr out = pb.field("out", {I, J, K}, DType::int32);
  // Index fields over different dims combine after an explicit broadcast.
  pb.call("ids", broadcast(index(I) * 100, {I, J, K}) + broadcast(index(J) * 10, {I, J, K}) + index(K), {out},
          {{I, -1, 3}, {J, 1, 3}, {K, 0, 2}});
  Field fo({I, J, K}, DType::int32, {5, 4, 3}, {-2, 0, 0});
  fo.fill(kIntSentinel);
  run_program(pb.build(), Arguments().field("out", fo));
  EXPECT_TRUE(matches(
      fo, [](const Index& x) { return static_cast<double>(x[0] * 100 + x[1] * 10 + x[2]); },
      [](const Index& x) { return x[0] >= -1 && x[0] < 3 && x[1] >= 1 && x[1] < 3 && x[2] < 2; }, 0, kIntSentinel));
}

TEST(Index, AsFloatCoordinate) {
  ProgramBuilder pb("coord");
  Expr dx = pb.scalar("dx", DType::float64);
  Expr out = pb.field("out", {I, J}, DType::float64);
  pb.call("x", broadcast(astype(index(I), DType::float64) * dx, {I, J}) + astype(index(J), DType::float64), {out},
          {{I, 0, NX}, {J, 0, NY}});
  Field fo({I, J}, DType::float64, {NX, NY});
  run_program(pb.build(), Arguments().scalar("dx", 0.25).field("out", fo));
  EXPECT_TRUE(matches(fo, [](const Index& x) { return static_cast<double>(x[0]) * 0.25 + static_cast<double>(x[1]); }));
}

// --- tuples, composition, labels -------------------------------------------------------------------

TEST(Tuples, MultipleOutputsOfDifferentDtypes) {
  ProgramBuilder pb("multi");
  Expr a = pb.field("a", {I, J, K}, DType::float64);
  Expr o1 = pb.field("o1", {I, J, K}, DType::float64), o2 = pb.field("o2", {I, J, K}, DType::boolean);
  Expr o3 = pb.field("o3", {I, J, K}, DType::int32);
  pb.call("multi", make_tuple({a * a, a > 1, astype(floor(a), DType::int32)}), {o1, o2, o3}, full());
  Field fa = ijk(DType::float64, 21), f1 = out_ijk(), f2 = out_ijk(DType::boolean), f3 = out_ijk(DType::int32);
  run_program(pb.build(), Arguments().field("a", fa).field("o1", f1).field("o2", f2).field("o3", f3));
  EXPECT_TRUE(matches(f1, [&](const Index& x) { return v(fa, x) * v(fa, x); }));
  EXPECT_TRUE(matches(f2, [&](const Index& x) { return v(fa, x) > 1 ? 1.0 : 0.0; }));
  EXPECT_TRUE(matches(f3, [&](const Index& x) { return static_cast<double>(static_cast<std::int32_t>(std::floor(v(fa, x)))); }));
}

// Operators are plain C++ functions; calling one from another composes expressions.
Expr lap(const Expr& f) { return -4.0 * f + f(I + 1) + f(I - 1) + f(J + 1) + f(J - 1); }
Expr bilap(const Expr& f) { return lap(lap(f)); }
std::pair<Expr, Expr> minmax(const Expr& a, const Expr& b) { return {minimum(a, b), maximum(a, b)}; }

double lap_ref(const std::function<double(std::int64_t, std::int64_t)>& f, std::int64_t i, std::int64_t j) {
  return -4.0 * f(i, j) + f(i + 1, j) + f(i - 1, j) + f(i, j + 1) + f(i, j - 1);
}

TEST(Composition, OperatorsCallingOperators) {
  ProgramBuilder pb("bilap");
  Expr a = pb.field("a", {I, J}, DType::float64);
  Expr out = pb.field("out", {I, J}, DType::float64);
  pb.call("bilap", bilap(a), {out}, {{I, 2, 8}, {J, 2, 7}});
  Field fa({I, J}, DType::float64, {10, 9}), fo({I, J}, DType::float64, {10, 9});
  fill_pattern(fa, 22);
  fo.fill(kSentinel);
  run_program(pb.build(), Arguments().field("a", fa).field("out", fo));
  auto av = [&](std::int64_t i, std::int64_t j) { return fa.at<double>({i, j}); };
  EXPECT_TRUE(matches(
      fo,
      [&](const Index& x) {
        return lap_ref([&](std::int64_t i, std::int64_t j) { return lap_ref(av, i, j); }, x[0], x[1]);
      },
      [](const Index& x) { return x[0] >= 2 && x[0] < 8 && x[1] >= 2 && x[1] < 7; }, 1e-12));
}

TEST(Composition, HelperReturningSeveralValues) {
  ProgramBuilder pb("minmax");
  Expr a = pb.field("a", {I, J, K}, DType::float64), b = pb.field("b", {I, J, K}, DType::float64);
  Expr out = pb.field("out", {I, J, K}, DType::float64);
  auto [lo, hi] = minmax(a, b);
  pb.call("spread", hi - lo, {out}, full());
  Field fa = ijk(DType::float64, 23), fb = ijk(DType::float64, 24), fo = out_ijk();
  run_program(pb.build(), Arguments().field("a", fa).field("b", fb).field("out", fo));
  EXPECT_TRUE(matches(fo, [&](const Index& x) { return std::max(v(fa, x), v(fb, x)) - std::min(v(fa, x), v(fb, x)); }));
}

TEST(Labels, NamedAndMaterializeHaveNoSemanticEffect) {
  auto build = [](bool labelled) {
    ProgramBuilder pb("labels");
    Expr a = pb.field("a", {I, J}, DType::float64);
    Expr out = pb.field("out", {I, J}, DType::float64);
    Expr t = labelled ? materialize("tmp", a * a + 1) : a * a + 1;
    Expr u = labelled ? named("u", t(I + 1) - t) : t(I + 1) - t;
    pb.call("c", u * 2, {out}, {{I, 0, 6}, {J, 0, 4}});
    return pb.build();
  };
  Field fa({I, J}, DType::float64, {7, 4});
  fill_pattern(fa, 25);
  Field o1({I, J}, DType::float64, {7, 4}), o2({I, J}, DType::float64, {7, 4});
  o1.fill(kSentinel);
  o2.fill(kSentinel);
  run_program(build(false), Arguments().field("a", fa).field("out", o1));
  run_program(build(true), Arguments().field("a", fa).field("out", o2));
  EXPECT_TRUE(same_values(snapshot(o1), snapshot(o2)));
  auto t = [&](std::int64_t i, std::int64_t j) { return fa.at<double>({i, j}) * fa.at<double>({i, j}) + 1; };
  EXPECT_TRUE(matches(o2, [&](const Index& x) { return (t(x[0] + 1, x[1]) - t(x[0], x[1])) * 2; },
                      [](const Index& x) { return x[0] < 6; }));
}

// --- shifts -------------------------------------------------------------------------------------------------

TEST(Shifts, LaplacianOnTheInteriorLeavesTheBoundaryUntouched) {
  ProgramBuilder pb("laplacian");
  Expr a = pb.field("a", {I, J, K}, DType::float64);
  Expr out = pb.field("out", {I, J, K}, DType::float64);
  pb.call("lap", lap(a), {out}, {{I, 1, NX - 1}, {J, 1, NY - 1}, {K, 0, NK}});
  Field fa = ijk(DType::float64, 26), fo = out_ijk();
  run_program(pb.build(), Arguments().field("a", fa).field("out", fo));
  EXPECT_TRUE(matches(
      fo,
      [&](const Index& x) {
        auto f = [&](std::int64_t i, std::int64_t j) { return fa.at<double>({i, j, x[2]}); };
        return -4.0 * f(x[0], x[1]) + f(x[0] + 1, x[1]) + f(x[0] - 1, x[1]) + f(x[0], x[1] + 1) + f(x[0], x[1] - 1);
      },
      [](const Index& x) { return x[0] >= 1 && x[0] < NX - 1 && x[1] >= 1 && x[1] < NY - 1; }));
}

TEST(Shifts, AsymmetricShiftsAlongIAndJ) {
  ProgramBuilder pb("asym");
  Expr a = pb.field("a", {I, J}, DType::float64);
  Expr out = pb.field("out", {I, J}, DType::float64);
  pb.call("asym", a(I + 2) - 3 * a(J - 1) + a(I - 1)(J + 1), {out}, {{I, 1, 4}, {J, 1, 3}});
  Field fa({I, J}, DType::float64, {6, 4}), fo({I, J}, DType::float64, {6, 4});
  fill_pattern(fa, 27);
  fo.fill(kSentinel);
  run_program(pb.build(), Arguments().field("a", fa).field("out", fo));
  EXPECT_TRUE(matches(
      fo,
      [&](const Index& x) {
        return fa.at<double>({x[0] + 2, x[1]}) - 3 * fa.at<double>({x[0], x[1] - 1}) + fa.at<double>({x[0] - 1, x[1] + 1});
      },
      [](const Index& x) { return x[0] >= 1 && x[0] < 4 && x[1] >= 1 && x[1] < 3; }));
}

TEST(Shifts, VerticalShiftsKPlusMinusOne) {
  ProgramBuilder pb("vshift");
  Expr a = pb.field("a", {I, J, K}, DType::float64);
  Expr out = pb.field("out", {I, J, K}, DType::float64);
  pb.call("dz", (a(K + 1) - a(K - 1)) * 0.5, {out}, {{I, 0, NX}, {J, 0, NY}, {K, 1, NK - 1}});
  Field fa = ijk(DType::float64, 28), fo = out_ijk();
  run_program(pb.build(), Arguments().field("a", fa).field("out", fo));
  EXPECT_TRUE(matches(
      fo, [&](const Index& x) { return (v(fa, {x[0], x[1], x[2] + 1}) - v(fa, {x[0], x[1], x[2] - 1})) * 0.5; },
      [](const Index& x) { return x[2] >= 1 && x[2] < NK - 1; }));
}

TEST(Shifts, ShiftOfAnExpressionShiftsEveryOperand) {
  ProgramBuilder pb("expr_shift");
  Expr a = pb.field("a", {I, J, K}, DType::float64), b = pb.field("b", {I, J, K}, DType::float64);
  Expr out = pb.field("out", {I, J, K}, DType::float64);
  pb.call("c", (a * b)(I + 1)(K - 1), {out}, {{I, 0, NX - 1}, {J, 0, NY}, {K, 1, NK}});
  Field fa = ijk(DType::float64, 29), fb = ijk(DType::float64, 30), fo = out_ijk();
  run_program(pb.build(), Arguments().field("a", fa).field("b", fb).field("out", fo));
  EXPECT_TRUE(matches(
      fo, [&](const Index& x) { const Index y{x[0] + 1, x[1], x[2] - 1}; return v(fa, y) * v(fb, y); },
      [](const Index& x) { return x[0] < NX - 1 && x[2] >= 1; }));
}

TEST(Shifts, DynamicVerticalOffsetsFromAnIntField) {
  constexpr int nk = 6;
  ProgramBuilder pb("dyn");
  Expr a = pb.field("a", {I, K}, DType::float64);
  Expr off = pb.field("off", {I, K}, DType::int32);
  Expr out = pb.field("out", {I, K}, DType::float64);
  pb.call("gather", a(K + off) + a, {out}, {{I, 0, 4}, {K, 0, nk}});
  Field fa({I, K}, DType::float64, {4, nk}), fof({I, K}, DType::int32, {4, nk}), fo({I, K}, DType::float64, {4, nk});
  fill_pattern(fa, 31);
  for (int i = 0; i < 4; ++i)
    for (int k = 0; k < nk; ++k) fof.at<std::int32_t>({i, k}) = static_cast<std::int32_t>((i * 5 + k * 2) % nk - k);
  run_program(pb.build(), Arguments().field("a", fa).field("off", fof).field("out", fo));
  EXPECT_TRUE(matches(fo, [&](const Index& x) {
    const std::int64_t target = x[1] + fof.at<std::int32_t>({x[0], x[1]});
    return fa.at<double>({x[0], target}) + fa.at<double>({x[0], x[1]});
  }));
}

TEST(Shifts, DynamicOffsetIntoAColumnField) {
  ProgramBuilder pb("dyn_col");
  Expr col = pb.field("col", {K}, DType::float32);
  Expr off = pb.field("off", {I, K}, DType::int64);
  Expr out = pb.field("out", {I, K}, DType::float32);
  pb.call("gather", col(K + off), {out}, {{I, 0, 3}, {K, 0, 4}});
  Field fc({K}, DType::float32, {4}), fof({I, K}, DType::int64, {3, 4}), fo({I, K}, DType::float32, {3, 4});
  fill_pattern(fc, 32);
  for (int i = 0; i < 3; ++i)
    for (int k = 0; k < 4; ++k) fof.at<std::int64_t>({i, k}) = (3 - k) - i;  // reads level 3 - i
  run_program(pb.build(), Arguments().field("col", fc).field("off", fof).field("out", fo));
  EXPECT_TRUE(matches(fo, [&](const Index& x) { return static_cast<double>(fc.at<float>({x[1] + fof.at<std::int64_t>({x[0], x[1]})})); }));
}

// --- origins, sub-domains, scalar bounds, in/out, sequences ----------------------------------------------

TEST(Domains, InputWithNegativeOriginCoversTheHalo) {
  constexpr int n = 6;
  ProgramBuilder pb("halo");
  Expr a = pb.field("a", {I}, DType::float64);
  Expr out = pb.field("out", {I}, DType::float64);
  pb.call("smooth", (a(I - 2) + a(I - 1) + a + a(I + 1) + a(I + 2)) / 5, {out}, {{I, 0, n}});
  Field fa({I}, DType::float64, {n + 4}, {-2});  // covers [-2, n + 2)
  fill_pattern(fa, 33);
  Field fo({I}, DType::float64, {n});
  run_program(pb.build(), Arguments().field("a", fa).field("out", fo));
  EXPECT_TRUE(matches(fo, [&](const Index& x) {
    double s = 0;
    for (int d = -2; d <= 2; ++d) s += fa.at<double>({x[0] + d});
    return s / 5;
  }));
  EXPECT_EQ(fa.origin()[0], -2);
}

TEST(Domains, OutputWithNonZeroOriginUsesAbsoluteIndices) {
  ProgramBuilder pb("offset_out");
  Expr a = pb.field("a", {I, J}, DType::float64);
  Expr out = pb.field("out", {I, J}, DType::float64);
  pb.call("copy", a(I - 1) + astype(index(I), DType::float64), {out}, {{I, 11, 14}, {J, -3, -1}});
  Field fa({I, J}, DType::float64, {4, 3}, {10, -3}), fo({I, J}, DType::float64, {5, 2}, {10, -3});
  fill_pattern(fa, 34);
  fo.fill(kSentinel);
  run_program(pb.build(), Arguments().field("a", fa).field("out", fo));
  EXPECT_TRUE(matches(
      fo, [&](const Index& x) { return fa.at<double>({x[0] - 1, x[1]}) + static_cast<double>(x[0]); },
      [](const Index& x) { return x[0] >= 11 && x[0] < 14; }));
}

TEST(Domains, SubDomainLeavesTheRestOfTheOutputUntouched) {
  ProgramBuilder pb("sub");
  Expr a = pb.field("a", {I, J, K}, DType::float64);
  Expr out = pb.field("out", {I, J, K}, DType::float64);
  pb.call("twice", a * 2, {out}, {{I, 1, 3}, {J, 2, 4}, {K, 1, 2}});
  Field fa = ijk(DType::float64, 35), fo = out_ijk();
  run_program(pb.build(), Arguments().field("a", fa).field("out", fo));
  EXPECT_TRUE(matches(fo, [&](const Index& x) { return v(fa, x) * 2; },
                      [](const Index& x) { return x[0] >= 1 && x[0] < 3 && x[1] >= 2 && x[2] == 1; }));
}

TEST(Domains, BoundsFromScalarParametersServeEverySize) {
  ProgramBuilder pb("scalar_bounds");
  Expr a = pb.field("a", {I}, DType::float64);
  Expr nx = pb.scalar("nx", DType::int32);
  Expr out = pb.field("out", {I}, DType::float64);
  pb.call("diff", a(I + 1) - a, {out}, {{I, 0, nx - 1}});
  const ir::Program prog = pb.build();
  for (int n : {4, 9}) {
    Field fa({I}, DType::float64, {n}), fo({I}, DType::float64, {n});
    fill_pattern(fa, 36 + n);
    fo.fill(kSentinel);
    run_program(prog, Arguments().field("a", fa).scalar("nx", n).field("out", fo));
    EXPECT_TRUE(matches(fo, [&](const Index& x) { return fa.at<double>({x[0] + 1}) - fa.at<double>({x[0]}); },
                        [&](const Index& x) { return x[0] < n - 1; }))
        << "nx = " << n;
  }
}

TEST(Domains, EmptyDomainWritesNothing) {
  ProgramBuilder pb("empty_dom");
  Expr a = pb.field("a", {I}, DType::float64);
  Expr lo = pb.scalar("lo", DType::int32);
  Expr out = pb.field("out", {I}, DType::float64);
  pb.call("copy", a, {out}, {{I, lo, lo}});
  Field fa({I}, DType::float64, {4}), fo({I}, DType::float64, {4});
  fill_pattern(fa, 40);
  fo.fill(kSentinel);
  run_program(pb.build(), Arguments().field("a", fa).scalar("lo", 2).field("out", fo));
  EXPECT_TRUE(matches(fo, [](const Index&) { return 0.0; }, [](const Index&) { return false; }));
}

TEST(InOut, UpdateReadsTheOldValues) {
  constexpr int n = 8;
  ProgramBuilder pb("inout");
  Expr a = pb.field("a", {I}, DType::float64);
  pb.call("update", a + a(I + 1), {a}, {{I, 0, n - 1}});
  Field fa({I}, DType::float64, {n});
  fill_pattern(fa, 41);
  const std::vector<double> old = snapshot(fa);
  run_program(pb.build(), Arguments().field("a", fa));
  for (int i = 0; i < n - 1; ++i) EXPECT_EQ(fa.at<double>({i}), old[i] + old[i + 1]) << i;
  EXPECT_EQ(fa.at<double>({n - 1}), old[n - 1]);
}

TEST(InOut, BackwardReadingUpdateAlsoSeesOldValues) {
  constexpr int n = 8;
  ProgramBuilder pb("inout_back");
  Expr a = pb.field("a", {I}, DType::float64);
  pb.call("update", a - a(I - 1) * 0.5, {a}, {{I, 1, n}});
  Field fa({I}, DType::float64, {n});
  fill_pattern(fa, 42);
  const std::vector<double> old = snapshot(fa);
  run_program(pb.build(), Arguments().field("a", fa));
  EXPECT_EQ(fa.at<double>({0}), old[0]);
  for (int i = 1; i < n; ++i) EXPECT_EQ(fa.at<double>({i}), old[i] - old[i - 1] * 0.5) << i;
}

TEST(Sequences, LaterCallReadsAnEarlierOutput) {
  ProgramBuilder pb("seq");
  Expr a = pb.field("a", {I, J}, DType::float64);
  Expr tmp = pb.field("tmp", {I, J}, DType::float64);
  Expr out = pb.field("out", {I, J}, DType::float64);
  pb.call("square", a * a, {tmp}, {{I, 0, 6}, {J, 0, 5}});
  pb.call("grad", tmp(I + 1) - tmp(J - 1), {out}, {{I, 0, 5}, {J, 1, 5}});
  Field fa({I, J}, DType::float64, {6, 5}), ft({I, J}, DType::float64, {6, 5}), fo({I, J}, DType::float64, {6, 5});
  fill_pattern(fa, 43);
  ft.fill(kSentinel);
  fo.fill(kSentinel);
  run_program(pb.build(), Arguments().field("a", fa).field("tmp", ft).field("out", fo));
  auto sq = [&](std::int64_t i, std::int64_t j) { return fa.at<double>({i, j}) * fa.at<double>({i, j}); };
  EXPECT_TRUE(matches(ft, [&](const Index& x) { return sq(x[0], x[1]); }));
  EXPECT_TRUE(matches(fo, [&](const Index& x) { return sq(x[0] + 1, x[1]) - sq(x[0], x[1] - 1); },
                      [](const Index& x) { return x[0] < 5 && x[1] >= 1; }));
}

TEST(Sequences, ThreeCallsUpdatingOneFieldInTurn) {
  ProgramBuilder pb("seq3");
  Expr a = pb.field("a", {I}, DType::float64);
  Expr b = pb.field("b", {I}, DType::float64);
  pb.call("one", a * 2, {b}, {{I, 0, 6}});
  pb.call("two", b + b(I + 1), {b}, {{I, 0, 5}});
  pb.call("three", b - a, {a}, {{I, 2, 4}});
  Field fa({I}, DType::float64, {6}), fb({I}, DType::float64, {6});
  fill_pattern(fa, 44);
  fb.fill(kSentinel);
  const auto a0 = snapshot(fa);
  run_program(pb.build(), Arguments().field("a", fa).field("b", fb));
  std::vector<double> b1(6), b2(6), a3 = a0;
  for (int i = 0; i < 6; ++i) b1[i] = a0[i] * 2;
  b2 = b1;
  for (int i = 0; i < 5; ++i) b2[i] = b1[i] + b1[i + 1];
  for (int i = 2; i < 4; ++i) a3[i] = b2[i] - a0[i];
  EXPECT_EQ(snapshot(fb), b2);
  EXPECT_EQ(snapshot(fa), a3);
}

// --- call-time field shapes ---------------------------------------------------------------------------------------

TEST(FieldsAtCallTime, PermutedDimsAndHorizontalFastestLayout) {
  ProgramBuilder pb("layouts");
  Expr a = pb.field("a", {I, J, K}, DType::float64);
  Expr out = pb.field("out", {I, J, K}, DType::float64);
  pb.call("c", a(I + 1) + a(K - 1) * 2, {out}, {{I, 0, NX - 1}, {J, 0, NY}, {K, 1, NK}});
  Field fa({K, I, J}, DType::float64, {NK, NX, NY});  // dims in another order
  fill_with(fa, [](const Index& x) { return pattern({x[1], x[2], x[0]}, 45); });
  Field fo({I, J, K}, DType::float64, {NX, NY, NK}, {}, Layout::horizontal_fastest);
  fo.fill(kSentinel);
  EXPECT_EQ(fo.strides()[0], 1);
  run_program(pb.build(), Arguments().field("a", fa).field("out", fo));
  EXPECT_TRUE(matches(
      fo,
      [&](const Index& x) {
        return pattern({x[0] + 1, x[1], x[2]}, 45) + pattern({x[0], x[1], x[2] - 1}, 45) * 2;
      },
      [](const Index& x) { return x[0] < NX - 1 && x[2] >= 1; }));
}

TEST(FieldsAtCallTime, IntScalarsConvertBetweenWidths) {
  ProgramBuilder pb("widths");
  Expr n32 = pb.scalar("n32", DType::int32);
  Expr n64 = pb.scalar("n64", DType::int64);
  Expr o1 = pb.field("o1", {I}, DType::int32), o2 = pb.field("o2", {I}, DType::int64);
  pb.call("c", make_tuple({n32 + index(I), n64 * 2}), {o1, o2}, {{I, 0, n32}});
  Field f1({I}, DType::int32, {5}), f2({I}, DType::int64, {5});
  f1.fill(-1);
  f2.fill(-1);
  run_program(pb.build(), Arguments().scalar("n32", std::int64_t{3}).scalar("n64", std::int32_t{-7}).field("o1", f1).field("o2", f2));
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(f1.at<std::int32_t>({i}), i < 3 ? 3 + i : -1);
    EXPECT_EQ(f2.at<std::int64_t>({i}), i < 3 ? -14 : -1);
  }
}

}  // namespace
}  // namespace fieldflow
