#pragma once
// The runtime's view of a program whose kernels run on a device (Backend::cuda). CompiledProgram
// binds and checks a call's arguments on the host exactly as for the CPU, obtains the call's
// transient memory through TransientMemory (device memory for gpu_global transients), and hands
// the runner the host-side ff_call: field and table pointers into host memory, transient pointers
// into the device workspace. The runner owns everything device-specific (module, stream, copies,
// launches), so this folder's other files never include a device runtime's headers.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "fieldflow/abi.h"

namespace fieldflow::runtime {

// Host memory behind one field buffer (ff_call::buffers[i], i < number of parameters) or table.
struct HostSpan {
  const void* data = nullptr;  // nullptr: not a field / table parameter
  std::size_t bytes = 0;
  bool output = false;         // copied back after a successful call
};

class DeviceRunner {
 public:
  virtual ~DeviceRunner() = default;
  // The stream of every launch, copy and stream-ordered allocation of the next call.
  virtual void* stream() const = 0;
  // Runs the call's kernels in order on stream(); returns the ff_error flags the kernels raised.
  // Outputs are copied back to the host only when no flag is set (a failed call changes nothing),
  // and the stream is synchronised before returning, so the call's device work is complete.
  virtual std::int32_t run(const ff_call& host_call, const std::vector<HostSpan>& buffers,
                           const std::vector<HostSpan>& tables) = 0;
};

}  // namespace fieldflow::runtime
