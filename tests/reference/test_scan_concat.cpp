// Reference executor: concat_where regions and vertical scans (forward, backward, tuple carries,
// sub-ranges, a tridiagonal Thomas solve). Expected values come from plain column loops.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "fieldflow/dsl.h"
#include "fieldflow/errors.h"
#include "fieldflow/mesh.h"
#include "fieldflow/reference.h"
#include "reference/lang_test_util.h"
#include "reference/run_program.h"

namespace fieldflow {
namespace {

using namespace langtest;

constexpr int NX = 3, NY = 2, NK = 7;

Field ijk(DType t = DType::float64, int seed = -1) {
  Field f({I, J, K}, t, {NX, NY, NK});
  if (seed >= 0) fill_pattern(f, seed);
  else f.fill(kSentinel);
  return f;
}
std::vector<ProgramBuilder::Bound> full() { return {{I, 0, NX}, {J, 0, NY}, {K, 0, NK}}; }
double v(const Field& f, const Index& x) { return f.get_as_double(f.offset_of(x)); }

// --- concat_where ---------------------------------------------------------------------------------------

TEST(ConcatWhere, SurfaceLevelFromOneFieldTheRestFromAnother) {
  ProgramBuilder pb("cw_k0");
  Expr a = pb.field("a", {I, J, K}, DType::float64), b = pb.field("b", {I, J, K}, DType::float64);
  Expr out = pb.field("out", {I, J, K}, DType::float64);
  pb.call("c", concat_where(K == 0, a, b * 2), {out}, full());
  Field fa = ijk(DType::float64, 1), fb = ijk(DType::float64, 2), fo = ijk();
  run_program(pb.build(), Arguments().field("a", fa).field("b", fb).field("out", fo));
  EXPECT_TRUE(matches(fo, [&](const Index& x) { return x[2] == 0 ? v(fa, x) : v(fb, x) * 2; }));
}

TEST(ConcatWhere, UnselectedBranchIsNeverRead) {
  // a(K - 1) does not exist at K = 0: the region K == 0 takes the other branch, so no DomainError.
  ProgramBuilder pb("cw_guard");
  Expr a = pb.field("a", {I, J, K}, DType::float64);
  Expr out = pb.field("out", {I, J, K}, DType::float64);
  pb.call("c", concat_where(K == 0, 0.0, a - a(K - 1)), {out}, full());
  Field fa = ijk(DType::float64, 3), fo = ijk();
  run_program(pb.build(), Arguments().field("a", fa).field("out", fo));
  EXPECT_TRUE(matches(fo, [&](const Index& x) { return x[2] == 0 ? 0.0 : v(fa, x) - v(fa, {x[0], x[1], x[2] - 1}); }));
}

TEST(ConcatWhere, TopLevelBoundFromAScalarParameter) {
  ProgramBuilder pb("cw_top");
  Expr a = pb.field("a", {I, J, K}, DType::float64);
  Expr nk = pb.scalar("nk", DType::int32);
  Expr out = pb.field("out", {I, J, K}, DType::float64);
  pb.call("c", concat_where(K >= nk - 1, a, a(K + 1) - a), {out}, {{I, 0, NX}, {J, 0, NY}, {K, 0, nk}});
  Field fa = ijk(DType::float64, 4), fo = ijk();
  run_program(pb.build(), Arguments().field("a", fa).scalar("nk", NK).field("out", fo));
  EXPECT_TRUE(matches(fo, [&](const Index& x) {
    return x[2] >= NK - 1 ? v(fa, x) : v(fa, {x[0], x[1], x[2] + 1}) - v(fa, x);
  }));
}

TEST(ConcatWhere, NestedRegions) {
  ProgramBuilder pb("cw_nested");
  Expr a = pb.field("a", {I, J, K}, DType::float64), b = pb.field("b", {I, J, K}, DType::float64);
  Expr nk = pb.scalar("nk", DType::int32);
  Expr out = pb.field("out", {I, J, K}, DType::float64);
  pb.call("c", concat_where(K == 0, a, concat_where(K >= nk - 1, b, (a(K - 1) + b(K + 1)) / 2)), {out}, full());
  Field fa = ijk(DType::float64, 5), fb = ijk(DType::float64, 6), fo = ijk();
  run_program(pb.build(), Arguments().field("a", fa).field("b", fb).scalar("nk", NK).field("out", fo));
  EXPECT_TRUE(matches(fo, [&](const Index& x) {
    if (x[2] == 0) return v(fa, x);
    if (x[2] >= NK - 1) return v(fb, x);
    return (v(fa, {x[0], x[1], x[2] - 1}) + v(fb, {x[0], x[1], x[2] + 1})) / 2;
  }));
}

TEST(ConcatWhere, LiteralBranchesOverAColumnWrittenToAVolume) {
  ProgramBuilder pb("cw_lit");
  Expr out = pb.field("out", {I, J, K}, DType::float64);
  // Weak literals meeting only each other become float64 (any float) or int32.
  pb.call("c", concat_where(K < 2, 1.5, concat_where(K != 4, 2.0, -1)) * 2, {out}, full());
  Field fo = ijk(DType::float64);
  run_program(pb.build(), Arguments().field("out", fo));
  EXPECT_TRUE(matches(fo, [](const Index& x) { return x[2] < 2 ? 3.0 : x[2] != 4 ? 4.0 : -2.0; }));
}

struct CwCase {
  const char* name;
  IndexCondition (*cond)(const Expr&);
  bool (*ref)(std::int64_t, std::int64_t);
};

class ConcatWhereCompare : public ::testing::TestWithParam<CwCase> {};

TEST_P(ConcatWhereCompare, OnAHorizontalDimension) {
  const CwCase& c = GetParam();
  ProgramBuilder pb(std::string("cw_") + c.name);
  Expr a = pb.field("a", {I, J}, DType::float64);
  Expr m = pb.scalar("m", DType::int32);
  Expr out = pb.field("out", {I, J}, DType::float64);
  pb.call("c", concat_where(c.cond(m + 1), a, -a), {out}, {{I, 0, 6}, {J, 0, 2}});
  Field fa({I, J}, DType::float64, {6, 2}), fo({I, J}, DType::float64, {6, 2});
  fill_pattern(fa, 7);
  run_program(pb.build(), Arguments().field("a", fa).scalar("m", 2).field("out", fo));
  EXPECT_TRUE(matches(fo, [&](const Index& x) { return c.ref(x[0], 3) ? v(fa, x) : -v(fa, x); }));
}

INSTANTIATE_TEST_SUITE_P(
    AllComparisons, ConcatWhereCompare,
    ::testing::Values(
        CwCase{"eq", [](const Expr& b) { return I == b; }, [](std::int64_t i, std::int64_t b) { return i == b; }},
        CwCase{"ne", [](const Expr& b) { return I != b; }, [](std::int64_t i, std::int64_t b) { return i != b; }},
        CwCase{"lt", [](const Expr& b) { return I < b; }, [](std::int64_t i, std::int64_t b) { return i < b; }},
        CwCase{"le", [](const Expr& b) { return I <= b; }, [](std::int64_t i, std::int64_t b) { return i <= b; }},
        CwCase{"gt", [](const Expr& b) { return I > b; }, [](std::int64_t i, std::int64_t b) { return i > b; }},
        CwCase{"ge", [](const Expr& b) { return I >= b; }, [](std::int64_t i, std::int64_t b) { return i >= b; }}),
    [](const auto& info) { return std::string(info.param.name); });

// --- scans -----------------------------------------------------------------------------------------------

Expr cumsum_body(const Expr& carry, const std::vector<Expr>& in) { return carry + in[0]; }

TEST(Scan, ForwardCumulativeSum) {
  ProgramBuilder pb("fwd");
  Expr a = pb.field("a", {I, J, K}, DType::float64);
  Expr out = pb.field("out", {I, J, K}, DType::float64);
  pb.call("cumsum", scan("cumsum", ScanDirection::forward, {Scalar(0.0)}, cumsum_body, {a}), {out}, full());
  Field fa = ijk(DType::float64, 8), fo = ijk();
  run_program(pb.build(), Arguments().field("a", fa).field("out", fo));
  EXPECT_TRUE(matches(fo, [&](const Index& x) {
    double s = 0;
    for (std::int64_t k = 0; k <= x[2]; ++k) s += v(fa, {x[0], x[1], k});
    return s;
  }));
}

TEST(Scan, BackwardCumulativeSumWithInit) {
  ProgramBuilder pb("bwd");
  Expr a = pb.field("a", {I, J, K}, DType::float64);
  Expr out = pb.field("out", {I, J, K}, DType::float64);
  pb.call("rsum", scan("rsum", ScanDirection::backward, {Scalar(100.0)}, cumsum_body, {a}), {out}, full());
  Field fa = ijk(DType::float64, 9), fo = ijk();
  run_program(pb.build(), Arguments().field("a", fa).field("out", fo));
  EXPECT_TRUE(matches(fo, [&](const Index& x) {
    double s = 100.0;
    for (std::int64_t k = NK - 1; k >= x[2]; --k) s += v(fa, {x[0], x[1], k});
    return s;
  }));
}

TEST(Scan, RecurrenceWithInitAndTwoInputs) {
  // y_k = y_{k-1} * r_k + a_k, y_{-1} = 1.
  ProgramBuilder pb("recur");
  Expr a = pb.field("a", {I, J, K}, DType::float64), r = pb.field("r", {I, J, K}, DType::float64);
  Expr out = pb.field("out", {I, J, K}, DType::float64);
  pb.call("recur",
          scan("recur", ScanDirection::forward, {Scalar(1.0)},
               [](const Expr& y, const std::vector<Expr>& in) { return y * in[1] + in[0]; }, {a, r}),
          {out}, full());
  Field fa = ijk(DType::float64, 10), fr = ijk(DType::float64, 11), fo = ijk();
  run_program(pb.build(), Arguments().field("a", fa).field("r", fr).field("out", fo));
  EXPECT_TRUE(matches(fo, [&](const Index& x) {
    double y = 1.0;
    for (std::int64_t k = 0; k <= x[2]; ++k) y = y * v(fr, {x[0], x[1], k}) + v(fa, {x[0], x[1], k});
    return y;
  }));
}

TEST(Scan, TupleCarryRunningSumAndMax) {
  ProgramBuilder pb("tuple_scan");
  Expr a = pb.field("a", {I, J, K}, DType::float64);
  Expr s = pb.field("s", {I, J, K}, DType::float64), m = pb.field("m", {I, J, K}, DType::float64);
  Expr t = scan("summax", ScanDirection::forward, {Scalar(0.0), Scalar(-1e300)},
                [](const Expr& c, const std::vector<Expr>& in) {
                  return make_tuple({c[0] + in[0], maximum(c[1], in[0])});
                },
                {a});
  pb.call("summax", t, {s, m}, full());
  Field fa = ijk(DType::float64, 12), fs = ijk(), fm = ijk();
  run_program(pb.build(), Arguments().field("a", fa).field("s", fs).field("m", fm));
  EXPECT_TRUE(matches(fs, [&](const Index& x) {
    double acc = 0;
    for (std::int64_t k = 0; k <= x[2]; ++k) acc += v(fa, {x[0], x[1], k});
    return acc;
  }));
  EXPECT_TRUE(matches(fm, [&](const Index& x) {
    double acc = -1e300;
    for (std::int64_t k = 0; k <= x[2]; ++k) acc = std::max(acc, v(fa, {x[0], x[1], k}));
    return acc;
  }));
}

TEST(Scan, TupleCarryComponentsOfDifferentDtypes) {
  // Carry (count of positive levels so far: int32, their sum: float64); output their ratio.
  ProgramBuilder pb("mixed_carry");
  Expr a = pb.field("a", {I, J, K}, DType::float64);
  Expr out = pb.field("out", {I, J, K}, DType::float64);
  Expr cnt = pb.field("cnt", {I, J, K}, DType::int32);
  Expr t = scan("pos", ScanDirection::forward, {Scalar(std::int32_t{0}), Scalar(0.0)},
                [](const Expr& c, const std::vector<Expr>& in) {
                  return make_tuple({c[0] + astype(in[0] > 0, DType::int32), c[1] + where(in[0] > 0, in[0], 0.0)});
                },
                {a});
  pb.call("pos", make_tuple({t[1] / maximum(astype(t[0], DType::float64), 1.0), t[0]}), {out, cnt}, full());
  Field fa = ijk(DType::float64, 13), fo = ijk(), fc = ijk(DType::int32);
  run_program(pb.build(), Arguments().field("a", fa).field("out", fo).field("cnt", fc));
  EXPECT_TRUE(matches(fo, [&](const Index& x) {
    int n = 0;
    double s = 0;
    for (std::int64_t k = 0; k <= x[2]; ++k)
      if (v(fa, {x[0], x[1], k}) > 0) ++n, s += v(fa, {x[0], x[1], k});
    return s / std::max(static_cast<double>(n), 1.0);
  }));
  EXPECT_TRUE(matches(fc, [&](const Index& x) {
    int n = 0;
    for (std::int64_t k = 0; k <= x[2]; ++k) n += v(fa, {x[0], x[1], k}) > 0;
    return static_cast<double>(n);
  }));
}

TEST(Scan, OverASubRangeOfLevels) {
  ProgramBuilder pb("sub_scan");
  Expr a = pb.field("a", {I, J, K}, DType::float64);
  Expr nk = pb.scalar("nk", DType::int32);
  Expr out = pb.field("out", {I, J, K}, DType::float64);
  pb.call("cumsum", scan("cumsum", ScanDirection::forward, {Scalar(0.5)}, cumsum_body, {a}), {out},
          {{I, 0, NX}, {J, 0, NY}, {K, 1, nk - 1}});
  Field fa = ijk(DType::float64, 14), fo = ijk();
  run_program(pb.build(), Arguments().field("a", fa).scalar("nk", NK).field("out", fo));
  EXPECT_TRUE(matches(
      fo,
      [&](const Index& x) {
        double s = 0.5;  // the sweep starts at the domain's first level
        for (std::int64_t k = 1; k <= x[2]; ++k) s += v(fa, {x[0], x[1], k});
        return s;
      },
      [](const Index& x) { return x[2] >= 1 && x[2] < NK - 1; }));
}

TEST(Scan, BackwardOverASubRangeStartsAtTheTop) {
  ProgramBuilder pb("sub_scan_bwd");
  Expr a = pb.field("a", {I, J, K}, DType::float64);
  Expr out = pb.field("out", {I, J, K}, DType::float64);
  pb.call("rsum", scan("rsum", ScanDirection::backward, {Scalar(0.0)}, cumsum_body, {a}), {out},
          {{I, 0, NX}, {J, 0, NY}, {K, 2, 5}});
  Field fa = ijk(DType::float64, 15), fo = ijk();
  run_program(pb.build(), Arguments().field("a", fa).field("out", fo));
  EXPECT_TRUE(matches(
      fo,
      [&](const Index& x) {
        double s = 0;
        for (std::int64_t k = 4; k >= x[2]; --k) s += v(fa, {x[0], x[1], k});
        return s;
      },
      [](const Index& x) { return x[2] >= 2 && x[2] < 5; }));
}

TEST(Scan, IntegerCarry) {
  ProgramBuilder pb("int_scan");
  Expr a = pb.field("a", {I, J, K}, DType::int64);
  Expr out = pb.field("out", {I, J, K}, DType::int64);
  pb.call("c",
          scan("c", ScanDirection::forward, {Scalar(std::int64_t{1})},
               [](const Expr& c, const std::vector<Expr>& in) { return c * 3 - in[0] + c / 2; }, {a}),
          {out}, full());
  Field fa({I, J, K}, DType::int64, {NX, NY, NK}), fo({I, J, K}, DType::int64, {NX, NY, NK});
  fill_with(fa, [](const Index& x) { return static_cast<double>((x[0] * 7 + x[1] * 3 + x[2] * 5) % 13 - 6); });
  run_program(pb.build(), Arguments().field("a", fa).field("out", fo));
  for (int i = 0; i < NX; ++i)
    for (int j = 0; j < NY; ++j) {
      std::int64_t c = 1;
      for (int k = 0; k < NK; ++k) {
        c = c * 3 - fa.at<std::int64_t>({i, j, k}) + c / 2;
        EXPECT_EQ(fo.at<std::int64_t>({i, j, k}), c) << i << "," << j << "," << k;
      }
    }
}

// An int32 carry that leaves the int32 range after two levels wraps, level after level, like
// uint32 arithmetic.
TEST(Scan, IntegerCarryWrapsAround) {
  ProgramBuilder pb("int_scan_wrap");
  Expr a = pb.field("a", {I, J, K}, DType::int32);
  Expr out = pb.field("out", {I, J, K}, DType::int32);
  pb.call("c",
          scan("c", ScanDirection::backward, {Scalar(std::int32_t{7})},
               [](const Expr& c, const std::vector<Expr>& in) { return c * 65537 + in[0] - 1000003; }, {a}),
          {out}, full());
  Field fa({I, J, K}, DType::int32, {NX, NY, NK}), fo({I, J, K}, DType::int32, {NX, NY, NK});
  fill_with(fa, [](const Index& x) { return static_cast<double>((x[0] * 7 + x[1] * 3 + x[2] * 5) % 13 - 6); });
  run_program(pb.build(), Arguments().field("a", fa).field("out", fo));
  for (int i = 0; i < NX; ++i)
    for (int j = 0; j < NY; ++j) {
      std::uint32_t c = 7;
      for (int k = NK - 1; k >= 0; --k) {
        c = c * 65537u + static_cast<std::uint32_t>(fa.at<std::int32_t>({i, j, k})) - 1000003u;
        EXPECT_EQ(fo.at<std::int32_t>({i, j, k}), static_cast<std::int32_t>(c)) << i << "," << j << "," << k;
      }
    }
}

TEST(Scan, Float32CarryComputesInFloat) {
  ProgramBuilder pb("f32_scan");
  Expr a = pb.field("a", {K}, DType::float32);
  Expr out = pb.field("out", {K}, DType::float32);
  pb.call("c",
          scan("c", ScanDirection::forward, {Scalar(1.0f)},
               [](const Expr& c, const std::vector<Expr>& in) { return c + in[0] * 0.1; }, {a}),
          {out}, {{K, 0, 40}});
  Field fa({K}, DType::float32, {40}), fo({K}, DType::float32, {40});
  for (int k = 0; k < 40; ++k) fa.at<float>({k}) = 1e-7f * static_cast<float>(k % 5 + 1);
  run_program(pb.build(), Arguments().field("a", fa).field("out", fo));
  float c = 1.0f;
  for (int k = 0; k < 40; ++k) {
    c = c + fa.at<float>({k}) * 0.1f;
    EXPECT_EQ(fo.at<float>({k}), c) << k;
  }
}

TEST(Scan, ScalarParameterInTheBodyAndPointwiseUse) {
  ProgramBuilder pb("decay");
  Expr a = pb.field("a", {I, J, K}, DType::float64);
  Expr alpha = pb.scalar("alpha", DType::float64);
  Expr out = pb.field("out", {I, J, K}, DType::float64);
  Expr s = scan("decay", ScanDirection::backward, {Scalar(0.0)},
                [&](const Expr& c, const std::vector<Expr>& in) { return alpha * c + in[0]; }, {a});
  pb.call("decay", s - a, {out}, full());
  Field fa = ijk(DType::float64, 16), fo = ijk();
  run_program(pb.build(), Arguments().field("a", fa).scalar("alpha", 0.9).field("out", fo));
  EXPECT_TRUE(matches(fo, [&](const Index& x) {
    double c = 0;
    for (std::int64_t k = NK - 1; k >= x[2]; --k) c = 0.9 * c + v(fa, {x[0], x[1], k});
    return c - v(fa, x);
  }));
}

TEST(Scan, InputsComputedWithShiftsAndColumnFields) {
  // The scan's inputs are expressions: a vertical difference and a broadcast column.
  ProgramBuilder pb("scan_inputs");
  Expr a = pb.field("a", {I, J, K}, DType::float64);
  Expr col = pb.field("col", {K}, DType::float64);
  Expr out = pb.field("out", {I, J, K}, DType::float64);
  pb.call("c",
          scan("c", ScanDirection::forward, {Scalar(0.0)},
               [](const Expr& c, const std::vector<Expr>& in) { return c + in[0] * in[1]; }, {a(K + 1) - a, col}),
          {out}, {{I, 0, NX}, {J, 0, NY}, {K, 0, NK - 1}});
  Field fa = ijk(DType::float64, 17), fc({K}, DType::float64, {NK}), fo = ijk();
  fill_pattern(fc, 18);
  run_program(pb.build(), Arguments().field("a", fa).field("col", fc).field("out", fo));
  EXPECT_TRUE(matches(
      fo,
      [&](const Index& x) {
        double c = 0;
        for (std::int64_t k = 0; k <= x[2]; ++k)
          c += (v(fa, {x[0], x[1], k + 1}) - v(fa, {x[0], x[1], k})) * fc.at<double>({k});
        return c;
      },
      [](const Index& x) { return x[2] < NK - 1; }, 1e-13));
}

TEST(Scan, OnAnUnstructuredColumnWithNeighbourSums) {
  const Mesh m = make_torus_mesh(3, 3);
  const Connectivity C2V = make_connectivity("C2V", Cell, Vertex, 3);
  constexpr int nk = 5;
  ProgramBuilder pb("mesh_scan");
  Expr fv = pb.field("fv", {Vertex, K}, DType::float64);
  Expr out = pb.field("out", {Cell, K}, DType::float64);
  pb.call("c", scan("c", ScanDirection::forward, {Scalar(0.0)}, cumsum_body, {neighbor_sum(fv(C2V), C2V)}), {out},
          {{Cell, 0, static_cast<int>(m.n_cells)}, {K, 0, nk}});
  Field f({Vertex, K}, DType::float64, {m.n_vertices, nk}), o({Cell, K}, DType::float64, {m.n_cells, nk});
  fill_pattern(f, 19);
  run_program(pb.build(), Arguments().field("fv", f).field("out", o).connectivity("C2V", m.table("C2V")));
  const auto& t = m.table("C2V");
  EXPECT_TRUE(matches(o, [&](const Index& x) {
    double c = 0;
    for (std::int64_t k = 0; k <= x[1]; ++k)
      c += (f.at<double>({t(x[0], 0), k}) + f.at<double>({t(x[0], 1), k})) + f.at<double>({t(x[0], 2), k});
    return c;
  }));
}

// --- scans whose only state is the carry ------------------------------------------------------------------

TEST(Scan, CarryOnlyScanCountsLevelsOfTheCallsRange) {
  // No inputs: the value is a column over [K], written to every column; its length is the domain's.
  ProgramBuilder pb("count_levels");
  Expr out = pb.field("out", {I, J, K}, DType::float64), lo = pb.scalar("lo", DType::int32);
  const Expr levels = scan("count", ScanDirection::forward, {Scalar(0.5)},
                           [](const Expr& c, const std::vector<Expr>& in) {
                             EXPECT_TRUE(in.empty());
                             return c * 2;
                           },
                           K);
  EXPECT_EQ(levels.type().to_string(), "float64[K]");
  pb.call("count", levels, {out}, {{I, 0, NX}, {J, 0, NY}, {K, lo, NK}});
  Field fo = ijk();
  run_program(pb.build(), Arguments().field("out", fo).scalar("lo", 2));
  // Level lo holds init * 2, each level above doubles it again.
  EXPECT_TRUE(matches(fo, [](const Index& x) { return std::ldexp(0.5, static_cast<int>(x[2]) - 1); },
                      [](const Index& x) { return x[2] >= 2; }));
}

TEST(Scan, CarryOnlyTupleScanInsideAnExpressionBackward) {
  // Fibonacci numbers counted from the top level down, combined with a field: the scan is an operand.
  ProgramBuilder pb("fib");
  Expr a = pb.field("a", {I, J, K}, DType::int64), out = pb.field("out", {I, J, K}, DType::int64);
  const Expr fib = scan("fib", ScanDirection::backward, {Scalar(std::int64_t{0}), Scalar(std::int64_t{1})},
                        [](const Expr& c, const std::vector<Expr>&) { return make_tuple({c[1], c[0] + c[1]}); }, K);
  pb.call("scaled", a * fib[0] + fib[1], {out}, {{I, 0, NX}, {J, 0, NY}, {K, 1, NK}});
  Field fa = ijk(DType::int64, 30), fo = ijk(DType::int64);
  run_program(pb.build(), Arguments().field("a", fa).field("out", fo));
  std::vector<std::int64_t> f0(NK), f1(NK);
  std::int64_t x0 = 0, x1 = 1;
  for (int k = NK - 1; k >= 1; --k) {  // the swept range is the call's [1, NK), from the top
    const std::int64_t next = x0 + x1;
    x0 = x1;
    x1 = next;
    f0[k] = x0, f1[k] = x1;
  }
  EXPECT_TRUE(matches(fo, [&](const Index& x) { return static_cast<double>(v(fa, x) * f0[x[2]] + f1[x[2]]); },
                      [](const Index& x) { return x[2] >= 1; }, 0, kIntSentinel));
}

TEST(Scan, CarryOnlyScanNeedsAVerticalAxisAndAnEmptyInputListNeedsOne) {
  auto body = [](const Expr& c, const std::vector<Expr>&) { return c + 1; };
  EXPECT_ERROR(DimensionError, scan("s", ScanDirection::forward, {Scalar(0)}, body, I), "scan 's'",
               "vertical dimension", "given I (horizontal)");
  EXPECT_ERROR(DimensionError, scan("s", ScanDirection::forward, {Scalar(0)}, body, std::vector<Expr>{}),
               "scan 's'", "expected inputs", "given none", "scan(name, direction, init, body, K)");
  // The body still sees no inputs it could index.
  EXPECT_ERROR(DTypeError,
               scan("s", ScanDirection::forward, {Scalar(0.0)},
                    [](const Expr& c, const std::vector<Expr>&) { return c + Expr(true); }, K),
               "bool");
}

TEST(Scan, ReadingAScanOutsideItsSweptRangeIsADomainError) {
  ProgramBuilder pb("scan_shift");
  Expr a = pb.field("a", {I, J, K}, DType::float64);
  Expr out = pb.field("out", {I, J, K}, DType::float64);
  pb.call("c", scan("cs", ScanDirection::forward, {Scalar(0.0)}, cumsum_body, {a})(K + 1), {out}, full());
  Field fa = ijk(DType::float64, 20), fo = ijk();
  EXPECT_ERROR(DomainError, run_program(pb.build(), Arguments().field("a", fa).field("out", fo)), "program 'scan_shift'",
               "scan 'cs'", "K=7", "[0, 7)");
  EXPECT_TRUE(matches(fo, [](const Index&) { return 0.0; }, [](const Index&) { return false; }));
}

// --- a tridiagonal solve: forward tuple scan + backward scan -------------------------------------------------

// The plain-loop Thomas algorithm for one column: a x[k-1] + b x[k] + c x[k+1] = d.
std::vector<double> thomas(std::vector<double> a, std::vector<double> b, std::vector<double> c, std::vector<double> d) {
  const std::size_t n = b.size();
  std::vector<double> cp(n), dp(n), x(n);
  cp[0] = c[0] / b[0];
  dp[0] = d[0] / b[0];
  for (std::size_t k = 1; k < n; ++k) {
    const double m = b[k] - a[k] * cp[k - 1];
    cp[k] = c[k] / m;
    dp[k] = (d[k] - a[k] * dp[k - 1]) / m;
  }
  x[n - 1] = dp[n - 1];
  for (std::size_t k = n - 1; k-- > 0;) x[k] = dp[k] - cp[k] * x[k + 1];
  return x;
}

Expr forward_sweep(const Expr& a, const Expr& b, const Expr& c, const Expr& d) {
  return scan("forward_sweep", ScanDirection::forward, {Scalar(0.0), Scalar(0.0)},
              [](const Expr& cd, const std::vector<Expr>& in) {
                const Expr m = in[1] - in[0] * cd[0];
                return make_tuple({in[2] / m, (in[3] - in[0] * cd[1]) / m});
              },
              {a, b, c, d});
}
Expr back_substitution(const Expr& cp, const Expr& dp) {
  return scan("back_substitution", ScanDirection::backward, {Scalar(0.0)},
              [](const Expr& x, const std::vector<Expr>& in) { return in[1] - in[0] * x; }, {cp, dp});
}

struct Tridiag {
  Field a = ijk(), b = ijk(), c = ijk(), d = ijk();
  Tridiag() {
    fill_with(a, [](const Index& x) { return x[2] == 0 ? 0.0 : 0.3 + 0.1 * pattern(x, 21) / 16; });
    fill_with(b, [](const Index& x) { return 4.0 + pattern(x, 22) / 16; });
    fill_with(c, [](const Index& x) { return x[2] == NK - 1 ? 0.0 : -0.7 + 0.1 * pattern(x, 23) / 16; });
    fill_with(d, [](const Index& x) { return pattern(x, 24); });
  }
  void check(const Field& x) const {
    for (int i = 0; i < NX; ++i)
      for (int j = 0; j < NY; ++j) {
        std::vector<double> ca(NK), cb(NK), cc(NK), cd(NK);
        for (int k = 0; k < NK; ++k)
          ca[k] = v(a, {i, j, k}), cb[k] = v(b, {i, j, k}), cc[k] = v(c, {i, j, k}), cd[k] = v(d, {i, j, k});
        const auto want = thomas(ca, cb, cc, cd);
        for (int k = 0; k < NK; ++k) {
          EXPECT_NEAR(v(x, {i, j, k}), want[k], 1e-12 * std::max(1.0, std::abs(want[k])));
          // And the solution really solves the system.
          double lhs = cb[k] * v(x, {i, j, k});
          if (k > 0) lhs += ca[k] * v(x, {i, j, k - 1});
          if (k < NK - 1) lhs += cc[k] * v(x, {i, j, k + 1});
          EXPECT_NEAR(lhs, cd[k], 1e-10 * std::max(1.0, std::abs(cd[k])));
        }
      }
  }
};

TEST(Scan, TridiagonalSolveInTwoCalls) {
  ProgramBuilder pb("thomas2");
  Expr a = pb.field("a", {I, J, K}, DType::float64), b = pb.field("b", {I, J, K}, DType::float64),
       c = pb.field("c", {I, J, K}, DType::float64), d = pb.field("d", {I, J, K}, DType::float64);
  Expr cp = pb.field("cp", {I, J, K}, DType::float64), dp = pb.field("dp", {I, J, K}, DType::float64);
  Expr x = pb.field("x", {I, J, K}, DType::float64);
  pb.call("forward_sweep", forward_sweep(a, b, c, d), {cp, dp}, full());
  pb.call("back_substitution", back_substitution(cp, dp), {x}, full());
  Tridiag t;
  Field fcp = ijk(), fdp = ijk(), fx = ijk();
  run_program(pb.build(), Arguments()
                                .field("a", t.a)
                                .field("b", t.b)
                                .field("c", t.c)
                                .field("d", t.d)
                                .field("cp", fcp)
                                .field("dp", fdp)
                                .field("x", fx));
  t.check(fx);
}

TEST(Scan, TridiagonalSolveInOneCall) {
  ProgramBuilder pb("thomas1");
  Expr a = pb.field("a", {I, J, K}, DType::float64), b = pb.field("b", {I, J, K}, DType::float64),
       c = pb.field("c", {I, J, K}, DType::float64), d = pb.field("d", {I, J, K}, DType::float64);
  Expr x = pb.field("x", {I, J, K}, DType::float64);
  Expr fwd = forward_sweep(a, b, c, d);
  pb.call("solve", back_substitution(fwd[0], fwd[1]), {x}, full());
  Tridiag t;
  Field fx = ijk();
  run_program(pb.build(), Arguments().field("a", t.a).field("b", t.b).field("c", t.c).field("d", t.d).field("x", fx));
  t.check(fx);
}

// On CUDA a pointwise kernel that reads a sweep's result only at its own point runs in the sweep's
// level loop (fuse_scan_consumers). Here t = x * u is such a consumer, but x is also read two
// columns away, so the sweep covers one column more than t: t's code in the loop must skip it.
// 70 columns take two thread blocks of the scan (64 threads), 5 rows more than the emulated grid's
// 3 blocks along y.
TEST(Scan, AConsumerInTheSweepRunsOnlyOverItsOwnColumns) {
  constexpr int N = 70, NJ = 5, NL = 6;
  ProgramBuilder pb("sweep_consumer");
  Expr a = pb.field("a", {I, J, K}, DType::float64), b = pb.field("b", {I, J, K}, DType::float64),
       u = pb.field("u", {I, J, K}, DType::float64), out = pb.field("out", {I, J, K}, DType::float64);
  Expr x = scan("bwd", ScanDirection::backward, {Scalar(0.5)},
                [](const Expr& c, const std::vector<Expr>& in) { return in[1] - in[0] * c; }, {a, b});
  Expr t = materialize("t", x * u);
  pb.call("solve", x(I + 2) + t(I + 1) - t(I - 1), {out}, {{I, 1, N - 2}, {J, 0, NJ}, {K, 0, NL}});
  Field fa({I, J, K}, DType::float64, {N, NJ, NL}), fb({I, J, K}, DType::float64, {N, NJ, NL}),
      fu({I, J, K}, DType::float64, {N, NJ, NL}), fo({I, J, K}, DType::float64, {N, NJ, NL});
  fill_pattern(fa, 1);
  fill_pattern(fb, 2);
  fill_pattern(fu, 3);
  fo.fill(kSentinel);
  run_program(pb.build(), Arguments().field("a", fa).field("b", fb).field("u", fu).field("out", fo));
  std::vector<double> xs(static_cast<std::size_t>(N * NJ * NL));
  auto xat = [&](int i, int j, int k) -> double& { return xs[static_cast<std::size_t>((i * NJ + j) * NL + k)]; };
  for (int i = 0; i < N; ++i)
    for (int j = 0; j < NJ; ++j) {
      double c = 0.5;
      for (int k = NL - 1; k >= 0; --k) xat(i, j, k) = c = v(fb, {i, j, k}) - v(fa, {i, j, k}) * c;
    }
  for (int i = 0; i < N; ++i)
    for (int j = 0; j < NJ; ++j)
      for (int k = 0; k < NL; ++k) {
        const double want = i < 1 || i >= N - 2 ? kSentinel
                                                : xat(i + 2, j, k) + xat(i + 1, j, k) * v(fu, {i + 1, j, k}) -
                                                      xat(i - 1, j, k) * v(fu, {i - 1, j, k});
        EXPECT_EQ(v(fo, {i, j, k}), want) << i << "," << j << "," << k;
      }
}

// An update that overwrites what the sweep reads one level up must wait for the whole sweep: in
// the sweep's level loop it would overwrite a(K+1) before the next level reads it.
TEST(Scan, AnUpdateOfTheSweptInputWaitsForTheWholeSweep) {
  ProgramBuilder pb("sweep_overwrite");
  Expr a = pb.field("a", {I, J, K}, DType::float64), b = pb.field("b", {I, J, K}, DType::float64);
  Expr x = scan("bwd", ScanDirection::backward, {Scalar(0.0)},
                [](const Expr& c, const std::vector<Expr>& in) { return in[1] - in[0] * c; }, {a(K + 1), b});
  pb.call("solve", x * 2.0, {a}, {{I, 0, NX}, {J, 0, NY}, {K, 0, NK - 1}});
  Field fa = ijk(DType::float64, 4), fb = ijk(DType::float64, 5);
  const Field before = fa.clone();
  run_program(pb.build(), Arguments().field("a", fa).field("b", fb));
  for (int i = 0; i < NX; ++i)
    for (int j = 0; j < NY; ++j) {
      double c = 0.0;
      EXPECT_EQ(v(fa, {i, j, NK - 1}), v(before, {i, j, NK - 1}));
      for (int k = NK - 2; k >= 0; --k) {
        c = v(fb, {i, j, k}) - v(before, {i, j, k + 1}) * c;
        EXPECT_EQ(v(fa, {i, j, k}), c * 2.0) << i << "," << j << "," << k;
      }
    }
}

}  // namespace
}  // namespace fieldflow
