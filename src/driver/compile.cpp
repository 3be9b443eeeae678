// The compile driver: the one place that knows every stage. Program -> passes -> codegen ->
// toolchain (cache) -> runtime. (Ahead-of-time libraries skip the toolchain: src/aot/.)
#include <fmt/format.h>

#include <optional>

#include "codegen/cpu/generate_cpu.h"
#include "driver/cpu_build.h"
#include "driver/cuda_build.h"
#include "fieldflow/compile.h"
#include "fieldflow/errors.h"
#include "passes/fold_static_scalars.h"
#include "passes/pipeline.h"
#include "runtime/compiled_program.h"
#include "toolchain/compiler.h"
#include "toolchain/module_cache.h"

namespace fieldflow {

CompiledProgram compile(const ir::Program& program, const CompileOptions& given) {
  // Every later stage sees a layout: the one asked for, else the backend's.
  CompileOptions options = given;
  if (!options.layout) options.layout = default_layout(options.backend);
  // Options are checked now, never at the first call.
  const std::string static_key = driver::check_options(program, options);
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
  if (options.backend == Backend::cuda) return driver::compile_cuda(program, options);
  if (options.backend == Backend::cpu) {
    image.schedule = driver::lower_for(program, options, Device::cpu);
    toolchain::ModuleCache cache(options.cache_dir.empty() ? std::filesystem::path{} : std::filesystem::path(options.cache_dir));
    const toolchain::CompilerConfig config = toolchain::default_compiler_config(true);
    const std::string extra_key = fmt::format("{}abi{}static:{}", passes::pipeline_description(), FF_ABI_VERSION, static_key);
    // Generating the source costs most of a warm load (codegen's text passes: ~10 M instructions
    // for fvm_nabla), so a program compiled before finds its source through the cache's index.
    const std::string source_key = driver::cpu_source_key(program, options);
    std::optional<std::string> recalled;
    if (!source_key.empty()) recalled = cache.recall_source(source_key, config, extra_key);
    image.source = recalled ? *std::move(recalled) : driver::generate_cpu_source(image.schedule);
    image.loop_forms = codegen::has_loop_forms(image.source);
    // Loaded by the cache (under the entry's lock when needed): a concurrent `fieldflow cache clear` cannot make it fail.
    auto loaded = cache.get_or_load(program.name, image.source, config, extra_key);
    const toolchain::CacheEntry& entry = loaded.entry;
    if (!recalled && !source_key.empty()) cache.remember_source(source_key, entry, config, extra_key);
    image.module.emplace(std::move(loaded.module));
    auto version = reinterpret_cast<std::int32_t (*)()>(image.module->symbol("ff_abi_version"));
    if (version() != FF_ABI_VERSION)
      throw CompileError(fmt::format("program '{}': module {} has ABI version {}, expected {}", program.name,
                                     entry.path.string(), version(), FF_ABI_VERSION));
    image.entry = reinterpret_cast<std::int32_t (*)(const ff_call*)>(image.module->symbol("ff_run"));
    image.compile_seconds = entry.was_hit ? 0 : entry.compile_seconds;
    image.cache_hit = entry.was_hit;
  }
  return CompiledProgram(std::make_unique<CompiledProgram::Impl>(std::move(image)));
}

}  // namespace fieldflow
