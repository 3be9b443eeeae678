#pragma once
// Status codes and the thread-local last-error message of the C API. Every entry point runs its
// body through guarded(), so no exception ever crosses the C boundary. Internal to src/capi/.
#include <stdexcept>

#include "fieldflow/fieldflow.h"

namespace fieldflow::capi {

// Misuse of the C API itself, below fieldflow's own error kinds.
class InvalidHandle : public std::runtime_error {  // FF_ERROR_INVALID_HANDLE
 public:
  using std::runtime_error::runtime_error;
};
class InvalidValue : public std::runtime_error {  // FF_ERROR_INVALID_VALUE
 public:
  using std::runtime_error::runtime_error;
};

// Records `message` as the thread's last error and returns `status`.
ff_status fail(ff_status status, const char* message) noexcept;
// Called from a catch block: maps the exception in flight to its status (one per
// fieldflow::Error subclass) and records its message.
ff_status status_of_current_exception() noexcept;

template <class Body>
ff_status guarded(Body&& body) noexcept {
  try {
    body();
    return FF_OK;
  } catch (...) {
    return status_of_current_exception();
  }
}

}  // namespace fieldflow::capi
