// The benchmark suite without running it: the report keeps the CPU and GPU suites apart (a
// configuration's ratios use its own device's hand-written time and same-bytes copy, the
// machine's copy bandwidth is the host's, the device's is reported against its peak, and the GPU
// targets -- >= 0.9 of hand-written CUDA, bandwidth-bound kernels >= 0.8 of the device copy --
// apply to GPU results only; the timings are made up here, so every expected ratio is computed
// from them in the test), and every GPU configuration has a hand-written kernel whose launch fits
// CUDA's limits at the benchmark's sizes.
#include <gtest/gtest.h>

#include <string>

#include "cuda_baselines.h"
#include "cuda_suite.h"
#include "report.h"

namespace fieldflow::bench {
namespace {

CaseInfo kernel_case(const std::string& device, const std::string& program, const std::string& variant,
                     const std::string& mode, CaseKind kind = CaseKind::kernel) {
  CaseInfo c;
  c.device = device;
  c.program = program;
  c.variant = variant;
  c.mode = mode;
  c.kind = kind;
  c.layout = "horizontal_fastest";
  c.size = "256x256x80";
  c.compulsory_bytes = 1e9;
  c.name = device + "/" + program + "/" + variant + "/" + mode;
  return c;
}

const nlohmann::json* find_result(const nlohmann::json& report, const std::string& device, const std::string& program,
                                  const std::string& variant, const std::string& mode) {
  for (const auto& r : report.at("results"))
    if (r.at("device") == device && r.at("program") == program && r.at("variant") == variant && r.at("mode") == mode)
      return &r;
  return nullptr;
}

const nlohmann::json* find_target(const nlohmann::json& report, const std::string& name) {
  for (const auto& t : report.at("targets"))
    if (t.at("name") == name) return &t;
  return nullptr;
}

TEST(BenchReport, KeepsTheCpuAndGpuSuitesApart) {
  std::vector<CaseInfo> cases;
  Samples samples;
  auto add = [&](CaseInfo c, double seconds) {
    samples.seconds[c.name] = {seconds, seconds};
    cases.push_back(std::move(c));
  };
  CaseInfo probe = kernel_case("cpu", "copy", "copy", "none", CaseKind::copy);
  probe.compulsory_bytes = 2e9;
  add(probe, 0.1);  // 20 GB/s
  CaseInfo gpu_probe = kernel_case("cuda", "copy", "copy", "none", CaseKind::copy);
  gpu_probe.compulsory_bytes = 2e9;
  add(gpu_probe, 0.0005);  // 4000 GB/s
  for (const char* program : {"hdiff", "vadv"}) {
    // Host: 1 GB per call; copy 0.05 s, hand-written 0.06 s, fieldflow 0.062 s.
    add(kernel_case("cpu", program, "copy", "none", CaseKind::case_copy), 0.05);
    add(kernel_case("cpu", program, "handwritten", "none"), 0.06);
    add(kernel_case("cpu", program, "fieldflow", "pool"), 0.062);
    // Device: copy 0.3 ms, hand-written 0.4 ms, fieldflow 0.5 ms (pool) and 0.42 ms (external).
    add(kernel_case("cuda", program, "copy", "none", CaseKind::case_copy), 0.0003);
    add(kernel_case("cuda", program, "handwritten", "none"), 0.0004);
    add(kernel_case("cuda", program, "fieldflow", "pool"), 0.0005);
    add(kernel_case("cuda", program, "fieldflow", "external"), 0.00042);
  }
  ReportSettings settings;
  settings.gpu = nlohmann::json{{"name", "Test GPU"}, {"arch", "sm_90"}, {"hbm_peak_gbps", 5000.0}};
  const nlohmann::json report = make_report(cases, samples, settings);

  EXPECT_DOUBLE_EQ(report.at("machine").at("copy_gbps").get<double>(), 2e9 / 0.1 / 1e9);
  EXPECT_DOUBLE_EQ(report.at("gpu").at("copy_gbps").get<double>(), 2e9 / 0.0005 / 1e9);
  EXPECT_DOUBLE_EQ(report.at("gpu").at("copy_vs_peak").get<double>(), 4000.0 / 5000.0);
  EXPECT_EQ(report.at("configurations").size(), 4u);  // two programs on two devices

  const auto* cpu = find_result(report, "cpu", "hdiff", "fieldflow", "pool");
  const auto* gpu = find_result(report, "cuda", "hdiff", "fieldflow", "pool");
  ASSERT_TRUE(cpu && gpu);
  EXPECT_DOUBLE_EQ(cpu->at("vs_handwritten").get<double>(), 0.06 / 0.062);
  EXPECT_DOUBLE_EQ(gpu->at("vs_handwritten").get<double>(), 0.0004 / 0.0005);
  EXPECT_DOUBLE_EQ(gpu->at("vs_copy").get<double>(), (1e9 / 0.0005) / (1e9 / 0.0003));

  // GPU targets: vs hand-written 0.9 (pool 0.8 missed, external 0.95 met); vs copy 0.8 for hdiff
  // (bandwidth-bound), none for vadv (a latency-bound column solver).
  const auto* hw_pool = find_target(report, "vs_handwritten/hdiff (cuda)/horizontal_fastest/256x256x80/pool");
  const auto* hw_ext = find_target(report, "vs_handwritten/hdiff (cuda)/horizontal_fastest/256x256x80/external");
  const auto* copy_ext = find_target(report, "vs_copy/hdiff (cuda)/horizontal_fastest/256x256x80/external");
  ASSERT_TRUE(hw_pool && hw_ext && copy_ext) << report.at("targets").dump(1);
  EXPECT_DOUBLE_EQ(hw_pool->at("target").get<double>(), target_cuda_vs_handwritten);
  EXPECT_FALSE(hw_pool->at("met").get<bool>());
  EXPECT_TRUE(hw_ext->at("met").get<bool>());
  EXPECT_DOUBLE_EQ(copy_ext->at("measured").get<double>(), 0.0003 / 0.00042);
  EXPECT_FALSE(copy_ext->at("met").get<bool>());  // 0.71 < 0.8
  EXPECT_EQ(find_target(report, "vs_copy/vadv (cuda)/horizontal_fastest/256x256x80/pool"), nullptr);
  EXPECT_EQ(find_target(report, "vs_copy/hdiff/horizontal_fastest/256x256x80/pool"), nullptr);  // no CPU vs_copy target
  // The CPU's own target for hdiff is unchanged (>= 1.0 of hand-written).
  const auto* cpu_hw = find_target(report, "vs_handwritten/hdiff/horizontal_fastest/256x256x80/pool");
  ASSERT_TRUE(cpu_hw);
  EXPECT_DOUBLE_EQ(cpu_hw->at("target").get<double>(), 1.0);

  const std::string tables = markdown_tables(report);
  EXPECT_NE(tables.find("GPU: Test GPU (sm_90), HBM peak 5000 GB/s, device copy 4000 GB/s (0.80 of peak)"),
            std::string::npos)
      << tables;
  EXPECT_NE(tables.find("| hdiff (cuda) | hf | 256x256x80 |"), std::string::npos) << tables;
  EXPECT_NE(tables.find("| hdiff | hf | 256x256x80 |"), std::string::npos) << tables;
  EXPECT_NE(svg_plot(report).find("hdiff (cuda) hf 256x256x80"), std::string::npos);
}

// A paired case (hand-written and fieldflow called in turn): each repetition's ratio is taken of
// its own two means, repetitions during which other processes used the CPUs are dropped like any
// case's, and the median and range of the kept ratios go to the configuration, its pool row and
// the table.
TEST(BenchReport, PairedRatiosArePerRepetition) {
  std::vector<CaseInfo> cases;
  Samples samples;
  auto add = [&](CaseInfo c, std::vector<double> seconds) {
    samples.seconds[c.name] = std::move(seconds);
    cases.push_back(std::move(c));
  };
  add(kernel_case("cpu", "nabla4", "copy", "none", CaseKind::case_copy), {0.05, 0.05, 0.05, 0.05});
  add(kernel_case("cpu", "nabla4", "handwritten", "none"), {0.06, 0.08, 0.06, 0.07});
  add(kernel_case("cpu", "nabla4", "fieldflow", "pool"), {0.07, 0.06, 0.08, 0.06});
  CaseInfo paired = kernel_case("cpu", "nabla4", "paired", "pool", CaseKind::paired);
  // Four repetitions: the third was disturbed (others used 0.5 CPUs) and is not counted.
  samples.paired[paired.name] = {{0.060, 0.075}, {0.080, 0.080}, {0.200, 0.050}, {0.066, 0.060}};
  samples.others_cpu[paired.name] = {0.0, 0.05, 0.5, 0.0};
  add(paired, {0.135, 0.16, 0.25, 0.126});

  const nlohmann::json report = make_report(cases, samples, ReportSettings{});
  ASSERT_EQ(report.at("configurations").size(), 1u);
  const nlohmann::json& p = report.at("configurations").at(0).at("paired");
  ASSERT_TRUE(p.is_object()) << report.at("configurations").dump(1);
  // Kept ratios 0.8, 1.0, 1.1: median 1.0, lowest 0.8, highest 1.1.
  EXPECT_DOUBLE_EQ(p.at("vs_handwritten").get<double>(), 0.080 / 0.080);
  EXPECT_DOUBLE_EQ(p.at("vs_handwritten_min").get<double>(), 0.060 / 0.075);
  EXPECT_DOUBLE_EQ(p.at("vs_handwritten_max").get<double>(), 0.066 / 0.060);
  EXPECT_DOUBLE_EQ(p.at("handwritten_median_s").get<double>(), 0.066);
  EXPECT_DOUBLE_EQ(p.at("fieldflow_median_s").get<double>(), 0.075);
  EXPECT_EQ(p.at("repetitions").get<int>(), 4);
  EXPECT_EQ(p.at("rejected_repetitions").get<int>(), 1);
  EXPECT_FALSE(p.at("all_disturbed").get<bool>());

  const auto* pool = find_result(report, "cpu", "nabla4", "fieldflow", "pool");
  const auto* hw = find_result(report, "cpu", "nabla4", "handwritten", "none");
  ASSERT_TRUE(pool && hw);
  EXPECT_DOUBLE_EQ(pool->at("vs_handwritten_paired").get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(pool->at("vs_handwritten").get<double>(), 0.065 / 0.065);  // the separate medians
  EXPECT_FALSE(hw->contains("vs_handwritten_paired"));
  EXPECT_EQ(find_result(report, "cpu", "nabla4", "paired", "pool"), nullptr);  // not a result of its own

  const std::string tables = markdown_tables(report);
  EXPECT_NE(tables.find("| 1.00 (0.80–1.10) |"), std::string::npos) << tables;
  // The chart has the paired bar too, in its own colour.
  const std::string svg = svg_plot(report);
  EXPECT_NE(svg.find("the same, paired"), std::string::npos);
  EXPECT_NE(svg.find("height=\"8\" fill=\"#17becf\""), std::string::npos) << svg;
}

// Every repetition of a paired case disturbed: all are kept, and the entry says so.
TEST(BenchReport, PairedRatiosOfADisturbedRunSayTheyWereDisturbed) {
  CaseInfo paired = kernel_case("cpu", "nabla4", "paired", "pool", CaseKind::paired);
  Samples samples;
  samples.seconds[paired.name] = {0.2, 0.3};
  samples.paired[paired.name] = {{0.090, 0.100}, {0.150, 0.100}};
  samples.others_cpu[paired.name] = {0.9, 1.2};
  const CaseInfo copy = kernel_case("cpu", "nabla4", "copy", "none", CaseKind::case_copy);
  samples.seconds[copy.name] = {0.05};
  const nlohmann::json report = make_report({copy, paired}, samples, ReportSettings{});
  const nlohmann::json& p = report.at("configurations").at(0).at("paired");
  EXPECT_TRUE(p.at("all_disturbed").get<bool>());
  EXPECT_EQ(p.at("rejected_repetitions").get<int>(), 2);
  EXPECT_DOUBLE_EQ(p.at("vs_handwritten").get<double>(), 0.5 * (0.9 + 1.5));
}

// Without a paired case (the GPU suite, or a filter that left one side out) nothing is paired.
TEST(BenchReport, NoPairedCaseNoPairedRatio) {
  std::vector<CaseInfo> cases;
  Samples samples;
  for (const char* variant : {"handwritten", "fieldflow"}) {
    CaseInfo c = kernel_case("cpu", "hdiff", variant, variant == std::string("fieldflow") ? "pool" : "none");
    samples.seconds[c.name] = {0.01};
    cases.push_back(c);
  }
  const nlohmann::json report = make_report(cases, samples, ReportSettings{});
  EXPECT_FALSE(report.at("configurations").at(0).contains("paired"));
  EXPECT_FALSE(find_result(report, "cpu", "hdiff", "fieldflow", "pool")->contains("vs_handwritten_paired"));
  EXPECT_NE(markdown_tables(report).find("| 1.00 / – | – |"), std::string::npos) << markdown_tables(report);
  EXPECT_EQ(svg_plot(report).find("height=\"8\" fill=\"#17becf\""), std::string::npos);  // no paired bar drawn
}

// The GPU suite's configurations (full and quick sizes) each have a hand-written CUDA kernel whose
// planned launch is within CUDA's limits and has enough threads to fill a GPU (65,536: an H200
// holds 132 x 2048 threads at once; the solver has one per column, the rest at least that many).
TEST(BenchSuite, GpuConfigurationsHaveBaselinesThatLaunchWithinCudaLimits) {
  for (bool quick : {false, true})
    for (const KernelConfig& kc : cuda_kernel_configs(quick)) {
      SCOPED_TRACE(kc.program + " " + kc.size_text());
      ASSERT_TRUE(has_cuda_baseline(kc.program));
      EXPECT_EQ(kc.layout, Layout::horizontal_fastest);
      auto inst = examples::example(kc.program).make_instance(kc.size, kc.layout, 1);
      std::vector<double> scratch(cuda_baseline_scratch_bytes(kc.program, inst) / sizeof(double) + 1);
      CudaBaselineMemory memory;
      memory.field = [&](const std::string& name) { return inst.fields.at(name).data(); };
      memory.table = [&](const std::string& name) { return inst.mesh->table(name).entries(); };
      memory.scratch = scratch.data();
      const CudaBaselineLaunch l = plan_cuda_baseline(kc.program, inst, memory);
      std::uint64_t threads = 1;
      for (int a = 0; a < 3; ++a) threads *= std::uint64_t{l.grid[a]} * l.block[a];
      EXPECT_LE(l.block[0] * l.block[1] * l.block[2], 1024u);
      EXPECT_LE(l.grid[1], 65535u);
      EXPECT_LE(l.grid[2], 65535u);
      if (!quick) {
        EXPECT_GE(threads, std::uint64_t{65536}) << "too few threads to fill a GPU";
      }
    }
}

}  // namespace
}  // namespace fieldflow::bench
