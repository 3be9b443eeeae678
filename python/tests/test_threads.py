"""A call releases the GIL: two Python threads run two programs at the same time."""

import threading

import numpy as np

import fieldflow as ff
from conftest import I, K
from fieldflow import Field, field_operator, float64, int32, program

IK = Field[[I, K], float64]


@field_operator
def heavy(a: IK) -> IK:
    x = a
    for step in range(40):  # 40 dependent transcendental steps per point: a long call
        x = ff.sin(x) * 0.999 + ff.exp(-x * x)
        if step == 19:
            x = ff.materialize("half_way", x)  # a transient, so that memory is asked for
    return x


@program
def heavy_program(a: IK, out: IK, ni: int32, nk: int32):
    heavy(a, out=out, domain={I: (0, ni), K: (0, nk)})


def numpy_heavy(a):
    x = a
    for _ in range(40):
        x = np.sin(x) * 0.999 + np.exp(-x * x)
    return x


def test_two_threads_run_two_programs_concurrently():
    # Program A's external allocator runs at the start of its call (the only Python code inside
    # it) and signals that A is inside; the main thread then runs program B to completion while A
    # is still computing. Were the GIL held during A's call, the main thread could not run until
    # A had returned.
    inside, a_done = threading.Event(), threading.Event()

    def allocator(request):
        inside.set()
        return ff.zeros(request.bytes, np.uint8)

    a_prog = heavy_program.compile(num_threads=1, external_memory_allocator=allocator)
    b_prog = heavy_program.compile(num_threads=1)
    big = np.random.default_rng(5).random((2000, 300))
    small = np.random.default_rng(6).random((20, 30))
    a_out, b_out = np.zeros_like(big), np.zeros_like(small)
    errors = []

    def run_a():
        try:
            a_prog(big, a_out, ni=big.shape[0], nk=big.shape[1])
        except Exception as e:  # reported by the main thread
            errors.append(e)
        a_done.set()

    plan = a_prog.memory_plan(ni=big.shape[0], nk=big.shape[1])
    assert plan.packed_bytes > 0, "the heavy program must need a transient, so that the allocator runs"
    worker = threading.Thread(target=run_a)
    worker.start()
    assert inside.wait(60)
    b_prog(small, b_out, ni=small.shape[0], nk=small.shape[1])
    b_finished_while_a_ran = not a_done.is_set()
    worker.join()
    assert not errors
    assert b_finished_while_a_ran
    np.testing.assert_allclose(b_out, numpy_heavy(small), rtol=1e-10)
    np.testing.assert_allclose(a_out, numpy_heavy(big), rtol=1e-10)


def test_concurrent_calls_on_one_program_are_serialized():
    # Persistent memory: one transient buffer per instance, which overlapping calls would share.
    prog = heavy_program.compile(num_threads=1, transient_memory_mode="persistent")
    arrays = [np.random.default_rng(i).random((50, 40)) for i in range(4)]
    outs = [np.zeros_like(a) for a in arrays]
    threads = [threading.Thread(target=prog, args=(a, o), kwargs={"ni": 50, "nk": 40}) for a, o in zip(arrays, outs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for a, o in zip(arrays, outs):
        np.testing.assert_allclose(o, numpy_heavy(a), rtol=1e-10)
    stats = prog.memory_stats()
    assert stats.calls == 4 and stats.system_allocations == 1
