"""Benchmark (not a test): what calling a compiled program from Python costs.

  1. per-call overhead: a program over one point, called from Python (arguments converted and
     bound, GIL released) against the same calls made from C++ on arguments bound once;
  2. a large program (COSMO hdiff, 256 x 256 x 64) called from Python against the same calls from C++.

Each round's mean wall and CPU time per call (CPU: of the whole process, OpenMP threads included);
the medians over the rounds. Run with the package installed (scripts/test-python.sh builds it):

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


def per_call(run, calls):
    """(wall seconds, CPU seconds of this process) per call of run(calls)."""
    wall, cpu = time.perf_counter(), time.process_time()
    run(calls)
    return (time.perf_counter() - wall) / calls, (time.process_time() - cpu) / calls


def python_loop(call):
    def run(calls):
        for _ in range(calls):
            call()
    return run


def report(name, py, cpp, unit, scale):
    (py_wall, py_cpu), (cpp_wall, cpp_cpu) = ([statistics.median(x) for x in zip(*r)] for r in (py, cpp))
    print(f"{name}: wall {py_wall * scale:.3f} {unit} per call from Python, {cpp_wall * scale:.3f} {unit} from C++ "
          f"(difference {(py_wall - cpp_wall) * scale:.3f} {unit}, ratio {py_wall / cpp_wall:.4f}); "
          f"CPU {py_cpu * scale:.3f} {unit} from Python, {cpp_cpu * scale:.3f} {unit} from C++ "
          f"(difference {(py_cpu - cpp_cpu) * scale:.3f} {unit}, ratio {py_cpu / cpp_cpu:.4f})")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--size", type=int, default=256)
    args = parser.parse_args()

    compiled = one_point.compile()
    a, out = np.zeros(1), np.zeros(1)
    py, cpp = [], []
    for _ in range(args.rounds):
        py.append(per_call(python_loop(lambda: compiled(a, out, n=1)), 20000))
        cpp.append(per_call(lambda calls: compiled._time_calls_from_cpp(calls, a, out, n=1), 20000))
    assert out[0] == 1.0
    report("1-point program", py, cpp, "us", 1e6)

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
        py.append(per_call(python_loop(lambda: compiled(inp, coeff, result, **sizes)), 10))
        cpp.append(per_call(lambda calls: compiled._time_calls_from_cpp(calls, inp, coeff, result, **sizes), 10))
    report(f"hdiff {n}x{n}x{nk}", py, cpp, "ms", 1e3)


if __name__ == "__main__":
    main()
