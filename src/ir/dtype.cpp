#include "fieldflow/dtype.h"

#include <fmt/format.h>

#include "fieldflow/errors.h"

namespace fieldflow {

std::string_view to_string(DType t) {
  switch (t) {
    case DType::boolean: return "bool";
    case DType::int32: return "int32";
    case DType::int64: return "int64";
    case DType::float32: return "float32";
    case DType::float64: return "float64";
  }
  return "?";
}

DType parse_dtype(std::string_view name) {
  for (DType t : {DType::boolean, DType::int32, DType::int64, DType::float32, DType::float64})
    if (to_string(t) == name) return t;
  throw DTypeError(fmt::format("unknown dtype '{}': expected one of bool, int32, int64, float32, float64",
                               name));
}

std::size_t size_of(DType t) {
  switch (t) {
    case DType::boolean: return 1;
    case DType::int32: return 4;
    case DType::int64: return 8;
    case DType::float32: return 4;
    case DType::float64: return 8;
  }
  return 0;
}

bool is_integral(DType t) { return t == DType::int32 || t == DType::int64; }
bool is_floating(DType t) { return t == DType::float32 || t == DType::float64; }

std::string_view cpp_type_name(DType t) {
  switch (t) {
    case DType::boolean: return "bool";
    case DType::int32: return "std::int32_t";
    case DType::int64: return "std::int64_t";
    case DType::float32: return "float";
    case DType::float64: return "double";
  }
  return "?";
}

}  // namespace fieldflow
