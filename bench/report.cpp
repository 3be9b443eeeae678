// The suite's report (see report.h).
#include "report.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

namespace fieldflow::bench {

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double minimum(const std::vector<double>& v) { return v.empty() ? 0 : *std::min_element(v.begin(), v.end()); }

nlohmann::json number_or_null(double v, bool valid) { return valid && std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }

std::string short_layout(const std::string& layout) {
  if (layout == "vertical_fastest") return "vf";
  if (layout == "horizontal_fastest") return "hf";
  return layout;
}

std::string fmt_ms(const nlohmann::json& seconds) {
  return seconds.is_number() ? fmt::format("{:.3f}", seconds.get<double>() * 1e3) : "–";
}
std::string fmt_ratio(const nlohmann::json& v) { return v.is_number() ? fmt::format("{:.2f}", v.get<double>()) : "–"; }

}  // namespace

std::vector<double> load_average() {
  std::ifstream in("/proc/loadavg");
  double a = 0, b = 0, c = 0;
  if (in >> a >> b >> c) return {a, b, c};
  return {};
}

void CollectingReporter::ReportRuns(const std::vector<Run>& runs) {
  std::vector<Run> shown;
  for (const Run& r : runs) {
    const std::string& name = r.run_name.function_name;
    if (r.error_occurred) {
      samples_.errors[name] = r.error_message;
      shown.push_back(r);
    } else if (r.run_type == Run::RT_Iteration) {
      if (r.iterations > 0) samples_.seconds[name].push_back(r.real_accumulated_time / static_cast<double>(r.iterations));
      if (r.repetitions <= 1) shown.push_back(r);  // no aggregates follow a single repetition
    } else if (r.aggregate_name == "median" || r.aggregate_name == "min") {
      shown.push_back(r);
    }
  }
  if (!shown.empty()) ConsoleReporter::ReportRuns(shown);
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) {
        std::string m = line.substr(colon + 1);
        m.erase(0, m.find_first_not_of(" \t"));
        return m;
      }
    }
  return "unknown";
}

nlohmann::json make_report(const std::vector<CaseInfo>& cases, const Samples& samples, const ReportSettings& settings) {
  using nlohmann::json;
  auto stats = [&](const std::string& name, double& med, double& mn, std::size_t& n) {
    auto it = samples.seconds.find(name);
    if (it == samples.seconds.end() || it->second.empty()) return false;
    med = median(it->second);
    mn = minimum(it->second);
    n = it->second.size();
    return med > 0;
  };

  json report;
  report["schema"] = "fieldflow-bench/1";

  // Machine and the copy probe.
  double copy_gbps = 0;
  json machine{{"cpu", cpu_model()}, {"threads", omp_get_max_threads()}, {"copy_gbps", nullptr},
               {"copy_bytes", nullptr}, {"copy_median_s", nullptr},
               {"load_average_before", settings.load_before}, {"load_average_after", load_average()}};
  json copies = json::array();
  for (const auto& c : cases) {
    double med, mn;
    std::size_t n;
    if (c.kind != CaseKind::copy || !stats(c.name, med, mn, n)) continue;
    const double gbps = c.compulsory_bytes / med / 1e9;
    copies.push_back(json{{"case", c.name}, {"median_s", med}, {"min_s", mn}, {"gbps", gbps}});
    if (gbps > copy_gbps) {  // the faster probe: the other one was disturbed
      copy_gbps = gbps;
      machine["copy_gbps"] = copy_gbps;
      machine["copy_bytes"] = c.compulsory_bytes;
      machine["copy_median_s"] = med;
    }
  }
  machine["copy_probes"] = copies;
  report["machine"] = machine;
  report["settings"] = json{{"quick", settings.quick}, {"repetitions", settings.repetitions},
                            {"min_time_s", settings.min_time}, {"filter", settings.filter},
                            {"interleaved", settings.interleaved}};

  // Kernel results; vs_handwritten needs the hand-written case of the same configuration.
  std::map<std::string, double> handwritten;  // program/layout/size -> median
  for (const auto& c : cases) {
    double med, mn;
    std::size_t n;
    if (c.kind == CaseKind::kernel && c.variant == "handwritten" && stats(c.name, med, mn, n))
      handwritten[c.program + "/" + c.layout + "/" + c.size] = med;
  }
  json results = json::array(), memory = json::array();
  std::set<std::string> planned;
  for (const auto& c : cases) {
    if (c.kind != CaseKind::kernel) continue;
    double med, mn;
    std::size_t n;
    if (!stats(c.name, med, mn, n)) continue;
    const double gbps = c.compulsory_bytes / med / 1e9;
    const auto hw = handwritten.find(c.program + "/" + c.layout + "/" + c.size);
    results.push_back(json{{"program", c.program},
                           {"variant", c.variant},
                           {"mode", c.mode},
                           {"layout", c.layout},
                           {"size", c.size},
                           {"median_s", med},
                           {"min_s", mn},
                           {"repetitions", n},
                           {"compulsory_bytes", c.compulsory_bytes},
                           {"gbps", gbps},
                           {"vs_copy", number_or_null(gbps / copy_gbps, copy_gbps > 0)},
                           {"vs_handwritten", number_or_null(hw == handwritten.end() ? 0 : hw->second / med,
                                                             hw != handwritten.end())}});
    const std::string key = c.program + "/" + c.layout + "/" + c.size;
    if (c.plan && planned.insert(key).second) {
      const MemoryPlan& p = *c.plan;
      memory.push_back(json{{"program", c.program},
                            {"layout", c.layout},
                            {"size", c.size},
                            {"transients", p.transients.size()},
                            {"naive_sum_bytes", p.naive_sum_bytes},
                            {"packed_bytes", p.packed_bytes},
                            {"lower_bound_bytes", p.lower_bound_bytes},
                            {"packed_over_lower_bound",
                             number_or_null(static_cast<double>(p.packed_bytes) / p.lower_bound_bytes,
                                            p.lower_bound_bytes > 0)}});
    }
  }
  report["results"] = results;
  report["memory"] = memory;

  json compile = json::array();
  std::vector<std::string> programs;
  for (const auto& c : cases)
    if ((c.kind == CaseKind::compile_cold || c.kind == CaseKind::compile_warm) &&
        std::find(programs.begin(), programs.end(), c.program) == programs.end())
      programs.push_back(c.program);
  for (const auto& program : programs) {
    double cold = 0, warm = 0, cold_min = 0, warm_min = 0;
    std::size_t n;
    const bool has_cold = stats("compile_cold/" + program, cold, cold_min, n);
    const bool has_warm = stats("compile_warm/" + program, warm, warm_min, n);
    if (!has_cold && !has_warm) continue;
    compile.push_back(json{{"program", program},
                           {"cold_s", number_or_null(cold, has_cold)},
                           {"warm_s", number_or_null(warm, has_warm)},
                           {"cold_min_s", number_or_null(cold_min, has_cold)},
                           {"warm_min_s", number_or_null(warm_min, has_warm)}});
  }
  report["compile"] = compile;

  json overhead = json::array();
  for (const auto& c : cases) {
    double med, mn;
    std::size_t n;
    if (c.kind == CaseKind::call_overhead && stats(c.name, med, mn, n))
      overhead.push_back(json{{"program", c.program}, {"mode", c.mode}, {"median_us", med * 1e6}, {"min_us", mn * 1e6}});
  }
  report["call_overhead"] = overhead;

  json errors = json::array();
  for (const auto& [name, message] : samples.errors) errors.push_back(json{{"case", name}, {"message", message}});
  report["errors"] = errors;
  return report;
}

std::string markdown_tables(const nlohmann::json& report) {
  using nlohmann::json;
  std::string s;
  const json& m = report.at("machine");
  s += fmt::format("Machine: {}, {} threads, copy {} GB/s (the faster of two probes).\n\n", m.at("cpu").get<std::string>(),
                   m.at("threads").get<int>(),
                   m.at("copy_gbps").is_number() ? fmt::format("{:.1f}", m.at("copy_gbps").get<double>()) : "–");

  // One row per configuration: the hand-written time, each mode's time, the ratios.
  struct Row {
    std::string program, layout, size;
    std::map<std::string, json> by_mode;  // "none" = hand-written
  };
  std::vector<Row> rows;
  for (const auto& r : report.at("results")) {
    const std::string p = r.at("program"), l = r.at("layout"), z = r.at("size");
    auto it = std::find_if(rows.begin(), rows.end(),
                           [&](const Row& x) { return x.program == p && x.layout == l && x.size == z; });
    if (it == rows.end()) {
      rows.push_back({p, l, z, {}});
      it = rows.end() - 1;
    }
    it->by_mode[r.at("mode").get<std::string>()] = r;
  }
  s += "| program | layout | size | hand-written ms | scoped ms | persistent ms | pool ms | external ms | "
       "vs_handwritten pool / external | vs_copy hand-written / pool | spread persistent/pool/external, "
       "medians / mins |\n";
  s += "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  auto field = [](const std::map<std::string, json>& by, const std::string& mode, const char* key) {
    auto it = by.find(mode);
    return it == by.end() ? json() : it->second.at(key);
  };
  // How far apart the three modes that keep memory between calls are: (slowest / fastest - 1).
  auto spread = [&](const std::map<std::string, json>& by, const char* key) -> std::string {
    double lo = 0, hi = 0;
    for (const char* mode : {"persistent", "pool", "external"}) {
      const json v = field(by, mode, key);
      if (!v.is_number()) return "–";
      const double t = v.get<double>();
      lo = lo == 0 ? t : std::min(lo, t);
      hi = std::max(hi, t);
    }
    return fmt::format("{:.0f}%", 100 * (hi / lo - 1));
  };
  for (const auto& row : rows) {
    s += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} / {} | {} / {} | {} / {} |\n", row.program,
                     short_layout(row.layout), row.size, fmt_ms(field(row.by_mode, "none", "median_s")),
                     fmt_ms(field(row.by_mode, "scoped", "median_s")), fmt_ms(field(row.by_mode, "persistent", "median_s")),
                     fmt_ms(field(row.by_mode, "pool", "median_s")), fmt_ms(field(row.by_mode, "external", "median_s")),
                     fmt_ratio(field(row.by_mode, "pool", "vs_handwritten")),
                     fmt_ratio(field(row.by_mode, "external", "vs_handwritten")),
                     fmt_ratio(field(row.by_mode, "none", "vs_copy")), fmt_ratio(field(row.by_mode, "pool", "vs_copy")),
                     spread(row.by_mode, "median_s"), spread(row.by_mode, "min_s"));
  }

  if (!report.at("memory").empty()) {
    s += "\n| program | layout | size | transients | naive sum B | packed B | lower bound B | packed / bound |\n";
    s += "|---|---|---|---:|---:|---:|---:|---:|\n";
    for (const auto& r : report.at("memory"))
      s += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} |\n", r.at("program").get<std::string>(),
                       short_layout(r.at("layout")), r.at("size").get<std::string>(), r.at("transients").get<int>(),
                       r.at("naive_sum_bytes").get<std::uint64_t>(), r.at("packed_bytes").get<std::uint64_t>(),
                       r.at("lower_bound_bytes").get<std::uint64_t>(), fmt_ratio(r.at("packed_over_lower_bound")));
  }
  if (!report.at("compile").empty()) {
    s += "\n| program | cold compile s | warm compile ms |\n|---|---:|---:|\n";
    for (const auto& r : report.at("compile"))
      s += fmt::format("| {} | {} | {} |\n", r.at("program").get<std::string>(),
                       r.at("cold_s").is_number() ? fmt::format("{:.2f}", r.at("cold_s").get<double>()) : "–",
                       fmt_ms(r.at("warm_s")));
  }
  if (!report.at("call_overhead").empty()) {
    s += "\n| program (1 point) | mode | call µs (median) |\n|---|---|---:|\n";
    for (const auto& r : report.at("call_overhead"))
      s += fmt::format("| {} | {} | {:.2f} |\n", r.at("program").get<std::string>(), r.at("mode").get<std::string>(),
                       r.at("median_us").get<double>());
  }
  if (!report.at("errors").empty()) {
    s += "\nErrors:\n";
    for (const auto& e : report.at("errors"))
      s += fmt::format("- {}: {}\n", e.at("case").get<std::string>(), e.at("message").get<std::string>());
  }
  return s;
}

std::string svg_plot(const nlohmann::json& report) {
  using nlohmann::json;
  struct Group {
    std::string label;
    json fieldflow_vs_hw, fieldflow_vs_copy, handwritten_vs_copy;
  };
  std::vector<Group> groups;
  for (const auto& r : report.at("results")) {
    const std::string label = fmt::format("{} {} {}", r.at("program").get<std::string>(),
                                          short_layout(r.at("layout")), r.at("size").get<std::string>());
    auto it = std::find_if(groups.begin(), groups.end(), [&](const Group& g) { return g.label == label; });
    if (it == groups.end()) {
      groups.push_back({label, {}, {}, {}});
      it = groups.end() - 1;
    }
    if (r.at("variant") == "handwritten") it->handwritten_vs_copy = r.at("vs_copy");
    if (r.at("variant") == "fieldflow" && r.at("mode") == "pool") {
      it->fieldflow_vs_hw = r.at("vs_handwritten");
      it->fieldflow_vs_copy = r.at("vs_copy");
    }
  }
  double vmax = 1.2;
  for (const auto& g : groups)
    for (const json* v : {&g.fieldflow_vs_hw, &g.fieldflow_vs_copy, &g.handwritten_vs_copy})
      if (v->is_number()) vmax = std::max(vmax, v->get<double>());
  vmax = std::ceil(vmax * 5) / 5;

  const double left = 230, right = 30, top = 60, bar = 9, gap = 10, width = 900;
  const double group_h = 3 * bar + gap;
  const double plot_w = width - left - right;
  const double height = top + groups.size() * group_h + 50;
  auto xpos = [&](double v) { return left + plot_w * std::clamp(v, 0.0, vmax) / vmax; };
  const char* colors[] = {"#1f77b4", "#ff7f0e", "#9e9e9e"};
  const char* names[] = {"fieldflow (pool) vs hand-written", "fieldflow (pool) vs copy", "hand-written vs copy"};

  const json& m = report.at("machine");
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"Helvetica,Arial,sans-serif\" "
      "font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      width, height);
  s += fmt::format("<text x=\"{}\" y=\"18\" font-size=\"14\">fieldflow bench: speed relative to hand-written code "
                   "and to a copy ({} threads, copy {} GB/s; medians)</text>\n",
                   10, m.at("threads").get<int>(),
                   m.at("copy_gbps").is_number() ? fmt::format("{:.1f}", m.at("copy_gbps").get<double>()) : "–");
  for (int i = 0; i < 3; ++i) {
    const double x = left + i * 220;
    s += fmt::format("<rect x=\"{}\" y=\"30\" width=\"12\" height=\"10\" fill=\"{}\"/><text x=\"{}\" y=\"39\">{}</text>\n",
                     x, colors[i], x + 16, names[i]);
  }
  // Grid and target lines.
  for (double v = 0; v <= vmax + 1e-9; v += 0.2) {
    const double x = xpos(v);
    s += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#e0e0e0\"/>\n", x, top - 5,
                     height - 45);
    s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{:.1f}</text>\n", x, height - 32, v);
  }
  s += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"black\" stroke-width=\"1.5\"/>\n",
                   xpos(1.0), top - 5, height - 45);
  s += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#d62728\" stroke-dasharray=\"4 3\"/>\n",
                   xpos(0.75), top - 5, height - 45);
  s += fmt::format("<text x=\"{}\" y=\"{}\" fill=\"#d62728\" text-anchor=\"middle\">0.75</text>\n", xpos(0.75),
                   top - 8);
  s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">1.0</text>\n", xpos(1.0), top - 8);
  s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">ratio (higher is better; 1.0 = as fast as the "
                   "reference)</text>\n",
                   left + plot_w / 2, height - 12);
  double y = top;
  for (const auto& g : groups) {
    s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", left - 6, y + 1.5 * bar + 4, g.label);
    const json* vals[] = {&g.fieldflow_vs_hw, &g.fieldflow_vs_copy, &g.handwritten_vs_copy};
    for (int i = 0; i < 3; ++i) {
      if (vals[i]->is_number()) {
        const double v = vals[i]->get<double>();
        s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\"/>", left, y + i * bar,
                         xpos(v) - left, bar - 1, colors[i]);
        s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" font-size=\"8\">{:.2f}</text>\n", xpos(v) + 3,
                         y + i * bar + bar - 2, v);
      }
    }
    y += group_h;
  }
  return s + "</svg>\n";
}

}  // namespace fieldflow::bench
