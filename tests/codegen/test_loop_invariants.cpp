// hoist_loop_invariants on loop bodies written the way the point emitter writes them, one
// behaviour per case. End to end, every compiled test compares the hoisted kernels with the
// reference (torus meshes take the full-row copy of the loop, bounded meshes the masked one).
#include <gtest/gtest.h>

#include "codegen/common/loop_invariants.h"

namespace fieldflow::codegen {
namespace {

// A copy with its unit factors folded leaves the unfolded product unread: that product and the
// load only it read go, a chain of them too; what an assignment, a store or a nested block reads
// stays, and so does a local assigned later (its assignment reads it).
TEST(LoopInvariants, DeadLocalsGoWithWhatOnlyTheyRead) {
  const std::string body =
      "  double acc0 = double(0);\n"
      "  const double v4 = b1[o1 + x_Cell];\n"
      "  const double u4 = blk_unit0[x_Cell - blk_];\n"
      "  const double v5 = b0[o0 + x_Cell + x_K * s0_1];\n"
      "  const double v6 = static_cast<double>(v5 * v4);\n"
      "  const double v7 = static_cast<double>(v6 * 2.0);\n"
      "  const double w6 = static_cast<double>(v5 * u4);\n"
      "  bool ok1 = true;\n"
      "  const double v8 = static_cast<double>(acc0 + w6);\n"
      "  acc0 = ok1 ? v8 : acc0;\n"
      "  if (x_K == 0) {\n"
      "    const double unused_inside = v5;\n"
      "  }\n"
      "  b2[o2 + x_Cell + x_K * s2_1] = acc0;\n";
  EXPECT_EQ(without_dead_locals(body),
            "  double acc0 = double(0);\n"
            "  const double u4 = blk_unit0[x_Cell - blk_];\n"
            "  const double v5 = b0[o0 + x_Cell + x_K * s0_1];\n"
            "  const double w6 = static_cast<double>(v5 * u4);\n"
            "  bool ok1 = true;\n"
            "  const double v8 = static_cast<double>(acc0 + w6);\n"
            "  acc0 = ok1 ? v8 : acc0;\n"
            "  if (x_K == 0) {\n"
            "    const double unused_inside = v5;\n"
            "  }\n"
            "  b2[o2 + x_Cell + x_K * s2_1] = acc0;\n");
  EXPECT_EQ(without_dead_locals(""), "");
}

// A neighbour reduction: the table row, its mask and the weight move; the loads along K, the
// accumulation and the store stay; the mask is reported for the full-row copy.
TEST(LoopInvariants, TableRowsWeightsAndMasksMoveLoadsAlongTheLoopStay) {
  const std::string body =
      "  double acc0 = double(0);\n"
      "  std::int32_t nb2 = t5[std::int64_t(x_Cell) * t5_rs + std::int64_t(0) * t5_ns];\n"
      "  const bool present3 = nb2 >= 0;  // missing neighbours do not contribute\n"
      "  nb2 = present3 ? nb2 : 0;\n"
      "  bool ok1 = present3;\n"
      "  const double v4 = b1[o1 + x_Cell * s1_0 + 0];\n"
      "  const double v5 = b0[o0 + nb2 * s0_0 + x_K];\n"
      "  const double v6 = static_cast<double>(v5 * v4);\n"
      "  const double v7 = static_cast<double>(acc0 + v6);\n"
      "  acc0 = ok1 ? v7 : acc0;\n"
      "  b2[o2 + x_Cell * s2_0 + x_K] = acc0;\n";
  const HoistedLoopBody h = hoist_loop_invariants(body, "x_K");
  EXPECT_EQ(h.invariant,
            "  std::int32_t nb2 = t5[std::int64_t(x_Cell) * t5_rs + std::int64_t(0) * t5_ns];\n"
            "  const bool present3 = nb2 >= 0;  // missing neighbours do not contribute\n"
            "  nb2 = present3 ? nb2 : 0;\n"
            "  bool ok1 = present3;\n"
            "  const double v4 = b1[o1 + x_Cell * s1_0 + 0];\n");
  EXPECT_EQ(h.body,
            "  double acc0 = double(0);\n"
            "  const double v5 = b0[o0 + nb2 * s0_0 + x_K];\n"
            "  const double v6 = static_cast<double>(v5 * v4);\n"
            "  const double v7 = static_cast<double>(acc0 + v6);\n"
            "  acc0 = ok1 ? v7 : acc0;\n"
            "  b2[o2 + x_Cell * s2_0 + x_K] = acc0;\n");
  EXPECT_EQ(h.masks, std::vector<std::string>{"ok1"});
}

// Nothing behind a `continue` moves: the load through nb3 is invalid where the jump is taken.
TEST(LoopInvariants, NothingAfterAJumpMoves) {
  const std::string body =
      "  std::int32_t nb3 = t1[x_E * t1_rs];\n"
      "  if (nb3 < 0) continue;\n"
      "  const double v4 = b0[o0 + nb3];\n"
      "  b1[o1 + x_E * s1_0 + x_K] = v4;\n";
  const HoistedLoopBody h = hoist_loop_invariants(body, "x_K");
  EXPECT_EQ(h.invariant.find("v4"), std::string::npos) << h.invariant;
  EXPECT_NE(h.body.find("  if (nb3 < 0) continue;\n  const double v4"), std::string::npos) << h.body;
}

// A local assigned again after a line that stays has read it keeps its place, and so does
// everything computed from it; a value set inside a branch depends on the branch.
TEST(LoopInvariants, ReassignedAfterAStayingReadAndBranchValuesStay) {
  const std::string body =
      "  std::int32_t nb1 = t0[x_C];\n"
      "  const double v2 = b0[o0 + nb1 * s0_0 + x_K];\n"
      "  nb1 = nb1 < 0 ? 0 : nb1;\n"
      "  const double v3 = b1[o1 + nb1];\n"
      "  double v4;\n"
      "  if (x_K == 0) {\n"
      "    v4 = v3;\n"
      "  } else {\n"
      "    v4 = v2;\n"
      "  }\n"
      "  const double v5 = v4 * 2.0;\n"
      "  b2[o2 + x_C * s2_0 + x_K] = v5 + v3;\n";
  const HoistedLoopBody h = hoist_loop_invariants(body, "x_K");
  EXPECT_EQ(h.invariant, "") << "nb1 is read by a line that stays before it is assigned again";
  EXPECT_EQ(h.body, body);
  EXPECT_TRUE(h.masks.empty());
}

// The head of a branch defines nothing: the table row and the weight before and after a
// branch on the level still move (its condition names `std` and `int64_t`, which once made every
// line that names them count as dependent); what the branch assigns, and what reads that, stays;
// so does everything after a one-line `if` that assigns.
TEST(LoopInvariants, ABranchOnTheLevelKeepsOnlyWhatItAssigns) {
  const std::string body =
      "  double v1;\n"
      "  if (x_K < std::int64_t(1ULL)) {\n"
      "    v1 = b0[o0 + x_K];\n"
      "  } else {\n"
      "    v1 = 0.5;\n"
      "  }\n"
      "  std::int32_t nb2 = t3[std::int64_t(x_V) * t3_rs + std::int64_t(0) * t3_ns];\n"
      "  const double v3 = b1[o1 + nb2];\n"
      "  const double v4 = static_cast<double>(v1 * v3);\n"
      "  b2[o2 + x_V * s2_0 + x_K] = v4;\n";
  const HoistedLoopBody h = hoist_loop_invariants(body, "x_K");
  EXPECT_EQ(h.invariant,
            "  std::int32_t nb2 = t3[std::int64_t(x_V) * t3_rs + std::int64_t(0) * t3_ns];\n"
            "  const double v3 = b1[o1 + nb2];\n");
  const std::string one_line = "  double v1 = 1.0;\n  if (x_K < 1) v1 = 2.0;\n  const double v3 = static_cast<double>(v1 * 2.0);\n";
  EXPECT_EQ(hoist_loop_invariants(one_line, "x_K").invariant, "") << "v1 is assigned on the if's line";
}

// A dynamic offset's check clamps the offset on the line of its `if` (fuzzer seed 23400215). The
// offset depends only on the level, but the check assigns it, so neither it nor the load through
// it may move above the check: the hoisted load read 2^31 elements past `col` and crashed.
TEST(LoopInvariants, AnOffsetClampedByItsCheckStaysWithTheCheck) {
  const std::string body =
      "  std::int64_t dyn3 = fieldflow::abi::ff_iadd<std::int64_t>(x_K, std::int32_t(2147483645));\n"
      "  if (dyn3 < call->buffers[22].lo[0] || dyn3 >= call->buffers[22].hi[0]) { err |= ff_error_dynamic_offset; dyn3 = call->buffers[22].lo[0]; }\n"
      "  const double v4 = b22[o22 + static_cast<std::int64_t>(dyn3)];\n"
      "  const double v5 = b1[o1 + x_V];\n"
      "  b2[o2 + x_V + x_K * s2_1] = static_cast<double>(v4 + v5);\n";
  const HoistedLoopBody h = hoist_loop_invariants(body, "x_V");
  EXPECT_EQ(h.invariant, "") << "the offset is assigned again by its check";
  EXPECT_EQ(h.body, body);
}

// The lines are parsed by hand (no std::regex: this runs on every warm compile). What counts as
// a statement, an assignment inside a block, a jump and a mask, one edge of each.
TEST(LoopInvariants, TheHandParserKeepsToTheStatementsThePointEmitterWrites) {
  const std::string body =
      "  const double v1 = b0[o0 + x_C];  // a comment; with a semicolon\n"
      "  const auto v2 = v1 + 1.0;\n"
      "  const double v3 = v2 * 2.0;\n"
      "  bool okA = v1 > 0.0;\n"
      "  bool ok7 = v1 > 1.0;\n"
      "  const double returned_value = v1 * 3.0;\n"
      "  if (check) {\n"
      "    err |= v1 == returned_value;\n"
      "  }\n"
      "  const double v8 = err * 1.0;\n"
      "  std::int64_t gap = x_C == 0 ? 1 : 2;\n"
      "  b1[o1 + x_C * s1_0 + x_K] = v3 + v8 + gap;\n";
  const HoistedLoopBody h = hoist_loop_invariants(body, "x_K");
  // v1 ends at the `;` before the comment; `const auto` is not a statement the emitter writes, so
  // v2 and what reads it stay; `returned_value` is a name, not a `return`; the `|=` inside the
  // branch makes err (and v8) dependent, the `==` there assigns nothing. (The `if` line is
  // not a statement either: the names on it, here only `check`, count as dependent.)
  EXPECT_EQ(h.invariant,
            "  const double v1 = b0[o0 + x_C];  // a comment; with a semicolon\n"
            "  bool okA = v1 > 0.0;\n"
            "  bool ok7 = v1 > 1.0;\n"
            "  const double returned_value = v1 * 3.0;\n"
            "  std::int64_t gap = x_C == 0 ? 1 : 2;\n");
  EXPECT_EQ(h.masks, std::vector<std::string>{"ok7"}) << "okA is not a reduction mask's name";
  EXPECT_NE(h.body.find("const auto v2"), std::string::npos) << h.body;
  EXPECT_NE(h.body.find("const double v3"), std::string::npos) << h.body;
  EXPECT_NE(h.body.find("const double v8"), std::string::npos) << h.body;
}

// (t * a) * b with a, b level-invariant and t * a used once: the fast copy computes t * (a * b)
// (exact where b is +-1, which the kernel checks before taking it), keeping t's side of the
// product; a product whose intermediate is read twice, or of integers, keeps its order.
TEST(LoopInvariants, ProductsByAUnitFactorReassociateInTheFastCopy) {
  const std::string body =
      "  const double v1 = b0[o0 + x_E];\n"
      "  const double v2 = b1[o1 + x_E];\n"
      "  const double v3 = b2[o2 + x_E * s2_0 + x_K];\n"
      "  const double v4 = static_cast<double>(v3 * v1);\n"
      "  const double v5 = static_cast<double>(v4 * v2);\n"
      "  const double v6 = static_cast<double>(v3 * v1);\n"
      "  const double v7 = static_cast<double>(v6 * v2);\n"
      "  const double v8 = static_cast<double>(v6 + v7);\n"
      "  const double v11 = static_cast<double>(v1 * v3);\n"
      "  const double v12 = static_cast<double>(v2 * v11);\n"
      "  const std::int64_t i13 = t0[x_E];\n"
      "  const std::int64_t i14 = static_cast<std::int64_t>(x_K * i13);\n"
      "  const std::int64_t i15 = static_cast<std::int64_t>(i14 * i13);\n"
      "  b3[o3 + x_E * s3_0 + x_K] = v5 + v8 + v12 + i15;\n";
  const HoistedLoopBody h = hoist_loop_invariants(body, "x_K");
  EXPECT_EQ(h.invariant,
            "  const double v1 = b0[o0 + x_E];\n"
            "  const double v2 = b1[o1 + x_E];\n"
            "  const std::int64_t i13 = t0[x_E];\n");
  EXPECT_EQ(h.unit_factors, std::vector<std::string>{"v2"});
  EXPECT_EQ(h.fast_prelude, std::vector<std::string>{"const double unit0_v5 = static_cast<double>(v1 * v2);"}) << "one product for the pair (v1, v2)";
  std::string fast = h.body;
  const auto replace = [&](const std::string& from, const std::string& to) {
    const std::size_t at = fast.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    fast.replace(at, from.size(), to);
  };
  replace("v5 = static_cast<double>(v4 * v2)", "v5 = static_cast<double>(v3 * unit0_v5)");
  replace("v12 = static_cast<double>(v2 * v11)", "v12 = static_cast<double>(unit0_v5 * v3)");
  EXPECT_EQ(h.fast_body, fast) << "v7 (v6 is read twice) and i15 (integers) keep their order";
}

// Without such a product the fast copy is the loop itself and nothing is checked.
TEST(LoopInvariants, NoUnitFactorsWithoutAChainOfInvariantFactors) {
  const std::string body =
      "  const double v1 = b0[o0 + x_E];\n"
      "  const double v2 = b2[o2 + x_E * s2_0 + x_K];\n"
      "  const double v3 = static_cast<double>(v2 * v1);\n"
      "  const double v4 = static_cast<double>(v3 * v2);\n"
      "  b3[o3 + x_E * s3_0 + x_K] = v4;\n";
  const HoistedLoopBody h = hoist_loop_invariants(body, "x_K");
  EXPECT_TRUE(h.unit_factors.empty());
  EXPECT_TRUE(h.fast_prelude.empty());
  EXPECT_EQ(h.fast_body, h.body);
}

// A loop across columns inside a level loop: its branches on the level (a boundary) do not
// change along the loop and are set to false in the copy for the interior levels; so is a branch
// on the loop's own variable against such a bound (a loop condition, run piecewise); a branch on
// a value the body computes, on memory, or nested in another block stays as it is.
TEST(LoopInvariants, BranchesOnTheLevelAreUnswitchedOthersStay) {
  const std::string body =
      "  double v0;\n"
      "  if (x_K == std::int64_t(0ULL)) {\n"
      "    v0 = double(0x0p+0);\n"
      "  } else {\n"
      "    v0 = b1[o1 + x_I + (x_K - 1) * s1_2];\n"
      "    if (x_K == p9) {\n"
      "      v0 = 1.0;\n"
      "    }\n"
      "  }\n"
      "  const double v3 = b0[o0 + x_I + x_K * s0_2];\n"
      "  if (v3 > v0) {\n"
      "    v0 = v3;\n"
      "  }\n"
      "  if (v0 > 1.0) {\n"
      "    v0 = 1.0;\n"
      "  }\n"
      "  if (x_I == 3) {\n"
      "    v0 = 2.0;\n"
      "  }\n"
      "  if (b2[x_K] > 0.0) {\n"
      "    v0 = 3.0;\n"
      "  }\n"
      "  if (x_K == std::int64_t(0ULL)) {\n"
      "    v0 = -v0;\n"
      "  }\n"
      "  b3[o3 + x_I + x_K * s3_2] = v0;\n";
  const UnswitchedLoopBody u = unswitch_invariant_branches(body, "x_I");
  EXPECT_EQ(u.conditions, std::vector<std::string>{"x_K == std::int64_t(0ULL)"}) << "once, though it is written twice";
  EXPECT_EQ(u.loop_conditions, std::vector<std::string>{"x_I == 3"});
  EXPECT_EQ(u.breaks, std::vector<std::string>{"3"});
  std::string fast = body;
  for (const std::string branch : {"  if (x_K == std::int64_t(0ULL)) {", "  if (x_I == 3) {"})
    for (std::size_t at; (at = fast.find(branch)) != std::string::npos;) fast.replace(at, branch.size(), "  if (false) {");
  EXPECT_EQ(u.fast_body, fast);
  const UnswitchedLoopBody none = unswitch_invariant_branches("  const double v1 = b0[x_I];\n", "x_I");
  EXPECT_TRUE(none.conditions.empty());
  EXPECT_TRUE(none.loop_conditions.empty());
}

// Loop conditions: the loop index, or it shifted as the point emitter writes it (`(x_K + 1)`),
// compared once with a bound the loop does not change. Each gives the index value where the
// shifted index meets the bound (in wrapping arithmetic). Anything else is not one: a bound the
// body computes or reads from memory, two comparisons, another spelling of the shift, another
// variable that merely starts with the loop's name.
TEST(LoopInvariants, ComparisonsOfTheLoopIndexWithABoundAreLoopConditions) {
  const auto one = [](const std::string& condition) {
    const std::string body = "  double v0;\n  if (" + condition + ") {\n    v0 = 1.0;\n  } else {\n    v0 = 2.0;\n  }\n"
                             "  const double v3 = b0[x_K] * 2.0;\n  b1[x_K] = v0 + v3;\n";
    return unswitch_invariant_branches(body, "x_K");
  };
  const std::vector<std::pair<std::string, std::string>> accepted = {
      {"x_K == std::int64_t(0ULL)", "std::int64_t(0ULL)"},
      {"x_K < p3", "p3"},
      {"x_K >= std::int64_t(18446744073709551615ULL + 1ULL * static_cast<unsigned long long>(p9))",
       "std::int64_t(18446744073709551615ULL + 1ULL * static_cast<unsigned long long>(p9))"},
      {"(x_K + 1) <= p3", "std::int64_t(std::uint64_t(p3) - std::uint64_t(1LL))"},
      {"(x_K - 12) != (p3 * 2)", "std::int64_t(std::uint64_t((p3 * 2)) - std::uint64_t(-12LL))"},
      {"x_K > lo_k0_x_K", "lo_k0_x_K"},
  };
  for (const auto& [condition, bound] : accepted) {
    const UnswitchedLoopBody u = one(condition);
    EXPECT_EQ(u.loop_conditions, std::vector<std::string>{condition});
    EXPECT_EQ(u.breaks, std::vector<std::string>{bound}) << condition;
    EXPECT_NE(u.fast_body.find("if (false) {"), std::string::npos) << condition;
  }
  for (const std::string condition :
       {"x_K == v3", "x_K == b0[3]", "x_K < p3 && p4", "x_K < p3 || x_K > p4", "x_K + 1 == p3", "(x_K + p1) == p3",
        "x_K == (p3 < p4)", "x_K < p3 ? 1 : 0", "x_Kb == p3", "p3 == x_K", "(x_K + 1)) == p3", "x_K == (p3"}) {
    const UnswitchedLoopBody u = one(condition);
    EXPECT_TRUE(u.loop_conditions.empty()) << condition;
    EXPECT_TRUE(u.breaks.empty()) << condition;
  }
}


// The fvm_nabla shape: per edge around a vertex, the sum of the field at both ends of the edge.
// Where one index is in every pair (checked before the copy), that column is loaded once, each
// pair loads its other column, and a sum whose second operand was the shared column is written
// the other way round (the same value: addition commutes).
TEST(LoopInvariants, PairsOfColumnsSharingOneLoadItOnce) {
  const std::string body =
      "  double acc1 = double(0);\n"
      "  const double v8 = b0[o0 + nb7 * s0_0 + x_K];\n"
      "  const double v10 = b0[o0 + nb9 * s0_0 + x_K];\n"
      "  const double v11 = static_cast<double>(v10 + v8);\n"
      "  acc1 = static_cast<double>(acc1 + v11);\n"
      "  const double v22 = b0[o0 + nb21 * s0_0 + x_K];\n"
      "  const double v24 = b0[o0 + nb23 * s0_0 + x_K];\n"
      "  const double v25 = static_cast<double>(v24 + v22);\n"
      "  acc1 = static_cast<double>(acc1 + v25);\n"
      "  const double v36 = b0[o0 + nb35 * s0_0 + x_K];\n"
      "  const double v38 = b0[o0 + nb37 * s0_0 + x_K];\n"
      "  const double v39 = static_cast<double>(v38 + v36);\n"
      "  acc1 = static_cast<double>(acc1 + v39);\n"
      "  b5[o5 + x_Vertex * s5_0 + x_K] = acc1;\n";
  const SharedColumnBody s = share_common_columns(body, "x_K");
  EXPECT_EQ(s.candidates, std::vector<std::string>{"const std::int64_t share0 = (nb9 == nb23 || nb9 == nb21) ? nb9 : nb7;"});
  EXPECT_EQ(s.condition, "(nb9 == share0 || nb7 == share0) && (nb23 == share0 || nb21 == share0) && (nb37 == share0 || nb35 == share0)");
  EXPECT_EQ(s.fast_prelude, (std::vector<std::string>{"const std::int64_t share0_0 = nb9 == share0 ? nb7 : nb9;",
                                                      "const std::int64_t share0_1 = nb23 == share0 ? nb21 : nb23;",
                                                      "const std::int64_t share0_2 = nb37 == share0 ? nb35 : nb37;"}));
  EXPECT_EQ(s.fast_body,
            "  double acc1 = double(0);\n"
            "  const double share0_column = b0[o0 + share0 * s0_0 + x_K];\n"
            "  const double v10 = b0[o0 + share0_0 * s0_0 + x_K];\n"
            "  const double v11 = static_cast<double>(share0_column + v10);\n"
            "  acc1 = static_cast<double>(acc1 + v11);\n"
            "  const double v24 = b0[o0 + share0_1 * s0_0 + x_K];\n"
            "  const double v25 = static_cast<double>(share0_column + v24);\n"
            "  acc1 = static_cast<double>(acc1 + v25);\n"
            "  const double v38 = b0[o0 + share0_2 * s0_0 + x_K];\n"
            "  const double v39 = static_cast<double>(share0_column + v38);\n"
            "  acc1 = static_cast<double>(acc1 + v39);\n"
            "  b5[o5 + x_Vertex * s5_0 + x_K] = acc1;\n");
}

// No copy where a pair cannot give up a load: one pair alone, a load read twice, an index that
// changes along the loop, two buffers, a store before the last load (in a branch too), a jump.
TEST(LoopInvariants, NoSharedColumnWhereALoadCannotMove) {
  const auto pairs = [](const std::string& second_load, const std::string& between) {
    return "  const double v1 = b0[o0 + nb1 * s0_0 + x_K];\n"
           "  const double v2 = b0[o0 + nb2 * s0_0 + x_K];\n"
           "  const double v3 = static_cast<double>(v1 + v2);\n" +
           between +
           "  const double v4 = b0[o0 + nb1 * s0_0 + x_K];\n" + second_load +
           "  const double v6 = static_cast<double>(v4 + v5);\n"
           "  b5[o5 + x_K] = v3 * v6;\n";
  };
  const std::string ok = "  const double v5 = b0[o0 + nb3 * s0_0 + x_K];\n";
  EXPECT_FALSE(share_common_columns(pairs(ok, ""), "x_K").condition.empty()) << "the shape the others vary";
  EXPECT_TRUE(share_common_columns(pairs(ok, ""), "nb3").condition.empty()) << "an index along the loop";
  EXPECT_TRUE(share_common_columns(pairs("  const double v5 = b1[o0 + nb3 * s0_0 + x_K];\n", ""), "x_K").condition.empty())
      << "another buffer";
  EXPECT_TRUE(share_common_columns(pairs(ok, "  b0[o0 + x_K] = v3;\n"), "x_K").condition.empty()) << "a store between";
  EXPECT_TRUE(share_common_columns(pairs(ok, "  const double v9 = v1 * 2.0;\n"), "x_K").condition.empty())
      << "v1 read twice: pair 0 keeps both loads, pair 1 is alone";
  EXPECT_TRUE(share_common_columns(pairs(ok, "  if (x_K == 0) {\n    b1[x_K] = 1.0;\n  }\n"), "x_K").condition.empty())
      << "a store in a branch between";
  EXPECT_TRUE(share_common_columns(pairs(ok, "  if (v3 > 1.0) continue;\n"), "x_K").condition.empty()) << "a jump";
  EXPECT_FALSE(share_common_columns(pairs(ok, "  if (x_K == 0) {\n    acc = 1.0;\n  }\n"), "x_K").condition.empty())
      << "a branch that writes no memory";
  const SharedColumnBody none = share_common_columns(pairs("  const double v5 = b0[o0 + nb3 * s0_0 + x_K + 1];\n", ""), "x_K");
  EXPECT_TRUE(none.condition.empty()) << "addresses that differ in more than one name";
  EXPECT_EQ(none.fast_body, pairs("  const double v5 = b0[o0 + nb3 * s0_0 + x_K + 1];\n", ""));
}

}  // namespace
}  // namespace fieldflow::codegen

