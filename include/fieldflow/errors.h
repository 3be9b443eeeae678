#pragma once
// Every error fieldflow raises derives from fieldflow::Error, one subclass per kind, so a host can
// catch precisely what it can handle. User mistakes get a message naming the program, the argument
// or transient, what was expected and what was given; broken invariants raise InternalError with
// the file and line (a bug in fieldflow, never the user's fault).
#include <stdexcept>
#include <string>

namespace fieldflow {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

#define FIELDFLOW_ERROR_KIND(Name) \
  class Name : public Error {      \
   public:                         \
    using Error::Error;            \
  };

// Language / construction time.
FIELDFLOW_ERROR_KIND(DimensionError)     // dimension mismatch, shift along a missing dimension, ...
FIELDFLOW_ERROR_KIND(DTypeError)         // dtype mixes that need astype, non-bool conditions, ...
FIELDFLOW_ERROR_KIND(ProgramError)       // malformed program: unknown/duplicate parameter, bad call
// Call time.
FIELDFLOW_ERROR_KIND(ArgumentError)      // missing / extra / duplicated / wrongly typed argument
FIELDFLOW_ERROR_KIND(DomainError)        // domain outside an output, read outside an input's extent
FIELDFLOW_ERROR_KIND(ConnectivityError)  // neighbour table of the wrong shape or index out of range
FIELDFLOW_ERROR_KIND(LayoutError)        // field strides do not match the compiled layout
// Compilation and toolchain.
FIELDFLOW_ERROR_KIND(OptionError)        // invalid or conflicting compile options
FIELDFLOW_ERROR_KIND(CompileError)       // the system compiler rejected generated code
FIELDFLOW_ERROR_KIND(CacheError)         // the on-disk compile cache is unusable
// Transient memory.
FIELDFLOW_ERROR_KIND(StorageError)       // storage kind without a device mapping
FIELDFLOW_ERROR_KIND(WorkspaceError)     // external workspace missing, too small, misaligned, ...
FIELDFLOW_ERROR_KIND(AllocationError)    // a system or pool allocation failed
FIELDFLOW_ERROR_KIND(ConcurrencyError)   // overlapping use of memory that must not be shared
// Bugs in fieldflow itself.
FIELDFLOW_ERROR_KIND(InternalError)

#undef FIELDFLOW_ERROR_KIND

[[noreturn]] void throw_internal(const char* file, int line, const std::string& what);

}  // namespace fieldflow

#define FIELDFLOW_ASSERT(cond, msg) \
  do {                              \
    if (!(cond)) ::fieldflow::throw_internal(__FILE__, __LINE__, std::string(#cond ": ") + (msg)); \
  } while (0)

// Where control must not arrive (past a switch over every enumerator, after a search that cannot
// fail): an unconditional InternalError, so an unoptimised build also knows nothing follows (an
// always-failing FIELDFLOW_ASSERT draws -Wreturn-type there).
#define FIELDFLOW_UNREACHABLE(msg) ::fieldflow::throw_internal(__FILE__, __LINE__, std::string("unreachable: ") + (msg))
