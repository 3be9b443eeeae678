"""The language from Python on both backends, against numpy references written here."""

import numpy as np
import pytest

import fieldflow as ff
from conftest import Cell, Edge, I, J, K, Vertex
from fieldflow import Field, field_operator, float64, int32, program, scan_operator

IJK = Field[[I, J, K], float64]


@field_operator
def laplacian(f: IJK) -> IJK:
    return -4.0 * f + f(I + 1) + f(I - 1) + f(J + 1) + f(J - 1)


@field_operator
def lap_of_lap(f: IJK) -> IJK:
    return laplacian(laplacian(f))  # operators call operators


@program
def lap_program(inp: IJK, out: IJK, n: int32, m: int32, nk: int32):
    lap_of_lap(inp, out=out, domain={I: (0, n), J: (0, m), K: (0, nk)})


def np_lap(a):
    return -4.0 * a[1:-1, 1:-1] + a[2:, 1:-1] + a[:-2, 1:-1] + a[1:-1, 2:] + a[1:-1, :-2]


def test_shifts_with_a_halo_given_as_origin(options, rng):
    n, m, nk = 9, 7, 5
    inp = ff.as_field(rng.random((n + 4, m + 4, nk)), origin=(-2, -2, 0))
    out = ff.zeros((n, m, nk))
    lap_program.compile(**options)(inp, out, n=n, m=m, nk=nk)
    np.testing.assert_allclose(out, np_lap(np_lap(np.asarray(inp))), rtol=1e-12)


@field_operator
def pointwise(a: IJK, b: IJK):
    s = ff.sqrt(ff.abs(a)) + ff.exp(-b) * ff.sin(a) - ff.maximum(a, b) ** 2
    t = ff.where(a > b, ff.minimum(a, 0.5), ff.floor(b * 3.0) / 3.0)
    c = ff.astype(ff.astype(a * 10.0, ff.int32) % 3, float64)
    return s + t, c - ff.fmod(b, 0.3)


@program
def pointwise_program(a: IJK, b: IJK, out: tuple[IJK, IJK], n: int32, m: int32, nk: int32):
    pointwise(a, b, out=out, domain={I: (0, n), J: (0, m), K: (0, nk)})


def test_math_where_astype_and_tuple_outputs(options, rng):
    shape = (6, 5, 4)
    a, b = rng.random(shape) * 2 - 1, rng.random(shape)
    x, y = ff.zeros(shape), ff.zeros(shape)
    pointwise_program.compile(**options)(a, b, (x, y), n=6, m=5, nk=4)
    s = np.sqrt(np.abs(a)) + np.exp(-b) * np.sin(a) - np.maximum(a, b) ** 2
    t = np.where(a > b, np.minimum(a, 0.5), np.floor(b * 3.0) / 3.0)
    c = ((a * 10.0).astype(np.int32) % 3).astype(np.float64)
    np.testing.assert_allclose(x, s + t, rtol=1e-12)
    np.testing.assert_allclose(y, c - np.fmod(b, 0.3), rtol=1e-12)


IK = Field[[I, K], float64]


@field_operator
def boundaries(f: IK, nk: int32) -> IK:
    # First and last level kept, the rest smoothed vertically.
    inner = 0.5 * f + 0.25 * (f(K + 1) + f(K - 1))
    return ff.concat_where((K == 0) | (K == nk - 1), f, inner)


@program
def boundaries_program(f: IK, out: IK, ni: int32, nk: int32):
    boundaries(f, nk, out=out, domain={I: (0, ni), K: (0, nk)})


def test_concat_where_on_vertical_levels(options, rng):
    f = rng.random((4, 7))
    out = np.full((4, 7), -1.0)
    boundaries_program.compile(**options)(f, out, ni=4, nk=7)
    want = f.copy()
    want[:, 1:-1] = 0.5 * f[:, 1:-1] + 0.25 * (f[:, 2:] + f[:, :-2])
    np.testing.assert_allclose(out, want, rtol=1e-12)


@scan_operator(axis=K, forward=True, init=0.0)
def running_sum(carry: float, x: float) -> float:
    return carry + x


@scan_operator(axis=K, forward=False, init=(0.0, 1.0))
def backward_pair(carry, x, w):
    return carry[0] + x * w, carry[1] * 0.5 + w


@program
def scan_program(x: IK, w: IK, total: IK, pair: tuple[IK, IK], ni: int32, nk: int32):
    running_sum(x, out=total, domain={I: (0, ni), K: (0, nk)})
    backward_pair(x, w, out=pair, domain={I: (0, ni), K: (0, nk)})


def test_scans_forward_and_backward_with_a_tuple_carry(options, rng):
    ni, nk = 3, 6
    x, w = rng.random((ni, nk)), rng.random((ni, nk))
    total, p0, p1 = np.zeros((ni, nk)), np.zeros((ni, nk)), np.zeros((ni, nk))
    scan_program.compile(**options)(x, w, total, (p0, p1), ni=ni, nk=nk)
    np.testing.assert_allclose(total, np.cumsum(x, axis=1), rtol=1e-12)
    want0, want1 = np.zeros((ni, nk)), np.zeros((ni, nk))
    c0, c1 = np.zeros(ni), np.ones(ni)
    for k in reversed(range(nk)):
        c0, c1 = c0 + x[:, k] * w[:, k], c1 * 0.5 + w[:, k]
        want0[:, k], want1[:, k] = c0, c1
    np.testing.assert_allclose(p0, want0, rtol=1e-12)
    np.testing.assert_allclose(p1, want1, rtol=1e-12)


E2V = ff.Connectivity("E2V", source=Edge, target=Vertex, max_neighbors=2)
V2E = ff.Connectivity("V2E", source=Vertex, target=Edge, max_neighbors=6)
C2E = ff.Connectivity("C2E", source=Cell, target=Edge, max_neighbors=3)
V2EDim, C2EDim = V2E.local, C2E.local
VK, EK, CK = Field[[Vertex, K], float64], Field[[Edge, K], float64], Field[[Cell, K], float64]


@field_operator
def edge_difference(psi: VK) -> EK:
    return psi(E2V[1]) - psi(E2V[0])


@field_operator
def vertex_stats(g: EK, sign: Field[[Vertex, V2EDim], float64]):
    return (ff.neighbor_sum(g(V2E) * sign, axis=V2EDim), ff.max_over(g(V2E), axis=V2EDim),
            ff.min_over(g(V2E), axis=V2EDim))


@field_operator
def cell_mean(g: EK) -> CK:
    return ff.neighbor_sum(g(C2E), axis=C2EDim) / 3.0


@program
def mesh_program(psi: VK, sign: Field[[Vertex, V2EDim], float64], grad: EK, stats: tuple[VK, VK, VK], mean: CK,
                 n_vertices: int32, n_edges: int32, n_cells: int32, nk: int32):
    edge_difference(psi, out=grad, domain={Edge: (0, n_edges), K: (0, nk)})
    vertex_stats(grad, sign, out=stats, domain={Vertex: (0, n_vertices), K: (0, nk)})
    cell_mean(grad, out=mean, domain={Cell: (0, n_cells), K: (0, nk)})


def test_unstructured_shifts_and_reductions_with_skipped_neighbours(options, rng):
    mesh = ff.bounded_mesh(5, 4)  # boundary vertices have missing (-1) edges
    t = mesh["tables"]
    nv, ne, nc, nk = mesh["n_vertices"], mesh["n_edges"], mesh["n_cells"], 3
    assert (t["V2E"] == -1).any()
    psi, sign = rng.random((nv, nk)), rng.random((nv, 6))
    grad, mean = np.zeros((ne, nk)), np.zeros((nc, nk))
    stats = tuple(np.zeros((nv, nk)) for _ in range(3))
    mesh_program.compile(**options)(psi, sign, grad, stats, mean, n_vertices=nv, n_edges=ne, n_cells=nc, nk=nk,
                                    E2V=t["E2V"], V2E=t["V2E"], C2E=t["C2E"])
    e2v, v2e, c2e = t["E2V"], t["V2E"], t["C2E"]
    want_grad = psi[e2v[:, 1]] - psi[e2v[:, 0]]
    np.testing.assert_allclose(grad, want_grad, rtol=1e-12)
    present = (v2e >= 0)[:, :, None]
    g = want_grad[np.maximum(v2e, 0)]  # (nv, 6, nk)
    np.testing.assert_allclose(stats[0], np.where(present, g * sign[:, :, None], 0).sum(axis=1), rtol=1e-12)
    np.testing.assert_allclose(stats[1], np.where(present, g, -np.inf).max(axis=1), rtol=1e-12)
    np.testing.assert_allclose(stats[2], np.where(present, g, np.inf).min(axis=1), rtol=1e-12)
    np.testing.assert_allclose(mean, want_grad[c2e].sum(axis=1) / 3.0, rtol=1e-12)


def test_both_loop_forms_and_their_tuning_give_the_references_bits(rng):
    # Horizontal-fastest mesh kernels run their element blocks in a scalar or a vector form
    # (LoopForm): each pinned, and tuned (the first calls alternate them, then one stays).
    mesh = ff.bounded_mesh(13, 11)  # blocks of elements with and without missing neighbours
    t = mesh["tables"]
    nv, ne, nc, nk = mesh["n_vertices"], mesh["n_edges"], mesh["n_cells"], 3
    sizes = dict(n_vertices=nv, n_edges=ne, n_cells=nc, nk=nk, E2V=t["E2V"], V2E=t["V2E"], C2E=t["C2E"])

    def run(compiled, seed):
        data = np.random.default_rng(seed)
        psi, sign = np.asfortranarray(data.random((nv, nk))), np.asfortranarray(data.random((nv, 6)))
        outs = [np.asfortranarray(np.zeros(shape)) for shape in [(ne, nk), (nv, nk), (nv, nk), (nv, nk), (nc, nk)]]
        compiled(psi, sign, outs[0], tuple(outs[1:4]), outs[4], **sizes)
        return outs

    reference = mesh_program.compile(backend="reference", layout="horizontal_fastest")
    for form in ["scalar", ff.LoopForm.vector]:
        compiled = mesh_program.compile(layout="horizontal_fastest", loop_form=form, num_threads=3,
                                        parallel_threshold=0)
        assert compiled.loop_form == (ff.LoopForm.scalar if form == "scalar" else ff.LoopForm.vector)
        for got, want in zip(run(compiled, 1), run(reference, 1)):
            np.testing.assert_array_equal(got, want)
    tuned = mesh_program.compile(layout="horizontal_fastest", num_threads=3, parallel_threshold=0)
    assert tuned.loop_form == ff.LoopForm.tuned
    for call in range(9):
        for got, want in zip(run(tuned, 10 + call), run(reference, 10 + call)):
            np.testing.assert_array_equal(got, want)
    assert tuned.loop_form in (ff.LoopForm.scalar, ff.LoopForm.vector)
    with pytest.raises(ff.OptionError, match="unknown loop form 'fast'"):
        mesh_program.compile(layout="horizontal_fastest", loop_form="fast")
    # Set on a compiled program: pinned, or timed again (e.g. for new sizes); a bad name changes nothing.
    tuned.loop_form = "vector"
    assert tuned.loop_form == ff.LoopForm.vector
    with pytest.raises(ff.OptionError, match="unknown loop form 'fast'"):
        tuned.loop_form = "fast"
    assert tuned.loop_form == ff.LoopForm.vector
    tuned.loop_form = ff.LoopForm.tuned
    for call in range(7):
        assert tuned.loop_form == ff.LoopForm.tuned
        for got, want in zip(run(tuned, 30 + call), run(reference, 30 + call)):
            np.testing.assert_array_equal(got, want)
    assert tuned.loop_form in (ff.LoopForm.scalar, ff.LoopForm.vector)


@field_operator
def shifted_sum(f: IK, off: Field[[I, K], ff.int32], dt: float64, flag: bool) -> IK:
    values = f(K + off) * dt + ff.broadcast(ff.astype(ff.index(K), float64), [I, K])
    return ff.if_(flag, values, -values)


@program
def dynamic_program(f: IK, off: Field[[I, K], ff.int32], out: IK, dt: float64, flag: bool, ni: int32, nk: int32):
    shifted_sum(f, off, dt, flag, out=out, domain={I: (0, ni), K: (0, nk)})


def test_dynamic_vertical_offsets_index_broadcast_and_scalar_if(options, rng):
    ni, nk = 4, 6
    f = rng.random((ni, nk))
    off = np.where(np.arange(nk) < nk - 1, 1, -1).astype(np.int32) * np.ones((ni, 1), np.int32)
    out = np.zeros((ni, nk))
    compiled = dynamic_program.compile(**options)
    for dt, flag in [(0.5, True), (2, False)]:
        compiled(f, off, out, dt=dt, flag=flag, ni=ni, nk=nk)
        k = np.arange(nk)
        want = f[:, k + off[0]] * dt + k
        np.testing.assert_allclose(out, want if flag else -want, rtol=1e-12)


def test_the_default_layout_is_the_backends():
    assert pointwise_program.compile().layout == ff.Layout.vertical_fastest
    assert pointwise_program.compile(backend="reference", layout=None).layout == ff.Layout.vertical_fastest
    assert pointwise_program.compile(layout="horizontal_fastest").layout == ff.Layout.horizontal_fastest


@pytest.mark.skipif(not hasattr(ff.Backend, "cuda"), reason="this build of fieldflow has no cuda backend")
def test_cuda_backend_against_numpy(rng):
    cupy = pytest.importorskip("cupy", reason="cupy is needed to hand device arrays to the cuda backend")
    shape = (6, 5, 4)
    a, b = rng.random(shape) * 2 - 1, rng.random(shape)
    # Fortran order: I unit-stride, the cuda backend's default layout (horizontal_fastest).
    x, y = cupy.zeros(shape, order="F"), cupy.zeros(shape, order="F")
    compiled = pointwise_program.compile(backend="cuda")
    assert compiled.layout == ff.Layout.horizontal_fastest
    compiled(cupy.asarray(a, order="F"), cupy.asarray(b, order="F"), (x, y), n=6, m=5, nk=4)
    reference = pointwise_program.compile(backend="reference")
    want_x, want_y = np.zeros(shape), np.zeros(shape)
    reference(a, b, (want_x, want_y), n=6, m=5, nk=4)
    np.testing.assert_allclose(cupy.asnumpy(x), want_x, rtol=1e-12)
    np.testing.assert_allclose(cupy.asnumpy(y), want_y, rtol=1e-12)
