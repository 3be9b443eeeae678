"""Decorators that trace Python functions into fieldflow programs.

A ``@field_operator`` is a Python function over field expressions: called while a program is
traced, it simply runs on the symbolic arguments, so operators compose like C++ functions do in
the C++ DSL. A ``@program`` is traced once, when it is first needed, with one symbolic argument per
annotated parameter; each ``op(..., out=..., domain=...)`` inside it becomes one call of the
program. ``@scan_operator`` builds a vertical scan from a Python body. Every expression is built by
the C++ DSL (fieldflow._core), which checks dims and dtypes as it goes; an error raised while
tracing is re-raised with the user's file and line.
"""

from __future__ import annotations

import functools
import inspect
import os
import threading
import typing

from . import _core

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_tracing = threading.local()  # .builder: the ProgramBuilder of the program being traced


class _FieldType:
    """``Field[[I, J, K], float64]``: the type of a field parameter."""

    def __init__(self, dims, dtype):
        self.dims = list(dims)
        self.dtype = _core.DType(dtype) if isinstance(dtype, _core.DType) else dtype

    def __repr__(self):
        return f"Field[[{', '.join(d.name for d in self.dims)}], {self.dtype}]"


class Field:
    """Annotation of a field parameter, as in GT4Py: ``Field[[I, J, K], float64]``."""

    def __class_getitem__(cls, item):
        if not isinstance(item, tuple) or len(item) != 2:
            raise _core.DimensionError(f"Field[...] takes a list of dimensions and a dtype, given {item!r}")
        dims, dtype = item
        if isinstance(dims, _core.Dimension):
            dims = [dims]
        return _FieldType(dims, dtype)


def _user_frame(tb):
    """The innermost traceback entry outside the fieldflow package: the user's line."""
    found = None
    while tb is not None:
        if not os.path.abspath(tb.tb_frame.f_code.co_filename).startswith(_PACKAGE_DIR):
            found = tb
        tb = tb.tb_next
    return found


def _located(error, fn):
    """The same exception class with the user's file and line in its message."""
    tb = _user_frame(error.__traceback__)
    if tb is None:
        code = fn.__code__
        where = f"{code.co_filename}:{code.co_firstlineno}"
    else:
        where = f"{tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}"
    located = type(error)(f"{where}: {error}")
    located.filename, located.lineno = where.rsplit(":", 1)[0], int(where.rsplit(":", 1)[1])
    return located.with_traceback(error.__traceback__)


def _trace(fn, run):
    """Runs a tracing step; fieldflow errors come back pointing at the user's line."""
    try:
        return run()
    except _core.Error as error:
        if getattr(error, "lineno", None) is not None:
            raise
        raise _located(error, fn) from None


class FieldOperator:
    """A ``@field_operator``: a Python function over field expressions."""

    def __init__(self, fn):
        self.definition = fn
        self.__name__ = fn.__name__
        functools.update_wrapper(self, fn)

    def __call__(self, *args, out=None, domain=None, **kwargs):
        builder = getattr(_tracing, "builder", None)
        if builder is None:
            raise _core.ProgramError(
                f"field operator '{self.__name__}' was called outside a @program; call it from a program "
                "(with out= and domain=) or from another field operator")
        value = self.definition(*args, **kwargs)
        if out is None:
            if domain is not None:
                raise _core.ProgramError(f"'{self.__name__}': domain= was given without out=")
            return value
        outputs = list(out) if isinstance(out, (tuple, list)) else [out]
        if domain is None:
            raise _core.ProgramError(f"'{self.__name__}' writes out= without a domain= (a dict {{dim: (lo, hi)}})")
        bounds = [(dim, lo, hi) for dim, (lo, hi) in domain.items()]
        builder.call(self.__name__, value, outputs, bounds)
        return None


def field_operator(fn=None, **_options):
    """Decorator: ``@field_operator`` (GT4Py-style; options such as backend= are accepted and ignored:
    a field operator is compiled as part of the programs that call it)."""
    if fn is None:
        return lambda f: FieldOperator(f)
    return FieldOperator(fn)


class ScanOperator(FieldOperator):
    """A ``@scan_operator(axis=K, forward=True, init=0.0)``: ``fn(carry, *inputs)`` is the new carry."""

    def __init__(self, fn, axis, forward, init):
        super().__init__(fn)
        self.axis, self.forward, self.init = axis, forward, init
        self.definition = self._scan

    def _scan(self, *inputs):
        fn = self.__wrapped__

        def body(carry, values):
            return fn(carry, *values)

        return _core.scan(self.__name__, self.forward, self.init, body, list(inputs) if inputs else self.axis)


def scan_operator(*, axis, forward=True, init):
    """Decorator of a vertical scan: ``@scan_operator(axis=K, forward=True, init=0.0)``; a tuple
    ``init`` makes a tuple carry (read its components as ``carry[0]``, ...)."""
    return lambda fn: ScanOperator(fn, axis, forward, init)


def _annotations(fn):
    try:
        return typing.get_type_hints(fn)
    except Exception:  # annotations naming local variables: take them as written
        return dict(getattr(fn, "__annotations__", {}))


def _declare(builder, name, annotation):
    """One program parameter from its annotation."""
    if isinstance(annotation, _FieldType):
        return builder.field(name, annotation.dims, annotation.dtype)
    if typing.get_origin(annotation) is tuple:
        elements = typing.get_args(annotation)
        if not all(isinstance(e, _FieldType) for e in elements):
            raise _core.ProgramError(f"parameter '{name}': a tuple parameter holds fields, given {annotation!r}")
        return builder.tuple_field(name, [(e.dims, e.dtype) for e in elements])
    if annotation is inspect.Parameter.empty:
        raise _core.ProgramError(f"parameter '{name}' has no annotation (Field[[dims], dtype] or a scalar dtype)")
    return builder.scalar(name, annotation)


def _trace_program(fn, name):
    signature = inspect.signature(fn)
    hints = _annotations(fn)
    builder = _core.ProgramBuilder(name)
    previous = getattr(_tracing, "builder", None)
    _tracing.builder = builder
    try:
        def run():
            symbols = [_declare(builder, p, hints.get(p, inspect.Parameter.empty)) for p in signature.parameters]
            fn(*symbols)
            return builder.build()

        return _trace(fn, run)
    finally:
        _tracing.builder = previous


class Program:
    """A ``@program``: traced once into the IR, compiled per set of options on first use, called on
    arrays. ``program(*arrays, **scalars_and_tables)`` runs the variant given to the decorator."""

    def __init__(self, fn, options):
        self.definition = fn
        self.__name__ = fn.__name__
        functools.update_wrapper(self, fn)
        self._options = options
        self._ir = None
        self._default = None
        self._lock = threading.Lock()

    @property
    def ir(self):
        """The traced program (fieldflow's IR); printing it shows every call."""
        if self._ir is None:
            self._ir = _trace_program(self.definition, self.__name__)
        return self._ir

    def compile(self, **options):
        """A new CompiledProgram: options are those of fieldflow.compile (backend, layout,
        transient_memory_mode, external_memory_allocator, external_workspace, num_threads, ...),
        over the decorator's."""
        return _core.compile(self.ir, **{**self._options, **options})

    def __call__(self, *args, **kwargs):
        compiled = self._default
        if compiled is None:
            with self._lock:
                if self._default is None:
                    self._default = self.compile()
                compiled = self._default
        compiled(*args, **kwargs)

    def with_backend(self, backend):
        return Program(self.definition, {**self._options, "backend": backend})


def program(fn=None, **options):
    """Decorator: ``@program`` or ``@program(backend="cpu", transient_memory_mode="pool", ...)``."""
    if fn is None:
        return lambda f: Program(f, options)
    return Program(fn, options)


def compile(program, **options):  # noqa: A001 (the C++ name)
    """Compiles a traced @program (or the IR of one) with the given options."""
    ir = program.ir if isinstance(program, Program) else program
    return _core.compile(ir, **options)
