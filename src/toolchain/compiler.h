#pragma once
// Invoking the system C++ compiler on generated source.
//
// The JIT turns generated C++ into a shared object by running the compiler as a child process
// (argv only, never through a shell, so paths and flags cannot inject commands). Everything that
// influences the produced code -- the compiler binary and its flags -- is explicit in
// CompilerConfig, so the module cache can make both part of its key.
#include <filesystem>
#include <string>
#include <vector>

namespace fieldflow::toolchain {

struct CompilerConfig {
  // Compiler command: a name looked up in PATH or a path, optionally followed by arguments and
  // split into words like a shell does ("ccache g++", "c++ -O0", "'/opt/my cc/g++' -m64"; quotes
  // and backslashes as in sh, no expansions). A path to an executable file is used whole even if
  // it contains spaces.
  std::string cxx;
  std::vector<std::string> flags;  // every argument before the source file, in order
};

// The configuration the JIT uses unless the caller supplies one.
//   compiler: env FIELDFLOW_CXX, else env CXX, else "c++" (in a clang build with ThreadSanitizer,
//             that clang: its modules must share the process's sanitizer runtime).
//   flags:    -std=c++20 -O3 -march=native -fPIC -shared -fno-math-errno [-fopenmp] -I<include>
//             where <include> is env FIELDFLOW_INCLUDE_DIR, else the source tree's include/ (if it
//             exists), else the install prefix's include/; plus -fsanitize=<...> when the library
//             itself is built with run-time sanitizers (CMake FIELDFLOW_SANITIZE: ASan, UBSan,
//             LSan in GCC builds; TSan in clang builds, whose libomp Archer annotates).
// Deliberately no -ffast-math: compiled results must be bitwise equal to the reference interpreter.
// The environment is read on every call, so a host may change it between compilations.
CompilerConfig default_compiler_config(bool openmp = true);

// Where generated code finds fieldflow/abi.h: env FIELDFLOW_INCLUDE_DIR, else the source tree's
// include/ (if it exists), else the install prefix's include/.
std::filesystem::path jit_include_dir();

// The words of a compiler command (see CompilerConfig::cxx). Throws CompileError for an empty
// command or an unterminated quote.
std::vector<std::string> command_words(const std::string& cxx);

// A string identifying the compiler: the first line of `<cxx> --version` plus the resolved path of
// the binary (its first word) and the further words of the command. Computed once per distinct `cxx` per process and then served from memory (the cache
// calls this on every lookup). Throws CompileError naming `cxx` if it cannot be found or run.
std::string compiler_identity(const std::string& cxx);

// Compiles `source` into the shared object `output` with `config`. Paths are made absolute first
// (a relative path starting with '-' would otherwise be read as an option). The compiler's stdout
// and stderr are captured in memory (so they survive a full disk) and written to `output` with
// extension ".log" when not empty.
// On failure throws CompileError whose message holds the full command, the diagnostics (first
// ~8 KB) and where the source can be found: `source` itself, or, when `keep_source_on_failure` is
// non-empty, that path, to which the source (and the log, as <stem>.log) are copied first -- the
// module cache compiles in a temporary directory it deletes, so it keeps failed sources elsewhere.
// When that copy fails the message says so and names neither (the caller removes them).
// The kept copies are private files written without following symbolic links (secure_fs.h).
// When the compiler failed because a disk is full ("No space left on device" in its output, or
// under 1 MiB left next to `output`), throws CacheError instead, saying so and naming the folders.
void compile_shared_object(const std::filesystem::path& source, const std::filesystem::path& output,
                           const CompilerConfig& config,
                           const std::filesystem::path& keep_source_on_failure = {});

}  // namespace fieldflow::toolchain
