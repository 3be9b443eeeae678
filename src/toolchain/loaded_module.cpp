#include "toolchain/loaded_module.h"

#include <dlfcn.h>

#include <utility>

#include <fmt/format.h>

#include "fieldflow/errors.h"

namespace fieldflow::toolchain {

LoadedModule::LoadedModule(std::filesystem::path path) : path_(std::move(path)) {
  // dlopen treats a name without '/' as a library to search for in the system paths; an absolute
  // path makes sure the file we were given is the file we load.
  const std::filesystem::path absolute = std::filesystem::absolute(path_);
  handle_ = dlopen(absolute.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle_ == nullptr) {
    const char* why = dlerror();
    throw CompileError(fmt::format("cannot load compiled module '{}': {}", path_.string(),
                                   why != nullptr ? why : "unknown dlopen error"));
  }
}

LoadedModule::~LoadedModule() { unload(); }

LoadedModule::LoadedModule(LoadedModule&& other) noexcept
    : path_(std::move(other.path_)), handle_(std::exchange(other.handle_, nullptr)) {}

LoadedModule& LoadedModule::operator=(LoadedModule&& other) noexcept {
  if (this != &other) {
    unload();
    path_ = std::move(other.path_);
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

void LoadedModule::unload() noexcept {
  if (handle_ != nullptr) dlclose(handle_);
  handle_ = nullptr;
}

void* LoadedModule::symbol(const char* name) const {
  // A symbol's value may legitimately be null, so dlerror() -- not the returned pointer -- says
  // whether the lookup failed; clear any stale error first.
  if (handle_ == nullptr) {
    // dlsym(nullptr, ...) would search the whole process (RTLD_DEFAULT); refuse instead.
    throw CompileError(fmt::format("symbol '{}' requested from a moved-from module (was '{}')",
                                   name, path_.string()));
  }
  dlerror();
  void* address = dlsym(handle_, name);
  if (const char* why = dlerror(); why != nullptr) {
    throw CompileError(fmt::format("symbol '{}' not found in compiled module '{}': {}", name,
                                   path_.string(), why));
  }
  return address;
}

}  // namespace fieldflow::toolchain
