// The run-time half of ahead-of-time libraries: a descriptor linked into the host becomes a
// CompiledProgram. The program is rebuilt with the library's own registration function and lowered
// again (the runtime needs its schedule, and this needs no compiler); regenerating its source and
// comparing fingerprints proves the linked code is what this fieldflow would generate.
#include <fmt/format.h>

#include <cstdlib>
#include <string_view>

#include "aot/fingerprint.h"
#include "aot/generate_library.h"
#include "codegen/cpu/generate_cpu.h"
#include "driver/cpu_build.h"
#include "driver/cuda_build.h"
#include "fieldflow/aot.h"
#include "fieldflow/aot_module.h"
#include "fieldflow/errors.h"
#include "runtime/compiled_program.h"

namespace fieldflow {

namespace {

const ff_aot_program& checked(const ff_aot_program* d) {
  if (d == nullptr)
    throw ArgumentError("AOT program: the descriptor is null; expected the pointer returned by a library's "
                        "fieldflow_aot_<library>_<program>()");
  if (d->magic != FF_AOT_MAGIC)
    throw CompileError(fmt::format("AOT program: {} is not a fieldflow AOT descriptor (magic {:#x}, expected {:#x})",
                                   static_cast<const void*>(d), d->magic, FF_AOT_MAGIC));
  if (d->descriptor_version < 1 || d->descriptor_version > FF_AOT_DESCRIPTOR_VERSION)
    throw CompileError(fmt::format("AOT program: the descriptor has format version {}, this fieldflow reads versions 1 "
                                   "to {}; regenerate the library with this fieldflow", d->descriptor_version,
                                   FF_AOT_DESCRIPTOR_VERSION));
  aot::check_identifier("library", d->library);
  aot::check_identifier("program", d->name);
  return *d;
}

// Version 1 descriptors end before the backend: they are cpu programs.
Backend backend_of(const ff_aot_program& d) {
  return d.descriptor_version >= 2 ? parse_backend(d.backend) : Backend::cpu;
}

std::string what(const ff_aot_program& d) { return fmt::format("AOT program '{}' of library '{}'", d.name, d.library); }

ir::Program rebuild(const ff_aot_program& d) {
  AotPrograms programs;
  d.programs(programs);
  return programs.find(d.name).build();
}

// The descriptor's canonical "name=value;" text back as scalars of the parameters' dtypes.
std::map<std::string, Scalar> parse_static_scalars(const ff_aot_program& d, const ir::Program& program) {
  std::map<std::string, Scalar> out;
  std::string_view text = d.static_scalars;
  while (!text.empty()) {
    const auto end = text.find(';'), eq = text.find('=');
    if (end == std::string_view::npos || eq > end)
      throw CompileError(fmt::format("{}: malformed static scalars '{}' in the descriptor", what(d), d.static_scalars));
    const std::string name(text.substr(0, eq));
    std::string value(text.substr(eq + 1, end - eq - 1));
    text.remove_prefix(end + 1);
    const ir::Param* prm = program.find(name);
    if (!prm || prm->kind != ir::ParamKind::scalar)
      throw CompileError(fmt::format("{}: the descriptor's static scalar '{}' is not a scalar parameter of the program "
                                     "its library rebuilds", what(d), name));
    const DType t = prm->type.dtype;
    if (t == DType::boolean) out[name] = Scalar(value == "true");
    else if (is_integral(t)) out[name] = Scalar(static_cast<std::int64_t>(std::strtoll(value.c_str(), nullptr, 10))).cast(t);
    else {
      if (!value.empty() && value.back() == 'f') value.pop_back();  // float32's suffix
      out[name] = Scalar(std::strtod(value.c_str(), nullptr)).cast(t);
    }
  }
  return out;
}

std::string statics_text(const std::string& key) { return key.empty() ? std::string("none") : "'" + key + "'"; }

}  // namespace

AotProgramInfo aot_program_info(const ff_aot_program* program) {
  const ff_aot_program& d = checked(program);
  AotProgramInfo info;
  info.library = d.library;
  info.name = d.name;
  info.layout = parse_layout(d.layout);
  info.static_scalars = parse_static_scalars(d, rebuild(d));
  info.abi_version = d.module_abi_version();
  info.hash = d.hash;
  info.backend = backend_of(d);
  if (info.backend == Backend::cuda) info.cuda_arch = d.cuda_arch;
  return info;
}

CompiledProgram load_aot(const ff_aot_program* program, const CompileOptions& given) {
  const ff_aot_program& d = checked(program);
  const std::int32_t compiled_abi = d.module_abi_version();
  if (d.abi_version != FF_ABI_VERSION || compiled_abi != FF_ABI_VERSION)
    throw CompileError(fmt::format("{}: generated for ABI version {} and compiled against ABI version {}, this fieldflow "
                                   "has ABI version {}; regenerate the library with this fieldflow", what(d),
                                   d.abi_version, compiled_abi, FF_ABI_VERSION));
  const Backend backend = backend_of(d);
  if (given.backend != backend)
    throw OptionError(fmt::format("{}: options.backend must be {} (the library holds compiled {} code), given {}",
                                  what(d), to_string(backend), to_string(backend), to_string(given.backend)));
  const Layout layout = parse_layout(d.layout);
  if (given.layout && *given.layout != layout)
    throw OptionError(fmt::format("{}: the library was generated for layout {}, options.layout is {}", what(d),
                                  to_string(layout), to_string(*given.layout)));
  CompileOptions options = given;  // without a layout: the library's
  options.layout = layout;
  const ir::Program rebuilt = rebuild(d);
  // The same checks as compile(): memory options, threads, and static scalars naming parameters.
  const std::string static_key = driver::check_options(rebuilt, options);
  if (static_key != d.static_scalars)
    throw OptionError(fmt::format("{}: the library was generated with static scalars {}, options.static_scalars are {}",
                                  what(d), statics_text(d.static_scalars), statics_text(static_key)));
  const std::string prefix = aot::symbol_prefix(d.library, d.name);
  const auto check_fingerprint = [&](const std::string& hash) {
    if (hash != d.hash)
      throw CompileError(fmt::format("{}: the library was generated by another fieldflow or from another definition of "
                                     "the program (fingerprint {}), this fieldflow generates fingerprint {} from it; "
                                     "regenerate the library", what(d), d.hash, hash));
  };
  if (backend == Backend::cuda) {
    driver::CudaBuild build = driver::build_cuda_source(rebuilt, options, prefix);
    check_fingerprint(aot::fingerprint(build, d.cuda_arch));
    if (d.cubin == nullptr || d.cubin_bytes == 0)
      throw CompileError(fmt::format("{}: the descriptor of a cuda program has no CUDA image", what(d)));
    std::string cubin(reinterpret_cast<const char*>(d.cubin), static_cast<std::size_t>(d.cubin_bytes));
    return driver::cuda_program(rebuilt, options, std::move(build), std::move(cubin), 0, false);
  }
  driver::CpuBuild build = driver::build_cpu_source(rebuilt, options, prefix);
  check_fingerprint(aot::fingerprint(build));
  CompiledProgram::Impl::Image image;
  image.program = rebuilt;
  image.options = options;
  image.schedule = std::move(build.schedule);
  image.source = std::move(build.source);
  image.loop_forms = codegen::has_loop_forms(image.source);
  image.entry = d.run;
  return CompiledProgram(std::make_unique<CompiledProgram::Impl>(std::move(image)));
}

}  // namespace fieldflow
