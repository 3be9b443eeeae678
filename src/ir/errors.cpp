#include "fieldflow/errors.h"

#include <fmt/format.h>

namespace fieldflow {

void throw_internal(const char* file, int line, const std::string& what) {
  throw InternalError(fmt::format("fieldflow internal error at {}:{}: {} (this is a bug in fieldflow)",
                                  file, line, what));
}

}  // namespace fieldflow
