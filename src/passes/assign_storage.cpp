#include "passes/assign_storage.h"

namespace fieldflow::passes {

void assign_storage(ir::Schedule& s, Device target) {
  for (auto& t : s.transients) {
    t.storage = target == Device::cpu ? Storage::host_heap : Storage::gpu_global;
    (void)device_of(t.storage);  // throws StorageError for storages without a device
  }
}

}  // namespace fieldflow::passes
