import os

import numpy as np
import pytest

import fieldflow as ff

# Compiled modules are cached on disk; the test script points this into build/ (CI reruns hit it).
os.environ.setdefault("FIELDFLOW_CACHE_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "build",
                                                          "python-test-cache"))

I, J = ff.Dimension("I"), ff.Dimension("J")
K = ff.Dimension("K", kind=ff.VERTICAL)
Vertex, Edge, Cell = ff.Dimension("Vertex"), ff.Dimension("Edge"), ff.Dimension("Cell")


# The backends every language test runs on; each compares with a numpy reference in the test.
# parallel_threshold=0 makes the cpu backend take its parallel (OpenMP) path even on small grids.
BACKENDS = [
    pytest.param({"backend": "reference"}, id="reference"),
    pytest.param({"backend": "cpu", "parallel_threshold": 0, "num_threads": 2}, id="cpu-parallel"),
]


@pytest.fixture(params=BACKENDS)
def options(request):
    return request.param


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
