// The suite's report (see report.h).
#include "report.h"

#include "quiet.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>

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
      if (r.iterations > 0) {
        samples_.seconds[name].push_back(r.real_accumulated_time / static_cast<double>(r.iterations));
        const auto c = r.counters.find(others_cpu_counter);
        samples_.others_cpu[name].push_back(c == r.counters.end() ? -1.0 : c->second.value);
        const auto hw = r.counters.find(paired_handwritten_counter), ff = r.counters.find(paired_fieldflow_counter);
        if (hw != r.counters.end() && ff != r.counters.end())
          samples_.paired[name].push_back({hw->second.value, ff->second.value});
      }
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

namespace {

// One case's repetitions after the quiet-run protocol: the disturbed ones are dropped, unless
// every one was (then all are kept and the case says so).
struct CaseStats {
  double median = 0, min = 0;
  std::size_t repetitions = 0, rejected = 0;
  bool all_disturbed = false;
};

// The repetitions of a case (of `count`) that the quiet-run protocol keeps; all of them when it
// would keep none (`all_disturbed` then says so).
std::vector<std::size_t> kept_repetitions(const Samples& samples, const std::string& name, std::size_t count,
                                          double max_others_cpu, bool& all_disturbed) {
  const auto o = samples.others_cpu.find(name);
  std::vector<std::size_t> kept;
  for (std::size_t i = 0; i < count; ++i) {
    const double others = o == samples.others_cpu.end() || i >= o->second.size() ? -1.0 : o->second[i];
    if (!(others > max_others_cpu)) kept.push_back(i);
  }
  all_disturbed = kept.empty();
  if (all_disturbed)
    for (std::size_t i = 0; i < count; ++i) kept.push_back(i);
  return kept;
}

std::optional<CaseStats> case_stats(const Samples& samples, const std::string& name, double max_others_cpu) {
  auto it = samples.seconds.find(name);
  if (it == samples.seconds.end() || it->second.empty()) return std::nullopt;
  const std::vector<double>& t = it->second;
  CaseStats s;
  std::vector<double> kept;
  for (std::size_t i : kept_repetitions(samples, name, t.size(), max_others_cpu, s.all_disturbed)) kept.push_back(t[i]);
  s.repetitions = t.size();
  s.rejected = s.all_disturbed ? t.size() : t.size() - kept.size();
  s.median = median(kept);
  s.min = minimum(kept);
  if (!(s.median > 0)) return std::nullopt;
  return s;
}

// A paired case's report entry: per kept repetition the ratio hand-written / fieldflow of its two
// means, and the median, lowest and highest of those ratios (null when it did not run).
nlohmann::json paired_stats(const Samples& samples, const std::string& name, double max_others_cpu) {
  auto it = samples.paired.find(name);
  if (it == samples.paired.end() || it->second.empty()) return nullptr;
  const auto& pairs = it->second;
  bool all_disturbed = false;
  std::vector<double> ratios, handwritten, fieldflow;
  for (std::size_t i : kept_repetitions(samples, name, pairs.size(), max_others_cpu, all_disturbed)) {
    if (!(pairs[i].fieldflow > 0) || !(pairs[i].handwritten > 0)) continue;
    ratios.push_back(pairs[i].handwritten / pairs[i].fieldflow);
    handwritten.push_back(pairs[i].handwritten);
    fieldflow.push_back(pairs[i].fieldflow);
  }
  if (ratios.empty()) return nullptr;
  return nlohmann::json{{"vs_handwritten", median(ratios)},
                        {"vs_handwritten_min", minimum(ratios)},
                        {"vs_handwritten_max", *std::max_element(ratios.begin(), ratios.end())},
                        {"handwritten_median_s", median(handwritten)},
                        {"fieldflow_median_s", median(fieldflow)},
                        {"repetitions", pairs.size()},
                        {"rejected_repetitions", all_disturbed ? pairs.size() : pairs.size() - ratios.size()},
                        {"all_disturbed", all_disturbed}};
}

std::string config_key(const std::string& device, const std::string& program, const std::string& layout,
                       const std::string& size) {
  return device + "/" + program + "/" + layout + "/" + size;
}
std::string config_key(const CaseInfo& c) { return config_key(c.device, c.program, c.layout, c.size); }

// A configuration's label in tables and plots: the GPU's carry the device.
std::string program_label(const std::string& program, const std::string& device) {
  return device == "cpu" ? program : fmt::format("{} ({})", program, device);
}

// Bandwidth-bound on the GPU (the vs_copy target applies): every kernel but the vertical solver,
// whose column recurrence is bound by latency.
bool cuda_bandwidth_bound(const std::string& program) { return program != "vadv"; }

}  // namespace

nlohmann::json make_report(const std::vector<CaseInfo>& cases, const Samples& samples, const ReportSettings& settings) {
  using nlohmann::json;
  std::size_t total_repetitions = 0, rejected_repetitions = 0;
  std::map<std::string, CaseStats> stats;
  for (const auto& c : cases)
    if (auto s = case_stats(samples, c.name, settings.max_others_cpu)) {
      stats[c.name] = *s;
      total_repetitions += s->repetitions;
      rejected_repetitions += s->rejected;
    }
  auto stat = [&](const std::string& name) -> const CaseStats* {
    auto it = stats.find(name);
    return it == stats.end() ? nullptr : &it->second;
  };

  json report;
  report["schema"] = "fieldflow-bench/2";

  // Machine and its DRAM-sized copy probe.
  double copy_gbps = 0;
  json machine{{"cpu", cpu_model()}, {"threads", omp_get_max_threads()}, {"copy_gbps", nullptr},
               {"copy_bytes", nullptr}, {"copy_median_s", nullptr},
               {"load_average_before", settings.load_before}, {"load_average_after", load_average()}};
  json copies = json::array();
  double gpu_copy_gbps = 0;
  for (const auto& c : cases) {
    const CaseStats* s = stat(c.name);
    if (c.kind != CaseKind::copy || !s) continue;
    const double gbps = c.compulsory_bytes / s->median / 1e9;
    if (c.device != "cpu") {  // the device's probe: reported under "gpu"
      gpu_copy_gbps = std::max(gpu_copy_gbps, gbps);
      continue;
    }
    copies.push_back(json{{"case", c.name}, {"median_s", s->median}, {"min_s", s->min}, {"gbps", gbps}});
    if (gbps > copy_gbps) {  // the faster probe: the other one was disturbed
      copy_gbps = gbps;
      machine["copy_gbps"] = copy_gbps;
      machine["copy_bytes"] = c.compulsory_bytes;
      machine["copy_median_s"] = s->median;
    }
  }
  machine["copy_probes"] = copies;
  report["machine"] = machine;
  // The GPU suite's device: its attributes, its copy probe (the faster of two) against its peak.
  if (settings.gpu.is_object() && !settings.gpu.empty()) {
    json gpu = settings.gpu;
    gpu["copy_gbps"] = number_or_null(gpu_copy_gbps, gpu_copy_gbps > 0);
    const double peak = gpu.value("hbm_peak_gbps", 0.0);
    gpu["copy_vs_peak"] = number_or_null(gpu_copy_gbps / peak, gpu_copy_gbps > 0 && peak > 0);
    report["gpu"] = gpu;
  }
  report["settings"] = json{{"quick", settings.quick}, {"repetitions", settings.repetitions},
                            {"min_time_s", settings.min_time}, {"filter", settings.filter},
                            {"interleaved", settings.interleaved}};
  report["quiet"] = json{{"idle_wait", settings.idle_wait.is_null() ? json::object() : settings.idle_wait},
                         {"max_others_cpu", settings.max_others_cpu},
                         {"repetitions", total_repetitions},
                         {"rejected_repetitions", rejected_repetitions},
                         {"load_average_before", settings.load_before},
                         {"load_average_after", load_average()}};

  // Per configuration: its same-bytes copy and hand-written medians, and the paired ratios.
  std::map<std::string, double> handwritten, yardstick;
  std::map<std::string, json> paired;
  for (const auto& c : cases) {
    if (c.kind == CaseKind::paired) paired[config_key(c)] = paired_stats(samples, c.name, settings.max_others_cpu);
    const CaseStats* s = stat(c.name);
    if (!s) continue;
    if (c.kind == CaseKind::kernel && c.variant == "handwritten") handwritten[config_key(c)] = s->median;
    if (c.kind == CaseKind::case_copy) yardstick[config_key(c)] = c.compulsory_bytes / s->median / 1e9;
  }
  json results = json::array(), memory = json::array(), configurations = json::array();
  std::set<std::string> planned;
  std::map<std::string, json> config_json;
  std::vector<std::string> config_order;
  for (const auto& c : cases) {
    if (c.kind != CaseKind::kernel && c.kind != CaseKind::case_copy) continue;
    const std::string key = config_key(c);
    if (!config_json.count(key)) {
      config_order.push_back(key);
      const auto y = yardstick.find(key);
      config_json[key] = json{{"program", c.program}, {"device", c.device}, {"layout", c.layout}, {"size", c.size},
                              {"compulsory_bytes", c.compulsory_bytes},
                              {"copy_gbps", number_or_null(y == yardstick.end() ? 0 : y->second, y != yardstick.end())},
                              {"transients", nullptr}, {"modes_collapsed", false},
                              {"spread_persistent_pool_external", nullptr}};
      if (paired.count(key)) config_json[key]["paired"] = paired[key];
    }
    if (c.kind == CaseKind::kernel && c.variant == "fieldflow") {
      config_json[key]["transients"] = !c.mode_independent;
      config_json[key]["modes_collapsed"] = c.mode_independent;
    }
    const CaseStats* s = stat(c.name);
    if (c.kind != CaseKind::kernel || !s) continue;
    const double gbps = c.compulsory_bytes / s->median / 1e9;
    const auto hw = handwritten.find(key);
    const auto y = yardstick.find(key);
    results.push_back(json{{"program", c.program},
                           {"device", c.device},
                           {"variant", c.variant},
                           {"mode", c.mode},
                           {"mode_independent", c.mode_independent},
                           {"layout", c.layout},
                           {"size", c.size},
                           {"median_s", s->median},
                           {"min_s", s->min},
                           {"repetitions", s->repetitions},
                           {"rejected_repetitions", s->rejected},
                           {"all_disturbed", s->all_disturbed},
                           {"compulsory_bytes", c.compulsory_bytes},
                           {"gbps", gbps},
                           {"vs_copy", number_or_null(y == yardstick.end() ? 0 : gbps / y->second, y != yardstick.end())},
                           {"vs_handwritten", number_or_null(hw == handwritten.end() ? 0 : hw->second / s->median,
                                                             hw != handwritten.end())}});
    if (!c.loop_form.empty()) results.back()["loop_form"] = c.loop_form;
    if (c.variant == "fieldflow" && c.mode == "pool" && paired.count(key))
      results.back()["vs_handwritten_paired"] =
          paired[key].is_object() ? paired[key].at("vs_handwritten") : json();
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
  // How far apart the three modes that keep memory between calls are (slowest / fastest - 1):
  // they run the same kernels, so this is the noise floor of the run for that configuration.
  for (const std::string& key : config_order) {
    double lo = 0, hi = 0;
    int found = 0;
    for (const auto& r : results)
      if (r.at("variant") == "fieldflow" && config_key(r.at("device"), r.at("program"), r.at("layout"), r.at("size")) == key)
        for (const char* mode : {"persistent", "pool", "external"})
          if (r.at("mode") == mode && !r.at("mode_independent").get<bool>()) {
            const double t = r.at("median_s");
            lo = found++ ? std::min(lo, t) : t;
            hi = std::max(hi, t);
          }
    if (found == 3) config_json[key]["spread_persistent_pool_external"] = hi / lo - 1;
    configurations.push_back(config_json[key]);
  }
  report["results"] = results;
  report["configurations"] = configurations;
  report["memory"] = memory;

  json compile = json::array(), targets = json::array();
  auto target = [&](const std::string& name, const char* unit, double limit, const CaseStats* s, double scale,
                    bool at_least) {
    const double v = s ? s->median * scale : 0;
    targets.push_back(json{{"name", name}, {"unit", unit}, {"target", limit},
                           {"kind", at_least ? "at least" : "at most"}, {"measured", number_or_null(v, s != nullptr)},
                           {"met", s ? json(at_least ? v >= limit : v <= limit) : json()}});
  };
  std::vector<std::string> programs;
  for (const auto& c : cases)
    if ((c.kind == CaseKind::compile_cold || c.kind == CaseKind::compile_warm) &&
        std::find(programs.begin(), programs.end(), c.program) == programs.end())
      programs.push_back(c.program);
  for (const auto& program : programs) {
    const CaseStats* cold = stat("compile_cold/" + program);
    const CaseStats* warm = stat("compile_warm/" + program);
    if (!cold && !warm) continue;
    compile.push_back(json{{"program", program},
                           {"cold_s", number_or_null(cold ? cold->median : 0, cold)},
                           {"warm_s", number_or_null(warm ? warm->median : 0, warm)},
                           {"cold_min_s", number_or_null(cold ? cold->min : 0, cold)},
                           {"warm_min_s", number_or_null(warm ? warm->min : 0, warm)}});
    if (cold) target("compile_cold/" + program, "s", target_cold_compile_s, cold, 1, false);
    if (warm) target("compile_warm/" + program, "s", target_warm_load_s, warm, 1, false);
  }
  report["compile"] = compile;

  json overhead = json::array();
  for (const auto& c : cases) {
    const CaseStats* s = stat(c.name);
    if (c.kind != CaseKind::call_overhead || !s) continue;
    overhead.push_back(json{{"program", c.program}, {"mode", c.mode}, {"median_us", s->median * 1e6},
                            {"min_us", s->min * 1e6}, {"rejected_repetitions", s->rejected}});
    target(c.name, "us", target_call_overhead_us, s, 1e6, false);
  }
  report["call_overhead"] = overhead;

  // Speed against the hand-written code, for the modes that keep memory between calls a model
  // would use (pool, external). CPU (issue 11): vadv >= 0.9, hdiff >= 1.0, the rest >= 0.95.
  // GPU (issue 10): >= 0.9 of hand-written CUDA, and bandwidth-bound kernels >= 0.8 of the device's
  // copy of their bytes.
  for (const auto& r : results) {
    if (r.at("variant") != "fieldflow") continue;
    const std::string mode = r.at("mode");
    if (mode != "pool" && mode != "external") continue;
    const std::string program = r.at("program"), device = r.at("device");
    const std::string where = fmt::format("{}/{}/{}/{}", program_label(program, device),
                                          r.at("layout").get<std::string>(), r.at("size").get<std::string>(), mode);
    if (device != "cpu" && cuda_bandwidth_bound(program) && r.at("vs_copy").is_number()) {
      const double v = r.at("vs_copy");
      targets.push_back(json{{"name", "vs_copy/" + where}, {"unit", "ratio"}, {"target", target_cuda_vs_copy},
                             {"kind", "at least"}, {"measured", v}, {"met", v >= target_cuda_vs_copy}});
    }
    if (!r.at("vs_handwritten").is_number()) continue;
    const double limit = device != "cpu" ? target_cuda_vs_handwritten
                         : program == "vadv" ? 0.9 : program == "hdiff" ? 1.0 : 0.95;
    const double v = r.at("vs_handwritten");
    targets.push_back(json{{"name", "vs_handwritten/" + where},
                           {"unit", "ratio"}, {"target", limit}, {"kind", "at least"}, {"measured", v},
                           {"met", v >= limit}});
  }
  report["targets"] = targets;

  json errors = json::array();
  for (const auto& [name, message] : samples.errors) errors.push_back(json{{"case", name}, {"message", message}});
  report["errors"] = errors;
  return report;
}

std::string markdown_tables(const nlohmann::json& report) {
  using nlohmann::json;
  std::string s;
  const json& m = report.at("machine");
  s += fmt::format("Machine: {}, {} threads, DRAM copy {} GB/s (the faster of two probes).\n", m.at("cpu").get<std::string>(),
                   m.at("threads").get<int>(),
                   m.at("copy_gbps").is_number() ? fmt::format("{:.1f}", m.at("copy_gbps").get<double>()) : "–");
  if (report.contains("quiet")) {
    const json& q = report.at("quiet");
    const json& w = q.at("idle_wait");
    s += fmt::format("Quiet-run protocol: {}; {} of {} repetitions rejected (other processes above {:.2f} CPUs).\n",
                     w.contains("message") ? w.at("message").get<std::string>() : "no idle wait",
                     q.at("rejected_repetitions").get<std::size_t>(), q.at("repetitions").get<std::size_t>(),
                     q.at("max_others_cpu").get<double>());
  }
  if (report.contains("gpu")) {
    const json& g = report.at("gpu");
    s += fmt::format("GPU: {} ({}), HBM peak {} GB/s, device copy {} GB/s ({} of peak).\n",
                     g.value("name", std::string("?")), g.value("arch", std::string("?")),
                     g.value("hbm_peak_gbps", json()).is_number() ? fmt::format("{:.0f}", g.at("hbm_peak_gbps").get<double>()) : "–",
                     g.value("copy_gbps", json()).is_number() ? fmt::format("{:.0f}", g.at("copy_gbps").get<double>()) : "–",
                     fmt_ratio(g.value("copy_vs_peak", json())));
  }
  s += "\n";

  // One row per configuration: the yardstick copy, the hand-written time, each mode's time, the ratios.
  struct Row {
    std::string device, program, layout, size;
    std::map<std::string, json> by_mode;  // "none" = hand-written
  };
  std::vector<Row> rows;
  for (const auto& r : report.at("results")) {
    const std::string d = r.value("device", std::string("cpu")), p = r.at("program"), l = r.at("layout"),
                      z = r.at("size");
    auto it = std::find_if(rows.begin(), rows.end(), [&](const Row& x) {
      return x.device == d && x.program == p && x.layout == l && x.size == z;
    });
    if (it == rows.end()) {
      rows.push_back({d, p, l, z, {}});
      it = rows.end() - 1;
    }
    it->by_mode[r.at("mode").get<std::string>()] = r;
  }
  auto configuration = [&](const Row& row) {
    for (const auto& c : report.at("configurations"))
      if (c.value("device", std::string("cpu")) == row.device && c.at("program") == row.program &&
          c.at("layout") == row.layout && c.at("size") == row.size)
        return c;
    return json::object();
  };
  s += "| program | layout | size | same-bytes copy GB/s | hand-written ms | pool ms | persistent ms | external ms | "
       "scoped ms | vs_handwritten pool / external | paired vs_handwritten (lowest–highest) | "
       "vs_copy hand-written / pool | spread persistent/pool/external | rejected reps |\n";
  s += "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  auto field = [](const std::map<std::string, json>& by, const std::string& mode, const char* key) {
    auto it = by.find(mode);
    return it == by.end() ? json() : it->second.at(key);
  };
  bool any_collapsed = false;
  for (const auto& row : rows) {
    const json c = configuration(row);
    const bool collapsed = c.value("modes_collapsed", false);
    any_collapsed = any_collapsed || collapsed;
    auto mode_ms = [&](const char* mode) { return collapsed ? std::string("=") : fmt_ms(field(row.by_mode, mode, "median_s")); };
    std::size_t rejected = 0, reps = 0;
    for (const auto& [mode, r] : row.by_mode) {
      rejected += r.at("rejected_repetitions").get<std::size_t>();
      reps += r.at("repetitions").get<std::size_t>();
    }
    const json spread = c.value("spread_persistent_pool_external", json());
    const json paired = c.value("paired", json());
    const std::string paired_text =
        paired.is_object() ? fmt::format("{} ({}–{})", fmt_ratio(paired.at("vs_handwritten")),
                                          fmt_ratio(paired.at("vs_handwritten_min")),
                                          fmt_ratio(paired.at("vs_handwritten_max")))
                           : "–";
    s += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} / {} | {} | {} / {} | {} | {}/{} |\n",
                     program_label(row.program, row.device),
                     short_layout(row.layout), row.size,
                     c.value("copy_gbps", json()).is_number() ? fmt::format("{:.1f}", c.at("copy_gbps").get<double>()) : "–",
                     fmt_ms(field(row.by_mode, "none", "median_s")), fmt_ms(field(row.by_mode, "pool", "median_s")),
                     mode_ms("persistent"), mode_ms("external"), mode_ms("scoped"),
                     fmt_ratio(field(row.by_mode, "pool", "vs_handwritten")),
                     collapsed ? fmt_ratio(field(row.by_mode, "pool", "vs_handwritten"))
                               : fmt_ratio(field(row.by_mode, "external", "vs_handwritten")),
                     paired_text, fmt_ratio(field(row.by_mode, "none", "vs_copy")), fmt_ratio(field(row.by_mode, "pool", "vs_copy")),
                     collapsed ? std::string("no transients")
                               : spread.is_number() ? fmt::format("{:.0f}%", 100 * spread.get<double>()) : "–",
                     rejected, reps);
  }
  if (any_collapsed)
    s += "\n`=`: the program has no transients, so its module is the same in every mode; it ran once (pool) and "
         "that time stands for all four.\n";
  std::string forms;
  for (const auto& r : report.at("results"))
    if (r.contains("loop_form"))
      forms += fmt::format("{}{} {} {} {}: {}", forms.empty() ? "" : "; ", r.at("program").get<std::string>(),
                           short_layout(r.at("layout")), r.at("size").get<std::string>(), r.at("mode").get<std::string>(),
                           r.at("loop_form").get<std::string>());
  if (!forms.empty())
    s += "\nLoop forms the tuning kept (LoopForm::tuned, timed on each instance's first calls): " + forms + ".\n";

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
  if (report.contains("targets") && !report.at("targets").empty()) {
    s += "\n| target | wanted | measured | met |\n|---|---:|---:|---|\n";
    for (const auto& t : report.at("targets"))
      s += fmt::format("| {} | {} {:.3g} {} | {} | {} |\n", t.at("name").get<std::string>(),
                       t.at("kind") == "at least" ? "≥" : "≤", t.at("target").get<double>(), t.at("unit").get<std::string>(),
                       t.at("measured").is_number() ? fmt::format("{:.3g}", t.at("measured").get<double>()) : "–",
                       t.at("met").is_boolean() ? (t.at("met").get<bool>() ? "yes" : "**no**") : "–");
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
    json fieldflow_vs_hw, fieldflow_paired, fieldflow_vs_copy, handwritten_vs_copy;
  };
  std::vector<Group> groups;
  for (const auto& r : report.at("results")) {
    const std::string label = fmt::format("{} {} {}", program_label(r.at("program"), r.value("device", std::string("cpu"))),
                                          short_layout(r.at("layout")), r.at("size").get<std::string>());
    auto it = std::find_if(groups.begin(), groups.end(), [&](const Group& g) { return g.label == label; });
    if (it == groups.end()) {
      groups.push_back({label, {}, {}, {}, {}});
      it = groups.end() - 1;
    }
    if (r.at("variant") == "handwritten") it->handwritten_vs_copy = r.at("vs_copy");
    if (r.at("variant") == "fieldflow" && r.at("mode") == "pool") {
      it->fieldflow_vs_hw = r.at("vs_handwritten");
      it->fieldflow_paired = r.value("vs_handwritten_paired", json());
      it->fieldflow_vs_copy = r.at("vs_copy");
    }
  }
  double vmax = 1.2;
  for (const auto& g : groups)
    for (const json* v : {&g.fieldflow_vs_hw, &g.fieldflow_paired, &g.fieldflow_vs_copy, &g.handwritten_vs_copy})
      if (v->is_number()) vmax = std::max(vmax, v->get<double>());
  vmax = std::ceil(vmax * 5) / 5;

  const double left = 230, right = 30, top = 60, bar = 9, gap = 10, width = 900;
  constexpr int bars = 4;
  const double group_h = bars * bar + gap;
  const double plot_w = width - left - right;
  const double height = top + groups.size() * group_h + 50;
  auto xpos = [&](double v) { return left + plot_w * std::clamp(v, 0.0, vmax) / vmax; };
  const char* colors[bars] = {"#1f77b4", "#17becf", "#ff7f0e", "#9e9e9e"};
  const char* names[bars] = {"fieldflow (pool) vs hand-written", "the same, paired", "fieldflow (pool) vs copy",
                             "hand-written vs copy"};

  const json& m = report.at("machine");
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"Helvetica,Arial,sans-serif\" "
      "font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      width, height);
  s += fmt::format("<text x=\"{}\" y=\"18\" font-size=\"14\">fieldflow bench: speed relative to hand-written code "
                   "and to a copy ({} threads, copy {} GB/s; medians)</text>\n",
                   10, m.at("threads").get<int>(),
                   m.at("copy_gbps").is_number() ? fmt::format("{:.1f}", m.at("copy_gbps").get<double>()) : "–");
  // The legend in one row from the left edge, each entry as wide as its name (about 6.2 px per
  // character at 11 px).
  double legend_x = 10;
  for (int i = 0; i < bars; ++i) {
    s += fmt::format("<rect x=\"{}\" y=\"30\" width=\"12\" height=\"10\" fill=\"{}\"/><text x=\"{}\" y=\"39\">{}</text>\n",
                     legend_x, colors[i], legend_x + 16, names[i]);
    legend_x += 16 + 6.2 * std::string_view(names[i]).size() + 14;
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
    s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", left - 6, y + 0.5 * bars * bar + 4,
                     g.label);
    const json* vals[bars] = {&g.fieldflow_vs_hw, &g.fieldflow_paired, &g.fieldflow_vs_copy, &g.handwritten_vs_copy};
    for (int i = 0; i < bars; ++i) {
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
