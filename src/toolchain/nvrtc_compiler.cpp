// NVRTC in-process compilation; see nvrtc_compiler.h.
#include "toolchain/nvrtc_compiler.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nvrtc.h>

#include "fieldflow/device_errors.h"
#include "toolchain/compiler.h"

namespace fieldflow::toolchain {

std::vector<std::string> nvrtc_options(const std::string& arch) {
  return {"--gpu-architecture=" + arch,
          "--std=c++17",
          "--fmad=false",
          "--prec-div=true",
          "--prec-sqrt=true",
          "-I" + jit_include_dir().string()};
}

std::string nvrtc_identity() {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return "NVRTC (unknown version)";
  return fmt::format("NVRTC {}.{}", major, minor);
}

std::vector<std::string> nvrtc_architectures() {
  int count = 0;
  if (nvrtcGetNumSupportedArchs(&count) != NVRTC_SUCCESS || count <= 0) return {};
  std::vector<int> numbers(static_cast<std::size_t>(count));
  if (nvrtcGetSupportedArchs(numbers.data()) != NVRTC_SUCCESS) return {};
  std::vector<std::string> out;
  for (int n : numbers) out.push_back(fmt::format("sm_{}", n));
  return out;
}

bool nvrtc_compiles_for(const std::string& arch) {
  const std::size_t digits = arch.find_first_not_of("0123456789", 3);
  const std::string real = arch.substr(0, digits);  // sm_90a -> sm_90
  const std::vector<std::string> known = nvrtc_architectures();
  return arch.rfind("sm_", 0) == 0 && std::find(known.begin(), known.end(), real) != known.end();
}

namespace {

// NVRTC programs are destroyed on every path out, including a throw.
struct Program {
  nvrtcProgram handle = nullptr;
  ~Program() {
    if (handle) nvrtcDestroyProgram(&handle);
  }
};

[[noreturn]] void fail(const std::string& program_name, const char* call, nvrtcResult r, const std::string& log = {}) {
  throw CompileError(fmt::format("program '{}': {} failed: {}{}{}", program_name, call, nvrtcGetErrorString(r),
                                 log.empty() ? "" : "\n", log.substr(0, 8 * 1024)));
}

struct Compiled {
  std::string cubin, log;
};

Compiled compile(const std::string& program_name, const std::string& source, const std::string& arch,
                 const std::vector<std::string>& extra_options) {
  if (arch.rfind("sm_", 0) != 0)
    throw OptionError(fmt::format("program '{}': CUDA architecture '{}' is not a real architecture: expected sm_<NN> "
                                  "(e.g. sm_90 for H100/H200)", program_name, arch));
  // NVRTC's own words for this are an invalid --gpu-architecture option, which reads like a
  // mistake of fieldflow's command line.
  if (!nvrtc_compiles_for(arch))
    throw OptionError(fmt::format("program '{}': {} does not compile for CUDA architecture '{}'; it compiles for {}",
                                  program_name, nvrtc_identity(), arch, fmt::join(nvrtc_architectures(), ", ")));
  Program p;
  const std::string file = program_name + ".cu";
  if (nvrtcResult r = nvrtcCreateProgram(&p.handle, source.c_str(), file.c_str(), 0, nullptr, nullptr); r != NVRTC_SUCCESS)
    fail(program_name, "nvrtcCreateProgram", r);
  std::vector<std::string> options = nvrtc_options(arch);
  options.insert(options.end(), extra_options.begin(), extra_options.end());
  std::vector<const char*> argv;
  for (const auto& o : options) argv.push_back(o.c_str());
  const nvrtcResult compiled = nvrtcCompileProgram(p.handle, static_cast<int>(argv.size()), argv.data());
  Compiled out;
  std::size_t log_size = 0;
  if (nvrtcGetProgramLogSize(p.handle, &log_size) == NVRTC_SUCCESS && log_size > 1) {
    out.log.resize(log_size);
    nvrtcGetProgramLog(p.handle, out.log.data());
    out.log.resize(log_size - 1);
  }
  if (compiled != NVRTC_SUCCESS) fail(program_name, "nvrtcCompileProgram", compiled, out.log);
  std::size_t size = 0;
  if (nvrtcResult r = nvrtcGetCUBINSize(p.handle, &size); r != NVRTC_SUCCESS) fail(program_name, "nvrtcGetCUBINSize", r);
  out.cubin.assign(size, '\0');
  if (nvrtcResult r = nvrtcGetCUBIN(p.handle, out.cubin.data()); r != NVRTC_SUCCESS) fail(program_name, "nvrtcGetCUBIN", r);
  return out;
}

}  // namespace

// ptxas -v reports each kernel as
//   ptxas info    : Compiling entry function 'NAME' for 'sm_90'
//   ptxas info    : Function properties for NAME
//   ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
//   ptxas info    : Used 14 registers, used 0 barriers
// (non-kernel functions that were not inlined get "Function properties" lines too; they are
// attributed to the entry being compiled, whose frame they use).
std::vector<KernelResources> parse_ptxas_report(const std::string& program_name, const std::string& log) {
  std::vector<KernelResources> out;
  std::vector<std::pair<bool, bool>> seen;  // per kernel: local memory read, registers read
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    const auto entry = line.find("Compiling entry function '");
    if (entry != std::string::npos) {
      const auto from = entry + std::strlen("Compiling entry function '");
      out.push_back({line.substr(from, line.find('\'', from) - from)});
      seen.emplace_back(false, false);
      continue;
    }
    if (out.empty()) continue;
    long long stack = 0, stores = 0, loads = 0;
    int registers = 0;
    const auto number = line.find_first_of("0123456789");
    if (number != std::string::npos &&
        std::sscanf(line.c_str() + number, "%lld bytes stack frame, %lld bytes spill stores, %lld bytes spill loads", &stack,
                    &stores, &loads) == 3) {
      out.back().stack_bytes = std::max<std::int64_t>(out.back().stack_bytes, stack);
      out.back().spill_store_bytes += stores;
      out.back().spill_load_bytes += loads;
      seen.back().first = true;
    } else if (const auto used = line.find("Used "); used != std::string::npos &&
                                                     std::sscanf(line.c_str() + used, "Used %d registers", &registers) == 1) {
      out.back().registers = registers;
      seen.back().second = true;
    }
  }
  for (std::size_t k = 0; k < out.size(); ++k)
    if (!seen[k].first || !seen[k].second)
      throw CompileError(fmt::format("program '{}': ptxas's report of kernel '{}' has no {} line; expected 'N bytes stack "
                                     "frame, N bytes spill stores, N bytes spill loads' and 'Used N registers' in:\n{}",
                                     program_name, out[k].symbol, seen[k].first ? "'Used N registers'" : "stack frame",
                                     log.substr(0, 8 * 1024)));
  return out;
}

std::string nvrtc_compile(const std::string& program_name, const std::string& source, const std::string& arch) {
  return compile(program_name, source, arch, {}).cubin;
}

ReportedCubin nvrtc_compile_reporting(const std::string& program_name, const std::string& source, const std::string& arch) {
  Compiled c = compile(program_name, source, arch, {"--ptxas-options=-v"});
  return {std::move(c.cubin), parse_ptxas_report(program_name, c.log)};
}

InProcessBuild nvrtc_build(const std::string& program_name, const std::string& arch) {
  InProcessBuild b;
  b.identity = nvrtc_identity();
  b.flags = nvrtc_options(arch);
  b.build = [program_name, arch](const std::string& source) { return nvrtc_compile(program_name, source, arch); };
  return b;
}

}  // namespace fieldflow::toolchain
