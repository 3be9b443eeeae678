#pragma once
// What the JIT (compile) and ahead-of-time libraries (the build-time generator and load_aot) share,
// so that all three check options alike and lower and generate a program to the same schedule and
// the same source text: an AOT library is only trusted when load_aot regenerates exactly the source
// it was built from.
#include <string>

#include "fieldflow/compile.h"
#include "ir/schedule.h"

namespace fieldflow::driver {

// Checks `options` against `program` as compile() documents it (memory mode, backend, layout,
// threads, parallel threshold, static scalars naming scalar parameters of a matching kind).
// Returns the static scalars as canonical text, "name=value;" per scalar in name order, each value
// cast to its parameter's dtype: equal texts mean equal folded programs.
std::string check_options(const ir::Program& program, const CompileOptions& options);
// Whether `arch` names one GPU architecture NVRTC makes machine code for: sm_90, sm_90a, sm_100f.
bool is_cuda_arch(const std::string& arch);

// The layout options compile for: theirs, else the backend's default.
inline Layout layout_of(const CompileOptions& options) {
  return options.layout.value_or(default_layout(options.backend));
}

// Lowers `program` for a target device with the options' layout and static scalars, and checks
// that every buffer and loop fits the C ABI. Throws DimensionError otherwise.
ir::Schedule lower_for(const ir::Program& program, const CompileOptions& options, Device target);

struct CpuBuild {
  ir::Schedule schedule;
  std::string source;
};

// Lowers `program` for the CPU with the options' layout and static scalars and generates its source;
// the exported functions are `<symbol_prefix>run` and `<symbol_prefix>abi_version`. Throws
// DimensionError when a buffer or loop has more dimensions than generated code supports.
CpuBuild build_cpu_source(const ir::Program& program, const CompileOptions& options,
                          const std::string& symbol_prefix = "ff_");

// The second half of build_cpu_source: the source of a schedule lower_for(program, options,
// Device::cpu) returned.
std::string generate_cpu_source(const ir::Schedule& schedule, const std::string& symbol_prefix = "ff_");

// Everything the source build_cpu_source returns is a function of: this fieldflow build
// (build_identity), the program exactly (ir::structural_key), the layout, the static scalars bit for
// bit, and the symbol prefix. Equal keys mean equal sources, so a cache may hand back the source it
// stored under the key instead of generating it again. "" when this build has no identity.
std::string cpu_source_key(const ir::Program& program, const CompileOptions& options,
                           const std::string& symbol_prefix = "ff_");

}  // namespace fieldflow::driver
