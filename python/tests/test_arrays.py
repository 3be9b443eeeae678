"""Arrays as fields without copies: numpy arrays, buffer protocol, __array_interface__ and DLPack
objects; strides respected, layouts and types checked as in C++."""

import ctypes

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


def test_views_that_interleave_in_one_array_are_inputs_and_outputs_of_one_call(compiled, data):
    """The components of an array of structures: their spans overlap, their elements do not
    (np.shares_memory is False), so one call reads two and writes the third, only its elements."""
    a, b = data
    x = np.full((10, 3, 6), -1.0)
    x[:, 0, :] = a
    x[:, 1, :] = b
    assert np.may_share_memory(x[:, 1, :], x[:, 2, :]) and not np.shares_memory(x[:, 1, :], x[:, 2, :])
    compiled(x[:, 0, :], x[:, 1, :], x[:, 2, :], ni=10, nk=6)
    np.testing.assert_allclose(x[1:-1, 2, :], numpy_blend(a, b)[1:-1], rtol=1e-12)
    assert (x[[0, -1], 2, :] == -1.0).all()  # outside the domain
    np.testing.assert_array_equal(x[:, 0, :], a)
    np.testing.assert_array_equal(x[:, 1, :], b)
    # A view that does share elements with an input is still refused, before anything is written.
    y = np.zeros((11, 6))
    with pytest.raises(ff.ArgumentError, match="output .out. and argument .b. share memory"):
        compiled(a, y[:10], y[1:], ni=10, nk=6)
    assert not y.any()


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
    # What fieldflow's views refuse (negative strides, misaligned data) names the parameter too.
    with pytest.raises(ff.ArgumentError, match="field 'out': .*stride along I must be >= 0 elements, given -6"):
        compiled(a, b, np.zeros((10, 6))[::-1], ni=10, nk=6)
    unaligned = np.zeros(10 * 6 * 8 + 1, dtype=np.uint8)[1:].view(np.float64).reshape(10, 6)
    with pytest.raises(ff.ArgumentError, match="field 'b': .*misaligned for float64"):
        compiled(a, unaligned, out, ni=10, nk=6)
    with pytest.raises(ff.ArgumentError, match="missing arguments: nk"):
        compiled(a, b, out, ni=10)
    with pytest.raises(ff.ArgumentError, match="no parameter 'nz'"):
        compiled(a, b, out, ni=10, nk=6, nz=3)
    with pytest.raises(ff.ArgumentError, match="given twice"):
        compiled(a, b, out, 10, 6, nk=6)
    with pytest.raises(ff.ArgumentError, match="nk"):
        compiled(a, b, out, ni=10, nk=6.5)
    with pytest.raises(ff.ArgumentError, match="scalar 'ni' expects int32: .*given an object of type ndarray"):
        compiled(a, b, out, ni=np.array([10], dtype=np.int32), nk=6)
    with pytest.raises(ff.ArgumentError, match="scalar 'nk' expects int32: .*given an object of type str"):
        compiled(a, b, out, ni=10, nk="6")
    with pytest.raises(ff.ArgumentError, match="scalar 'nk' expects int32: the integer .* does not fit int64"):
        compiled(a, b, out, ni=10, nk=2**70)
    with pytest.raises(ff.ArgumentError, match="output .out. and argument .b. share memory"):
        compiled(a, b, b, ni=10, nk=6)
    assert not out.any()  # every rejected call wrote nothing


def test_positional_scalars_and_repeated_calls_over_new_arrays(compiled, data):
    a, b = data
    out = np.zeros((10, 6))
    compiled(a, b, out, np.int64(10), np.array(6, dtype=np.int32))  # numpy scalars and 0-d arrays are numbers
    np.testing.assert_allclose(out, numpy_blend(a, b), rtol=1e-12)
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


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int), ("dtype", _DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class DLPackOnDevice:
    """A 2-D int32 array that says, through DLPack, it lives on a device (`device_type` 2: CUDA):
    what a CuPy or PyTorch CUDA table looks like to fieldflow, without a GPU. Its "device" address
    is host memory here, so a host read of it would not fault: the test sees the refusal itself."""

    def __init__(self, host_array, device_type=2):
        self.host, self.device_type, self.keep = np.ascontiguousarray(host_array, dtype=np.int32), device_type, []

    def __dlpack_device__(self):
        return (self.device_type, 0)

    def __dlpack__(self, **kwargs):
        shape = (ctypes.c_int64 * 2)(*self.host.shape)
        strides = (ctypes.c_int64 * 2)(self.host.shape[1], 1)
        tensor = _DLManagedTensor(_DLTensor(self.host.ctypes.data, _DLDevice(self.device_type, 0), 2,
                                            _DLDataType(0, 32, 1), shape, strides, 0), None, None)
        self.keep += [shape, strides, tensor]
        new_capsule = ctypes.pythonapi.PyCapsule_New
        new_capsule.restype, new_capsule.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        return new_capsule(ctypes.addressof(tensor), b"dltensor", None)


def test_a_connectivity_table_in_device_memory_is_refused_and_pinned_memory_is_read():
    # The runtime reads tables on the host: a CUDA table used to be read there, a segfault on a GPU.
    prog = edge_sum.compile()
    table = np.array([[0, 1], [1, 2], [2, 0], [3, 1]], dtype=np.int32)
    psi, out = np.array([1.0, 2.0, 3.0, 4.0]), np.zeros(4)
    with pytest.raises(ff.ConnectivityError, match="'E2V' must be in host memory.*DLPack device type 2"):
        prog(psi, out, n_edges=4, E2V=DLPackOnDevice(table))
    assert not out.any()
    prog(psi, out, n_edges=4, E2V=DLPackOnDevice(table, device_type=3))  # kDLCUDAHost: pinned host memory
    np.testing.assert_array_equal(out, psi[table[:, 0]] + 10 * psi[table[:, 1]])
