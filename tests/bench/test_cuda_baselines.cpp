// The hand-written CUDA baselines of the GPU benchmark (bench/cuda/baselines.cu) compute exactly
// what the programs compute, bit for bit, without a device: the kernels are compiled here as host
// code (the prelude below defines CUDA's keywords and launch variables) and run under an emulation
// of the grid their plan gives (bench/cuda_baselines.cpp), every block and thread in turn, on the
// instance's host memory. Sizes take every path of the launches: partial blocks along I and J
// (hdiff's 32 x 8, vadv's 64), a single level (the solver's edge case), runs of levels with a
// remainder (unstructured kernels: 8 levels per thread, 83 levels), tori and the bounded mesh
// whose tables have skip values. Every field is compared, so inputs and points outside the domain
// must be untouched. The same kernels run on a device in tests/cuda/test_cuda_device.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "cuda_baselines.h"
#include "fieldflow/errors.h"
#include "fieldflow/examples.h"
#include "fieldflow/mesh.h"
#include "fieldflow/reference.h"
#include "support/backend_harness.h"
#include "support/instance_bits.h"
#ifdef FIELDFLOW_WITH_CUDA
#include "toolchain/nvrtc_compiler.h"
#endif

// --- the kernels as host code ----------------------------------------------------------------
namespace emulated {
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __restrict__ __restrict
struct dim3_t {
  unsigned x = 0, y = 0, z = 0;
};
dim3_t blockIdx, threadIdx, blockDim, gridDim;
struct int4 {
  int x, y, z, w;
};
template <class T>
inline T __ldg(const T* p) {
  return *p;
}
using std::min;
#include "baselines.cu"
#undef __global__
#undef __device__
#undef __forceinline__
#undef __launch_bounds__
#undef __restrict__
}  // namespace emulated

namespace fieldflow::bench {
namespace {

using testing_support::error_of;
using testing_support::expect_same_bits;

// Runs a planned launch: the grid, each block's threads in turn, the kernel given the parameter
// struct the plan filled (the bytes a cudaLaunchKernel would pass).
template <class Params>
void emulate(void (*kernel)(const Params), const CudaBaselineLaunch& l) {
  ASSERT_EQ(l.params.size(), sizeof(Params)) << l.kernel;
  Params p;
  std::memcpy(&p, l.params.data(), sizeof p);
  using emulated::blockDim, emulated::blockIdx, emulated::gridDim, emulated::threadIdx;
  gridDim = {l.grid[0], l.grid[1], l.grid[2]};
  blockDim = {l.block[0], l.block[1], l.block[2]};
  for (unsigned bz = 0; bz < l.grid[2]; ++bz)
    for (unsigned by = 0; by < l.grid[1]; ++by)
      for (unsigned bx = 0; bx < l.grid[0]; ++bx)
        for (unsigned tz = 0; tz < l.block[2]; ++tz)
          for (unsigned ty = 0; ty < l.block[1]; ++ty)
            for (unsigned tx = 0; tx < l.block[0]; ++tx) {
              blockIdx = {bx, by, bz};
              threadIdx = {tx, ty, tz};
              kernel(p);
            }
}

void emulate(const CudaBaselineLaunch& l) {
  if (l.kernel == "ff_bl_hdiff") return emulate(emulated::ff_bl_hdiff, l);
  if (l.kernel == "ff_bl_vadv") return emulate(emulated::ff_bl_vadv, l);
  if (l.kernel == "ff_bl_nabla4") return emulate(emulated::ff_bl_nabla4, l);
  if (l.kernel == "ff_bl_c2e2co_sum") return emulate(emulated::ff_bl_c2e2co_sum, l);
  FAIL() << "no emulated kernel " << l.kernel;
}

// The instance's own host memory, as the kernel's "device" memory.
CudaBaselineMemory host_memory(examples::ExampleInstance& inst, std::vector<double>& scratch) {
  CudaBaselineMemory m;
  m.field = [&inst](const std::string& name) { return inst.fields.at(name).data(); };
  m.table = [&inst](const std::string& name) { return inst.mesh->table(name).entries(); };
  m.scratch = scratch.empty() ? nullptr : scratch.data();
  return m;
}

struct Case {
  std::string program;
  examples::ExampleSize size;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const auto& s = info.param.size;
  return info.param.program + "_" + std::to_string(s.nx) + "x" + std::to_string(s.ny) + "x" + std::to_string(s.nk) +
         (s.bounded ? "_bounded" : "");
}

std::vector<Case> all_cases() {
  std::vector<Case> v;
  for (const examples::ExampleSize& s :
       {examples::ExampleSize{37, 11, 3}, {5, 6, 1}, {33, 9, 2}, {70, 3, 5}, {64, 8, 4}, {17, 19, 83}}) {
    v.push_back({"hdiff", s});
    v.push_back({"vadv", s});
  }
  for (const examples::ExampleSize& s : {examples::ExampleSize{5, 4, 11}, {3, 6, 1}, {9, 7, 8, true},
                                         {4, 3, 2, true}, {11, 9, 83, true}, {12, 10, 17}})
    for (const char* p : {"nabla4", "c2e2co_sum"}) v.push_back({p, s});
  return v;
}

// The examples' smooth waves make some re-associations exact (hdiff's flux sum is, at every point
// of them): every input element is scaled by a pseudo-random factor within 1 +- 1e-3 (zeros, such
// as nabla4's unused weight slots, stay zero), so an operation out of the program's order shows.
// hdiff's input also gets a random power of two up to 2^7 per point: its fluxes are differences of
// values near 1, multiples of one ulp small enough that any order of their sum is exact, so only
// values of different exponents make the order matter.
examples::ExampleInstance rough_instance(const Case& c) {
  auto inst = examples::example(c.program).make_instance(c.size, Layout::horizontal_fastest, 3);
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> factor(1 - 1e-3, 1 + 1e-3);
  for (auto& [name, f] : inst.fields) {
    if (std::find(inst.outputs.begin(), inst.outputs.end(), name) != inst.outputs.end()) continue;
    double* d = f.data_as<double>();
    const bool spread = c.program == "hdiff" && name == "in";
    for (std::int64_t i = 0; i < f.size(); ++i)
      d[i] *= factor(rng) * (spread ? static_cast<double>(1 << (rng() % 8)) : 1.0);
  }
  return inst;
}

class CudaBaseline : public ::testing::TestWithParam<Case> {};

TEST_P(CudaBaseline, MatchesReferenceUnderEmulatedLaunch) {
  const Case& c = GetParam();
  ASSERT_TRUE(has_cuda_baseline(c.program));
  const auto& ex = examples::example(c.program);
  auto expected = rough_instance(c), actual = rough_instance(c);
  run_reference(ex.program, expected.arguments());
  std::vector<double> scratch(cuda_baseline_scratch_bytes(c.program, actual) / sizeof(double));
  const CudaBaselineLaunch l = plan_cuda_baseline(c.program, actual, host_memory(actual, scratch));
  emulate(l);
  emulate(l);  // a second call over the same memory gives the same result (vadv reuses its scratch)
  expect_same_bits(expected, actual, c.program);
}

INSTANTIATE_TEST_SUITE_P(Programs, CudaBaseline, ::testing::ValuesIn(all_cases()), case_name);

// An instance the kernels cannot run is refused when the launch is planned, with what was expected.
TEST(CudaBaselines, RefusesWhatTheKernelsCannotRun) {
  std::vector<double> scratch(1), no_scratch;
  auto refusal = [&](const std::string& program, examples::ExampleInstance& inst, std::vector<double>& s) {
    return error_of<ArgumentError>([&] { plan_cuda_baseline(program, inst, host_memory(inst, s)); });
  };
  auto has = [](const std::string& message, const std::string& text) {
    return message.find(text) != std::string::npos;
  };
  auto vf = examples::example("hdiff").make_instance({6, 5, 3}, Layout::vertical_fastest, 1);
  EXPECT_PRED2(has, refusal("hdiff", vf, scratch), "expected 1 (the GPU's layout, horizontal_fastest)");
  auto lap = examples::example("laplacian").make_instance({6, 5, 3}, Layout::horizontal_fastest, 1);
  EXPECT_FALSE(has_cuda_baseline("laplacian"));
  EXPECT_PRED2(has, refusal("laplacian", lap, scratch), "no hand-written CUDA baseline for program 'laplacian'");
  auto fvm = examples::example("fvm_nabla").make_instance({4, 4, 3}, Layout::horizontal_fastest, 1);
  EXPECT_PRED2(has, refusal("fvm_nabla", fvm, scratch), "expected hdiff, vadv, nabla4 or c2e2co_sum");
  auto vadv = examples::example("vadv").make_instance({6, 5, 3}, Layout::horizontal_fastest, 1);
  EXPECT_PRED2(has, refusal("vadv", vadv, no_scratch), "no scratch");

  // The kernels read a neighbour row as one int4: C order, 16-byte aligned entries.
  auto c2e = examples::example("c2e2co_sum").make_instance({4, 4, 3}, Layout::horizontal_fastest, 1);
  const NeighborTable& table = c2e.mesh->table("C2E2CO");
  std::vector<std::int32_t> shifted(table.data.size() + 4);
  CudaBaselineMemory m = host_memory(c2e, scratch);
  m.table = [&](const std::string&) { return shifted.data() + 1; };
  EXPECT_PRED2(has, error_of<ArgumentError>([&] { plan_cuda_baseline("c2e2co_sum", c2e, m); }),
               "are not 16-byte aligned");
  std::vector<std::int32_t> fortran_order(table.data.size());
  for (std::int64_t c = 0; c < table.n_source; ++c)
    for (int q = 0; q < 4; ++q) fortran_order[q * table.n_source + c] = table(c, q);
  auto mesh = std::make_shared<Mesh>(*c2e.mesh);
  mesh->tables.at("C2E2CO") = NeighborTable::view("C2E2CO", table.source, table.target, table.n_source,
                                                  table.n_target, 4, fortran_order.data(), 1, table.n_source);
  c2e.mesh = mesh;
  EXPECT_PRED2(has, refusal("c2e2co_sum", c2e, scratch), "expected 4 in C order (4, 1)");

  // Sizes beyond CUDA's grid (hdiff: one block per level along z, at most 65535) or the kernels'
  // 32-bit indexing (vadv's scratch index), on fields whose stride 0 repeats a few values.
  std::vector<double> few(4100, 1.0);
  const std::vector<Dimension> ijk = vadv.fields.at("out").dims();
  auto repeated = [&](std::int64_t nx, std::int64_t ny, std::int64_t nk, int halo) {
    return Field::view(few.data(), ijk, DType::float64, {nx + 2 * halo, ny + 2 * halo, nk}, {1, 0, 0},
                       {-halo, -halo, 0});
  };
  examples::ExampleInstance deep;
  deep.fields.emplace("in", repeated(8, 8, 70000, 2));
  deep.fields.emplace("coeff", repeated(8, 8, 70000, 0));
  deep.fields.emplace("out", repeated(8, 8, 70000, 0));
  for (const auto& [name, v] : {std::pair{"nx", 8}, {"ny", 8}, {"nk", 70000}}) deep.scalars[name] = Scalar(v);
  EXPECT_PRED2(has, refusal("hdiff", deep, scratch), "exceeds 65535 blocks along y or z");
  examples::ExampleInstance wide;
  for (const char* name : {"u_stage", "u_pos", "utens", "utens_stage", "out"})
    wide.fields.emplace(name, repeated(2048, 2048, 1024, 0));
  wide.fields.emplace("wcon", repeated(2049, 2048, 1024, 0));
  for (const auto& [name, v] : {std::pair{"nx", 2048}, {"ny", 2048}, {"nk", 1024}}) wide.scalars[name] = Scalar(v);
  wide.scalars["dtr_stage"] = Scalar(0.15);
  EXPECT_PRED2(has, refusal("vadv", wide, scratch), "nx * ny * nk is 4294967296");
}

// What NVRTC compiles on the GPU is this file's kernels: the text embedded in the build is the
// file itself, and it compiles for sm_90 with fieldflow's NVRTC options (no device needed), its
// kernels spilling no registers (a yardstick that spills would flatter fieldflow).
TEST(CudaBaselines, EmbeddedSourceIsTheKernelFileAndCompilesWithoutSpills) {
  std::ifstream in(FIELDFLOW_CUDA_BASELINES_FILE, std::ios::binary);
  ASSERT_TRUE(in) << FIELDFLOW_CUDA_BASELINES_FILE;
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(std::string(cuda_baselines_source), file);
#ifdef FIELDFLOW_WITH_CUDA
  const toolchain::ReportedCubin built = toolchain::nvrtc_compile_reporting("cuda_baselines", cuda_baselines_source, "sm_90");
  ASSERT_GT(built.cubin.size(), 64u);
  EXPECT_EQ(built.cubin.compare(1, 3, "ELF"), 0) << "NVRTC returned no ELF cubin";
  for (const char* kernel : {"ff_bl_hdiff", "ff_bl_vadv", "ff_bl_nabla4", "ff_bl_c2e2co_sum"}) {
    EXPECT_NE(built.cubin.find(kernel), std::string::npos) << kernel << " is not in the cubin";
    const auto k = std::find_if(built.kernels.begin(), built.kernels.end(),
                                [&](const toolchain::KernelResources& r) { return r.symbol == kernel; });
    ASSERT_NE(k, built.kernels.end()) << "ptxas reported no " << kernel;
    EXPECT_FALSE(k->spills()) << kernel << ": " << k->spill_store_bytes << " bytes spill stores at " << k->registers
                              << " registers";
    std::printf("[ ptxas    ] %s: %d registers, %lld bytes stack\n", kernel, k->registers,
                static_cast<long long>(k->stack_bytes));
  }
#else
  GTEST_SKIP() << "built without CUDA: NVRTC not available";
#endif
}

}  // namespace
}  // namespace fieldflow::bench
