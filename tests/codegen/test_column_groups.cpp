// Column groups (fuse_columns) against the reference, with guarded caller workspaces of exactly
// the size the program asks for. Regression tests of issue 8's miscompiles: a transient produced
// inside a group but read by a later statement over a smaller or larger horizontal domain, and
// packing that ignored the column-by-column order of a group.
#include <gtest/gtest.h>

#include <cmath>
#include <fmt/format.h>

#include <functional>
#include <map>

#include "fieldflow/compile.h"
#include "fieldflow/dsl.h"
#include "fieldflow/reference.h"
#include "support/backend_harness.h"
#include "support/guarded_workspace.h"

namespace fieldflow {
namespace {

using testing_support::GuardedWorkspace;
using testing_support::same_bits;

const Dimension I = horizontal_dim("I"), J = horizontal_dim("J"), K = vertical_dim("K");

struct FieldSpec {
  std::string name;
  std::vector<Dimension> dims;
  std::vector<std::int64_t> shape, origin;
  bool output = false;
};

// Fields with deterministic, distinct contents per name; outputs start with a pattern too, so
// "left untouched" is checked as well as "written right".
std::map<std::string, Field> make_fields(const std::vector<FieldSpec>& specs, Layout layout) {
  std::map<std::string, Field> fields;
  double seed = 0.37;
  for (const auto& s : specs) {
    Field f(s.dims, DType::float64, s.shape, s.origin, layout);
    for (std::int64_t i = 0; i < f.size(); ++i) f.set_from_double(i, std::sin(seed * static_cast<double>(i + 1)) + (s.output ? 7.0 : 0.0));
    seed += 0.11;
    fields.emplace(s.name, std::move(f));
  }
  return fields;
}

Arguments arguments(std::map<std::string, Field>& fields, const std::map<std::string, std::int64_t>& scalars) {
  Arguments a;
  for (auto& [name, f] : fields) a.field(name, f);
  for (const auto& [name, v] : scalars) a.scalar(name, static_cast<std::int32_t>(v));
  return a;
}

// Runs `program` on the reference and compiled in external mode with an exactly sized, guarded
// workspace, at 1-4 threads on the parallel path, and in the other modes; every output bitwise
// equal, no guard byte touched.
void expect_matches_reference(const ir::Program& program, const std::vector<FieldSpec>& specs,
                              const std::map<std::string, std::int64_t>& scalars) {
  for (Layout layout : {Layout::vertical_fastest, Layout::horizontal_fastest}) {
    auto expected = make_fields(specs, layout);
    run_reference(program, arguments(expected, scalars));
    for (int threads : {1, 2, 3, 4}) {
      CompileOptions probe = testing_support::cpu_options(layout);
      probe.num_threads = threads;
      probe.parallel_threshold = 0;
      auto fields = make_fields(specs, layout);
      Arguments args = arguments(fields, scalars);
      std::size_t bytes = 0;
      for (const auto& r : compile(program, probe).workspace_requirements(size_symbols(program, args)))
        if (r.device == Device::cpu) bytes = r.bytes;
      GuardedWorkspace ws(bytes);
      CompileOptions o = probe;
      o.memory.external_workspace[Device::cpu] = ws.workspace();
      auto compiled = compile(program, o);
      for (int call = 0; call < 2; ++call) compiled(args);
      const std::string where = fmt::format("{} layout, {} threads", to_string(layout), threads);
      EXPECT_EQ(ws.damage(), "") << where << ", workspace of " << bytes << " bytes";
      for (const auto& s : specs) EXPECT_TRUE(same_bits(expected.at(s.name), fields.at(s.name), s.name + ", " + where));
    }
    for (auto mode : {TransientMemoryMode::scoped, TransientMemoryMode::persistent, TransientMemoryMode::pool}) {
      CompileOptions o = testing_support::cpu_options(layout);
      o.num_threads = 3;
      o.parallel_threshold = 0;
      o.memory.mode = mode;
      auto fields = make_fields(specs, layout);
      compile(program, o)(arguments(fields, scalars));
      for (const auto& s : specs)
        EXPECT_TRUE(same_bits(expected.at(s.name), fields.at(s.name), s.name + ", mode " + std::string(to_string(mode))));
    }
  }
}

Expr cumulative_sum(const Expr& x) {
  return scan("cumsum", ScanDirection::forward, {Scalar(0.0)},
              [](const Expr& carry, const std::vector<Expr>& in) { return carry + in[0]; }, {x});
}

// A vertical solver statement (its scan shrinks to a column buffer, so the statement becomes a
// column group), then a statement over another horizontal range that reads a value stored as a
// transient; that transient's producer is placed in the group.
ir::Program group_then_reader(std::int64_t reader_lo, std::int64_t reader_hi_from_n) {
  ProgramBuilder pb("group_then_reader");
  Expr in = pb.field("in", {I, J, K}, DType::float64);
  Expr solved = pb.field("solved", {I, J, K}, DType::float64);
  Expr smoothed = pb.field("smoothed", {I, J, K}, DType::float64);
  Expr n = pb.scalar("n", DType::int32), nk = pb.scalar("nk", DType::int32);
  pb.call("solve", cumulative_sum(in) * 2.0, {solved}, {{I, 0, n}, {J, 0, n}, {K, 0, nk}});
  const Expr t = materialize("t", sin(in) * cos(in) + exp(in));
  pb.call("smooth", t(I + 1) + t(I - 1), {smoothed},
          {{I, Expr(reader_lo), n + Expr(reader_hi_from_n)}, {J, 0, n}, {K, 0, nk}});
  return pb.build();
}

TEST(ColumnGroups, ScheduleShapeOfTheRegressionProgram) {
  // The shape these regression tests are about: the transient t is produced inside the group of
  // the vertical solver and read by the next statement, outside it.
  auto compiled = compile(group_then_reader(2, -2), testing_support::cpu_options());
  const std::string schedule = compiled.schedule_text();
  EXPECT_NE(schedule.find("kernel 2 't' pointwise -> (t) over extent of its outputs in column group 0"), std::string::npos)
      << schedule;
  EXPECT_NE(schedule.find("kernel 3 'smooth' pointwise -> (smoothed) over {I: [2, n - 2), J: [0, n), K: [0, nk)}\n"),
            std::string::npos)
      << schedule;
}

TEST(ColumnGroups, TransientReadOverASmallerDomainIsNotWrittenPastItsBox) {
  const std::int64_t n = 13, nk = 7;
  expect_matches_reference(group_then_reader(2, -2),
                           {{"in", {I, J, K}, {n, n, nk}, {0, 0, 0}},
                            {"solved", {I, J, K}, {n, n, nk}, {0, 0, 0}, true},
                            {"smoothed", {I, J, K}, {n, n, nk}, {0, 0, 0}, true}},
                           {{"n", n}, {"nk", nk}});
}

TEST(ColumnGroups, TransientReadOverALargerDomainIsFilledEverywhere) {
  const std::int64_t n = 11, nk = 6;
  expect_matches_reference(group_then_reader(-1, 1),
                           {{"in", {I, J, K}, {n + 4, n, nk}, {-2, 0, 0}},
                            {"solved", {I, J, K}, {n, n, nk}, {0, 0, 0}, true},
                            {"smoothed", {I, J, K}, {n + 2, n, nk}, {-1, 0, 0}, true}},
                           {{"n", n}, {"nk", nk}});
}

// A 2-D transient is last read by the first kernel of a column group; the group's column buffer
// (the scan) is produced by a later kernel. Kernel order says their lifetimes are disjoint, but
// the group runs every kernel on one column before the next, so the 2-D transient is still read
// (for later columns) after the column buffer was written: they must not share bytes.
ir::Program packing_across_a_group() {
  ProgramBuilder pb("packing_across_a_group");
  Expr in = pb.field("in", {I, J, K}, DType::float64);
  Expr surface = pb.field("surface", {I, J}, DType::float64);
  Expr out = pb.field("out", {I, J, K}, DType::float64);
  Expr n = pb.scalar("n", DType::int32), nk = pb.scalar("nk", DType::int32);
  const Expr a = materialize("a2d", sin(surface) + cos(surface) * exp(surface));
  const Expr c = materialize("c", a(I + 1) * in + a(I - 1));
  pb.call("column", c + cumulative_sum(in), {out}, {{I, 1, n - 1}, {J, 0, n}, {K, 0, nk}});
  return pb.build();
}

TEST(ColumnGroups, LiveRangesCoverTheWholeGroup) {
  auto compiled = compile(packing_across_a_group(), testing_support::cpu_options());
  const MemoryPlan plan = compiled.memory_plan({{"n", 9}, {"nk", 5}});
  // Every pair of transients that a group touches is live together, so no two share bytes.
  for (const auto& x : plan.transients)
    for (const auto& y : plan.transients) {
      if (&x == &y) continue;
      const bool overlap_bytes = x.offset < y.offset + y.bytes && y.offset < x.offset + x.bytes;
      EXPECT_FALSE(overlap_bytes) << x.name << " and " << y.name << " share bytes\n" << compiled.schedule_text();
    }
}

TEST(ColumnGroups, TransientReadByAGroupIsNotOverwrittenByItsColumnBuffers) {
  const std::int64_t n = 9, nk = 5;
  expect_matches_reference(packing_across_a_group(),
                           {{"in", {I, J, K}, {n, n, nk}, {0, 0, 0}},
                            {"surface", {I, J}, {n, n}, {0, 0}},
                            {"out", {I, J, K}, {n, n, nk}, {0, 0, 0}, true}},
                           {{"n", n}, {"nk", nk}});
}

// A tridiagonal solve (tuple-carry forward scan, backward scan, update) whose scan results
// stay in a group's blocks of columns, on sizes that take every path of the block loops: in the
// vertical-fastest layout blocks of 8 columns along J (full blocks and a remainder), in the
// horizontal-fastest layout rows of 256 columns along I (full rows and a remainder), a domain
// that starts off the blocks' grid (I from 1), inputs read in the neighbouring column, and a
// reader outside the group over a smaller domain.
ir::Program blocked_solver() {
  ProgramBuilder pb("blocked_solver");
  Expr w = pb.field("w", {I, J, K}, DType::float64), rhs = pb.field("rhs", {I, J, K}, DType::float64);
  Expr out = pb.field("out", {I, J, K}, DType::float64), side = pb.field("side", {I, J, K}, DType::float64);
  Expr ni = pb.scalar("ni", DType::int32), nj = pb.scalar("nj", DType::int32), nk = pb.scalar("nk", DType::int32);
  const Expr a = named("a", 0.1 * (w(I + 1) + w)), c = named("c", concat_where(K == nk - 1, 0.0, 0.2 * w(K + 1)));
  const Expr b = named("b", 2.0 - a - c);
  const Expr forward = scan(
      "fwd", ScanDirection::forward, {Scalar(0.0), Scalar(0.0)},
      [](const Expr& carry, const std::vector<Expr>& in) {
        const Expr divided = 1.0 / (in[1] - carry[0] * in[0]);
        return make_tuple({in[2] * divided, (in[3] - carry[1] * in[0]) * divided});
      },
      {a, b, c, rhs});
  // The backward sweep also reads a field (rhs, at K and K-1): its prefetch runs downwards.
  const Expr x = scan("bwd", ScanDirection::backward, {Scalar(0.0)},
                      [](const Expr& carry, const std::vector<Expr>& in) {
                        return in[1] - in[0] * carry + 0.01 * (in[2] - in[3]);
                      },
                      {forward[0], forward[1], rhs, concat_where(K == 0, 0.0, rhs(K - 1))});
  const Expr t = materialize("t", sqrt(abs(rhs)) + w);
  pb.call("solve", x * 0.5 + t, {out}, {{I, 1, ni}, {J, 0, nj}, {K, 0, nk}});
  pb.call("side", t(J + 1) - t, {side}, {{I, 1, ni - 1}, {J, 0, nj - 1}, {K, 0, nk}});
  return pb.build();
}

TEST(ColumnGroups, ScanGroupsInBlocksAboveTheBlockSizes) {
  const ir::Program p = blocked_solver();
  for (Layout layout : {Layout::vertical_fastest, Layout::horizontal_fastest}) {
    const std::string schedule = compile(p, testing_support::cpu_options(layout)).schedule_text();
    const int block = layout == Layout::vertical_fastest ? 8 : 256;
    EXPECT_NE(schedule.find(fmt::format("in column group 0 of {}-column blocks", block)), std::string::npos) << schedule;
    EXPECT_NE(schedule.find(fmt::format("column-local x{}", block)), std::string::npos) << schedule;
  }
  // Vertical-fastest: a whole block's scans run a copy with a constant trip count across the
  // block (nj 19: two whole blocks, then a remainder of 3 that takes the general copy).
  const std::string source = compile(p, testing_support::cpu_options(Layout::vertical_fastest)).generated_source();
  EXPECT_NE(source.find("// a whole block"), std::string::npos) << source;
  // Horizontal-fastest: the sweeps run the row in chunks and prefetch, before each chunk, the rows
  // the next level reads first: forward, w (read at K and K+1) at K+2 and rhs at K+1; backward,
  // rhs (read at K and K-1) at K-2.
  const std::string rows = compile(p, testing_support::cpu_options(Layout::horizontal_fastest)).generated_source();
  auto count = [&](const std::string& what) {
    std::size_t n = 0;
    for (std::size_t at = rows.find(what); at != std::string::npos; at = rows.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("__builtin_prefetch("), 3u) << rows;
  EXPECT_EQ(count("reinterpret_cast<std::uintptr_t>(b0) + std::uintptr_t(o0 + xc_I + x_J * s0_1 + (x_K + 2) * s0_2) * 8)"), 1u)
      << rows;
  EXPECT_EQ(count("reinterpret_cast<std::uintptr_t>(b1) + std::uintptr_t(o1 + xc_I + x_J * s1_1 + (x_K + 1) * s1_2) * 8)"), 1u)
      << rows;
  EXPECT_EQ(count("reinterpret_cast<std::uintptr_t>(b1) + std::uintptr_t(o1 + xc_I + x_J * s1_1 + (x_K - 2) * s1_2) * 8)"), 1u)
      << rows;
  // Whole chunks loop exactly 8; the rest of a block (I from 1: blocks [1, 257), [257, 513), then
  // 39 columns at ni 552, 4 columns at ni 5) runs the remainder loop.
  EXPECT_NE(rows.find("x_I < xc_I + 8; ++x_I)"), std::string::npos) << rows;
  EXPECT_NE(rows.find("for (std::int64_t x_I = xw_I; x_I < bhi_k"), std::string::npos) << rows;
  for (auto [ni, nj] : {std::pair<std::int64_t, std::int64_t>{5, 19}, {2 * 256 + 40, 3}}) {
    SCOPED_TRACE(fmt::format("ni {}, nj {}", ni, nj));
    const std::int64_t nk = 6;
    expect_matches_reference(p,
                             {{"w", {I, J, K}, {ni + 1, nj + 1, nk}, {0, 0, 0}},
                              {"rhs", {I, J, K}, {ni, nj + 1, nk}, {0, 0, 0}},
                              {"out", {I, J, K}, {ni, nj, nk}, {0, 0, 0}, true},
                              {"side", {I, J, K}, {ni, nj, nk}, {0, 0, 0}, true}},
                             {{"ni", ni}, {"nj", nj}, {"nk", nk}});
  }
}

}  // namespace
}  // namespace fieldflow
