// Names, parsing and validation of the memory options (design §3). Everything a user can get wrong
// about them is rejected here, when options are built or a program is compiled, never at a call;
// each message names the offending option, what was expected and what was given.
#include <fmt/format.h>

#include <algorithm>

#include "fieldflow/errors.h"
#include "fieldflow/memory.h"

namespace fieldflow {

namespace {

template <class Enum, std::size_t N>
Enum parse_enum(std::string_view what, std::string_view name, const Enum (&values)[N]) {
  std::string valid;
  for (Enum v : values) {
    if (to_string(v) == name) return v;
    valid += fmt::format("{}{}", valid.empty() ? "" : ", ", to_string(v));
  }
  throw OptionError(fmt::format("unknown {} '{}': expected one of {}", what, name, valid));
}

constexpr Device all_devices[] = {Device::cpu, Device::cuda};
constexpr Storage all_storages[] = {Storage::host_heap, Storage::gpu_global, Storage::gpu_shared,
                                    Storage::host_pinned};
constexpr TransientMemoryMode all_modes[] = {TransientMemoryMode::scoped, TransientMemoryMode::persistent,
                                             TransientMemoryMode::pool, TransientMemoryMode::external};

}  // namespace

std::string_view to_string(Device d) {
  switch (d) {
    case Device::cpu: return "cpu";
    case Device::cuda: return "cuda";
  }
  return "unknown device";
}

Device parse_device(std::string_view name) { return parse_enum("device", name, all_devices); }

std::string_view to_string(Storage s) {
  switch (s) {
    case Storage::host_heap: return "host_heap";
    case Storage::gpu_global: return "gpu_global";
    case Storage::gpu_shared: return "gpu_shared";
    case Storage::host_pinned: return "host_pinned";
  }
  return "unknown storage";
}

Storage parse_storage(std::string_view name) { return parse_enum("storage", name, all_storages); }

Device device_of(Storage s) {
  switch (s) {
    case Storage::host_heap: return Device::cpu;
    case Storage::gpu_global: return Device::cuda;
    case Storage::gpu_shared:
    case Storage::host_pinned: break;
  }
  throw StorageError(fmt::format(
      "storage '{}' has no device mapping for transients: expected host_heap (cpu) or gpu_global (cuda)",
      to_string(s)));
}

std::string_view to_string(TransientMemoryMode m) {
  switch (m) {
    case TransientMemoryMode::scoped: return "scoped";
    case TransientMemoryMode::persistent: return "persistent";
    case TransientMemoryMode::pool: return "pool";
    case TransientMemoryMode::external: return "external";
  }
  return "unknown mode";
}

TransientMemoryMode parse_transient_memory_mode(std::string_view name) {
  return parse_enum("transient memory mode", name, all_modes);
}

std::string_view to_string(MemoryEvent::Kind k) {
  using K = MemoryEvent::Kind;
  switch (k) {
    case K::system_allocate: return "system_allocate";
    case K::system_free: return "system_free";
    case K::pool_hit: return "pool_hit";
    case K::pool_miss: return "pool_miss";
    case K::pool_release: return "pool_release";
    case K::stream_allocate: return "stream_allocate";
    case K::stream_free: return "stream_free";
    case K::allocator_call: return "allocator_call";
    case K::install: return "install";
    case K::release: return "release";
  }
  return "unknown event";
}

TransientMemoryMode MemoryOptions::resolved_mode() const {
  const bool has_allocator = static_cast<bool>(external_memory_allocator);
  const bool has_workspace = !external_workspace.empty();

  // An enum is only a number: a value cast from a host's integer setting may name no mode at all.
  if (mode && static_cast<unsigned>(*mode) > static_cast<unsigned>(TransientMemoryMode::external))
    throw OptionError(fmt::format("transient memory mode {} is not a mode: expected scoped (0), persistent (1), pool (2) "
                                  "or external (3)", static_cast<unsigned>(*mode)));
  for (const auto& [device, ws] : external_workspace) {
    if (static_cast<unsigned>(device) > static_cast<unsigned>(Device::cuda))
      throw OptionError(fmt::format("external_workspace has an entry for device {}, which is not a device: expected "
                                    "cpu (0) or cuda (1)", static_cast<unsigned>(device)));
    if (ws.device != device)
      throw OptionError(fmt::format(
          "external_workspace entry for device {} describes a buffer on device {}: the key and "
          "Workspace::device must agree",
          to_string(device), to_string(ws.device)));
  }
  if (has_allocator && has_workspace) {
    // The allocator serves every device, so any workspace entry competes with it.
    throw OptionError(fmt::format(
        "both an external_memory_allocator and an external_workspace for device {} were given: "
        "supply one of them",
        to_string(external_workspace.begin()->first)));
  }
  const char* supplied = has_allocator ? "external_memory_allocator" : "external_workspace";
  if (!mode) return has_allocator || has_workspace ? TransientMemoryMode::external : TransientMemoryMode::pool;
  if (*mode == TransientMemoryMode::external) {
    if (!has_allocator && !has_workspace)
      throw OptionError(
          "transient memory mode 'external' needs memory from the host, but neither an "
          "external_memory_allocator nor an external_workspace was given");
    return *mode;
  }
  if (has_allocator || has_workspace)
    throw OptionError(fmt::format(
        "transient memory mode '{}' conflicts with the {} that was given: the {} is only used in "
        "mode 'external' (leave the mode unset or set it to 'external')",
        to_string(*mode), supplied, supplied));
  return *mode;
}

std::vector<WorkspaceRequirement> max_requirements(
    const std::vector<std::vector<WorkspaceRequirement>>& per_program) {
  std::vector<WorkspaceRequirement> out;
  for (const auto& program : per_program) {
    for (const WorkspaceRequirement& r : program) {
      auto it = std::find_if(out.begin(), out.end(), [&](const auto& o) { return o.device == r.device; });
      if (it == out.end()) {
        out.push_back(r);
      } else {
        it->bytes = std::max(it->bytes, r.bytes);
        it->alignment = std::max(it->alignment, r.alignment);
      }
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.device < b.device; });
  return out;
}

std::size_t MemoryPlan::bytes_on(Device d) const {
  std::size_t end = 0;
  for (const PlannedTransient& t : transients) {
    if (t.device != d) continue;
    const std::size_t rounded = (t.bytes + transient_alignment - 1) / transient_alignment * transient_alignment;
    end = std::max(end, t.offset + rounded);
  }
  return end;
}

std::vector<WorkspaceRequirement> MemoryPlan::requirements() const {
  std::vector<WorkspaceRequirement> out;
  for (Device d : all_devices) {
    const bool used = std::any_of(transients.begin(), transients.end(), [&](const auto& t) { return t.device == d; });
    if (used) out.push_back({d, bytes_on(d), transient_alignment});
  }
  return out;
}

}  // namespace fieldflow
