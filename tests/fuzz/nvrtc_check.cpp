// The fuzzer's programs through NVRTC; see nvrtc_check.h.
#include "fuzz/nvrtc_check.h"

#include <fmt/format.h>

#include <sstream>

#include "driver/cuda_build.h"
#include "support/nvrtc_bodies.h"

namespace fieldflow::fuzz {

bool nvrtc_available() { return driver::cuda_built(); }

std::vector<std::string> cuda_bodies(const FuzzCase& c, const std::string& prefix) {
  std::vector<Layout> layouts = c.layouts;
  layouts.push_back(Layout::any);
  std::vector<std::string> bodies;
  for (Layout l : layouts) {
    CompileOptions o;
    o.layout = l;
    try {
      bodies.push_back(fmt::format("// program '{}', layout {}\n", c.program.name, to_string(l)) +
                       driver::build_cuda_source(c.program, o, fmt::format("{}{}_", prefix, static_cast<int>(l))).source.body);
    } catch (const Error&) {
      // refused by the lowering: the emulated paths compare that refusal with the reference
    }
  }
  return bodies;
}

namespace {

// NVRTC's log can hold hundreds of lines for one mistake repeated in every kernel: the first
// few errors say what it is.
std::string first_lines(const std::string& log, int n) {
  std::istringstream in(log);
  std::string line, out;
  for (int i = 0; i < n && std::getline(in, line); ++i) out += (i ? "\n  " : "") + line;
  return out;
}

}  // namespace

std::vector<std::optional<Failure>> check_cuda_compiles(const std::vector<const FuzzCase*>& cases, NvrtcStats& stats,
                                                        const CudaBodies& bodies) {
  std::vector<std::optional<Failure>> out(cases.size());
  if (!nvrtc_available() || cases.empty()) return out;
  std::vector<std::vector<std::string>> per_case;
  for (std::size_t i = 0; i < cases.size(); ++i) per_case.push_back(bodies(*cases[i], fmt::format("c{}_", i)));
  auto compile = [&](std::size_t first, std::size_t last) {
    std::vector<std::string> bodies;
    for (std::size_t i = first; i < last; ++i) bodies.insert(bodies.end(), per_case[i].begin(), per_case[i].end());
    return testing_support::compile_cuda_bodies(bodies, "sm_90", last - first == 1 ? cases[first]->program.name : "batch");
  };
  const auto all = compile(0, cases.size());
  if (all.error.empty()) {
    stats.programs += cases.size();
    stats.kernels += all.kernels.size();
    if (cases.size() > 1) ++stats.batches;
    return out;
  }
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto one = cases.size() == 1 ? all : compile(i, i + 1);
    if (one.error.empty()) {
      ++stats.programs;
      stats.kernels += one.kernels.size();
      continue;
    }
    Failure f;
    f.kind = nvrtc_failure_kind;
    f.path = Path::cuda_kernels;
    f.layout = cases[i]->layouts.front();
    f.detail = "the generated CUDA (layouts as the case runs them, and any) compiled for sm_90: " + first_lines(one.error, 12);
    out[i] = std::move(f);
  }
  return out;
}

}  // namespace fieldflow::fuzz
