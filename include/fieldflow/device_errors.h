#pragma once
// Errors of devices and their backends (Backend::cuda). Like every fieldflow error they derive
// from fieldflow::Error (errors.h); messages name the program, the call and what was expected.
#include <cstddef>
#include <string>

#include "fieldflow/errors.h"

namespace fieldflow {

// A backend this build or this machine lacks: cuda in a fieldflow configured without the CUDA
// toolkit, or on a machine where cudaGetDeviceCount finds no usable device (the message says why).
class BackendUnavailableError : public Error {
 public:
  using Error::Error;
};

// A CUDA API call failed: names the call, the program and CUDA's error name and string.
class CudaError : public Error {
 public:
  using Error::Error;
};

// An allocation that failed for lack of memory (cudaMalloc, the device pool): says how many bytes
// were required, so a host can shrink its problem or free memory and retry.
class OutOfMemoryError : public AllocationError {
 public:
  OutOfMemoryError(const std::string& what, std::size_t required_bytes)
      : AllocationError(what), required_bytes_(required_bytes) {}
  std::size_t required_bytes() const { return required_bytes_; }

 private:
  std::size_t required_bytes_;
};

}  // namespace fieldflow
