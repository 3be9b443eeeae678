#pragma once
// A shared object loaded into the process, unloaded when the owner goes away.
//
// Loaded with RTLD_NOW so that an unresolved symbol fails here, at load time, with a message,
// instead of crashing on first call inside a kernel; RTLD_LOCAL so that the symbols of one
// generated module (every one exports the same entry-point names) never satisfy another's.
#include <filesystem>

namespace fieldflow::toolchain {

class LoadedModule {
 public:
  // Throws CompileError with dlerror()'s text when the file cannot be loaded.
  explicit LoadedModule(std::filesystem::path path);
  ~LoadedModule();

  LoadedModule(LoadedModule&& other) noexcept;
  LoadedModule& operator=(LoadedModule&& other) noexcept;
  LoadedModule(const LoadedModule&) = delete;
  LoadedModule& operator=(const LoadedModule&) = delete;

  // Address of an exported symbol; throws CompileError naming the symbol and the module's path
  // when it does not exist.
  void* symbol(const char* name) const;

  const std::filesystem::path& path() const { return path_; }

 private:
  void unload() noexcept;

  std::filesystem::path path_;
  void* handle_ = nullptr;
};

}  // namespace fieldflow::toolchain
