// The compile driver: the one place that knows every stage. Program -> passes -> codegen ->
// toolchain (cache) -> runtime.
#include <fmt/format.h>

#include "codegen/cpu/generate_cpu.h"
#include "fieldflow/compile.h"
#include "fieldflow/errors.h"
#include "passes/fold_static_scalars.h"
#include "passes/pipeline.h"
#include "runtime/compiled_program.h"
#include "toolchain/compiler.h"
#include "toolchain/module_cache.h"

namespace fieldflow {

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

CompiledProgram compile(const ir::Program& program, const CompileOptions& options) {
  // Options are checked now, never at the first call.
  (void)options.memory.resolved_mode();
  if (static_cast<unsigned>(options.backend) > static_cast<unsigned>(Backend::cpu))
    throw OptionError(fmt::format("program '{}': backend {} is not a backend: expected reference (0) or cpu (1)",
                                  program.name, static_cast<unsigned>(options.backend)));
  if (static_cast<unsigned>(options.layout) > static_cast<unsigned>(Layout::any))
    throw OptionError(fmt::format("program '{}': layout {} is not a layout: expected vertical_fastest (0), "
                                  "horizontal_fastest (1) or any (2)", program.name, static_cast<unsigned>(options.layout)));
  if (options.num_threads < 0)
    throw OptionError(fmt::format("program '{}': num_threads must be >= 0 (0: OpenMP default), given {}",
                                  program.name, options.num_threads));
  if (options.parallel_threshold < 0)
    throw OptionError(fmt::format("program '{}': parallel_threshold must be >= 0 points (0: always parallel), given {}",
                                  program.name, options.parallel_threshold));
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
  CompiledProgram::Impl::Image image;
  image.program = program;
  image.options = options;
  if (options.backend == Backend::reference && !options.static_scalars.empty()) {
    // The reference backend interprets the program itself: it gets the static values folded in
    // too, so both backends drop the same dead branches.
    ir::Schedule folded;
    folded.program = program;
    passes::fold_static_scalars(folded, options.static_scalars);
    image.program = folded.program;
  }
  if (options.backend == Backend::cpu) {
    passes::PipelineOptions po;
    po.layout = options.layout;
    po.target = Device::cpu;
    po.static_scalars = options.static_scalars;
    image.schedule = passes::lower(program, po);
    check_buffer_dims(image.schedule);
    image.source = codegen::generate_cpu_source(image.schedule);
    toolchain::ModuleCache cache(options.cache_dir.empty() ? std::filesystem::path{} : std::filesystem::path(options.cache_dir));
    // Loaded by the cache (under the entry's lock when needed): a concurrent `fieldflow cache clear` cannot make it fail.
    auto loaded = cache.get_or_load(program.name, image.source, toolchain::default_compiler_config(true),
                                    fmt::format("{}abi{}static:{}", passes::pipeline_description(), FF_ABI_VERSION, static_key));
    const toolchain::CacheEntry& entry = loaded.entry;
    image.module.emplace(std::move(loaded.module));
    auto version = reinterpret_cast<std::int32_t (*)()>(image.module->symbol("ff_abi_version"));
    if (version() != FF_ABI_VERSION)
      throw CompileError(fmt::format("program '{}': module {} has ABI version {}, expected {}", program.name,
                                     entry.path.string(), version(), FF_ABI_VERSION));
    image.compile_seconds = entry.was_hit ? 0 : entry.compile_seconds;
    image.cache_hit = entry.was_hit;
  }
  return CompiledProgram(std::make_unique<CompiledProgram::Impl>(std::move(image)));
}

}  // namespace fieldflow
