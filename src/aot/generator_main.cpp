// The main of a library's generator executable (fieldflow_add_library), shared by every library:
// the executable itself only adds the library's registration function.
#include <fmt/format.h>

#include <cstring>

#include "aot/generate_library.h"
#include "fieldflow/aot.h"
#include "fieldflow/errors.h"

namespace fieldflow::aot {

int generator_main(int argc, char** argv, void (*register_programs)(AotPrograms&)) {
  const char* self = argc > 0 ? argv[0] : "generator";
  try {
    LibraryOptions options;
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      auto value = [&]() -> std::string {
        if (i + 1 >= argc) throw ArgumentError(fmt::format("{} expects a value", arg));
        return argv[++i];
      };
      if (arg == "--out") options.out_dir = value();
      else if (arg == "--library") options.library = value();
      else if (arg == "--layout") options.layout = parse_layout(value());
      else if (arg == "--backend") options.backend = parse_backend(value());
      else if (arg == "--cuda-arch") options.cuda_arch = value();
      else if (arg.rfind("--", 0) == 0)
        throw ArgumentError(fmt::format("unknown option '{}'; expected --out DIR --library NAME [--layout L] [--backend "
                                        "cpu|cuda] [--cuda-arch sm_XY] PROGRAM...", arg));
      else options.programs.push_back(arg);
    }
    if (options.out_dir.empty() || options.library.empty())
      throw ArgumentError("--out DIR and --library NAME are required");
    if (!register_programs) throw ArgumentError("no registration function (FIELDFLOW_AOT_PROGRAMS) was given");
    check_identifier("library", options.library);
    options.registration = "fieldflow_aot_programs_" + options.library;
    AotPrograms programs;
    register_programs(programs);
    for (const auto& g : generate_library(programs, options)) fmt::print("{}: wrote {}\n", g.name, g.source.string());
    return 0;
  } catch (const Error& e) {
    fmt::print(stderr, "{}: {}\n", self, e.what());
    return 1;
  }
}

}  // namespace fieldflow::aot
