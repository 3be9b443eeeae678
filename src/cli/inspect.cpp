// `fieldflow inspect PROGRAM`: the IR, the schedule (after any pass) and the generated source of
// a built-in program, and optionally its schedule as a Graphviz DOT graph.
#include <fmt/format.h>
#include <fstream>

#include "cli/commands.h"
#include "codegen/cpu/generate_cpu.h"
#include "codegen/cuda/generate_cuda.h"
#include "driver/cuda_build.h"
#include "fieldflow/compile.h"
#include "fieldflow/errors.h"
#include "fieldflow/examples.h"
#include "passes/pipeline.h"

namespace fieldflow::cli {

namespace {

std::string dot_graph(const ir::Schedule& s) {
  std::string g = fmt::format("digraph \"{}\" {{\n  rankdir=LR;\n  node [fontname=\"Helvetica\"];\n", s.program.name);
  for (const auto& p : s.program.params)
    if (p.kind == ir::ParamKind::field)
      g += fmt::format("  \"{0}\" [shape=note, label=\"{0}\\n{1}\"];\n", p.name, p.type.to_string());
  for (const auto& t : s.transients)
    g += fmt::format("  \"{0}\" [shape=ellipse, style=filled, fillcolor=lightyellow, label=\"{0}\\ntransient, live "
                     "[{1},{2}]\"];\n", t.name, t.first_kernel, t.last_kernel);
  for (std::size_t k = 0; k < s.kernels.size(); ++k) {
    const auto& kern = s.kernels[k];
    g += fmt::format("  k{0} [shape=box, style=filled, fillcolor=lightblue, label=\"kernel {0}\\n{1} ({2})\"];\n", k,
                     kern.name, kern.kind == ir::KernelKind::scan ? "scan" : "pointwise");
    std::vector<std::string> seen;
    for (const auto& a : kern.accesses) {
      if (std::find(seen.begin(), seen.end(), a.buffer) != seen.end()) continue;
      seen.push_back(a.buffer);
      g += fmt::format("  \"{}\" -> k{};\n", a.buffer, k);
    }
    for (const auto& o : kern.outputs) g += fmt::format("  k{} -> \"{}\";\n", k, o);
  }
  return g + "}\n";
}

// The CUDA kernels and, per launch, the grid the runtime gives it (the source alone does not say
// which dimension runs along x, which along y and which are flattened along z) and, where
// fieldflow has the CUDA toolkit, what ptxas gives the kernel for `arch`.
std::string cuda_listing(const ir::Schedule& s, const std::string& arch) {
  const codegen::CudaSource cuda = codegen::generate_cuda_source(s);
  std::vector<driver::LaunchResources> resources;
  if (driver::cuda_built()) resources = driver::cuda_kernel_resources(s.program.name, cuda, arch);
  std::string out;
  for (std::size_t i = 0; i < cuda.launches.size(); ++i) {
    const codegen::CudaLaunch& l = cuda.launches[i];
    std::string zs;
    for (int a : l.z_axes) zs += fmt::format("{}{}", zs.empty() ? "" : ", ", a);
    out += fmt::format("// launch {}: kernel {}, {} threads per block, x = loop dimension {}, y = {}{}, z = [{}]{}, "
                       "{} parameter words\n",
                       l.symbol, l.kernel, l.block_x, l.x_axis, l.y_axis,
                       l.rows_per_thread > 1 ? fmt::format(" ({} per thread)", l.rows_per_thread) : "", zs,
                       l.raises_errors ? ", checks reads" : "", l.params.size());
    if (resources.empty()) continue;
    for (const auto& [bits, r] : {std::pair{32, resources[i].narrow}, std::pair{64, resources[i].wide}})
      out += fmt::format("//   {}, {}-bit indexing: {} registers, {} bytes stack, {} bytes spill stores, {} bytes spill "
                         "loads\n", arch, bits, r.registers, r.stack_bytes, r.spill_store_bytes, r.spill_load_bytes);
  }
  if (!driver::cuda_built()) out += "// (registers and spills: this fieldflow was built without the CUDA toolkit)\n";
  return out + cuda.source;
}

void run_inspect(const std::string& name, const std::string& after, const std::string& dot, const std::string& layout,
                 const std::string& backend, const std::string& arch) {
  const auto& ex = examples::example(name);
  const Backend b = parse_backend(backend);
  if (b == Backend::reference)
    throw ArgumentError("inspect --backend: the reference executor generates no source; expected cpu or cuda");
  fmt::print("== IR ==\n{}\n", ir::print(ex.program));
  passes::PipelineOptions po;
  // The layout each backend takes by default (horizontal unit stride on the GPU) unless given.
  po.layout = layout.empty() ? default_layout(b) : parse_layout(layout);
  po.target = b == Backend::cuda ? Device::cuda : Device::cpu;
  bool found = after.empty();
  po.after_pass = [&](const std::string& pass, const ir::Schedule& s, bool changed, double seconds) {
    if (pass != after) return;
    found = true;
    fmt::print("== schedule after {} ({}, {:.2f} ms) ==\n{}\n", pass, changed ? "changed" : "unchanged", seconds * 1e3,
               s.print());
  };
  const ir::Schedule s = passes::lower(ex.program, po);
  if (!found)
    throw ArgumentError(fmt::format("--after: no pass named '{}'; the pipeline is {}", after, passes::pipeline_description()));
  if (after.empty()) fmt::print("== schedule ==\n{}\n", s.print());
  fmt::print("== generated source ({}, {}) ==\n{}", backend, to_string(po.layout),
             b == Backend::cuda ? cuda_listing(s, arch) : codegen::generate_cpu_source(s));
  if (!dot.empty()) {
    std::ofstream(dot) << dot_graph(s);
    fmt::print("\nwrote {}\n", dot);
  }
}

}  // namespace

void add_inspect(CLI::App& app) {
  auto* cmd = app.add_subcommand("inspect", "Print a built-in program's IR, schedule and generated source");
  auto name = std::make_shared<std::string>();
  auto after = std::make_shared<std::string>();
  auto dot = std::make_shared<std::string>();
  auto layout = std::make_shared<std::string>();
  auto backend = std::make_shared<std::string>("cpu");
  auto arch = std::make_shared<std::string>(toolchain::default_cuda_arch);
  cmd->add_option("program", *name, "Built-in program name (see `fieldflow demo`)")->required();
  cmd->add_option("--after", *after, "Print the schedule after this pass (e.g. select_transients)");
  cmd->add_option("--dot", *dot, "Write the schedule as a Graphviz DOT graph to this file");
  cmd->add_option("--layout", *layout,
                  "vertical_fastest or horizontal_fastest (default: the backend's, horizontal_fastest on cuda)");
  cmd->add_option("--backend", *backend, "cpu (C++ with OpenMP) or cuda (CUDA C++; no device or toolkit needed)");
  cmd->add_option("--arch", *arch, "cuda: the architecture of the kernels' register and spill report (default sm_90)");
  cmd->callback([=] { run_inspect(*name, *after, *dot, *layout, *backend, *arch); });
}

}  // namespace fieldflow::cli
