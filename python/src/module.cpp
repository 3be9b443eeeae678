#include "bindings.h"

NB_MODULE(_core, m) {
  m.doc() = "fieldflow: the C++ library's language, compiler and runtime (see the package fieldflow)";
  fieldflow::python::bind_errors(m);
  fieldflow::python::bind_language(m);
  fieldflow::python::bind_runtime(m);
}
