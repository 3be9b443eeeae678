// Differential fuzzing in the test suite: a few hundred seeded random programs, each compiled and
// called in every transient-memory mode, thread counts 1-4, both layouts, several sizes, and
// compared bit for bit with the reference executor (tests/fuzz/differential.h); the CUDA
// backend's kernels too, under host emulation of the launch grid. Batches are
// separate tests so CTest can run them side by side. To dig into a failing seed, run
// `fieldflow_fuzz_programs --seed N --count 1`: it shrinks the program and prints it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <iostream>
#include <map>
#include <set>

#include "codegen/cuda/generate_cuda.h"
#include "driver/cuda_build.h"
#include "fieldflow/compile.h"
#include "fuzz/differential.h"
#include "fuzz/nvrtc_check.h"
#include "fuzz/shrink.h"
#include "passes/pipeline.h"

namespace fieldflow::fuzz {
namespace {

constexpr std::uint64_t programs_per_batch = 25;
constexpr int batches = 8;  // 200 programs: CTest runs the batches side by side


class FuzzBatch : public ::testing::TestWithParam<int> {};

TEST_P(FuzzBatch, CompiledAgreesWithReference) {
  RunConfig config;
  RunStats stats;
  const std::uint64_t first = 1 + static_cast<std::uint64_t>(GetParam()) * programs_per_batch;
  std::vector<FuzzCase> cases;
  for (std::uint64_t seed = first; seed < first + programs_per_batch; ++seed) {
    cases.push_back(generate_case(seed));
    const auto failure = check_case(cases.back(), config, stats);
    EXPECT_FALSE(failure.has_value()) << "seed " << seed << ": " << failure->kind << "\n  " << failure->detail
                                      << "\n  reproduce and shrink: fieldflow_fuzz_programs --seed " << seed
                                      << " --count 1";
  }
  // The CUDA the emulation ran also compiles for a GPU (one NVRTC translation unit for the batch).
  std::vector<const FuzzCase*> batch;
  for (const FuzzCase& c : cases) batch.push_back(&c);
  NvrtcStats nvrtc;
  const auto not_compiled = check_cuda_compiles(batch, nvrtc);
  for (std::size_t i = 0; i < not_compiled.size(); ++i)
    EXPECT_FALSE(not_compiled[i].has_value()) << "seed " << first + i << ": " << not_compiled[i]->detail;
  // The harness really ran the compiled program (a silent skip would pass every comparison).
  EXPECT_GT(stats.compiled_calls, programs_per_batch * 4);
  EXPECT_GT(stats.reference_calls, programs_per_batch);
  EXPECT_GT(stats.cuda_kernel_calls, programs_per_batch);  // the CUDA kernels ran too
  EXPECT_GE(stats.static_scalar_calls, programs_per_batch);  // and the static-scalar instances
  EXPECT_GE(stats.c_api_calls, programs_per_batch * 2);        // and the C API
  if (driver::cuda_built()) {
    EXPECT_GT(stats.cuda_runner_calls, programs_per_batch * 4);  // and the runner
    EXPECT_EQ(nvrtc.programs, programs_per_batch);                // and NVRTC compiled them all
    EXPECT_GT(nvrtc.kernels, programs_per_batch * 2);
  }
}

// The NVRTC check names the case whose CUDA does not compile, and only it, when its batch fails:
// here a kernel calling a host function (which the emulation's host compiler would accept).
TEST(FuzzNvrtc, ABatchThatFailsNamesTheCaseThatDoesNotCompile) {
  if (!driver::cuda_built()) GTEST_SKIP() << "fieldflow was built without the CUDA toolkit (no NVRTC)";
  const std::vector<FuzzCase> cases = {generate_case(1), generate_case(2), generate_case(3)};
  const std::string broken = cases[1].program.name;
  const CudaBodies breaking = [&](const FuzzCase& c, const std::string& prefix) {
    std::vector<std::string> bodies = cuda_bodies(c, prefix);
    if (c.program.name == broken)
      bodies.push_back("static int " + prefix + "on_the_host() { return 1; }\n__global__ void " + prefix +
                       "calls_the_host(int* p) { *p = " + prefix + "on_the_host(); }\n");
    return bodies;
  };
  NvrtcStats stats;
  const auto failures = check_cuda_compiles({&cases[0], &cases[1], &cases[2]}, stats, breaking);
  ASSERT_EQ(failures.size(), 3u);
  EXPECT_FALSE(failures[0].has_value());
  ASSERT_TRUE(failures[1].has_value());
  EXPECT_EQ(failures[1]->kind, nvrtc_failure_kind);
  EXPECT_NE(failures[1]->detail.find("__host__"), std::string::npos) << failures[1]->detail;
  EXPECT_FALSE(failures[2].has_value());
  EXPECT_EQ(stats.programs, 2u);  // the two that compile, each alone once the batch failed
  EXPECT_EQ(stats.batches, 0u);
  // Unbroken, the three compile as one batch.
  NvrtcStats whole;
  for (const auto& f : check_cuda_compiles({&cases[0], &cases[1], &cases[2]}, whole)) EXPECT_FALSE(f.has_value());
  EXPECT_EQ(whole.programs, 3u);
  EXPECT_EQ(whole.batches, 1u);
}

INSTANTIATE_TEST_SUITE_P(Seeds, FuzzBatch, ::testing::Range(0, batches));

TEST(FuzzGenerator, SameSeedSameProgramAndData) {
  for (std::uint64_t seed : {3u, 17u, 1234u}) {
    const FuzzCase a = generate_case(seed), b = generate_case(seed);
    EXPECT_EQ(ir::print(a.program), ir::print(b.program));
    ASSERT_EQ(a.sizes.size(), b.sizes.size());
    const CallData da = make_call_data(a, 0, a.layouts[0]), db = make_call_data(b, 0, b.layouts[0]);
    for (const auto& [name, f] : da.fields) {
      ASSERT_EQ(f.bytes(), db.fields.at(name).bytes());
      EXPECT_EQ(std::memcmp(f.data(), db.fields.at(name).data(), f.bytes()), 0) << name;
    }
  }
  EXPECT_NE(ir::print(generate_case(1).program), ir::print(generate_case(2).program));
}

// Programs whose vertical-fastest loops share a column (a vertex field summed at both ends of each
// edge around a vertex) take the horizontal-fastest blocks' shared-column copy too; a case is
// compiled in both layouts only one time in five, so these seeds (three of the twelve such seeds
// of the fuzz campaigns, docs/reliability.md) run in both, on the CPU paths. (On these meshes
// every edge of V2E(v) ends at v, so the per-element check always holds: the tables are rewired
// to fail it in CpuFeatures.AColumnSharedByEveryEdgeOfARowIsLoadedOnce.)
TEST(FuzzSeeds, SharedColumnProgramsAgreeInBothLayouts) {
  RunConfig config;
  config.paths = {Path::cpu, Path::c_api};
  RunStats stats;
  for (const std::uint64_t seed : {31000065u, 32000112u, 617065091u}) {
    FuzzCase c = generate_case(seed);
    c.layouts = {Layout::vertical_fastest, Layout::horizontal_fastest};
    CompileOptions o;
    o.layout = Layout::horizontal_fastest;
    const std::string source = compile(c.program, o).generated_source();
    EXPECT_NE(source.find("blk_run_kind_[run_] == 2"), std::string::npos) << "seed " << seed << ":\n" << source;
    const auto failure = check_case(c, config, stats);
    EXPECT_FALSE(failure.has_value()) << "seed " << seed << ": " << failure->kind << "\n  " << failure->detail;
  }
  EXPECT_GT(stats.compiled_calls, 3 * 8);
}

// The seeds the suite runs cover the language features the generator is meant to produce.
TEST(FuzzGenerator, SuiteSeedsCoverTheFeatures) {
  std::map<std::string, int> seen;
  for (std::uint64_t seed = 1; seed <= programs_per_batch * batches; ++seed) {
    const FuzzCase c = generate_case(seed);
    seen[c.mesh ? (c.bounded ? "bounded mesh" : "torus") : "cartesian"]++;
    for (Layout l : c.layouts) seen[std::string(to_string(l))]++;
    if (c.short_field_calls) seen["short-field calls"]++;
    for (const SizeSet& s : c.sizes)  // more columns than a horizontal-fastest row block (256)
      if (std::max(s.ni, s.nj) > 256 || 3 * s.nx * s.ny > 256) {
        seen[c.mesh ? "mesh rows longer than a block" : "cartesian rows longer than a block"]++;
        break;
      }
    std::set<std::string> domains;
    for (const ir::Stmt& st : c.program.stmts) {
      domains.insert(ir::to_string(st.domain));
      for (const ir::DomainRange& r : st.domain)
        for (const ir::SymExpr* b : {&r.lo, &r.hi})
          if (!b->ops.empty()) seen["domain bound through minimum, maximum, // or %"]++;
      if (st.outputs.size() > 1) seen["tuple outputs"]++;
      if (st.outputs.size() > 2) seen["three outputs"]++;
      for (const std::string& o : st.outputs)
        if (c.program.find(o)->type.dtype != c.program.find(st.outputs[0])->type.dtype) {
          seen["outputs of mixed dtypes"]++;
          break;
        }
      if (std::none_of(st.domain.begin(), st.domain.end(),
                       [](const ir::DomainRange& r) { return r.dim.kind == DimKind::vertical; }))
        seen["statement without K"]++;
      seen[std::string("writes ") + std::string(to_string(c.program.find(st.outputs[0])->type.dtype))]++;
      for (const ir::Expr* e : ir::post_order(st.expr)) {
        seen[std::string(ir::to_string(e->kind))]++;
        if (e->kind == ir::ExprKind::unary) seen[std::string("unary ") + std::string(ir::to_string(e->uop))]++;
        if (e->kind == ir::ExprKind::binary) seen[std::string("binary ") + std::string(ir::to_string(e->bop))]++;
        if (e->kind == ir::ExprKind::where && e->args[0]->kind == ir::ExprKind::scalar_ref) seen["if_"]++;
        if (e->kind == ir::ExprKind::neighbor_shift && e->args[0]->kind == ir::ExprKind::neighbor_shift)
          seen["chained neighbour shift"]++;
        if (e->kind == ir::ExprKind::field_ref &&
            std::any_of(e->type.dims.begin(), e->type.dims.end(),
                        [](const Dimension& d) { return d.kind == DimKind::local; }))
          seen["sparse field"]++;
        if (e->kind == ir::ExprKind::reduce)
          seen[std::string("reduce of ") + std::string(to_string(e->type.dtype))]++;
        if (e->kind == ir::ExprKind::reduce || e->kind == ir::ExprKind::neighbor_shift)
          seen["table " + e->conn.name]++;
        if (e->kind == ir::ExprKind::shift && is_integral(e->type.dtype)) seen["shifted integer field"]++;
        if (e->kind == ir::ExprKind::shift && e->type.dtype == DType::boolean) seen["shifted bool field"]++;
        if (e->kind == ir::ExprKind::neighbor_shift && e->type.dtype == DType::boolean)
          seen["bool at a neighbour"]++;
        if (e->kind == ir::ExprKind::concat_where && !e->bound.ops.empty())
          seen["concat_where bound through minimum or maximum"]++;
        // A tuple parameter's elements are fields named "uv.0", "uv.1".
        if (e->kind == ir::ExprKind::field_ref && e->name.find('.') != std::string::npos)
          seen["tuple parameter"]++;
        if (e->kind == ir::ExprKind::scan) seen[e->forward ? "forward scan" : "backward scan"]++;
        if (e->kind == ir::ExprKind::scan && e->init.size() > 1) seen["tuple carry"]++;
        if (e->kind == ir::ExprKind::scan && e->init[0].dtype() == DType::float32) seen["float32 scan"]++;
        if (e->kind == ir::ExprKind::named && e->materialize) seen["materialize"]++;
        if (e->kind == ir::ExprKind::binary &&
            (e->bop == ir::BinaryOp::add || e->bop == ir::BinaryOp::sub || e->bop == ir::BinaryOp::mul))
          for (const ir::ExprPtr& x : e->args)  // an operand that makes the operation wrap around
            if (x->kind == ir::ExprKind::literal && is_integral(x->type.dtype) &&
                (x->literal.as_int() >= 65536 || x->literal.as_int() <= -65536))
              seen["integer arithmetic near a limit"]++;
        if (e->kind == ir::ExprKind::field_ref) {
          seen[std::string("reads ") + std::string(to_string(e->type.dtype))]++;
          if (e->type.dims.size() == (c.mesh ? 1u : 2u) && !e->type.has(vertical_dim("K"))) seen["reads a surface"]++;
          for (const std::string& o : st.outputs)
            if (o == e->name) seen["in/out"]++;
        }
      }
    }
    if (domains.size() > 1) seen["statements over different domains"]++;
    for (std::size_t si = 0; si < c.sizes.size(); ++si)  // a call in which a reduced table lacks whole rows
      if (const auto emptied = emptied_rows(c, si)) {
        bool reduced = false;
        for (const ir::Stmt& st : c.program.stmts)
          for (const ir::Expr* e : ir::post_order(st.expr))
            reduced |= e->kind == ir::ExprKind::reduce && e->conn.name == emptied->table;
        if (reduced) {
          seen["a reduction over a table with emptied rows"]++;
          break;
        }
      }
    // What the GPU schedule makes of it: consumers in a sweep's level loop (fuse_scan_consumers).
    passes::PipelineOptions cuda;
    cuda.target = Device::cuda;
    cuda.layout = c.layouts[0];
    const ir::Schedule gpu = passes::lower(c.program, cuda);
    std::set<std::string> fusions;
    for (const ir::Kernel& k : gpu.kernels) {
      if (k.fused_into < 0) continue;
      const ir::Kernel& scan = gpu.kernels[static_cast<std::size_t>(k.fused_into)];
      fusions.insert("consumer in a sweep (cuda)");
      if (c.mesh) fusions.insert("consumer in a sweep on a mesh (cuda)");
      if (scan.outputs.size() > 1) fusions.insert("consumer of a tuple carry in a sweep (cuda)");
      if (k.extent_from_outputs) fusions.insert("transient producer in a sweep (cuda)");
      for (const auto& o : scan.outputs)
        fusions.insert(gpu.transients[gpu.transient_index(o)].in_registers ? "scan result in registers (cuda)"
                                                                           : "fused scan result also stored (cuda)");
    }
    // Mesh kernels whose threads compute runs of levels, their table rows read once per run.
    for (const codegen::CudaLaunch& l : codegen::generate_cuda_source(gpu).launches) {
      if (l.rows_per_thread == 1) continue;
      fusions.insert("runs of levels (cuda)");
      if (l.raises_errors) fusions.insert("runs of levels that check reads (cuda)");
    }
    for (const auto& f : fusions) seen[f]++;
    // A value (scan or materialized) used by more than one statement.
    std::map<const ir::Expr*, std::set<std::size_t>> users;
    for (std::size_t s = 0; s < c.program.stmts.size(); ++s)
      for (const ir::Expr* e : ir::post_order(c.program.stmts[s].expr))
        if (e->kind == ir::ExprKind::named || e->kind == ir::ExprKind::scan) users[e].insert(s);
    for (const auto& [e, stmts] : users)
      if (stmts.size() > 1) {
        seen["value shared by statements"]++;
        break;
      }
  }
  for (const char* feature :
       {"cartesian", "torus", "bounded mesh", "vertical_fastest", "horizontal_fastest", "short-field calls",
        "tuple outputs", "forward scan", "backward scan", "tuple carry", "materialize", "reads float32", "reads int32",
        "in/out", "statements over different domains", "value shared by statements", "shift", "dynamic_shift",
        "neighbor_shift", "reduce", "where", "concat_where", "astype", "binary", "unary", "reads int64", "reads bool",
        "writes int32", "writes int64", "writes bool", "writes float32", "statement without K", "reads a surface",
        "if_", "chained neighbour shift", "sparse field", "local_slot", "three outputs", "mesh rows longer than a block", "cartesian rows longer than a block",
        "outputs of mixed dtypes", "float32 scan", "integer arithmetic near a limit", "consumer in a sweep (cuda)",
        "scan result in registers (cuda)", "consumer in a sweep on a mesh (cuda)", "consumer of a tuple carry in a sweep (cuda)",
        "transient producer in a sweep (cuda)", "fused scan result also stored (cuda)", "runs of levels (cuda)",
        "reduce of float32", "reduce of int32", "reduce of int64", "table V2E2V", "table E2C2E", "table C2E2C",
        "shifted integer field", "shifted bool field", "bool at a neighbour", "tuple parameter",
        "domain bound through minimum, maximum, // or %", "concat_where bound through minimum or maximum",
        "a reduction over a table with emptied rows"})
    EXPECT_GE(seen[feature], 5) << feature;
  EXPECT_GE(seen["runs of levels that check reads (cuda)"], 3);  // a dynamic offset in a mesh kernel's run
  for (const auto& [feature, n] : seen)
    if (feature.find("(cuda)") != std::string::npos) std::cout << feature << ": " << n << " programs\n";
  // Every operator of the language, on the CPU and through the CUDA kernels alike.
  for (int op = 0; op <= static_cast<int>(ir::UnaryOp::gamma); ++op) {
    const std::string name = std::string("unary ") + std::string(ir::to_string(static_cast<ir::UnaryOp>(op)));
    EXPECT_GE(seen[name], 3) << name;
  }
  for (int op = 0; op <= static_cast<int>(ir::BinaryOp::logical_xor); ++op) {
    const std::string name = std::string("binary ") + std::string(ir::to_string(static_cast<ir::BinaryOp>(op)));
    EXPECT_GE(seen[name], 3) << name;
  }
}

}  // namespace
}  // namespace fieldflow::fuzz
