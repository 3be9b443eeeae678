"""Two weather-model kernels written GT4Py-style, run with fieldflow on numpy arrays, checked
against plain numpy and timed against it:

  - hdiff: COSMO's horizontal diffusion with flux limiting on a Cartesian grid (I, J, K);
  - divergence: an ICON-style reduction from edges to cells over the C2E connectivity of a
    triangular torus mesh, weighted by a geometric factor per cell and neighbour.

    python hdiff_and_mesh.py            # 128 x 128 x 64 grid, 128 x 128 torus mesh x 64 levels
    python hdiff_and_mesh.py --small    # a quick check
"""

import argparse
import time

import numpy as np

import fieldflow as ff
from fieldflow import Dimension, Field, field_operator, float64, int32, neighbor_sum, program

I, J = Dimension("I"), Dimension("J")
K = Dimension("K", kind=ff.VERTICAL)
IJK = Field[[I, J, K], float64]


@field_operator
def laplacian(f: IJK) -> IJK:
    return -4.0 * f + f(I + 1) + f(I - 1) + f(J + 1) + f(J - 1)


@field_operator
def hdiff_op(inp: IJK, coeff: IJK) -> IJK:
    lap = laplacian(inp)
    flx = lap(I + 1) - lap
    flx = ff.where(flx * (inp(I + 1) - inp) > 0.0, 0.0, flx)
    fly = lap(J + 1) - lap
    fly = ff.where(fly * (inp(J + 1) - inp) > 0.0, 0.0, fly)
    return inp - coeff * (flx - flx(I - 1) + fly - fly(J - 1))


@program
def hdiff(inp: IJK, coeff: IJK, out: IJK, ni: int32, nj: int32, nk: int32):
    hdiff_op(inp, coeff, out=out, domain={I: (0, ni), J: (0, nj), K: (0, nk)})


def hdiff_numpy(inp, coeff):
    """inp has a halo of 2 on each horizontal side; coeff and the result do not."""
    lap = -4.0 * inp[1:-1, 1:-1] + inp[2:, 1:-1] + inp[:-2, 1:-1] + inp[1:-1, 2:] + inp[1:-1, :-2]
    flx = lap[1:, 1:-1] - lap[:-1, 1:-1]
    flx = np.where(flx * (inp[2:-1, 2:-2] - inp[1:-2, 2:-2]) > 0.0, 0.0, flx)
    fly = lap[1:-1, 1:] - lap[1:-1, :-1]
    fly = np.where(fly * (inp[2:-2, 2:-1] - inp[2:-2, 1:-2]) > 0.0, 0.0, fly)
    return inp[2:-2, 2:-2] - coeff * (flx[1:] - flx[:-1] + fly[:, 1:] - fly[:, :-1])


Edge, Cell = Dimension("Edge"), Dimension("Cell")
C2E = ff.Connectivity("C2E", source=Cell, target=Edge, max_neighbors=3)
C2EDim = C2E.local


@field_operator
def divergence_op(vn: Field[[Edge, K], float64], geofac: Field[[Cell, C2EDim], float64]) -> Field[[Cell, K], float64]:
    return neighbor_sum(vn(C2E) * geofac, axis=C2EDim)


@program
def divergence(vn: Field[[Edge, K], float64], geofac: Field[[Cell, C2EDim], float64], div: Field[[Cell, K], float64],
               n_cells: int32, nk: int32):
    divergence_op(vn, geofac, out=div, domain={Cell: (0, n_cells), K: (0, nk)})


def divergence_numpy(vn, geofac, c2e):
    return (vn[c2e] * geofac[:, :, None]).sum(axis=1)


def best_of(repeats, fn):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="small sizes, for a quick check")
    args = parser.parse_args()
    n, nk, repeats = (16, 8, 2) if args.small else (128, 64, 10)
    rng = np.random.default_rng(0)

    inp = ff.as_field(rng.random((n + 4, n + 4, nk)), origin=(-2, -2, 0))
    coeff = ff.as_field(0.025 * rng.random((n, n, nk)))
    out = ff.zeros((n, n, nk))
    compiled = hdiff.compile(backend="cpu")
    run = lambda: compiled(inp, coeff, out, ni=n, nj=n, nk=nk)  # noqa: E731
    run()
    want = hdiff_numpy(np.asarray(inp), np.asarray(coeff))
    error = np.abs(out - want).max()
    assert error < 1e-12, f"hdiff differs from numpy by {error}"
    t_ff, t_np = best_of(repeats, run), best_of(repeats, lambda: hdiff_numpy(np.asarray(inp), np.asarray(coeff)))
    print(f"hdiff {n}x{n}x{nk}: fieldflow {t_ff * 1e3:.3f} ms, numpy {t_np * 1e3:.3f} ms "
          f"({t_np / t_ff:.1f}x), max difference {error:.1e}")

    mesh = ff.torus_mesh(n, n)
    c2e = mesh["tables"]["C2E"]
    n_edges, n_cells = mesh["n_edges"], mesh["n_cells"]
    vn = rng.random((n_edges, nk))
    geofac = rng.random((n_cells, 3))
    div = ff.zeros((n_cells, nk))
    compiled = divergence.compile(backend="cpu")
    run = lambda: compiled(vn, geofac, div, n_cells=n_cells, nk=nk, C2E=c2e)  # noqa: E731
    run()
    want = divergence_numpy(vn, geofac, c2e)
    error = np.abs(div - want).max()
    assert error < 1e-12, f"divergence differs from numpy by {error}"
    t_ff, t_np = best_of(repeats, run), best_of(repeats, lambda: divergence_numpy(vn, geofac, c2e))
    print(f"divergence on a {n}x{n} torus ({n_cells} cells) x {nk} levels: fieldflow {t_ff * 1e3:.3f} ms, "
          f"numpy {t_np * 1e3:.3f} ms ({t_np / t_ff:.1f}x), max difference {error:.1e}")


if __name__ == "__main__":
    main()
