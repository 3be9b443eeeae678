#pragma once
// The runtime's view of a program whose kernels run on a device (Backend::cuda). CompiledProgram
// binds and checks a call's arguments on the host exactly as for the CPU, obtains the call's
// transient memory through TransientMemory (device memory for gpu_global transients), and hands
// the runner the host-side ff_call: field pointers (host or device memory, as each field says),
// table pointers into host memory, transient pointers into the device workspace. The runner owns
// everything device-specific (module, stream, copies, launches), so this folder's other files
// never include a device runtime's headers.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fieldflow/abi.h"

namespace fieldflow {
class Field;
}

namespace fieldflow::runtime {

// The memory behind one field buffer (ff_call::buffers[i], i < number of parameters) or table.
struct ArgumentSpan {
  const void* data = nullptr;  // nullptr: not a field / table parameter
  std::size_t bytes = 0;
  bool output = false;         // written by the call
  // Device memory (Field::view with Device::cuda): read and written in place. Host memory is
  // copied to the device before the launches and, for outputs, back after a successful call.
  bool on_device = false;
  // An output in device memory of a program whose kernels check reads while running (dynamic
  // offsets): saved before the launches and restored when a check fails, so a failed call
  // changes no argument.
  bool save_before = false;
  // An output whose elements do not fill its span (a padded view, one of several views that
  // interleave in one array): the bytes between its elements, which may be another field's, are
  // never written. In host memory its device copy comes back to a host buffer, then element by
  // element (ir::copy_elements); in device memory a failed call restores it run by run. The
  // call's field, whose geometry those copies follow.
  const Field* scattered = nullptr;
  // Tables: NeighborTable::identity(), so a device copy is made again for another table object
  // even at the same address.
  std::uint64_t identity = 0;
};

struct DeviceCall {
  const std::vector<std::string>* names = nullptr;  // parameter names, for messages
  const std::vector<ArgumentSpan>* fields = nullptr;
  const std::vector<ArgumentSpan>* tables = nullptr;
  void* stream = nullptr;  // this call's stream; nullptr: the runner's stream()
};

class DeviceRunner {
 public:
  virtual ~DeviceRunner() = default;
  // The stream of every launch, copy and stream-ordered allocation of a call without its own.
  virtual void* stream() const = 0;
  // Called before the call's transient memory is obtained: throws when the call cannot run from
  // the calling thread (cuda: its current device is not the one the program was created on).
  virtual void check_caller() const {}
  // Whether the device's kernels can use the memory at `pointer`, which the caller gave for the
  // program's transients (an external workspace, an allocator's block): "" when they can, else
  // what the memory is and what they need. Asked when such memory is installed, before anything
  // runs: a kernel given host memory faults, and on a GPU the fault is sticky (every later CUDA
  // call of the process fails).
  virtual std::string memory_problem(const void* pointer) const {
    (void)pointer;
    return {};
  }
  // Runs the call's kernels in order on the call's stream; returns the ff_error flags the
  // kernels raised. Tables are the model's static mesh: copied to the device when a call gives
  // other ones (address or size) than the last, not on every call; a field's memory is checked
  // when its address differs from the last call's. A failed call changes no argument (host
  // outputs are not copied back, saved device outputs are restored), and the stream is
  // synchronised before returning, so the call's device work is complete. Throws ArgumentError when a field's memory is not where the
  // field says (before anything runs).
  virtual std::int32_t run(const ff_call& host_call, const DeviceCall& call) = 0;
};

}  // namespace fieldflow::runtime
