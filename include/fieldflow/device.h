#pragma once
// Where memory lives: the host (cpu) or an NVIDIA GPU (cuda). Shared by fields (a view over
// device memory) and transient memory (which device a workspace or allocation is for).
#include <cstdint>
#include <string_view>

namespace fieldflow {

enum class Device : std::uint8_t { cpu, cuda };
std::string_view to_string(Device d);
Device parse_device(std::string_view name);  // "cpu" | "cuda"; throws OptionError naming both

}  // namespace fieldflow
