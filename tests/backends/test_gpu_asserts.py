"""TIR asserts inside GPU kernels: a false condition claims the status word, records the assert's
number, and the host raises ``KernelAssertionError`` naming the function and the message. Run on
OpenCL (PoCL) against the interpreter; the CUDA source is compiled with NVRTC."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import relaxscript as rx
import tensorir as tir
from backends.c.status import STATUS_ASSERT_FAILED
from backends.cuda.codegen import cuda_source
from backends.gpu import GPULoweringError, lower_for_gpu
from backends.opencl.codegen import opencl_source
from backends.target import build_kernels
from tensorir.errors import KernelAssertionError

from .gpu_launch import check_on_opencl, require_nvrtc, require_opencl, run_opencl

pytestmark = pytest.mark.usefixtures("_opencl")


@pytest.fixture
def _opencl():
    require_opencl()


# a block-uniform assert (on the symbolic size) ahead of a shared tile and its barrier, and a
# per-thread one on the data in a second kernel without barriers
TILE = '''
@T.prim_func
def tile(var_a: T.handle, var_b: T.handle):
    T.func_attr({"tir.is_scheduled": True})
    n = T.int64()
    A = T.match_buffer(var_a, (n, T.int64(32)), "float32")
    B = T.match_buffer(var_b, (n, T.int64(32)), "float32")
    S = T.alloc_buffer((n, T.int64(32)), "float32", scope="shared")
    for b in T.thread_binding(n, thread="blockIdx.x"):
        assert n <= T.int64(6), "at most 6 rows"
        for t in T.thread_binding(T.int64(32), thread="threadIdx.x"):
            with T.block("load"):
                v0, v1 = T.axis.remap("SS", [b, t])
                S[v0, v1] = A[v0, v1]
        for t in T.thread_binding(T.int64(32), thread="threadIdx.x"):
            with T.block("reverse"):
                v0, v1 = T.axis.remap("SS", [b, t])
                B[v0, v1] = S[v0, T.int64(31) - v1] * T.float32(2)
    for b in T.thread_binding(n, thread="blockIdx.x"):
        for t in T.thread_binding(T.int64(32), thread="threadIdx.x"):
            with T.block("check"):
                v0, v1 = T.axis.remap("SS", [b, t])
                T.reads(B[v0, v1])
                T.writes(B[v0, v1])
                assert B[v0, v1] < T.float32(100), "an element reached 100"
                B[v0, v1] = B[v0, v1] + T.float32(1)
'''


def _arrays(n, rng, big=None):
    a = rng.standard_normal((n, 32)).astype("float32")
    if big is not None:
        a[big] = 60.0
    return [a, np.zeros((n, 32), "float32")]


@settings(max_examples=12, deadline=None)
@given(n=st.integers(1, 6), seed=st.integers(0, 2 ** 16))
def test_passing_asserts_leave_results_as_the_interpreter(n, seed):
    func = tir.from_source(TILE)
    rng = np.random.default_rng(seed)
    check_on_opencl(func, lambda _: _arrays(n, rng), [n], tolerance={"rtol": 1e-6, "atol": 0})


@pytest.mark.parametrize("n, big, message", [(7, None, "at most 6 rows"), (3, (1, 5), "an element reached 100")])
def test_a_false_assert_raises_its_message(n, big, message):
    func = tir.from_source(TILE)
    rng = np.random.default_rng(n)
    with pytest.raises(KernelAssertionError, match=message):
        tir.interpret(func, *_arrays(n, rng, big))
    module = build_kernels("opencl", func)
    with pytest.raises(KernelAssertionError, match=f"'tile'.*{message}"):
        module["tile"](*_arrays(n, rng, big))
    # the kernel records the assert's number after the status word
    gfunc = lower_for_gpu("tile", func)
    assert gfunc.assert_messages == ["at most 6 rows", "an element reached 100"]
    assert run_opencl(gfunc, opencl_source([gfunc]), _arrays(n, rng, big)) == STATUS_ASSERT_FAILED


def test_a_failed_assert_stops_the_later_launches():
    func = tir.from_source('''
@T.prim_func
def staged(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32"), k: T.int64):
    for b in T.thread_binding(2, thread="blockIdx.x"):
        for t in T.thread_binding(32, thread="threadIdx.x"):
            with T.block("first"):
                v = T.axis.spatial(64, b * 32 + t)
                assert k < T.int64(3), "k must be below 3"
                A[v] = A[v] + T.float32(1)
    for b in T.thread_binding(2, thread="blockIdx.x"):
        for t in T.thread_binding(32, thread="threadIdx.x"):
            with T.block("second"):
                v = T.axis.spatial(64, b * 32 + t)
                B[v] = A[v] * T.float32(3)
''')
    gfunc = lower_for_gpu("staged", func)
    assert len(gfunc.kernels) == 2
    source = opencl_source([gfunc])
    a, b = np.ones(64, "float32"), np.zeros(64, "float32")
    assert run_opencl(gfunc, source, [a, b], {"k": 2}) == 0
    np.testing.assert_array_equal(b, 6)
    a, b = np.ones(64, "float32"), np.zeros(64, "float32")
    assert run_opencl(gfunc, source, [a, b], {"k": 3}) == STATUS_ASSERT_FAILED
    np.testing.assert_array_equal(a, 1)   # the failing kernel stopped before its store
    np.testing.assert_array_equal(b, 0)   # the second launch returned at once


def test_a_thread_dependent_assert_beside_a_barrier_is_refused():
    # the load block's threads would leave at the assert while the others wait at the barrier
    text = TILE.replace("S[v0, v1] = A[v0, v1]",
                        "assert A[v0, v1] < T.float32(50), \"no big input\"\n                S[v0, v1] = A[v0, v1]")
    assert "no big input" in text
    with pytest.raises(GPULoweringError, match="no big input.*synchronizes"):
        opencl_source([lower_for_gpu("tile", tir.from_source(text))])


def test_a_relax_function_raises_a_kernel_assert_after_a_save_and_load(tmp_path):
    source = '''
@R.ir_module
class M:
    @T.prim_func
    def scale(x: T.Buffer(("n",), "float32"), out: T.Buffer(("n",), "float32")):
        n = T.int64()
        for i in range(n):
            with T.block("s"):
                v = T.axis.spatial(n, i)
                assert x[v] >= T.float32(0), "inputs must not be negative"
                out[v] = x[v] * T.float32(2)

    @R.function
    def main(x: R.Tensor(("n",), "float32")) -> R.Tensor(("n",), "float32"):
        n = T.int64()
        with R.dataflow():
            y = R.call_tir(M.scale, (x,), out_sinfo=R.Tensor((n,), "float32"))
            R.output(y)
        return y
'''
    exe = rx.build(rx.from_source(source), target="opencl")
    path = tmp_path / "scale.rsx"
    exe.save(path)
    vm = rx.VirtualMachine(rx.Executable.load(path))
    x = np.arange(70, dtype="float32")
    np.testing.assert_array_equal(vm["main"](x), x * 2)
    x[53] = -1
    with pytest.raises(KernelAssertionError, match="inputs must not be negative"):
        vm["main"](x)


def test_cuda_source_with_asserts_compiles():
    require_nvrtc()
    from backends.cuda.nvrtc import compile_ptx
    gfunc = lower_for_gpu("tile", tir.from_source(TILE))
    source = cuda_source([gfunc])
    assert source.count("rs_assert_failed(rs_status") == 2
    assert "rs_stop = *rs_status;" in source and "if (!rs_failed) {" in source
    assert b".entry tile_k1(" in compile_ptx(source)


def test_a_thread_dependent_assert_after_the_last_barrier_runs():
    # the check block of TILE moved into the first kernel, after its barrier: nothing waits later
    text = TILE.replace('B[v0, v1] = S[v0, T.int64(31) - v1] * T.float32(2)',
                        'assert A[v0, v1] < T.float32(50), "no big input"\n'
                        '                B[v0, v1] = S[v0, T.int64(31) - v1] * T.float32(2)')
    func = tir.from_source(text)
    rng = np.random.default_rng(5)
    check_on_opencl(func, lambda n: _arrays(n, rng), [2, 5], tolerance={"rtol": 1e-6, "atol": 0})
    with pytest.raises(KernelAssertionError, match="no big input"):
        build_kernels("opencl", func)["tile"](*_arrays(3, rng, (2, 7)))


def test_a_thread_dependent_assert_in_a_loop_with_a_barrier_is_refused():
    func = tir.from_source('''
@T.prim_func
def steps(A: T.Buffer((4, 32), "float32")):
    S = T.alloc_buffer((32,), "float32", scope="shared")
    for b in T.thread_binding(4, thread="blockIdx.x"):
        for k in range(3):
            for t in T.thread_binding(32, thread="threadIdx.x"):
                with T.block("load"):
                    v = T.axis.spatial(32, t)
                    S[v] = A[b, v]
            for t in T.thread_binding(32, thread="threadIdx.x"):
                with T.block("store"):
                    v = T.axis.spatial(32, t)
                    assert S[31 - v] > T.float32(-100), "in range"
                    A[b, v] = S[31 - v] + T.float32(1)
''')
    with pytest.raises(GPULoweringError, match="in range.*synchronizes"):
        opencl_source([lower_for_gpu("steps", func)])
