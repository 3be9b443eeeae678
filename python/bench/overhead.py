"""Benchmark (not a test): what calling a compiled program from Python costs.

  1. per-call overhead: a program over one point, called from Python (arguments converted and
     bound, GIL released) against the same calls made from C++ on arguments bound once;
  2. a large program (COSMO hdiff, 256 x 256 x 64) called from Python against the same calls from C++.

Each round's mean time per call; the median over the rounds. Run with the package installed (scripts/test-python.sh builds it):

    build/python-venv/bin/python python/bench/overhead.py
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import fieldflow as ff
from fieldflow import Dimension, Field, field_operator, float64, int32, program

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from hdiff_and_mesh import hdiff  # noqa: E402

I = Dimension("I")


@field_operator
def add_one(a: Field[[I], float64]) -> Field[[I], float64]:
    return a + 1.0


@program
def one_point(a: Field[[I], float64], out: Field[[I], float64], n: int32):
    add_one(a, out=out, domain={I: (0, n)})


def python_seconds_per_call(call, calls):
    start = time.perf_counter()
    for _ in range(calls):
        call()
    return (time.perf_counter() - start) / calls


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--size", type=int, default=256)
    args = parser.parse_args()

    compiled = one_point.compile()
    a, out = np.zeros(1), np.zeros(1)
    calls = 20000
    py, cpp = [], []
    for _ in range(args.rounds):
        py.append(python_seconds_per_call(lambda: compiled(a, out, n=1), calls))
        py.append(python_seconds_per_call(lambda: compiled(a, out, 1), calls))
        cpp.append(statistics.fmean(compiled._time_calls_from_cpp(calls, a, out, n=1)))
    assert out[0] == 1.0
    py_median, cpp_median = statistics.median(py), statistics.median(cpp)
    print(f"1-point program: {py_median * 1e6:.2f} us per call from Python, {cpp_median * 1e6:.2f} us from C++: "
          f"overhead {(py_median - cpp_median) * 1e6:.2f} us per call")

    n, nk = args.size, 64
    rng = np.random.default_rng(0)
    inp = ff.as_field(rng.random((n + 4, n + 4, nk)), origin=(-2, -2, 0))
    coeff = ff.as_field(0.025 * rng.random((n, n, nk)))
    result = ff.zeros((n, n, nk))
    compiled = hdiff.compile()
    sizes = {"ni": n, "nj": n, "nk": nk}
    compiled(inp, coeff, result, **sizes)  # warm: memory installed, threads started
    py, cpp = [], []
    for _ in range(args.rounds):
        py.append(python_seconds_per_call(lambda: compiled(inp, coeff, result, **sizes), 10))
        cpp.append(statistics.fmean(compiled._time_calls_from_cpp(10, inp, coeff, result, **sizes)))
    py_median, cpp_median = statistics.median(py), statistics.median(cpp)
    print(f"hdiff {n}x{n}x{nk}: {py_median * 1e3:.3f} ms per call from Python, {cpp_median * 1e3:.3f} ms from C++: "
          f"Python / C++ = {py_median / cpp_median:.4f}")


if __name__ == "__main__":
    main()
