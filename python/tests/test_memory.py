"""Transient memory from Python: every mode, the allocator and workspace rules and errors of
shared/design.md section 3, with the C++ error classes."""

import gc
import weakref

import numpy as np
import pytest

import fieldflow as ff
from conftest import I, J, K
from fieldflow import Field, field_operator, float64, int32, program

IJK = Field[[I, J, K], float64]


@field_operator
def smooth_twice(f: IJK) -> IJK:
    # The first smoothing is stored as a transient (materialize) and read at shifted points.
    s = ff.materialize("smoothed", 0.5 * f + 0.125 * (f(I + 1) + f(I - 1) + f(J + 1) + f(J - 1)))
    return 0.5 * s + 0.125 * (s(I + 1) + s(I - 1) + s(J + 1) + s(J - 1))


@program
def smooth(f: IJK, out: IJK, n: int32, nk: int32):
    smooth_twice(f, out=out, domain={I: (2, n - 2), J: (2, n - 2), K: (0, nk)})


@program
def copy(f: IJK, out: IJK, n: int32, nk: int32):
    ident(f, out=out, domain={I: (0, n), J: (0, n), K: (0, nk)})


@field_operator
def ident(f: IJK) -> IJK:
    return f + 0.0


N, NK = 12, 4
SIZES = {"n": N, "nk": NK}


def numpy_smooth(f):
    s = f.copy()
    s[1:-1, 1:-1] = 0.5 * f[1:-1, 1:-1] + 0.125 * (f[2:, 1:-1] + f[:-2, 1:-1] + f[1:-1, 2:] + f[1:-1, :-2])
    out = np.zeros_like(f)
    out[2:-2, 2:-2] = 0.5 * s[2:-2, 2:-2] + 0.125 * (s[3:-1, 2:-2] + s[1:-3, 2:-2] + s[2:-2, 3:-1] + s[2:-2, 1:-3])
    return out


@pytest.fixture
def field():
    return np.random.default_rng(7).random((N, N, NK))


class CountingAllocator:
    """Returns fresh numpy arrays and remembers every request and array (weakly)."""

    def __init__(self, extra=0, offset=0):
        self.requests, self.arrays, self.extra, self.offset = [], [], extra, offset

    def __call__(self, request):
        self.requests.append(request)
        block = ff.empty(request.bytes + self.extra + self.offset + 256, np.uint8)
        start = (-block.ctypes.data) % 256 + self.offset
        view = block[start:start + request.bytes + self.extra]
        self.arrays.append(weakref.ref(block))
        return view


@pytest.mark.parametrize("mode", ["scoped", "persistent", "pool", "external"])
def test_every_mode_gives_the_same_results_by_its_own_allocation_path(field, mode):
    allocator = CountingAllocator()
    extra = {"external_memory_allocator": allocator} if mode == "external" else {}
    prog = smooth.compile(transient_memory_mode=mode, **extra)
    assert prog.memory_mode == ff.TransientMemoryMode.__members__[mode]
    out = np.zeros_like(field)
    for _ in range(4):
        prog(field, out, n=N, nk=NK)
    np.testing.assert_allclose(out, numpy_smooth(field), rtol=1e-12)
    pool = np.zeros_like(field)
    smooth.compile(transient_memory_mode="pool")(field, pool, n=N, nk=NK)
    np.testing.assert_array_equal(out, pool)  # bit for bit the same in every mode
    stats = prog.memory_stats()
    assert stats.calls == 4
    if mode == "scoped":
        assert stats.system_allocations >= 4 and stats.last_call_system_allocations >= 1
    else:
        assert stats.last_call_system_allocations == 0  # steady state: nothing from the system
    if mode == "persistent":
        assert stats.system_allocations == 1
    if mode == "pool":
        assert stats.pool_hits >= 3
    if mode == "external":
        assert stats.allocator_calls == 1 and stats.system_allocations == 0
        assert len(allocator.requests) == 1
        request = allocator.requests[0]
        assert request.device == ff.Device.CPU and request.alignment >= 256 and request.program == "smooth"
        assert request.bytes == prog.workspace_requirements(SIZES)[0].bytes
    else:
        assert stats.allocator_calls == 0 and allocator.requests == []


def test_workspace_requirements_and_plan_before_the_first_call():
    prog = smooth.compile()
    reqs = prog.workspace_requirements(n=N, nk=NK)
    assert [r.device for r in reqs] == [ff.Device.CPU]
    plan = prog.memory_plan(SIZES)
    assert [t.name for t in plan.transients] == ["smoothed"]
    t = plan.transients[0]
    assert t.bytes >= N * N * NK * 8 - 4 * N * NK * 8 and t.offset % 256 == 0
    assert plan.packed_bytes == reqs[0].bytes == plan.bytes_on(ff.Device.CPU)
    assert plan.lower_bound_bytes <= plan.packed_bytes <= plan.naive_sum_bytes
    assert prog.memory_stats().calls == 0
    shared = ff.max_requirements([reqs, copy.compile().workspace_requirements(SIZES)])
    assert shared[0].bytes == reqs[0].bytes


def test_one_caller_owned_workspace_is_used_across_calls_and_programs(field):
    need = smooth.compile().workspace_requirements(SIZES)[0].bytes
    workspace = ff.zeros(need, np.uint8)
    prog = smooth.compile(external_workspace={ff.Device.CPU: workspace})
    other = smooth.compile(external_workspace={ff.Device.CPU: workspace})
    assert prog.memory_mode == ff.TransientMemoryMode.external  # a workspace alone means external
    out, out2 = np.zeros_like(field), np.zeros_like(field)
    for _ in range(3):
        prog(field, out, n=N, nk=NK)
        other(field * 2, out2, n=N, nk=NK)
    np.testing.assert_allclose(out, numpy_smooth(field), rtol=1e-12)
    np.testing.assert_allclose(out2, numpy_smooth(field * 2), rtol=1e-12)
    assert workspace.any()  # the transient lived in the caller's buffer
    stats = prog.memory_stats()
    assert stats.workspace_installs == 1 and stats.system_allocations == 0 and stats.allocator_calls == 0


def test_no_transients_no_workspace_runs_and_asks_nothing(field):
    allocator = CountingAllocator()
    prog = copy.compile(external_memory_allocator=allocator)
    out = np.zeros_like(field)
    prog(field, out, n=N, nk=NK)
    np.testing.assert_array_equal(out, field)
    assert allocator.requests == [] and prog.memory_stats().allocator_calls == 0


def test_option_errors_when_compiling():
    with pytest.raises(ff.OptionError, match="external"):
        smooth.compile(transient_memory_mode="external")  # neither allocator nor workspace
    with pytest.raises(ff.OptionError, match="pool"):
        smooth.compile(transient_memory_mode="pool", external_memory_allocator=CountingAllocator())
    with pytest.raises(ff.OptionError, match="scoped"):
        smooth.compile(transient_memory_mode="scoped", external_workspace={ff.Device.CPU: np.zeros(1024, np.uint8)})
    with pytest.raises(ff.OptionError):
        smooth.compile(external_memory_allocator=CountingAllocator(),
                       external_workspace={ff.Device.CPU: np.zeros(1024, np.uint8)})
    with pytest.raises(ff.OptionError, match="callable"):
        smooth.compile(external_memory_allocator=42)
    with pytest.raises(ff.OptionError, match="bogus"):
        smooth.compile(transient_memory_mode="bogus")


def test_workspace_errors_name_what_was_expected_and_given(field):
    out = np.zeros_like(field)
    need = smooth.compile().workspace_requirements(SIZES)[0].bytes
    # Only a CUDA workspace for a program needing CPU memory: the error names the device.
    fake_cuda = type("FakeCudaArray", (), {"__cuda_array_interface__": {
        "data": (4096, False), "shape": (need,), "typestr": "|u1", "version": 3, "strides": None}})()
    prog = smooth.compile(external_workspace={ff.Device.CUDA: fake_cuda})
    with pytest.raises(ff.WorkspaceError, match="cpu"):
        prog(field, out, n=N, nk=NK)
    small = ff.zeros(need - 256, np.uint8)
    prog = smooth.compile(external_workspace={ff.Device.CPU: small})
    with pytest.raises(ff.WorkspaceError, match=f"{need}.*{need - 256}|{need - 256}.*{need}"):
        prog(field, out, n=N, nk=NK)
    assert prog.memory_stats().workspace_installs == 0 and not out.any()  # nothing installed, nothing run
    # The caller replaces the buffer and the next call succeeds.
    prog.set_external_workspace(ff.Device.CPU, ff.zeros(need, np.uint8))
    prog(field, out, n=N, nk=NK)
    np.testing.assert_allclose(out, numpy_smooth(field), rtol=1e-12)
    misaligned = ff.zeros(need + 64, np.uint8)[8:]
    prog = smooth.compile(external_workspace={ff.Device.CPU: misaligned})
    with pytest.raises(ff.WorkspaceError, match="align"):
        prog(field, out, n=N, nk=NK)


def test_allocator_errors_reach_the_caller_and_nothing_is_installed(field):
    calls = []

    def failing(request):
        calls.append(request)
        raise MemoryError(f"no {request.bytes} bytes today")

    prog = smooth.compile(external_memory_allocator=failing)
    out = np.zeros_like(field)
    with pytest.raises(MemoryError, match="bytes today"):
        prog(field, out, n=N, nk=NK)
    assert prog.memory_stats().workspace_installs == 0 and not out.any()
    with pytest.raises(MemoryError):
        prog(field, out, n=N, nk=NK)  # asked again: nothing was installed
    assert len(calls) == 2
    short = smooth.compile(external_memory_allocator=CountingAllocator(extra=-256))
    with pytest.raises(ff.WorkspaceError, match="external_memory_allocator"):
        short(field, out, n=N, nk=NK)
    misaligned = smooth.compile(external_memory_allocator=CountingAllocator(offset=8))
    with pytest.raises(ff.WorkspaceError, match="align"):
        misaligned(field, out, n=N, nk=NK)
    returns_none = smooth.compile(external_memory_allocator=lambda request: None)
    with pytest.raises(ff.WorkspaceError):
        returns_none(field, out, n=N, nk=NK)
    returns_junk = smooth.compile(external_memory_allocator=lambda request: "memory")
    with pytest.raises(ff.WorkspaceError, match="str"):
        returns_junk(field, out, n=N, nk=NK)


def test_larger_sizes_ask_the_allocator_again_and_release_the_old_block(field):
    allocator = CountingAllocator()
    prog = smooth.compile(external_memory_allocator=allocator)
    prog(field, np.zeros_like(field), n=N, nk=NK)
    big = np.random.default_rng(3).random((2 * N, 2 * N, NK))
    out = np.zeros_like(big)
    prog(big, out, n=2 * N, nk=NK)
    np.testing.assert_allclose(out, numpy_smooth(big), rtol=1e-12)
    gc.collect()
    assert len(allocator.requests) == 2 and allocator.requests[1].bytes > allocator.requests[0].bytes
    assert allocator.arrays[0]() is None and allocator.arrays[1]() is not None
    assert prog.memory_stats().release_actions == 1


def test_the_allocators_array_lives_until_the_program_is_released(field):
    allocator = CountingAllocator()
    prog = smooth.compile(external_memory_allocator=allocator)
    prog(field, np.zeros_like(field), n=N, nk=NK)
    gc.collect()
    assert allocator.arrays[0]() is not None  # fieldflow holds it
    prog.release()
    gc.collect()
    assert allocator.arrays[0]() is None
    with pytest.raises(ff.ProgramError, match="released"):
        prog(field, np.zeros_like(field), n=N, nk=NK)
    # Dropping the last reference releases it too.
    allocator = CountingAllocator()
    prog = smooth.compile(external_memory_allocator=allocator)
    prog(field, np.zeros_like(field), n=N, nk=NK)
    del prog
    gc.collect()
    assert allocator.arrays[0]() is None


def test_a_caller_owned_workspace_is_kept_alive_by_the_program(field):
    need = smooth.compile().workspace_requirements(SIZES)[0].bytes
    workspace = ff.zeros(need, np.uint8)
    ref = weakref.ref(workspace)
    prog = smooth.compile(external_workspace={ff.Device.CPU: workspace})
    del workspace
    gc.collect()
    assert ref() is not None
    out = np.zeros_like(field)
    prog(field, out, n=N, nk=NK)
    np.testing.assert_allclose(out, numpy_smooth(field), rtol=1e-12)
    del prog
    gc.collect()
    assert ref() is None


def test_a_program_whose_allocator_refers_to_it_is_collected(field):
    # The allocator closes over a dict holding the program: a cycle through C++, which the garbage
    # collector sees because the program reports the allocator it holds.
    owner = {}
    blocks = []

    def allocator(request):
        assert owner["program"] is not None
        block = ff.empty(request.bytes, np.uint8)
        blocks.append(weakref.ref(block))
        return block

    owner["program"] = smooth.compile(external_memory_allocator=allocator)
    owner["program"](field, np.zeros_like(field), n=N, nk=NK)
    allocator_ref = weakref.ref(allocator)
    del allocator, owner
    gc.collect()
    assert allocator_ref() is None and blocks[0]() is None
