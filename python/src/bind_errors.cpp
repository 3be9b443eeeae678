// fieldflow::Error and its subclasses as Python exception classes with the same names, so a host
// catches in Python what it would catch in C++ (fieldflow.WorkspaceError, ...). All derive from
// fieldflow.Error, itself an Exception.
#include "bindings.h"
#include "fieldflow/errors.h"

namespace fieldflow::python {

void bind_errors(nb::module_& m) {
  // nanobind tries translators newest first: the base class goes first so that every subclass
  // is matched by its own translator before the base one.
  static nb::exception<Error> base(m, "Error", PyExc_Exception);
#define FIELDFLOW_PY_ERROR(Name) static nb::exception<Name> Name##_(m, #Name, base);
  FIELDFLOW_PY_ERROR(DimensionError)
  FIELDFLOW_PY_ERROR(DTypeError)
  FIELDFLOW_PY_ERROR(ProgramError)
  FIELDFLOW_PY_ERROR(ArgumentError)
  FIELDFLOW_PY_ERROR(DomainError)
  FIELDFLOW_PY_ERROR(ConnectivityError)
  FIELDFLOW_PY_ERROR(LayoutError)
  FIELDFLOW_PY_ERROR(OptionError)
  FIELDFLOW_PY_ERROR(CompileError)
  FIELDFLOW_PY_ERROR(CacheError)
  FIELDFLOW_PY_ERROR(StorageError)
  FIELDFLOW_PY_ERROR(WorkspaceError)
  FIELDFLOW_PY_ERROR(AllocationError)
  FIELDFLOW_PY_ERROR(ConcurrencyError)
  FIELDFLOW_PY_ERROR(InternalError)
#undef FIELDFLOW_PY_ERROR
}

}  // namespace fieldflow::python
