# fieldflow from Python: a Laplacian of a Laplacian over numpy arrays, compiled for the CPU, with
# the memory of the intermediate field supplied by the host through an allocator callback.
import numpy as np

import fieldflow as ff
from fieldflow import Dimension, Field, field_operator, float64, int32, program

I, J = Dimension("I"), Dimension("J")
K = Dimension("K", kind=ff.VERTICAL)
IJK = Field[[I, J, K], float64]


@field_operator
def laplacian(f: IJK) -> IJK:
    return -4.0 * f + f(I + 1) + f(I - 1) + f(J + 1) + f(J - 1)


@field_operator
def lap_of_lap(f: IJK) -> IJK:
    return laplacian(ff.materialize("lap", laplacian(f)))  # the inner result is a transient


@program
def lap_program(inp: IJK, out: IJK, n: int32, nk: int32):
    lap_of_lap(inp, out=out, domain={I: (0, n), J: (0, n), K: (0, nk)})


blocks = []  # the requests the allocator received (fieldflow keeps the arrays until the program is released)


def allocator(request):  # request.bytes, request.device, request.alignment
    assert request.device == ff.Device.CPU and request.alignment <= 256
    blocks.append(request)
    return ff.empty(request.bytes, np.uint8)  # 256-byte aligned


compiled = lap_program.compile(backend="cpu", external_memory_allocator=allocator)
size, levels = 32, 8
inp = ff.zeros((size + 4, size + 4, levels), origin=(-2, -2, 0))  # a halo of 2: indices -2 .. size+1
inp[...] = 1.0
inp[5 + 2, 5 + 2, 0] = 2.0  # the point (5, 5, 0)
out = ff.zeros((size, size, levels))
for step in range(10):  # the time loop: no allocation per call, the arrays are used in place
    compiled(inp, out, n=size, nk=levels)

assert out[5, 5, 0] == 20.0  # (-4)^2 + 4 x 1
assert len(blocks) == 1 and compiled.memory_stats().allocator_calls == 1
print("lap_of_lap at (5, 5, 0):", out[5, 5, 0])
