#pragma once
// Shared by the libFuzzer targets that run JIT modules.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

namespace fieldflow::fuzz {

// The fuzz build is clang with its OpenMP runtime (libomp), while JIT modules are g++ code that
// needs libgomp. Without this, libgomp is loaded with the first module and unloaded with the last
// one, and every reload leaks what its initializer allocates (LeakSanitizer reports it from an
// "<unknown module>"). In a GCC build the library itself keeps libgomp loaded; this does the same.
inline void keep_jit_openmp_runtime_loaded() {
  if (dlopen("libgomp.so.1", RTLD_NOW | RTLD_GLOBAL) == nullptr) {
    std::fprintf(stderr, "cannot load libgomp.so.1: %s\n", dlerror());
    std::abort();
  }
}

}  // namespace fieldflow::fuzz
