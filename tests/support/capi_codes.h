#pragma once
// The C API's codes for C++ values, shared by the tests that call through ff_program handles.
#include "fieldflow/dtype.h"
#include "fieldflow/fieldflow.h"

namespace fieldflow::testing_support {

inline int ff_dtype_code(DType d) {
  switch (d) {
    case DType::boolean: return FF_DTYPE_BOOL;
    case DType::int32: return FF_DTYPE_INT32;
    case DType::int64: return FF_DTYPE_INT64;
    case DType::float32: return FF_DTYPE_FLOAT32;
    case DType::float64: return FF_DTYPE_FLOAT64;
  }
  return -1;
}

}  // namespace fieldflow::testing_support
