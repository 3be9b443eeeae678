#pragma once
// Helpers shared by the sub-commands.
#include <string>

#include "fieldflow/examples.h"

namespace fieldflow::cli {

// "32x32x16" -> {32, 32, 16}; throws ArgumentError naming the expected form.
examples::ExampleSize parse_size(const std::string& text);

}  // namespace fieldflow::cli
