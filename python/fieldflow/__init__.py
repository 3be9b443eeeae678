"""fieldflow from Python: write field operators and programs GT4Py-style, run them compiled on
numpy arrays (zero copy), with the host in control of transient memory.

    I, J = Dimension("I"), Dimension("J")
    K = Dimension("K", kind=VERTICAL)

    @field_operator
    def lap(f: Field[[I, J, K], float64]) -> Field[[I, J, K], float64]:
        return -4.0 * f + f(I + 1) + f(I - 1) + f(J + 1) + f(J - 1)

    @program
    def laplacian(f: Field[[I, J, K], float64], out: Field[[I, J, K], float64], n: int32, nk: int32):
        lap(f, out=out, domain={I: (1, n - 1), J: (1, n - 1), K: (0, nk)})

    laplacian(f, out, n=f.shape[0], nk=f.shape[2])   # numpy arrays, written in place

The language, the compiler and the runtime are the C++ library's (fieldflow._core); see
docs/python.md.
"""

import os as _os

# Generated code includes fieldflow/abi.h; the package carries it (a host may point elsewhere).
_os.environ.setdefault("FIELDFLOW_INCLUDE_DIR", _os.path.join(_os.path.dirname(__file__), "include"))

from . import _core  # noqa: E402
from ._arrays import FieldArray, as_field, empty, zeros  # noqa: E402
from ._core import (  # noqa: E402
    AllocationError, AllocationRequest, ArgumentError, Backend, CacheError, CompiledProgram, CompileError,
    ConcurrencyError, ConnectivityError, Connectivity, Device, DimensionError, Dimension, DimKind, DomainError, LoopForm,
    DType, DTypeError, Error, Expr, InternalError, LayoutError, Layout, MemoryPlan, MemoryStats, OptionError,
    PlannedTransient, ProgramBuilder, ProgramError, StorageError, TransientMemoryMode, WorkspaceError, WorkspaceRequirement,
    abs, arccos, arcsin, arctan, astype, bounded_mesh, broadcast, cbrt, ceil, concat_where, cos, cosh, exp,
    floor, floor_divide, fmod, gamma, if_, index, isfinite, isinf, isnan, log, materialize, max_over,
    max_requirements, maximum, min_over, minimum, named, neighbor_sum, power, sin, sinh, slot, sqrt, tan,
    tanh, torus_mesh, trim_host_pool, trunc, where)
from ._tracing import (  # noqa: E402
    Field, FieldOperator, Program, ScanOperator, compile, field_operator, program, scan_operator)

HORIZONTAL = DimKind.HORIZONTAL
VERTICAL = DimKind.VERTICAL
LOCAL = DimKind.LOCAL

bool_ = DType.bool
int32 = DType.int32
int64 = DType.int64
float32 = DType.float32
float64 = DType.float64

__version__ = "0.1.0"
