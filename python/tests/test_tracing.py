"""Tracing: programs are traced once into the C++ IR; mistakes are the C++ DSL's typed errors,
pointing at the user's line."""

import inspect

import numpy as np
import pytest

import fieldflow as ff
from conftest import I, J, K
from fieldflow import Field, field_operator, float64, int32, program


def line_of(fn, text):
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


@field_operator
def mixes_dims(a: Field[[I, K], float64], b: Field[[J, K], float64]):
    return a + b(I + 1)  # b has no I: the shift is a DimensionError


@program
def bad_shift(a: Field[[I, K], float64], b: Field[[J, K], float64], out: Field[[I, K], float64], n: int32):
    mixes_dims(a, b, out=out, domain={I: (0, n), K: (0, n)})


def test_dsl_errors_point_at_the_users_line():
    with pytest.raises(ff.DimensionError) as error:
        bad_shift.ir
    assert error.value.filename == __file__
    assert error.value.lineno == line_of(mixes_dims.__wrapped__, "b(I + 1)")
    assert f"{__file__}:{error.value.lineno}" in str(error.value)
    assert "do not include I" in str(error.value)


@field_operator
def uses_python_if(a: Field[[I], float64]):
    if a > 0:  # a field has no truth value
        return a
    return -a


@program
def bad_if(a: Field[[I], float64], out: Field[[I], float64], n: int32):
    uses_python_if(a, out=out, domain={I: (0, n)})


def test_python_control_flow_on_fields_is_a_dtype_error_at_that_line():
    with pytest.raises(ff.DTypeError, match="where") as error:
        bad_if.ir
    assert error.value.lineno == line_of(uses_python_if.__wrapped__, "if a > 0")


def test_mistakes_in_programs():
    @program
    def no_annotation(a, out: Field[[I], float64]):
        pass

    with pytest.raises(ff.ProgramError, match="'a' has no annotation"):
        no_annotation.ir

    @program
    def no_domain(a: Field[[I], float64], out: Field[[I], float64]):
        identity(a, out=out)

    with pytest.raises(ff.ProgramError, match="domain") as error:
        no_domain.ir
    assert error.value.lineno == line_of(no_domain.definition, "identity(a, out=out)")

    @program
    def wrong_dtype(a: Field[[I], float64], out: Field[[I], ff.int32], n: int32):
        identity(a, out=out, domain={I: (0, n)})

    with pytest.raises(ff.DTypeError):
        wrong_dtype.ir
    with pytest.raises(ff.DTypeError, match="given an object of type str"):
        ff.sqrt("x")
    with pytest.raises(ff.ProgramError, match="outside a @program"):
        identity(np.zeros(3))


@field_operator
def identity(a: Field[[I], float64]) -> Field[[I], float64]:
    return a


def test_a_program_is_traced_once_into_the_ir():
    calls = []

    @field_operator
    def counted(a: Field[[I], float64]) -> Field[[I], float64]:
        calls.append(1)
        return 2.0 * a

    @program
    def twice(a: Field[[I], float64], out: Field[[I], float64], n: int32):
        counted(a, out=out, domain={I: (0, n)})

    assert "twice" in str(twice.ir) and [name for name, _, _ in twice.ir.params] == ["a", "out", "n"]
    out = np.zeros(4)
    for _ in range(3):
        twice(np.arange(4.0), out, n=4)
    twice.compile(backend="reference")(np.arange(4.0), out, n=4)
    assert calls == [1]
    np.testing.assert_array_equal(out, 2.0 * np.arange(4.0))


def test_expressions_are_typed_as_they_are_built():
    b = ff.ProgramBuilder("p")
    f = b.field("f", [I, K], float64)
    e = ff.astype(f(I + 1) * 2, ff.float32)
    assert e.dtype == ff.float32 and [d.name for d in e.dims] == ["I", "K"]
    assert (f > 1.0).dtype == ff.bool_
    assert (ff.astype(f, ff.float32) * np.float32(2)).dtype == ff.float32  # numpy scalars keep their dtype
    with pytest.raises(ff.DTypeError, match="float64 and float32"):
        f * np.float32(2)
    with pytest.raises(ff.DTypeError):
        f & f  # logical operators need bool
    with pytest.raises(ff.DimensionError):
        ff.neighbor_sum(f, axis=I)
