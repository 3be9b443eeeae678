"""Arrays as fields without copies: numpy arrays, buffer protocol, __array_interface__ and DLPack
objects; strides respected, layouts and types checked as in C++."""

import numpy as np
import pytest

import fieldflow as ff
from conftest import Edge, I, K, Vertex
from fieldflow import Field, field_operator, float64, int32, program

IK = Field[[I, K], float64]


@field_operator
def blend(a: IK, b: IK) -> IK:
    return 0.25 * a(I - 1) + 0.5 * a + 0.25 * a(I + 1) - b


@program
def blend_program(a: IK, b: IK, out: IK, ni: int32, nk: int32):
    blend(a, b, out=out, domain={I: (1, ni - 1), K: (0, nk)})


def numpy_blend(a, b):
    out = np.zeros_like(b)
    out[1:-1] = 0.25 * a[:-2] + 0.5 * a[1:-1] + 0.25 * a[2:] - b[1:-1]
    return out


@pytest.fixture(scope="module")
def compiled():
    return blend_program.compile()


@pytest.fixture
def data():
    rng = np.random.default_rng(11)
    return rng.random((10, 6)), rng.random((10, 6))


def test_the_output_array_is_written_in_place(compiled, data):
    a, b = data
    out = np.zeros((10, 6))
    pointer = out.ctypes.data
    compiled(a, b, out, ni=10, nk=6)
    assert out.ctypes.data == pointer
    np.testing.assert_allclose(out, numpy_blend(a, b), rtol=1e-12)
    # as_field keeps aligned arrays as they are: the same memory.
    aligned = ff.zeros((10, 6))
    assert ff.as_field(aligned).ctypes.data == aligned.ctypes.data
    compiled(a, b, ff.as_field(aligned), ni=10, nk=6)
    np.testing.assert_allclose(aligned, numpy_blend(a, b), rtol=1e-12)


def test_strided_views_are_read_and_written_through_their_strides(compiled, data):
    a, b = data
    big_a = np.zeros((20, 12))
    big_a[::2, ::2] = a  # a view with strides (2 rows, 2 elements): not unit-stride along K
    wide_out = np.full((10, 9), 7.0)
    out = wide_out[:, 1:7]  # padded rows: unit stride along K, row stride 9
    compiled(a.copy(), b, out, ni=10, nk=6)
    np.testing.assert_allclose(out[1:-1], numpy_blend(a, b)[1:-1], rtol=1e-12)
    assert (wide_out[:, 0] == 7).all() and (wide_out[:, 7:] == 7).all()  # padding untouched
    with pytest.raises(ff.LayoutError, match="K"):
        compiled(big_a[::2, ::2], b, out, ni=10, nk=6)


def test_fortran_order_arrays_with_a_horizontal_fastest_program(data):
    a, b = data
    fortran = blend_program.compile(layout="horizontal_fastest")
    fa, fb = np.asfortranarray(a), np.asfortranarray(b)
    out = ff.zeros((10, 6), layout=fortran)
    assert out.flags.f_contiguous and out.ctypes.data % 64 == 0
    fortran(fa, fb, out, ni=10, nk=6)
    np.testing.assert_allclose(out, numpy_blend(a, b), rtol=1e-12)
    with pytest.raises(ff.LayoutError):
        fortran(a, b, out, ni=10, nk=6)  # C order: K has unit stride, I does not


def test_buffer_protocol_array_interface_and_dlpack_objects(compiled, data):
    a, b = data

    class OnlyArrayInterface:
        def __init__(self, array):
            self.array = array
            self.__array_interface__ = array.__array_interface__

    class OnlyDLPack:
        def __init__(self, array):
            self.array = array

        def __dlpack__(self, **kwargs):
            return self.array.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return self.array.__dlpack_device__()

    out = np.zeros((10, 6))
    compiled(memoryview(a), OnlyDLPack(b), OnlyArrayInterface(out), ni=10, nk=6)
    np.testing.assert_allclose(out, numpy_blend(a, b), rtol=1e-12)


def test_bad_arrays_are_typed_errors_naming_the_parameter(compiled, data):
    a, b = data
    out = np.zeros((10, 6))
    with pytest.raises(ff.DTypeError, match="'a' is float64, given an array of float32"):
        compiled(a.astype(np.float32), b, out, ni=10, nk=6)
    with pytest.raises(ff.ArgumentError, match="'b' has 2 dimensions.*given an array of 3"):
        compiled(a, b[:, :, None], out, ni=10, nk=6)
    with pytest.raises(ff.ArgumentError, match="'a' expects an array.*list"):
        compiled([[1.0]], b, out, ni=10, nk=6)
    readonly = np.zeros((10, 6))
    readonly.flags.writeable = False
    with pytest.raises(ff.ArgumentError, match="'out' is written, given a read-only array"):
        compiled(a, b, readonly, ni=10, nk=6)
    with pytest.raises(ff.DomainError):
        compiled(a, b, np.zeros((5, 6)), ni=10, nk=6)
    with pytest.raises(ff.ArgumentError, match="missing arguments: nk"):
        compiled(a, b, out, ni=10)
    with pytest.raises(ff.ArgumentError, match="no parameter 'nz'"):
        compiled(a, b, out, ni=10, nk=6, nz=3)
    with pytest.raises(ff.ArgumentError, match="given twice"):
        compiled(a, b, out, 10, 6, nk=6)
    with pytest.raises(ff.ArgumentError, match="nk"):
        compiled(a, b, out, ni=10, nk=6.5)
    with pytest.raises(ff.ArgumentError, match="output .out. and argument .b. share memory"):
        compiled(a, b, b, ni=10, nk=6)
    assert not out.any()  # every rejected call wrote nothing


def test_positional_scalars_and_repeated_calls_over_new_arrays(compiled, data):
    a, b = data
    for scale in (1.0, 2.0, 3.0):  # a time loop: new arrays, same shapes
        out = np.zeros((10, 6))
        compiled(a * scale, b, out, 10, 6)
        np.testing.assert_allclose(out, numpy_blend(a * scale, b), rtol=1e-12)


def test_empty_and_zeros_are_aligned_in_the_layouts_order():
    c = ff.empty((3, 4, 5), np.float32)
    assert c.dtype == np.float32 and c.flags.c_contiguous and c.ctypes.data % 64 == 0
    f = ff.zeros((3, 4, 5), layout="horizontal_fastest", origin=(-1, 0, 0))
    assert f.flags.f_contiguous and not f.any() and f.origin == (-1, 0, 0)
    assert (f + 1).origin is None  # results of arithmetic are plain arrays starting at 0
    copied = ff.as_field(np.arange(10.0)[::2])
    assert copied.flags.c_contiguous and copied.ctypes.data % 64 == 0
    np.testing.assert_array_equal(copied, np.arange(10.0)[::2])


E2V = ff.Connectivity("E2V", source=Edge, target=Vertex, max_neighbors=2)


@program
def edge_sum(psi: Field[[Vertex], float64], s: Field[[Edge], float64], n_edges: int32):
    edge_value(psi, out=s, domain={Edge: (0, n_edges)})


@field_operator
def edge_value(psi: Field[[Vertex], float64]) -> Field[[Edge], float64]:
    return psi(E2V[0]) + 10.0 * psi(E2V[1])


def test_connectivity_tables_from_int32_arrays_in_c_and_fortran_order():
    prog = edge_sum.compile()
    table = np.array([[0, 1], [1, 2], [2, 0], [3, 1]], dtype=np.int32)
    psi = np.array([1.0, 2.0, 3.0, 4.0])
    out = np.zeros(4)
    prog(psi, out, n_edges=4, E2V=table)
    np.testing.assert_array_equal(out, psi[table[:, 0]] + 10 * psi[table[:, 1]])
    out[:] = 0
    prog(psi, out, n_edges=4, offset_provider={"E2V": np.asfortranarray(table)})  # GT4Py's spelling
    np.testing.assert_array_equal(out, psi[table[:, 0]] + 10 * psi[table[:, 1]])
    with pytest.raises(ff.ConnectivityError, match="int32"):
        prog(psi, out, n_edges=4, E2V=table.astype(np.int64))
    with pytest.raises(ff.ConnectivityError):
        prog(psi, out, n_edges=4, E2V=np.array([[0, 1], [1, 9], [2, 0], [3, 1]], dtype=np.int32))
    with pytest.raises(ff.ConnectivityError):
        prog(psi, out, n_edges=4, E2V=table[:, :1].copy())
    with pytest.raises(ff.ArgumentError, match="E2V"):
        prog(psi, out, n_edges=4)
