#pragma once
// What stands behind an ff_program handle of the C API, and the registry that maps handles to it.
// Internal to src/capi/.
//
// Handles are ids, not addresses: the registry hands out tagged 64-bit ids and maps them to live
// programs, so a destroyed or never-created handle is a failed lookup (FF_ERROR_INVALID_HANDLE),
// never a dereference of freed memory, and an id is never reused.
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "fieldflow/compile.h"
#include "fieldflow/fieldflow.h"
#include "fieldflow/mesh.h"

namespace fieldflow::capi {

// One compiled program and the arguments set through the C API. The argument state is built
// once and then only updated in place, so steady-state runs allocate nothing:
//  - a field is a Field view per parameter; setting it again with the same shape, strides and
//    origin moves the view to the new data (Field::set_view_data), anything else replaces it;
//  - `args` borrows those views and tables; it is rebuilt only when a parameter gets its first
//    value (the set of arguments changes), scalars are written into its entries in place.
struct Handle {
  explicit Handle(CompiledProgram p);

  CompiledProgram program;
  // FF_MEMORY_EXTERNAL without an allocator: compiled with an empty placeholder workspace that
  // ff_program_set_workspace replaces (see c_api.cpp).
  bool awaits_workspace = false;
  bool workspace_set[2] = {false, false};  // per device, for the message when none was set

  // Guards everything below: the C API may be called from several threads.
  std::mutex mutex;
  // The thread inside a run, to refuse re-entry from a callback (an allocator calling back into
  // the API on the same handle would otherwise wait for itself forever).
  std::atomic<std::thread::id> running{};

  // Per parameter index; the vectors are sized once, so the addresses `args` borrows are stable.
  std::vector<std::optional<Field>> fields;
  std::vector<std::optional<NeighborTable>> tables;
  struct TableView {  // what a table was set from, to recognise the same table set again
    const std::int32_t* data = nullptr;
    std::int64_t n_source = 0, n_target = 0;
    int max_neighbors = 0;
    std::int64_t source_stride = 0, neighbor_stride = 0;
    bool operator==(const TableView&) const = default;
  };
  std::vector<TableView> table_views;
  std::vector<std::optional<Scalar>> scalars;
  Arguments args;
  CallOptions call_options;  // the stream of a cuda handle's runs (ff_program_set_cuda_stream)
  bool args_built = false;
  std::vector<int> entry_of_param;  // index of each parameter's entry in args (-1 before built)
};

class Registry {
 public:
  ff_program* add(std::shared_ptr<Handle> h);
  // The live handle, or an InvalidHandle exception. The shared_ptr keeps it alive for the
  // caller's operation even if another thread destroys the handle meanwhile.
  std::shared_ptr<Handle> find(const ff_program* id) const;
  std::shared_ptr<Handle> remove(ff_program* id);

 private:
  mutable std::mutex mutex_;
  std::unordered_map<std::uint64_t, std::shared_ptr<Handle>> live_;
  std::uint64_t next_ = 1;
};
Registry& registry();

}  // namespace fieldflow::capi
