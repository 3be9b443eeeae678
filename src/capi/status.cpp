// Status codes of the C API: one per kind of fieldflow::Error, and the thread-local message.
#include "capi/status.h"

#include <new>
#include <string>

#include "fieldflow/device_errors.h"
#include "fieldflow/errors.h"

namespace fieldflow::capi {
namespace {
thread_local std::string last_error;
}  // namespace

ff_status fail(ff_status status, const char* message) noexcept {
  try {
    last_error = message;
  } catch (...) {
    // No memory for the message: the status still says what happened.
    last_error.clear();
  }
  return status;
}

ff_status status_of_current_exception() noexcept {
  // Every fieldflow::Error subclass is matched before Error itself.
  try {
    throw;
  } catch (const InvalidHandle& e) {
    return fail(FF_ERROR_INVALID_HANDLE, e.what());
  } catch (const InvalidValue& e) {
    return fail(FF_ERROR_INVALID_VALUE, e.what());
  } catch (const DimensionError& e) {
    return fail(FF_ERROR_DIMENSION, e.what());
  } catch (const DTypeError& e) {
    return fail(FF_ERROR_DTYPE, e.what());
  } catch (const ProgramError& e) {
    return fail(FF_ERROR_PROGRAM, e.what());
  } catch (const ArgumentError& e) {
    return fail(FF_ERROR_ARGUMENT, e.what());
  } catch (const DomainError& e) {
    return fail(FF_ERROR_DOMAIN, e.what());
  } catch (const ConnectivityError& e) {
    return fail(FF_ERROR_CONNECTIVITY, e.what());
  } catch (const LayoutError& e) {
    return fail(FF_ERROR_LAYOUT, e.what());
  } catch (const OptionError& e) {
    return fail(FF_ERROR_OPTION, e.what());
  } catch (const CompileError& e) {
    return fail(FF_ERROR_COMPILE, e.what());
  } catch (const CacheError& e) {
    return fail(FF_ERROR_CACHE, e.what());
  } catch (const StorageError& e) {
    return fail(FF_ERROR_STORAGE, e.what());
  } catch (const WorkspaceError& e) {
    return fail(FF_ERROR_WORKSPACE, e.what());
  } catch (const OutOfMemoryError& e) {
    return fail(FF_ERROR_OUT_OF_MEMORY, e.what());
  } catch (const AllocationError& e) {
    return fail(FF_ERROR_ALLOCATION, e.what());
  } catch (const ConcurrencyError& e) {
    return fail(FF_ERROR_CONCURRENCY, e.what());
  } catch (const InternalError& e) {
    return fail(FF_ERROR_INTERNAL, e.what());
  } catch (const BackendUnavailableError& e) {
    return fail(FF_ERROR_BACKEND_UNAVAILABLE, e.what());
  } catch (const CudaError& e) {
    return fail(FF_ERROR_CUDA, e.what());
  } catch (const Error& e) {
    return fail(FF_ERROR_UNKNOWN, e.what());
  } catch (const std::bad_alloc&) {
    return fail(FF_ERROR_OUT_OF_MEMORY, "out of memory (std::bad_alloc) inside fieldflow or one of its callbacks");
  } catch (const std::exception& e) {
    return fail(FF_ERROR_UNKNOWN, e.what());
  } catch (...) {
    return fail(FF_ERROR_UNKNOWN, "an exception that is not a std::exception was thrown below the C API (by a "
                                  "callback?)");
  }
}

}  // namespace fieldflow::capi

extern "C" const char* ff_last_error(void) { return fieldflow::capi::last_error.c_str(); }
