// `fieldflow aot --out DIR --library NAME [--layout L] [--static NAME=VALUE...] PROGRAM...`: writes an
// ahead-of-time library's sources (one .cpp and one C header per program) for built-in examples.
// Compile them with fieldflow_aot_target_options() of the CMake package (the JIT's flags, OpenMP)
// and link fieldflow; fieldflow_add_library does all of this for programs of one's own.
#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>

#include "aot/generate_library.h"
#include "cli/commands.h"
#include "fieldflow/aot.h"
#include "fieldflow/errors.h"

namespace fieldflow::cli {

namespace {

// "name=value": true/false, an integer, else a floating-point number; the program's parameter
// decides the final dtype (an integer value is accepted for an integer parameter of any width).
std::pair<std::string, Scalar> parse_static(const std::string& text) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
    throw ArgumentError(fmt::format("--static '{}': expected NAME=VALUE, e.g. --static limit=0.5", text));
  const std::string name = text.substr(0, eq), value = text.substr(eq + 1);
  if (value == "true" || value == "false") return {name, Scalar(value == "true")};
  char* end = nullptr;
  errno = 0;
  const long long i = std::strtoll(value.c_str(), &end, 10);
  if (*end == '\0' && errno == 0) return {name, Scalar(static_cast<std::int64_t>(i))};
  const double d = std::strtod(value.c_str(), &end);
  if (*end == '\0') return {name, Scalar(d)};
  throw ArgumentError(fmt::format("--static {}: '{}' is not a number, true or false", name, value));
}

}  // namespace

void add_aot(CLI::App& app) {
  auto* cmd = app.add_subcommand("aot", "Write the sources of an ahead-of-time library of built-in programs");
  auto out = std::make_shared<std::string>();
  auto library = std::make_shared<std::string>();
  auto layout = std::make_shared<std::string>("vertical_fastest");
  auto statics = std::make_shared<std::vector<std::string>>();
  auto programs = std::make_shared<std::vector<std::string>>();
  cmd->add_option("--out", *out, "Directory for the generated .cpp and .h files")->required();
  cmd->add_option("--library", *library, "Library name (a C identifier, part of every exported name)")->required();
  cmd->add_option("--layout", *layout, "vertical_fastest, horizontal_fastest or any");
  auto backend = std::make_shared<std::string>("cpu");
  auto arch = std::make_shared<std::string>("sm_90");
  cmd->add_option("--backend", *backend, "cpu, or cuda: the kernels compiled by NVRTC now and embedded (no device needed)");
  cmd->add_option("--cuda-arch", *arch, "The architecture of a cuda library's kernels (default sm_90: H100/H200)");
  cmd->add_option("--static", *statics, "NAME=VALUE: a static scalar, folded into every program that has it");
  cmd->add_option("programs", *programs, "Built-in program names")->required();
  cmd->callback([=] {
    aot::LibraryOptions options;
    options.out_dir = *out;
    options.library = *library;
    options.layout = parse_layout(*layout);
    options.backend = parse_backend(*backend);
    options.cuda_arch = *arch;
    for (const auto& s : *statics) {
      auto [name, value] = parse_static(s);
      options.static_scalars[name] = value;
    }
    options.programs = *programs;
    options.registration = "::fieldflow::aot::builtin_examples";  // declared by fieldflow/aot_module.h
    options.declare_registration = false;
    AotPrograms registry;
    aot::builtin_examples(registry);
    for (const auto& g : aot::generate_library(registry, options))
      fmt::print("{}: wrote {} and {}\n", g.name, g.source.string(), g.header.string());
  });
}

}  // namespace fieldflow::cli
