#include "cli/common.h"

#include <cstdio>
#include <fmt/format.h>

#include "fieldflow/errors.h"

namespace fieldflow::cli {

examples::ExampleSize parse_size(const std::string& text) {
  examples::ExampleSize s;
  char tail = 0;
  if (std::sscanf(text.c_str(), "%dx%dx%d%c", &s.nx, &s.ny, &s.nk, &tail) != 3 || s.nx < 3 || s.ny < 3 || s.nk < 1)
    throw ArgumentError(fmt::format("--size: expected NXxNYxNK with NX, NY >= 3 and NK >= 1 (e.g. 32x32x16), given '{}'",
                                    text));
  return s;
}

}  // namespace fieldflow::cli
