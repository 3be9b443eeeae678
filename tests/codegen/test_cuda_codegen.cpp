// The CUDA backend without a device: every built-in program's generated kernels run under host
// emulation (the launch grid looped over on the CPU) and equal the reference bit for bit, in both
// layouts, at sizes with partial blocks, several blocks along x and blocks striding along y; the
// generated CUDA compiles with NVRTC (in one batch, and through the module cache); the launch
// grid; and Backend::cuda's errors on a machine without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <cstring>
#include <functional>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <numeric>

#include <fmt/format.h>

#include "codegen/cuda/generate_cuda.h"
#include "driver/cuda_build.h"
#include "fieldflow/device_errors.h"
#include "fieldflow/dsl.h"
#include "fieldflow/examples.h"
#include "fieldflow/mesh.h"
#include "support/backend_harness.h"
#include "support/example_cases.h"
#include "support/cuda_harness.h"
#ifdef FIELDFLOW_WITH_CUDA
#include "runtime/cuda/cuda_device.h"
#endif

namespace fieldflow {
namespace {

using testing_support::same_bits;

using Case = testing_support::ExampleCase;

class CudaExamples : public ::testing::TestWithParam<Case> {};

CompileOptions options_for(Layout layout) {
  CompileOptions o;
  o.layout = layout;
  return o;
}

// Sizes: partial blocks everywhere (no extent is a multiple of 64 or 128); 131 levels give two
// blocks along x when the vertical dimension is unit-stride; the emulation caps the blocks along
// y at 3, so every kernel with more than 3 rows strides; and the bounded mesh has skip values.
// Both entry points of each kernel: the 32-bit ones these sizes fit, and the 64-bit ones.
TEST_P(CudaExamples, EmulatedKernelsEqualReferenceBitwise) {
  const auto& ex = examples::example(GetParam().name);
  const Layout layout = GetParam().layout;
  for (const auto indexing : {driver::EmulatedIndexing::as_the_runtime_chooses, driver::EmulatedIndexing::always_64_bit}) {
    SCOPED_TRACE(indexing == driver::EmulatedIndexing::always_64_bit ? "64-bit indexing" : "32-bit indexing");
    CompiledProgram prog = driver::compile_cuda_emulated(ex.program, options_for(layout), 3, indexing);
    std::vector<examples::ExampleSize> sizes = {{13, 7, 5}, {5, 3, 131}};
    if (ex.unstructured) sizes.push_back({7, 5, 7, true});
    else sizes.push_back({130, 3, 4});  // two blocks along I when it is unit-stride
    for (const examples::ExampleSize& size : sizes) {
      auto ref = ex.make_instance(size, layout, 5);
      auto emu = ex.make_instance(size, layout, 5);
      run_reference(ex.program, ref.arguments());
      prog(emu.arguments());
      for (auto& [name, field] : ref.fields)
        EXPECT_TRUE(same_bits(field, emu.fields.at(name), ex.name + "." + name))
            << "size " << size.nx << "x" << size.ny << "x" << size.nk << (size.bounded ? " (bounded mesh)" : "");
    }
  }
}

// Without a layout, CUDA code is built for horizontal_fastest (consecutive threads read
// consecutive horizontal points), and the emulated program checks fields against it.
TEST(CudaDefaults, TheLayoutIsHorizontalFastestUnlessGiven) {
  const auto& ex = examples::example("hdiff");
  EXPECT_EQ(driver::build_cuda_source(ex.program, CompileOptions{}).schedule.layout, Layout::horizontal_fastest);
  CompiledProgram prog = driver::compile_cuda_emulated(ex.program, CompileOptions{});
  EXPECT_EQ(prog.layout(), Layout::horizontal_fastest);
  auto ref = ex.make_instance({13, 7, 5}, Layout::horizontal_fastest, 5);
  auto emu = ex.make_instance({13, 7, 5}, Layout::horizontal_fastest, 5);
  run_reference(ex.program, ref.arguments());
  prog(emu.arguments());
  for (auto& [name, field] : ref.fields) EXPECT_TRUE(same_bits(field, emu.fields.at(name), name));
  auto vertical = ex.make_instance({13, 7, 5}, Layout::vertical_fastest, 5);
  EXPECT_THROW(prog(vertical.arguments()), LayoutError);
  EXPECT_EQ(driver::build_cuda_source(ex.program, options_for(Layout::vertical_fastest)).schedule.layout,
            Layout::vertical_fastest);
}

// A kernel's parameter words must fit what CUDA passes to a kernel (32,764 bytes since CUDA 12.1):
// one summing 1,400 fields (3 words each: data, offset, a stride) is refused with a CompileError
// naming the kernel and the bytes, before anything is compiled; 1,300 fit. NVRTC compiles a
// kernel with more than the 4,096 bytes of older CUDA (200 fields).
TEST(CudaParameters, AKernelReadingMoreThanCudaPassesIsRefused) {
  const Dimension I = horizontal_dim("I"), K = vertical_dim("K");
  for (const int n : {200, 1300, 1400}) {
    SCOPED_TRACE(n);
    ProgramBuilder pb("wide_sum");
    std::vector<Expr> terms;
    for (int i = 0; i < n; ++i) terms.push_back(pb.field(fmt::format("f{}", i), {I, K}, DType::float64));
    Expr o = pb.field("o", {I, K}, DType::float64);
    while (terms.size() > 1) {  // a balanced sum: no deep expression tree
      std::vector<Expr> next;
      for (std::size_t i = 0; i + 1 < terms.size(); i += 2) next.push_back(terms[i] + terms[i + 1]);
      if (terms.size() % 2) next.push_back(terms.back());
      terms = std::move(next);
    }
    pb.call("sum", terms[0], {o}, {{I, 0, 4}, {K, 0, 3}});
    const ir::Program program = pb.build();
    if (n == 1400) {
      const std::string error = testing_support::error_of<CompileError>(
          [&] { driver::build_cuda_source(program, options_for(Layout::horizontal_fastest)); });
      EXPECT_NE(error.find("program 'wide_sum': kernel 0 'sum' reads 4207 values of its call (33672 bytes of kernel "
                           "parameters), more than CUDA passes to a kernel (32764 bytes)"),
                std::string::npos)
          << error;
      continue;
    }
    const driver::CudaBuild built = driver::build_cuda_source(program, options_for(Layout::horizontal_fastest));
    ASSERT_EQ(built.source.launches.size(), 1u);
    EXPECT_EQ(built.source.launches[0].params.size(), 3u * static_cast<std::size_t>(n + 1) + 2 * 2);
    if (n == 200 && driver::cuda_built()) {
      EXPECT_GT(sizeof(ff_word) * built.source.launches[0].params.size(), 4096u);
      const auto resources = driver::cuda_kernel_resources("wide_sum", built.source, "sm_90");
      EXPECT_FALSE(resources[0].narrow.spills());
    }
  }
}

// A launch raises errors exactly when its kernel checks reads while running (a dynamic offset):
// the runtime reads the error flag back only for such programs.
TEST(CudaDefaults, LaunchesSayWhetherTheyRaiseErrors) {
  for (const auto& ex : examples::all_examples()) {
    const driver::CudaBuild b = driver::build_cuda_source(ex.program, CompileOptions{});
    for (const codegen::CudaLaunch& l : b.source.launches) {
      EXPECT_EQ(l.raises_errors, b.schedule.kernels[static_cast<std::size_t>(l.kernel)].has_dynamic_shift)
          << ex.name << " " << l.symbol;
      const std::size_t at = b.source.source.find("void " + l.symbol + "_body(");
      ASSERT_NE(at, std::string::npos) << l.symbol;
      const std::size_t end = b.source.source.find("\n}\n", at);
      EXPECT_EQ(b.source.source.substr(at, end - at).find("atomicOr") != std::string::npos, l.raises_errors) << l.symbol;
    }
  }
  const Dimension I = horizontal_dim("I"), K = vertical_dim("K");
  ProgramBuilder pb("gather_i");
  Expr a = pb.field("a", {I, K}, DType::float64), off = pb.field("off", {I, K}, DType::int32);
  Expr o = pb.field("o", {I, K}, DType::float64), o2 = pb.field("o2", {I, K}, DType::float64);
  pb.call("gather", a(I + off) - a, {o}, {{I, 0, 4}, {K, 0, 3}});
  pb.call("plain", a * 2.0, {o2}, {{I, 0, 4}, {K, 0, 3}});
  const driver::CudaBuild b = driver::build_cuda_source(pb.build(), CompileOptions{});
  int raising = 0, quiet = 0;
  for (const codegen::CudaLaunch& l : b.source.launches) {
    EXPECT_EQ(l.raises_errors, b.schedule.kernels[static_cast<std::size_t>(l.kernel)].has_dynamic_shift) << l.symbol;
    (l.raises_errors ? raising : quiet) += 1;
  }
  EXPECT_EQ(raising, 1) << "the gather checks its dynamic offset while running";
  EXPECT_GE(quiet, 1);
}

// What the generated source promises: one launch per kernel, except a kernel fused into its
// scan's level loop, with two __global__ entry points (64-bit and 32-bit indexing); no OpenMP,
// neighbour tables read through __ldg, scans sweep their dimension inside the thread.
TEST_P(CudaExamples, GeneratedSourceHasOneKernelPerScheduleKernel) {
  const auto& ex = examples::example(GetParam().name);
  const driver::CudaBuild b = driver::build_cuda_source(ex.program, options_for(GetParam().layout));
  const std::string& src = b.source.source;
  std::size_t globals = 0, fused = 0;
  for (std::size_t at = src.find("__global__"); at != std::string::npos; at = src.find("__global__", at + 1)) ++globals;
  for (const auto& k : b.schedule.kernels) fused += k.fused_into >= 0;
  EXPECT_EQ(globals, 2 * (b.schedule.kernels.size() - fused));
  ASSERT_EQ(b.source.launches.size(), b.schedule.kernels.size() - fused);
  for (const auto& l : b.source.launches) {
    EXPECT_NE(src.find(fmt::format("void __launch_bounds__({}) {}(", l.block_x, l.symbol)), std::string::npos);
    EXPECT_NE(src.find(fmt::format("void __launch_bounds__({}) {}(", l.block_x, l.narrow_symbol)), std::string::npos);
    EXPECT_NE(src.find(fmt::format("{}_body<std::int32_t, std::int32_t>(ff_p, ff_y0, ff_z0);", l.symbol)),
              std::string::npos);
    EXPECT_NE(src.find(fmt::format("{}_body<std::int64_t, std::int64_t>(ff_p, ff_y0, ff_z0);", l.symbol)),
              std::string::npos);
  }
  for (std::size_t i = 0; i < b.source.launches.size(); ++i)
    EXPECT_LT(i == 0 ? -1 : b.source.launches[i - 1].kernel, b.source.launches[i].kernel) << "in execution order";
  EXPECT_EQ(src.find("omp"), std::string::npos);
  // What a kernel reads of its call comes as its parameter words, by value: no descriptor in
  // device memory. Each launch's struct holds exactly its words.
  EXPECT_EQ(src.find("call->"), std::string::npos);
  for (const auto& l : b.source.launches) {
    const std::size_t at = src.find(fmt::format("struct {}_params {{\n  ff_word w[{}];\n}};", l.symbol, l.params.size()));
    ASSERT_NE(at, std::string::npos) << l.symbol;
    const std::string kernel = src.substr(at, src.find("extern \"C\"", at) - at);
    EXPECT_NE(kernel.find(fmt::format("ff_p.w[{}]", l.params.size() - 1)), std::string::npos) << l.symbol;
    EXPECT_EQ(kernel.find(fmt::format("ff_p.w[{}]", l.params.size())), std::string::npos) << l.symbol;
  }
  EXPECT_EQ(src.find("cudaMalloc"), std::string::npos) << "generated code never allocates";
  // A thread's point comes from its block and the launch's piece: no loop over the grid (one
  // ran once per thread and its setup doubled the registers: generate_cuda.cpp).
  EXPECT_EQ(src.find("gridDim"), std::string::npos);
  bool tables = false, scans = false;
  for (std::size_t k = 0; k < b.schedule.kernels.size(); ++k) {
    tables |= !b.schedule.kernels[k].connectivities.empty();
    scans |= b.schedule.kernels[k].kind == ir::KernelKind::scan;
    EXPECT_EQ(b.schedule.kernels[k].column_group, -1) << "column groups are CPU-only";
  }
  if (tables) {
    EXPECT_NE(src.find("__ldg(&t"), std::string::npos);
  }
  if (scans) {
    EXPECT_NE(src.find("for (ff_index st = 0;"), std::string::npos);
  }
  for (const auto& l : b.source.launches) {
    // x is the layout's unit-stride dimension among the grid's.
    if (l.x_axis < 0) continue;
    const auto dims = ir::kernel_loop_dims(b.schedule, b.schedule.kernels[l.kernel]);
    const Dimension x = dims[l.x_axis];
    if (GetParam().layout == Layout::horizontal_fastest) {
      EXPECT_NE(x.kind, DimKind::vertical) << l.symbol;
    }
    // A mesh kernel with the levels along y runs 8 of them per thread, its table rows read once
    // per run, before the level loop.
    const ir::Kernel& k = b.schedule.kernels[l.kernel];
    const bool levels_along_y = l.y_axis >= 0 && dims[l.y_axis].kind == DimKind::vertical;
    const bool runs = k.kind == ir::KernelKind::pointwise && !k.connectivities.empty() && levels_along_y;
    EXPECT_EQ(l.rows_per_thread, runs ? codegen::cuda_levels_per_thread : 1) << l.symbol;
    if (runs) {
      const std::size_t at = src.find("void " + l.symbol + "_body(");
      const std::size_t table = src.find("__ldg(&t", at), loop = src.find("#pragma unroll\n", at);
      ASSERT_NE(loop, std::string::npos) << l.symbol;
      EXPECT_LT(table, loop) << l.symbol << ": the neighbour row is read before the run's level loop";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, CudaExamples, ::testing::ValuesIn(testing_support::all_example_cases()),
                         testing_support::example_case_name);

// Every built-in program in both layouts, as one NVRTC translation unit.
// vadv on the GPU: the update runs in the backward sweep's level loop, so the sweep's result x
// never goes to memory. Field passes: the forward sweep reads 5 and writes c', d'; the backward
// sweep reads c', d', u_pos and writes out: 11, as many as the hand-written kernel (was 13: x
// written, then read back by a third kernel).
TEST(CudaVadv, TheUpdateRunsInTheBackwardSweepAndXStaysInRegisters) {
  const auto& ex = examples::example("vadv");
  const driver::CudaBuild b = driver::build_cuda_source(ex.program, options_for(Layout::horizontal_fastest));
  ASSERT_EQ(b.schedule.kernels.size(), 3u);
  EXPECT_EQ(b.schedule.kernels[2].fused_into, 1);
  ASSERT_EQ(b.source.launches.size(), 2u);
  EXPECT_EQ(b.source.launches[1].kernel, 1);
  const int x = b.schedule.transient_index("thomas_backward");
  ASSERT_GE(x, 0);
  EXPECT_TRUE(b.schedule.transients[x].in_registers);
  const std::size_t buffer = ex.program.params.size() + static_cast<std::size_t>(x);
  for (const auto& l : b.source.launches)
    for (const codegen::CallWord& w : l.params) {
      const bool of_buffer = w.kind == codegen::CallWord::Kind::buffer_data ||
                             w.kind == codegen::CallWord::Kind::buffer_offset ||
                             w.kind == codegen::CallWord::Kind::buffer_stride;
      EXPECT_FALSE(of_buffer && w.index == static_cast<int>(buffer)) << l.symbol << ": no kernel touches x's memory";
    }
  const std::map<std::string, std::int64_t> sizes{{"nx", 256}, {"ny", 256}, {"nk", 80}};
  const auto bytes = ir::transient_bytes(b.schedule, ir::compute_extents(b.schedule, sizes), 1);
  EXPECT_EQ(std::accumulate(bytes.begin(), bytes.end(), std::size_t{0}), std::size_t{2} * 256 * 256 * 80 * 8)
      << "c' and d' only";
}

// Every built-in program in both layouts, as one NVRTC translation unit; ptxas's report of its
// kernels is printed (registers, spills: informative, not required: see docs/cuda.md).
TEST(CudaNvrtc, EveryBuiltInProgramCompiles) {
  if (!driver::cuda_built()) GTEST_SKIP() << "fieldflow was built without the CUDA toolkit (no NVRTC)";
  testing_support::NvrtcBatch batch;
  for (const auto& ex : examples::all_examples())
    for (Layout l : {Layout::vertical_fastest, Layout::horizontal_fastest}) batch.add(ex.program, options_for(l));
  std::string summary;
  EXPECT_EQ(batch.compile_all("sm_90", &summary), "");
  std::printf("[ NVRTC    ] built-in programs: %s\n", summary.c_str());
  EXPECT_NE(summary.find(" kernels, at most "), std::string::npos) << summary;
}

// ptxas's report, parsed: a kernel that fits in its registers, and the same kernel spilling once
// its launch bounds leave it too few.
TEST(CudaNvrtc, ASpillIsReported) {
#ifndef FIELDFLOW_WITH_CUDA
  GTEST_SKIP() << "fieldflow was built without the CUDA toolkit (no NVRTC)";
#else
  const driver::CudaBuild built =
      driver::build_cuda_source(examples::example("nabla4").program, options_for(Layout::horizontal_fastest));
  const auto fits = toolchain::nvrtc_compile_reporting("nabla4", built.source.source, "sm_90").kernels;
  ASSERT_EQ(fits.size(), 2u) << "the kernel's entry points with 64-bit and with 32-bit indexing";
  for (const auto& k : fits) {
    EXPECT_TRUE(k.symbol == "ff_kernel_0" || k.symbol == "ff_kernel_0_i32") << k.symbol;
    EXPECT_FALSE(k.spills()) << k.symbol;
    EXPECT_GT(k.registers, 32) << k.symbol;
  }
  // 1024 threads and 2 blocks per SM leave 32 registers per thread (65,536 per SM); ptxas ignores
  // --maxrregcount where a kernel states its launch bounds.
  std::string squeezed = built.source.source;
  for (int entry = 0; entry < 2; ++entry) {
    const auto bounds = squeezed.find("__launch_bounds__(128)");
    ASSERT_NE(bounds, std::string::npos);
    squeezed.replace(bounds, std::strlen("__launch_bounds__(128)"), "__launch_bounds__(1024, 2)");
  }
  const auto spilled = toolchain::nvrtc_compile_reporting("nabla4", squeezed, "sm_90").kernels;
  ASSERT_EQ(spilled.size(), 2u);
  for (const auto& k : spilled) {
    EXPECT_LE(k.registers, 32) << k.symbol;
    EXPECT_TRUE(k.spills()) << k.symbol;
    EXPECT_GT(k.spill_store_bytes, 0) << k.symbol;
    EXPECT_GT(k.spill_load_bytes, 0) << k.symbol;
    EXPECT_GT(k.stack_bytes, 0) << k.symbol << ": spilled registers live in the stack frame";
  }
#endif
}

// The report's parser on ptxas's own words: two kernels, the frame of a function ptxas did not
// inline counted with the kernel it compiles, the lines around them ignored; a report without
// a kernel's registers or its local memory is refused, naming the program and the kernel.
TEST(CudaNvrtc, PtxasReportsAreParsedOrRefused) {
#ifndef FIELDFLOW_WITH_CUDA
  GTEST_SKIP() << "fieldflow was built without the CUDA toolkit (no NVRTC)";
#else
  const std::string a = "ptxas info    : Compiling entry function 'k_a' for 'sm_90'\n"
                        "ptxas info    : Function properties for k_a\n"
                        "ptxas         .     16 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads\n";
  const std::string a_registers = "ptxas info    : Used 32 registers, used 0 barriers, 16 bytes cumulative stack size\n";
  const std::string b = "ptxas info    : Compiling entry function 'k_b' for 'sm_90'\n"
                        "ptxas info    : Function properties for __internal_slowpath\n"
                        "ptxas         .     24 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads\n"
                        "ptxas info    : Function properties for k_b\n"
                        "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
                        "ptxas info    : Used 64 registers, used 0 barriers\n"
                        "ptxas info    : Compile time = 28.478 ms\n";
  const auto k = toolchain::parse_ptxas_report("p", "ptxas info    : 0 bytes gmem\n" + a + a_registers + b);
  ASSERT_EQ(k.size(), 2u);
  EXPECT_EQ(k[0].symbol, "k_a");
  EXPECT_EQ(k[0].registers, 32);
  EXPECT_EQ(k[0].stack_bytes, 16);
  EXPECT_EQ(k[0].spill_store_bytes, 8);
  EXPECT_EQ(k[0].spill_load_bytes, 8);
  EXPECT_EQ(k[1].symbol, "k_b");
  EXPECT_EQ(k[1].registers, 64);
  EXPECT_EQ(k[1].stack_bytes, 24);
  EXPECT_TRUE(k[1].spills());
  const auto refused = [](const std::string& log) {
    try {
      toolchain::parse_ptxas_report("p", log);
    } catch (const CompileError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const std::string no_registers = refused(a + b);
  EXPECT_NE(no_registers.find("program 'p': ptxas's report of kernel 'k_a' has no 'Used N registers' line"),
            std::string::npos)
      << no_registers;
  const std::string no_frame = refused("ptxas info    : Compiling entry function 'k_c' for 'sm_90'\n" + a_registers);
  EXPECT_NE(no_frame.find("kernel 'k_c' has no stack frame line"), std::string::npos) << no_frame;
  EXPECT_TRUE(toolchain::parse_ptxas_report("p", "").empty());
#endif
}

// What `fieldflow inspect --backend cuda` prints per launch: ptxas's registers and local memory of
// the launch's kernel, in launch order (a fused consumer has none of its own).
TEST(CudaNvrtc, ResourcesArePerLaunch) {
  if (!driver::cuda_built()) GTEST_SKIP() << "fieldflow was built without the CUDA toolkit (no NVRTC)";
  for (const char* name : {"vadv", "nabla4"}) {
    const driver::CudaBuild built =
        driver::build_cuda_source(examples::example(name).program, options_for(Layout::horizontal_fastest));
    const auto resources = driver::cuda_kernel_resources(name, built.source, "");
    ASSERT_EQ(resources.size(), built.source.launches.size()) << name;
    for (std::size_t i = 0; i < resources.size(); ++i) {
      EXPECT_EQ(resources[i].wide.symbol, built.source.launches[i].symbol) << name;
      EXPECT_EQ(resources[i].narrow.symbol, built.source.launches[i].narrow_symbol) << name;
      for (const auto& r : {resources[i].narrow, resources[i].wide}) {
        EXPECT_GT(r.registers, 0) << name;
        EXPECT_LE(r.registers, 255) << name;
      }
      // 32-bit offsets take one register where 64-bit ones take two.
      EXPECT_LE(resources[i].narrow.registers, resources[i].wide.registers) << name << " " << resources[i].wide.symbol;
    }
    EXPECT_THROW(driver::cuda_kernel_resources(name, built.source, "compute_90"), OptionError);
  }
}

// One program through the module cache: a cubin entry, a hit the second time, NVRTC's errors as
// CompileError naming the program, and an architecture that is not a real one refused.
TEST(CudaNvrtc, CompilesThroughTheModuleCache) {
  if (!driver::cuda_built()) GTEST_SKIP() << "fieldflow was built without the CUDA toolkit (no NVRTC)";
  const auto& ex = examples::example("laplacian");
  const std::string dir = ::testing::TempDir() + "cuda-cache-test";
  std::filesystem::remove_all(dir);
  const std::string src = driver::build_cuda_source(ex.program, options_for(Layout::horizontal_fastest)).source.source;
  const driver::CudaBinary first = driver::compile_cuda_binary("laplacian", src, "sm_90", dir);
  EXPECT_FALSE(first.cache_hit);
  EXPECT_EQ(first.arch, "sm_90");
  std::ifstream in(first.path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 64u);
  EXPECT_EQ(bytes.substr(1, 3), "ELF");
  EXPECT_TRUE(bytes.find("ff_kernel_0") != std::string::npos) << "the cubin holds the kernels' symbols";
  const driver::CudaBinary second = driver::compile_cuda_binary("laplacian", src, "sm_90", dir);
  EXPECT_TRUE(second.cache_hit);
  EXPECT_EQ(second.path, first.path);
  try {
    driver::compile_cuda_binary("broken", src + "\nthis is not CUDA;\n", "sm_90", dir);
    ADD_FAILURE() << "NVRTC accepted a broken source";
  } catch (const CompileError& e) {
    EXPECT_NE(std::string(e.what()).find("program 'broken'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("nvrtcCompileProgram"), std::string::npos) << e.what();
  }
  EXPECT_THROW(driver::compile_cuda_binary("laplacian", src, "compute_90", dir), OptionError);
  std::filesystem::remove_all(dir);
}

// An architecture this NVRTC does not compile for (Volta's sm_70 for CUDA 13, a device newer than
// the toolkit) is the option's mistake, named with the ones it does compile for, not NVRTC's
// "invalid value for --gpu-architecture".
TEST(CudaNvrtc, AnArchitectureThisNvrtcDoesNotCompileForIsAnOptionError) {
#ifndef FIELDFLOW_WITH_CUDA
  GTEST_SKIP() << "fieldflow was built without the CUDA toolkit (no NVRTC)";
#else
  const std::vector<std::string> known = toolchain::nvrtc_architectures();
  ASSERT_FALSE(known.empty());
  EXPECT_NE(std::find(known.begin(), known.end(), "sm_90"), known.end());
  for (const char* arch : {"sm_90", "sm_90a", "sm_100f"}) EXPECT_TRUE(toolchain::nvrtc_compiles_for(arch)) << arch;
  for (const char* arch : {"sm_10", "sm_9990", "sm_", "compute_90", ""}) EXPECT_FALSE(toolchain::nvrtc_compiles_for(arch)) << arch;
  const std::string src =
      driver::build_cuda_source(examples::example("laplacian").program, options_for(Layout::horizontal_fastest)).source.source;
  const std::string dir = ::testing::TempDir() + "cuda-arch-test";
  for (const auto& compile_for : std::vector<std::function<void(const std::string&)>>{
           [&](const std::string& arch) { toolchain::nvrtc_compile("laplacian", src, arch); },
           [&](const std::string& arch) { driver::compile_cuda_binary("laplacian", src, arch, dir); }})
    try {
      compile_for("sm_10");
      ADD_FAILURE() << "NVRTC compiled for sm_10";
    } catch (const OptionError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("program 'laplacian'"), std::string::npos) << what;
      EXPECT_NE(what.find("does not compile for CUDA architecture 'sm_10'; it compiles for " + known.front()),
                std::string::npos) << what;
      EXPECT_NE(what.find(toolchain::nvrtc_identity()), std::string::npos) << what;
    }
  std::filesystem::remove_all(dir);
#endif
}

// The grid the runtime launches: partial blocks round up, a block per row along y and z, an
// empty box along any loop dimension (a scan's own included) launches nothing.
TEST(CudaLaunch, GridCoversTheBoxWithPartialBlocks) {
  codegen::CudaLaunch l;
  l.block_x = 128;
  l.x_axis = 3;
  l.y_axis = 2;
  l.z_axes = {0, 1};
  l.loop_dims = 4;
  const std::int64_t dom[] = {0, 10, -1, 6, 2, 5, 0, 129};  // 10 x 7 x 3 x 129
  const codegen::CudaGrid g = codegen::cuda_grid(l, dom);
  EXPECT_EQ(g.x, 2);
  EXPECT_EQ(g.y, 3);
  EXPECT_EQ(g.z, 70);
  const std::int64_t big[] = {0, 1000, 0, 1000, 0, 70000, 0, 1};
  EXPECT_EQ(codegen::cuda_grid(l, big).y, 70000);
  EXPECT_EQ(codegen::cuda_grid(l, big).z, 1000000);
  const std::int64_t empty[] = {0, 10, 3, 3, 0, 5, 0, 129};
  EXPECT_EQ(codegen::cuda_grid(l, empty).x, 0);
  codegen::CudaLaunch scan = l;  // a scan over dim 1: not in the grid, but an empty one is no work
  scan.z_axes = {0};
  EXPECT_EQ(codegen::cuda_grid(scan, empty).x, 0);
  EXPECT_EQ(codegen::cuda_grid(scan, dom).z, 10);
  codegen::CudaLaunch flat = l;  // one loop dimension: one block along y and z
  flat.y_axis = -1;
  flat.z_axes.clear();
  EXPECT_EQ(codegen::cuda_grid(flat, dom).y, 1);
  EXPECT_EQ(codegen::cuda_grid(flat, dom).z, 1);
  codegen::CudaLaunch runs = l;  // runs of 8 rows along y: 7 rows in one block, 17 in three
  runs.rows_per_thread = 8;
  EXPECT_EQ(codegen::cuda_grid(runs, dom).y, 1);
  const std::int64_t taller[] = {0, 10, -1, 6, 0, 17, 0, 129};
  EXPECT_EQ(codegen::cuda_grid(runs, taller).y, 3);
  EXPECT_EQ(codegen::cuda_grid(runs, taller).z, 70);
}

// A grid with more rows than CUDA allows blocks is launched in pieces that cover every row once,
// none larger than the limit; a grid within it is one launch; an empty one none.
TEST(CudaLaunch, PiecesCoverEveryRowOnceWithinTheLimit) {
  for (const codegen::CudaGrid g : {codegen::CudaGrid{2, 7, 5}, codegen::CudaGrid{1, 70000, 1},
                                    codegen::CudaGrid{3, 65535, 131071}, codegen::CudaGrid{1, 65536, 65536}}) {
    std::map<std::pair<std::int64_t, std::int64_t>, int> rows;  // (y, z) -> times covered
    int pieces = 0;
    codegen::for_each_cuda_piece(g, codegen::cuda_max_grid_yz, [&](std::int64_t x, std::int64_t y, std::int64_t z,
                                                                   std::int64_t y0, std::int64_t z0) {
      ++pieces;
      EXPECT_EQ(x, g.x);
      EXPECT_GE(y, 1);
      EXPECT_GE(z, 1);
      EXPECT_LE(y, codegen::cuda_max_grid_yz);
      EXPECT_LE(z, codegen::cuda_max_grid_yz);
      EXPECT_LE(y0 + y, g.y);
      EXPECT_LE(z0 + z, g.z);
      // Rows are counted at the pieces' corners and edges (all rows would be 2^32 here).
      for (std::int64_t yy : {y0, y0 + y - 1})
        for (std::int64_t zz : {z0, z0 + z - 1}) ++rows[{yy, zz}];
    });
    const std::int64_t py = (g.y + 65534) / 65535, pz = (g.z + 65534) / 65535;
    EXPECT_EQ(pieces, py * pz) << g.y << " x " << g.z;
    EXPECT_TRUE(rows.count({0, 0}) && rows.count({g.y - 1, g.z - 1})) << "the first and last rows";
  }
  int none = 0;
  codegen::for_each_cuda_piece(codegen::CudaGrid{}, codegen::cuda_max_grid_yz, [&](auto...) { ++none; });
  EXPECT_EQ(none, 0);
  // Small pieces, every row counted: 7 x 5 rows in pieces of 3.
  std::map<std::pair<std::int64_t, std::int64_t>, int> rows;
  codegen::for_each_cuda_piece(codegen::CudaGrid{1, 7, 5}, 3, [&](std::int64_t, std::int64_t y, std::int64_t z,
                                                                   std::int64_t y0, std::int64_t z0) {
    for (std::int64_t yy = y0; yy < y0 + y; ++yy)
      for (std::int64_t zz = z0; zz < z0 + z; ++zz) ++rows[{yy, zz}];
  });
  EXPECT_EQ(rows.size(), 35u);
  for (const auto& [row, times] : rows) EXPECT_EQ(times, 1) << row.first << ", " << row.second;
}

// The race check of the emulation. The pipeline never makes a kernel whose threads share an
// element (break_write_hazards gives an in/out statement such as w = f(w(I+1)) a double buffer),
// so these tests undo that: the step writes w itself and the copy is dropped. Each thread then
// reads a neighbour's element of w that the neighbour writes in the same launch: a race on a GPU.
// Run one thread after the other, w(I+1) still reads the old values (the reference's) and w(K-1)
// the new ones; the check reports both, whatever the values.
driver::CudaBuild racing_step(const std::function<Expr(const Expr&)>& shifted, std::int64_t ni, std::int64_t nk) {
  const Dimension I = horizontal_dim("I"), K = vertical_dim("K");
  ProgramBuilder pb("racing");
  Expr w = pb.field("w", {I, K}, DType::float64);
  pb.call("step", shifted(w) * 0.5, {w}, {{I, 0, ni}, {K, 0, nk}});
  driver::CudaBuild b = driver::build_cuda_source(pb.build(), CompileOptions{});
  EXPECT_EQ(b.schedule.kernels.size(), 2u) << "the step into a double buffer, then its copy into w";
  if (b.schedule.kernels.size() == 2) {
    b.schedule.kernels[0].outputs = {"w"};
    b.schedule.kernels.pop_back();
  }
  return b;
}

std::string race_report(driver::CudaBuild b, std::int64_t ni, std::int64_t nk, int max_grid_yz) {
  const Dimension I = horizontal_dim("I"), K = vertical_dim("K");
  CompiledProgram prog = driver::compile_cuda_emulated(std::move(b), CompileOptions{}, max_grid_yz);
  Field w({I, K}, DType::float64, {ni + 4, nk + 6}, {-2, -3}, Layout::horizontal_fastest);  // halo for every shift
  w.fill(1.0);
  Arguments a;
  a.field("w", w);
  try {
    prog(a);
  } catch (const std::logic_error& e) {
    return e.what();
  }
  return {};
}

TEST(CudaRaceCheck, ThreadsOfALaunchSharingAnElementAreReported) {
  const Dimension I = horizontal_dim("I"), K = vertical_dim("K");
  // Along x: thread 1 of block 0 writes w's element that thread 0 read.
  const std::string along_x = race_report(racing_step([&](const Expr& w) { return w(I + 1); }, 200, 4), 200, 4, 3);
  EXPECT_NE(along_x.find("data race in emulated CUDA kernel ff_kernel_0_i32: thread (block (0, 0, 0), thread 1) writes "
                         "element"),
            std::string::npos)
      << along_x;
  EXPECT_NE(along_x.find("of buffer 0 'w', which thread (block (0, 0, 0), thread 0) reads in the same launch"),
            std::string::npos)
      << along_x;
  // Along y (K, one block per level): block 1 reads the level block 0 wrote.
  const std::string along_y = race_report(racing_step([&](const Expr& w) { return w(K - 1); }, 5, 4), 5, 4, 3);
  EXPECT_NE(along_y.find("thread (block (0, 1, 0), thread 0) reads element"), std::string::npos) << along_y;
  EXPECT_NE(along_y.find("which thread (block (0, 0, 0), thread 0) writes in the same launch"), std::string::npos)
      << along_y;
  // The same with the runner's grid, a block per level.
  EXPECT_NE(race_report(racing_step([&](const Expr& w) { return w(K - 1); }, 5, 4), 5, 4,
                        static_cast<int>(codegen::cuda_max_grid_yz))
                .find("data race"),
            std::string::npos);
  // In pieces of three levels, levels 0-2 are one launch and level 3 the next: w(K-3) is then
  // read a launch after it was written, which is no race for that launching (a GPU launches the
  // 4 levels at once: the runner's emulated launches, and the grid above, find it).
  EXPECT_EQ(race_report(racing_step([&](const Expr& w) { return w(K - 3); }, 5, 4), 5, 4, 3), "");
  EXPECT_NE(race_report(racing_step([&](const Expr& w) { return w(K - 3); }, 5, 4), 5, 4, 4).find("data race"),
            std::string::npos);
}

// What the pipeline makes is race-free: the in/out step as lowered, every element written once
// and read by its own thread only.
TEST(CudaRaceCheck, TheDoubleBufferedStepHasNoRace) {
  const Dimension I = horizontal_dim("I"), K = vertical_dim("K");
  ProgramBuilder pb("stepping");
  Expr w = pb.field("w", {I, K}, DType::float64);
  pb.call("step", (w(I + 1) + w(K - 1)) * 0.5, {w}, {{I, 0, 200}, {K, 0, 4}});
  EXPECT_EQ(race_report(driver::build_cuda_source(pb.build(), CompileOptions{}), 200, 4, 3), "");
}

// A mesh kernel's runs of levels (8 per thread) at level counts around a run: fewer levels than
// a run, one run exactly, runs with a remainder, more runs than a piece of the emulation's grid
// (3 blocks along y). The run reads the neighbour row and the weight once and checks its dynamic
// vertical offset at every level; a last-level offset out of range is the reference's error.
TEST(CudaRuns, AMeshKernelsRunsOfLevelsEqualTheReference) {
  const Dimension Edge = horizontal_dim("Edge"), Vertex = horizontal_dim("Vertex"), K = vertical_dim("K");
  const Connectivity E2V = make_connectivity("E2V", Edge, Vertex, 2);
  const Mesh torus = make_torus_mesh(4, 5);
  const std::int64_t ne = torus.n_edges, nv = torus.n_vertices;
  for (const std::int64_t nk : {3, 8, 19, 40})
    for (const bool out_of_range : {false, true}) {
      SCOPED_TRACE(fmt::format("{} levels{}", nk, out_of_range ? ", an offset out of range" : ""));
      ProgramBuilder pb("runs");
      Expr fvk = pb.field("fvk", {Vertex, K}, DType::float64), w = pb.field("w", {Edge}, DType::float64);
      Expr a = pb.field("a", {Edge, K}, DType::float64), off = pb.field("off", {Edge, K}, DType::int32);
      Expr out = pb.field("out", {Edge, K}, DType::float64);
      pb.call("c", neighbor_sum(fvk(E2V), E2V) * w + a(K + off), {out}, {{Edge, 0, ne}, {K, 0, nk}});
      const Layout hf = Layout::horizontal_fastest;
      Field f({Vertex, K}, DType::float64, {nv, nk}, {}, hf), fw({Edge}, DType::float64, {ne}, {}, hf);
      Field fa({Edge, K}, DType::float64, {ne, nk}, {}, hf), foff({Edge, K}, DType::int32, {ne, nk}, {}, hf);
      Field fo({Edge, K}, DType::float64, {ne, nk}, {}, hf);
      for (std::int64_t k = 0; k < nk; ++k) {
        for (std::int64_t v = 0; v < nv; ++v) f.at<double>({v, k}) = 0.5 * static_cast<double>((v * 7 + k * 3) % 23) - 3.0;
        for (std::int64_t e = 0; e < ne; ++e) {
          fa.at<double>({e, k}) = 0.25 * static_cast<double>((e * 5 + k) % 17);
          // -1, 0 or +1 where it stays in the column; one element of the last level leaves it.
          const std::int32_t o = static_cast<std::int32_t>((e + k) % 3) - 1;
          foff.at<std::int32_t>({e, k}) = (k + o < 0 || k + o >= nk) ? 0 : o;
          fo.at<double>({e, k}) = -7.0;
        }
      }
      for (std::int64_t e = 0; e < ne; ++e) fw.at<double>({e}) = 1.0 + 0.125 * static_cast<double>(e % 5);
      if (out_of_range) foff.at<std::int32_t>({ne / 2, nk - 1}) = 1;
      Arguments args;
      args.field("fvk", f).field("w", fw).field("a", fa).field("off", foff).field("out", fo);
      args.connectivity("E2V", torus.table("E2V"));
      const driver::CudaBuild b = driver::build_cuda_source(pb.build(), options_for(hf));
      // The checked kernel writes a transient (a failed call changes no output), then a copy.
      ASSERT_EQ(b.source.launches.size(), 2u);
      EXPECT_EQ(b.source.launches[0].rows_per_thread, codegen::cuda_levels_per_thread);
      EXPECT_TRUE(b.source.launches[0].raises_errors);
      // Both raise the same error (the harness rethrows it) and leave `out` as it was.
      if (out_of_range) {
        EXPECT_THROW(testing_support::compare_cuda_emulation_with_reference(pb.build(), args), DomainError);
        for (std::int64_t k = 0; k < nk; ++k)
          for (std::int64_t e = 0; e < ne; ++e) ASSERT_EQ(fo.at<double>({e, k}), -7.0) << e << ", " << k;
      } else {
        testing_support::compare_cuda_emulation_with_reference(pb.build(), args);
      }
    }
}

// ff_fits_32bit_indexing (fieldflow/abi.h) on descriptors alone: every partial sum of an element
// offset, |offset| + sum of (max(|lo|, |hi|) + 2 max_shift) |stride|, must stay below 2^31, and
// every box within +-2^29. Each bound is checked on both sides; a stride or a shift too large for
// the products is refused without overflowing them.
TEST(CudaIndexing, TheFitCheckBoundsEveryPartialSumOfAnOffset) {
  using fieldflow::abi::ff_fits_32bit_indexing;
  const std::int64_t limit = (std::int64_t{1} << 31) - 1, box = std::int64_t{1} << 29;
  std::vector<std::int64_t> domains(2 * FF_MAX_DIMS, 0);
  domains[0] = 0, domains[1] = 5, domains[2] = 0, domains[3] = 3;
  ff_buffer b{};
  b.lo[0] = 0, b.hi[0] = 5, b.strides[0] = 1;  // I: 5 points, reach 5
  b.lo[1] = -1, b.hi[1] = 4;                   // K: levels -1..3, reach 4
  ff_call call{};
  call.buffers = &b;
  call.domains = domains.data();
  const auto fits = [&](std::int64_t stride, std::int64_t max_shift) {
    b.strides[1] = stride;
    b.offset = stride;  // -lo * stride along K
    return ff_fits_32bit_indexing(&call, 1, 1, max_shift);
  };
  // With max_shift 1: stride + (4 + 2) stride + (5 + 2) = 7 stride + 7.
  EXPECT_TRUE(fits(306'783'377, 1));   // 2,147,483,646
  EXPECT_FALSE(fits(306'783'378, 1));  // 2,147,483,653
  EXPECT_TRUE(fits(306'783'377 - 100, 1));
  // The shift counts twice per dimension: 9 stride + 9 at max_shift 2.
  EXPECT_FALSE(fits(306'783'377, 2));
  EXPECT_TRUE(fits((limit - 9) / 9, 2));
  EXPECT_FALSE(fits((limit - 9) / 9 + 1, 2));
  EXPECT_FALSE(fits(1, box + 1)) << "a shift past the boxes' bound";
  EXPECT_FALSE(fits(1, -1));
  EXPECT_FALSE(fits(std::int64_t{1} << 40, 1)) << "a stride past 2^31, refused before its product";
  EXPECT_FALSE(fits(std::numeric_limits<std::int64_t>::max(), 1));
  // An empty extent is skipped: such a buffer is never read.
  EXPECT_TRUE(fits(100, 1));
  b.hi[1] = b.lo[1];
  b.strides[1] = std::int64_t{1} << 40;
  b.offset = 0;
  EXPECT_TRUE(ff_fits_32bit_indexing(&call, 1, 1, 1));
  b.hi[1] = 4;
  // Boxes: a coordinate up to 2^29 either side.
  for (const std::int64_t edge : {box, -box}) {
    b.lo[2] = std::min<std::int64_t>(edge, 0), b.hi[2] = std::max<std::int64_t>(edge, 0) + (edge < 0), b.strides[2] = 0;
    EXPECT_TRUE(fits(100, 1)) << edge;
    b.lo[2] -= edge < 0, b.hi[2] += edge > 0;
    EXPECT_FALSE(fits(100, 1)) << edge;
  }
  b.lo[2] = b.hi[2] = 0;
  domains[5] = box;
  EXPECT_TRUE(fits(100, 1));
  domains[5] = box + 1;
  EXPECT_FALSE(fits(100, 1)) << "a kernel's box";
  domains[5] = 0;
  domains[4] = -box - 1;
  EXPECT_FALSE(fits(100, 1));
  domains[4] = 0;
  // A negative offset (a field whose box starts far from 0) counts by its magnitude.
  b.strides[1] = 1000;
  b.offset = -limit;
  EXPECT_FALSE(ff_fits_32bit_indexing(&call, 1, 1, 1));
  b.offset = -(limit - (4 + 2) * 1000 - (5 + 2));
  EXPECT_TRUE(ff_fits_32bit_indexing(&call, 1, 1, 1));
  b.offset = -(limit - (4 + 2) * 1000 - (5 + 2) + 1);
  EXPECT_FALSE(ff_fits_32bit_indexing(&call, 1, 1, 1));
}

// A field whose offsets pass 2^31 (levels 2^29 float32 elements apart, in address space reserved
// without memory) is read by the 64-bit kernels, which the emulation chooses as the runner does,
// and equals the reference; one at the fit check's bound takes the 32-bit kernels and equals it too.
TEST(CudaIndexing, FieldsWhoseOffsetsPass32BitsEqualTheReference) {
  for (const std::int64_t stride : {std::int64_t{1} << 29, std::int64_t{306'783'377}}) {
    SCOPED_TRACE(stride);
    const auto far = testing_support::far_apart_levels(stride);
    const testing_support::ReferenceOutcome ref = testing_support::run_reference_on_copies(far->program, far->args);
    ASSERT_EQ(ref.error, nullptr);
    driver::compile_cuda_emulated(far->program, options_for(Layout::horizontal_fastest))(far->args);
    for (const auto& [mine, theirs] : ref.pairs) {
      if (mine == &far->o) {
        EXPECT_TRUE(same_bits(*theirs, *mine, "o"));  // a is strided: same_bits compares bytes
      }
    }
  }
}

// On a GPU, test_reference_cuda compares the outputs of programs that call CUDA's math library
// (exp, sin, pow, ...) within device_math_ulps, everything else bit for bit (support/cuda_harness.h).
// That harness only runs on a device, so its parts are checked here: which programs it relaxes, and
// the distance it measures.
TEST(DeviceMathHarness, OnlyProgramsCallingTheMathLibraryAreComparedWithinUlps) {
  using testing_support::uses_device_math_library;
  const Dimension I = horizontal_dim("I");
  const auto program = [&](const std::function<Expr(const Expr&, const Expr&)>& body, DType dt) {
    ProgramBuilder pb("math");
    Expr a = pb.field("a", {I}, dt), b = pb.field("b", {I}, dt), o = pb.field("o", {I}, dt);
    pb.call("s", body(a, b), {o}, {{I, 0, 4}});
    return pb.build();
  };
  const CompileOptions o;
  EXPECT_TRUE(uses_device_math_library(program([](const Expr& a, const Expr&) { return exp(a); }, DType::float64), o));
  EXPECT_TRUE(uses_device_math_library(program([](const Expr& a, const Expr&) { return gamma(a) * 2.0f; }, DType::float32), o));
  EXPECT_TRUE(uses_device_math_library(program([](const Expr& a, const Expr& b) { return power(a, b); }, DType::float64), o));
  // Exact on both: bit for bit.
  EXPECT_FALSE(uses_device_math_library(program([](const Expr& a, const Expr& b) { return power(a, b); }, DType::int32), o));
  EXPECT_FALSE(uses_device_math_library(
      program([](const Expr& a, const Expr& b) { return sqrt(a) + floor(b) - abs(a) + fmod(a, b); }, DType::float64), o));
  for (const auto& ex : examples::all_examples()) EXPECT_FALSE(uses_device_math_library(ex.program, o)) << ex.name;
}

TEST(DeviceMathHarness, UlpDistanceOrdersValuesAcrossZero) {
  using testing_support::ulp_distance;
  EXPECT_EQ(ulp_distance(1.0, 1.0), 0);
  EXPECT_EQ(ulp_distance(1.0, std::nextafter(1.0, 2.0)), 1);
  EXPECT_EQ(ulp_distance(std::nextafter(1.0, 0.0), std::nextafter(1.0, 2.0)), 2);
  EXPECT_EQ(ulp_distance(-0.0, 0.0), 0);
  const double tiny = std::numeric_limits<double>::denorm_min();
  EXPECT_EQ(ulp_distance(-tiny, tiny), 2);
  EXPECT_EQ(ulp_distance(-1.0, 1.0), 2 * ulp_distance(0.0, 1.0));
  EXPECT_EQ(ulp_distance(1.0f, std::nextafter(std::nextafter(1.0f, 2.0f), 2.0f)), 2);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(ulp_distance(nan, nan), 0);
  EXPECT_EQ(ulp_distance(nan, 1.0), std::numeric_limits<std::int64_t>::max());

  const Dimension I = horizontal_dim("I");
  Field a({I}, DType::float64, {5}), b({I}, DType::float64, {5});
  for (int i = 0; i < 5; ++i) a.at<double>({i}) = b.at<double>({i}) = 0.1 * i - 0.2;
  double& x = b.at<double>({3});
  for (int step = 0; step < 3; ++step) x = std::nextafter(x, 1.0);
  EXPECT_TRUE(testing_support::same_within_ulps(a, b, 3));
  EXPECT_FALSE(testing_support::same_within_ulps(a, b, 0)) << "0 ulps: bit for bit";
  Field negative_zero({I}, DType::float64, {1}), positive_zero({I}, DType::float64, {1});
  negative_zero.at<double>({0}) = -0.0;
  EXPECT_TRUE(testing_support::same_within_ulps(negative_zero, positive_zero, 1));
  EXPECT_FALSE(testing_support::same_within_ulps(negative_zero, positive_zero, 0)) << "-0 and +0 differ in bits";
  const ::testing::AssertionResult two = testing_support::same_within_ulps(a, b, 2);
  EXPECT_FALSE(two);
  EXPECT_NE(std::string(two.message()).find("element 3"), std::string::npos) << two.message();
  Field ia({I}, DType::int32, {5}), ib({I}, DType::int32, {5});
  ib.at<std::int32_t>({1}) = 1;
  EXPECT_FALSE(testing_support::same_within_ulps(ia, ib, 1000)) << "integers are compared bit for bit";
}

// Backend::cuda on this machine: a typed error saying why when there is no device (or no CUDA in
// this build); with a device the GPU checks are in scripts/gpu-check.sh.
TEST(CudaBackend, WithoutADeviceCompileSaysWhy) {
#ifdef FIELDFLOW_WITH_CUDA
  std::string why;
  if (runtime::cuda::device_count(&why) > 0) GTEST_SKIP() << "a CUDA device is present: see scripts/gpu-check.sh";
#endif
  CompileOptions o;
  o.backend = Backend::cuda;
  try {
    compile(examples::example("laplacian").program, o);
    ADD_FAILURE() << "compile for cuda succeeded without a device";
  } catch (const BackendUnavailableError& e) {
    EXPECT_NE(std::string(e.what()).find("program 'laplacian'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cuda"), std::string::npos) << e.what();
  }
  EXPECT_EQ(parse_backend("cuda"), Backend::cuda);
  EXPECT_EQ(to_string(Backend::cuda), "cuda");
}

}  // namespace
}  // namespace fieldflow
