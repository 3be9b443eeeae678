// `fieldflow plan PROGRAM --svg FILE`: the memory plan of a built-in program for given sizes,
// as a table and as an SVG drawing (x: kernel order, y: offset, one box per transient).
#include <fmt/format.h>
#include <fstream>
#include <omp.h>

#include "cli/commands.h"
#include "cli/common.h"
#include "fieldflow/compile.h"
#include "fieldflow/examples.h"

namespace fieldflow::cli {

namespace {

std::string svg(const std::string& program, const MemoryPlan& plan, int n_kernels) {
  const double width = 720, height = 420, left = 70, top = 40, right = 20, bottom = 50;
  const double kw = (width - left - right) / std::max(1, n_kernels);
  const double scale = plan.packed_bytes ? (height - top - bottom) / static_cast<double>(plan.packed_bytes) : 0;
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"Helvetica\" "
      "font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{}\" y=\"20\" font-size=\"14\">memory plan of {}: packed {} B, lower bound {} B, naive {} B</text>\n",
      width, height, left, program, plan.packed_bytes, plan.lower_bound_bytes, plan.naive_sum_bytes);
  s += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"black\"/>\n", left, top, height - bottom);
  s += fmt::format("<line x1=\"{0}\" y1=\"{2}\" x2=\"{1}\" y2=\"{2}\" stroke=\"black\"/>\n", left, width - right,
                   height - bottom);
  for (int k = 0; k < n_kernels; ++k)
    s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">k{}</text>\n", left + (k + 0.5) * kw,
                     height - bottom + 15, k);
  s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">kernel order</text>\n", (left + width) / 2,
                   height - 12);
  s += fmt::format("<text x=\"14\" y=\"{}\" transform=\"rotate(-90 14 {})\" text-anchor=\"middle\">offset (bytes)</text>\n",
                   (top + height - bottom) / 2, (top + height - bottom) / 2);
  static const char* colors[] = {"#8ecae6", "#ffb703", "#90be6d", "#f28482", "#cdb4db", "#f6bd60", "#84a59d"};
  int c = 0;
  for (const auto& t : plan.transients) {
    const double x = left + t.first_kernel * kw + 2, w = (t.last_kernel - t.first_kernel + 1) * kw - 4;
    const double y = height - bottom - (t.offset + t.bytes) * scale, h = std::max(1.0, t.bytes * scale);
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\" stroke=\"black\"/>\n", x, y, w, h,
                     colors[c++ % 7]);
    s += fmt::format("<text x=\"{}\" y=\"{}\">{} ({} B @ {})</text>\n", x + 4, y + std::min(h, 14.0) - 2, t.name,
                     t.bytes, t.offset);
  }
  return s + "</svg>\n";
}

void run_plan(const std::string& name, const std::string& file, const std::string& size_text, const std::string& layout_text) {
  const auto& ex = examples::example(name);
  const Layout layout = parse_layout(layout_text);
  auto inst = ex.make_instance(parse_size(size_text), layout, 1);
  Arguments args = inst.arguments();
  CompileOptions options;
  options.layout = layout;
  auto prog = compile(ex.program, options);
  const MemoryPlan plan = prog.memory_plan(size_symbols(ex.program, args));
  fmt::print("memory plan of {} ({}, {}, {} threads):\n", name, size_text, layout_text, omp_get_max_threads());
  fmt::print("  {:<20} {:>8} {:>12} {:>10} {:>12}\n", "transient", "dtype", "bytes", "live", "offset");
  for (const auto& t : plan.transients)
    fmt::print("  {:<20} {:>8} {:>12} {:>10} {:>12}\n", t.name, to_string(t.dtype), t.bytes,
               fmt::format("[{}, {}]", t.first_kernel, t.last_kernel), t.offset);
  fmt::print("  naive sum {} B, packed {} B, lower bound {} B\n", plan.naive_sum_bytes, plan.packed_bytes,
             plan.lower_bound_bytes);
  if (!file.empty()) {
    int n_kernels = 1;
    for (const auto& t : plan.transients) n_kernels = std::max(n_kernels, t.last_kernel + 1);
    std::ofstream(file) << svg(name, plan, n_kernels);
    fmt::print("wrote {}\n", file);
  }
}

}  // namespace

void add_plan(CLI::App& app) {
  auto* cmd = app.add_subcommand("plan", "Show (and draw) the transient memory plan of a built-in program");
  auto name = std::make_shared<std::string>();
  auto file = std::make_shared<std::string>();
  auto size = std::make_shared<std::string>("32x32x16");
  cmd->add_option("program", *name, "Built-in program name")->required();
  cmd->add_option("--svg", *file, "Write the plan as an SVG drawing to this file");
  auto layout = std::make_shared<std::string>("vertical_fastest");
  cmd->add_option("--size", *size, "Grid NXxNYxNK");
  cmd->add_option("--layout", *layout, "vertical_fastest or horizontal_fastest");
  cmd->callback([=] { run_plan(*name, *file, *size, *layout); });
}

}  // namespace fieldflow::cli
