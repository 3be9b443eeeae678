#pragma once
// The build-time half of ahead-of-time libraries: for each selected program of a registry, lower
// it, generate its source with symbols of its own, and write one C++ source (generated code plus
// the program's descriptor) and one C header (the descriptor's accessor, the parameters documented).
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "fieldflow/aot.h"

namespace fieldflow::aot {

struct LibraryOptions {
  std::filesystem::path out_dir;  // created if missing
  std::string library;            // a C identifier: part of every exported name
  Layout layout = Layout::vertical_fastest;
  // cuda: the programs' kernels are compiled by NVRTC at generation time (no device needed) for
  // `cuda_arch`, and their image is embedded in the generated source.
  Backend backend = Backend::cpu;
  std::string cuda_arch = "sm_90";
  std::string cache_dir;  // cuda: NVRTC's module cache (empty: FIELDFLOW_CACHE_DIR, else the default)
  // Folded into every selected program that has a scalar parameter of this name (`fieldflow aot
  // --static`), on top of the registry entry's own; naming a scalar no selected program has is an
  // ArgumentError.
  std::map<std::string, Scalar> static_scalars;
  std::vector<std::string> programs;  // registered names, at least one
  // The C++ name of the registry's function, which each descriptor points to so load_aot can rebuild
  // its program; declared in the generated source unless a fieldflow header declares it already.
  std::string registration;
  bool declare_registration = true;
};

struct GeneratedProgram {
  std::string name;
  std::filesystem::path source, header;
};

// Writes <out_dir>/fieldflow_aot_<library>_<program>.cpp and .h for every selected program.
// Throws ArgumentError (bad names, unknown program) or the first error lowering a program raises.
std::vector<GeneratedProgram> generate_library(const AotPrograms& programs, const LibraryOptions& options);

// Names shared by the generator and load_aot.
std::string descriptor_function(const std::string& library, const std::string& program);  // fieldflow_aot_<l>_<p>
std::string symbol_prefix(const std::string& library, const std::string& program);        // ff_aot_<l>_<p>_
// ArgumentError unless `name` is a C identifier ([A-Za-z_][A-Za-z0-9_]*); `what` names it.
void check_identifier(const std::string& what, const std::string& name);

}  // namespace fieldflow::aot
