#include "driver/cpu_build.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <string_view>

#include "codegen/cpu/generate_cpu.h"
#include "driver/build_identity.h"
#include "fieldflow/abi.h"
#include "fieldflow/errors.h"
#include "ir/structural_key.h"
#include "passes/pipeline.h"

namespace fieldflow::driver {

namespace {
// A program may mention any number of dimensions, but one buffer or kernel loop of generated
// code has at most FF_MAX_DIMS (fixed-size arrays of the C ABI).
void check_buffer_dims(const ir::Schedule& s) {
  auto check = [&](const std::vector<Dimension>& dims, const std::string& what) {
    if (dims.size() <= FF_MAX_DIMS) return;
    std::string names;
    for (const auto& d : dims) names += (names.empty() ? "" : ", ") + d.name;
    throw DimensionError(fmt::format("program '{}': {} has {} dimensions [{}]; compiled code supports at most {} per "
                                     "field, transient or loop (the reference executor has no limit)",
                                     s.program.name, what, dims.size(), names, FF_MAX_DIMS));
  };
  for (const auto& prm : s.program.params)
    if (prm.kind == ir::ParamKind::field) check(prm.type.dims, fmt::format("field '{}'", prm.name));
  for (const auto& t : s.transients) check(t.dims, fmt::format("transient '{}'", t.name));
  for (const auto& k : s.kernels) check(ir::kernel_loop_dims(s, k), fmt::format("kernel '{}'", k.name));
}
}  // namespace

bool is_cuda_arch(const std::string& arch) {
  // sm_ and two digits at least (sm_90, sm_100), then at most one of NVRTC's suffixes.
  std::size_t digits = 0;
  while (3 + digits < arch.size() && std::isdigit(static_cast<unsigned char>(arch[3 + digits]))) ++digits;
  const std::string_view rest = std::string_view(arch).substr(std::min(arch.size(), 3 + digits));
  return arch.rfind("sm_", 0) == 0 && digits >= 2 && (rest.empty() || rest == "a" || rest == "f");
}

std::string check_options(const ir::Program& program, const CompileOptions& options) {
  (void)options.memory.resolved_mode();
  if (static_cast<unsigned>(options.backend) > static_cast<unsigned>(Backend::cuda))
    throw OptionError(fmt::format("program '{}': backend {} is not a backend: expected reference (0), cpu (1) or cuda (2)",
                                  program.name, static_cast<unsigned>(options.backend)));
  if (static_cast<unsigned>(layout_of(options)) > static_cast<unsigned>(Layout::any))
    throw OptionError(fmt::format("program '{}': layout {} is not a layout: expected vertical_fastest (0), "
                                  "horizontal_fastest (1) or any (2)", program.name, static_cast<unsigned>(layout_of(options))));
  if (options.num_threads < 0)
    throw OptionError(fmt::format("program '{}': num_threads must be >= 0 (0: OpenMP default), given {}",
                                  program.name, options.num_threads));
  if (options.parallel_threshold < 0)
    throw OptionError(fmt::format("program '{}': parallel_threshold must be >= 0 points (0: always parallel), given {}",
                                  program.name, options.parallel_threshold));
  check_loop_form(program.name, options.loop_form);
  // NVRTC's machine code for one architecture (a cubin): compute_XY (PTX) and misspellings would
  // otherwise fail later, on a GPU machine only, with NVRTC's or the driver's words.
  if (const std::string& a = options.cuda_arch; !a.empty() && !is_cuda_arch(a))
    throw OptionError(fmt::format("program '{}': cuda_arch '{}' is not a GPU architecture: expected sm_<major><minor> "
                                  "such as sm_90 (H100/H200), optionally with the suffix a or f, or empty for the "
                                  "device's own", program.name, a));
  ir::verify(program);
  std::string static_key;
  for (const auto& [name, value] : options.static_scalars) {
    const ir::Param* prm = program.find(name);
    if (!prm || prm->kind != ir::ParamKind::scalar)
      throw OptionError(fmt::format("program '{}': static_scalars names '{}', which is not a scalar parameter of the "
                                    "program", program.name, name));
    const DType want = prm->type.dtype, given = value.dtype();
    const bool ok = want == given || (is_integral(want) && is_integral(given)) || (is_floating(want) && is_floating(given));
    if (!ok)
      throw OptionError(fmt::format("program '{}': static scalar '{}' is a {} parameter, given a {} value", program.name,
                                    name, to_string(want), to_string(given)));
    static_key += fmt::format("{}={};", name, value.cast(want).to_string());
  }
  return static_key;
}

ir::Schedule lower_for(const ir::Program& program, const CompileOptions& options, Device target) {
  passes::PipelineOptions po;
  po.layout = layout_of(options);
  po.target = target;
  po.static_scalars = options.static_scalars;
  ir::Schedule s = passes::lower(program, po);
  check_buffer_dims(s);
  return s;
}

std::string generate_cpu_source(const ir::Schedule& schedule, const std::string& symbol_prefix) {
  codegen::CpuCodegenOptions co;
  co.symbol_prefix = symbol_prefix;
  return codegen::generate_cpu_source(schedule, co);
}

CpuBuild build_cpu_source(const ir::Program& program, const CompileOptions& options, const std::string& symbol_prefix) {
  CpuBuild out;
  out.schedule = lower_for(program, options, Device::cpu);
  out.source = generate_cpu_source(out.schedule, symbol_prefix);
  return out;
}

std::string cpu_source_key(const ir::Program& program, const CompileOptions& options, const std::string& symbol_prefix) {
  const std::string& build = build_identity();
  if (build.empty()) return "";
  // Static scalars by bits (their text form would merge NaN payloads); lower_for reads nothing
  // else of the options but the layout.
  std::string statics;
  for (const auto& [name, value] : options.static_scalars) {
    const bool floating = is_floating(value.dtype());
    statics += fmt::format("{}:{}:{}{:016x};", name.size(), name, static_cast<int>(value.dtype()),
                           floating ? std::bit_cast<std::uint64_t>(value.as_double())
                                    : static_cast<std::uint64_t>(value.as_int()));
  }
  return fmt::format("cpu|build {}|layout {}|prefix {}:{}|static {}|program ", build,
                     static_cast<int>(layout_of(options)), symbol_prefix.size(), symbol_prefix, statics) +
         ir::structural_key(program);
}

}  // namespace fieldflow::driver
