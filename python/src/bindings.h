#pragma once
// The nanobind module fieldflow._core: the C++ library bound as it is (no second implementation).
// bind_errors.cpp maps fieldflow::Error and its subclasses to Python classes of the same names,
// bind_language.cpp the DSL (dimensions, expressions, builtins, ProgramBuilder), bind_runtime.cpp
// compile() and the compiled program called on arrays (views, no copies) with the GIL released.
#include <nanobind/nanobind.h>

#include "fieldflow/dsl.h"

namespace fieldflow::python {

namespace nb = nanobind;

void bind_errors(nb::module_& m);
void bind_language(nb::module_& m);
void bind_runtime(nb::module_& m);

// A DSL operand from Python: an Expr, or a literal (bool, int, float weakly typed like C++
// literals; a numpy scalar keeps its dtype). Anything else is a DTypeError naming its type.
Expr to_expr(nb::handle value);
// A typed value from Python (scan init, static scalars, call scalars before conversion).
Scalar to_scalar(nb::handle value);
// A dtype from a DType, a numpy dtype or type (np.float32), or bool / int / float.
DType to_dtype(nb::handle value);
std::string python_type_name(nb::handle value);

}  // namespace fieldflow::python
