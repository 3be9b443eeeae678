// NVRTC in-process compilation; see nvrtc_compiler.h.
#include "toolchain/nvrtc_compiler.h"

#include <fmt/format.h>
#include <nvrtc.h>

#include "fieldflow/device_errors.h"
#include "toolchain/compiler.h"

namespace fieldflow::toolchain {

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

}  // namespace

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

std::string nvrtc_compile(const std::string& program_name, const std::string& source, const std::string& arch) {
  if (arch.rfind("sm_", 0) != 0)
    throw OptionError(fmt::format("program '{}': CUDA architecture '{}' is not a real architecture: expected sm_<NN> "
                                  "(e.g. sm_90 for H100/H200)", program_name, arch));
  Program p;
  const std::string file = program_name + ".cu";
  if (nvrtcResult r = nvrtcCreateProgram(&p.handle, source.c_str(), file.c_str(), 0, nullptr, nullptr); r != NVRTC_SUCCESS)
    fail(program_name, "nvrtcCreateProgram", r);
  const std::vector<std::string> options = nvrtc_options(arch);
  std::vector<const char*> argv;
  for (const auto& o : options) argv.push_back(o.c_str());
  const nvrtcResult compiled = nvrtcCompileProgram(p.handle, static_cast<int>(argv.size()), argv.data());
  std::size_t log_size = 0;
  std::string log;
  if (nvrtcGetProgramLogSize(p.handle, &log_size) == NVRTC_SUCCESS && log_size > 1) {
    log.resize(log_size);
    nvrtcGetProgramLog(p.handle, log.data());
    log.resize(log_size - 1);
  }
  if (compiled != NVRTC_SUCCESS) fail(program_name, "nvrtcCompileProgram", compiled, log);
  std::size_t size = 0;
  if (nvrtcResult r = nvrtcGetCUBINSize(p.handle, &size); r != NVRTC_SUCCESS) fail(program_name, "nvrtcGetCUBINSize", r);
  std::string cubin(size, '\0');
  if (nvrtcResult r = nvrtcGetCUBIN(p.handle, cubin.data()); r != NVRTC_SUCCESS) fail(program_name, "nvrtcGetCUBIN", r);
  return cubin;
}

InProcessBuild nvrtc_build(const std::string& program_name, const std::string& arch) {
  InProcessBuild b;
  b.identity = nvrtc_identity();
  b.flags = nvrtc_options(arch);
  b.build = [program_name, arch](const std::string& source) { return nvrtc_compile(program_name, source, arch); };
  return b;
}

}  // namespace fieldflow::toolchain
