// `fieldflow bench`: runs the benchmark suite (bench/) in-process and writes one JSON report,
// optionally a Markdown table and an SVG chart; or renders those from an earlier report.
#include <fmt/format.h>

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/commands.h"
#include "fieldflow/device.h"
#include "fieldflow/errors.h"

#ifdef FIELDFLOW_HAVE_BENCH
#include "report.h"
#include "runner.h"
#endif

namespace fieldflow::cli {

#ifdef FIELDFLOW_HAVE_BENCH
namespace {

struct BenchArgs {
  std::string json_file, plot_file, table_file, filter, from_json, device = "cpu", loop_form = "tuned",
              baseline_form = "tuned";
  bool quick = false, sequential = false;
  int repetitions = 0;
  double min_time = 0;
  double wait_idle = 120, max_others_cpu = 0.1;
};

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  if (!out) throw ArgumentError(fmt::format("fieldflow bench: cannot write '{}'", path));
  out << text;
  if (!out) throw ArgumentError(fmt::format("fieldflow bench: writing '{}' failed", path));
}

void run_bench(const BenchArgs& a) {
  nlohmann::json report;
  if (!a.from_json.empty()) {
    std::ifstream in(a.from_json);
    if (!in) throw ArgumentError(fmt::format("fieldflow bench: cannot read '{}'", a.from_json));
    try {
      report = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      throw ArgumentError(fmt::format("fieldflow bench: '{}' is not a report: {}", a.from_json, e.what()));
    }
  } else {
    bench::RunOptions o;
    o.suite = a.quick ? bench::SuiteOptions::quick_defaults() : bench::SuiteOptions{};
    if (a.repetitions > 0) o.suite.repetitions = a.repetitions;
    if (a.min_time > 0) o.suite.min_time = a.min_time;
    o.suite.interleave = !a.sequential;
    o.suite.device = parse_device(a.device);
    o.suite.loop_form = parse_loop_form(a.loop_form);
    o.suite.baseline_form = a.baseline_form == "as_written" ? bench::BaselineForm::as_written
                            : a.baseline_form == "vector"   ? bench::BaselineForm::vector
                                                            : bench::BaselineForm::tuned;
    o.filter = a.filter;
    o.wait_idle_s = a.wait_idle;
    o.max_others_cpu = a.max_others_cpu;
    report = bench::run_suite(o);
  }
  const std::string tables = bench::markdown_tables(report);
  fmt::print("\n{}", tables);
  if (!a.json_file.empty()) write_file(a.json_file, report.dump(2) + "\n");
  if (!a.table_file.empty()) write_file(a.table_file, tables);
  if (!a.plot_file.empty()) write_file(a.plot_file, bench::svg_plot(report));
}

}  // namespace

void add_bench(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "bench", "Benchmark the built-in programs (every memory mode) against hand-written code and a copy");
  auto a = std::make_shared<BenchArgs>();
  cmd->add_option("--json", a->json_file, "Write the report (one JSON object) to this file");
  cmd->add_option("--filter", a->filter,
                  "Only cases whose name matches this regular expression (the copy probes and each selected "
                  "configuration's same-bytes copy always run)");
  cmd->add_flag("--quick", a->quick, "Small sizes and few repetitions (a smoke test, not a measurement)");
  cmd->add_option("--plot", a->plot_file, "Write an SVG bar chart of vs_handwritten and vs_copy to this file");
  cmd->add_option("--table", a->table_file, "Write the Markdown tables to this file");
  cmd->add_option("--repetitions", a->repetitions, "Repetitions per case (default 9, quick 2)")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--min-time", a->min_time, "Seconds per repetition of a kernel case (default 0.25)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--sequential", a->sequential,
                "Run each case's repetitions back to back instead of interleaving all cases' repetitions "
                "at random (less memory, more sensitive to drifts of a shared machine)");
  cmd->add_option("--wait-idle", a->wait_idle,
                  "Seconds to wait at most for an idle machine before measuring (default 120; 0: do not wait)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-others-cpu", a->max_others_cpu,
                  "A repetition during which other processes used more CPUs than this is rejected, and the "
                  "machine counts as idle below it (default 0.1)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--device", a->device,
                  "cpu: the host suite; cuda: the GPU suite (hdiff, vadv, nabla4, c2e2co_sum on device fields "
                  "against hand-written CUDA and the device's copy; needs a device)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_option("--loop-form", a->loop_form,
                  "The loop form of fieldflow's horizontal-fastest mesh blocks (LoopForm): tuned (default: each "
                  "instance times both and keeps the faster), scalar or vector")
      ->check(CLI::IsMember({"tuned", "scalar", "vector"}));
  cmd->add_option("--baseline-form", a->baseline_form,
                  "The form of the hand-written horizontal-fastest mesh baselines (BaselineForm): tuned (default), "
                  "as_written or vector")
      ->check(CLI::IsMember({"tuned", "as_written", "vector"}));
  cmd->add_option("--from-json", a->from_json, "Do not run: render the table / plot of an earlier report");
  cmd->callback([a] { run_bench(*a); });
}

#else

void add_bench(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "Benchmark suite (not built: configure with FIELDFLOW_BUILD_BENCH=ON)");
  cmd->allow_extras();
  cmd->callback([] {
    throw ArgumentError("fieldflow bench: this fieldflow was built without the benchmark suite "
                        "(configure with -DFIELDFLOW_BUILD_BENCH=ON)");
  });
}

#endif

}  // namespace fieldflow::cli
