"""GPU-scheduled TVMScript in the forms TVM's schedules print (dlight, meta-schedule), run on
OpenCL (PoCL) against the interpreter with symbolic dims bound to several values, and compiled
for CUDA with NVRTC. Each case is a construct tools/gpu_sweep.py found failing."""
from __future__ import annotations

import numpy as np
import pytest

import tensorir as tir
from backends.gpu import GPULoweringError, lower_for_gpu
from backends.opencl.codegen import opencl_source

from .gpu_launch import check_on_opencl, require_opencl

pytestmark = pytest.mark.usefixtures("_opencl")


@pytest.fixture
def _opencl():
    require_opencl()


def _normal(rng, *shape, dtype="float32"):
    return rng.standard_normal(shape).astype(dtype)


# float16 arrays the kernel declares itself: a per-thread cache and a shared tile
HALF_LOCAL_SHARED = '''
@T.prim_func
def main(var_x: T.handle, var_y: T.handle):
    T.func_attr({"tir.is_scheduled": True})
    n = T.int64()
    x = T.match_buffer(var_x, (n, T.int64(64)), "float16")
    y = T.match_buffer(var_y, (n, T.int64(64)), "float16")
    x_local = T.alloc_buffer((n, T.int64(64)), "float16", scope="local")
    x_shared = T.alloc_buffer((n, T.int64(64)), "float16", scope="shared")
    for b in T.thread_binding(n, thread="blockIdx.x"):
        for t in T.thread_binding(T.int64(16), thread="threadIdx.x"):
            for v in T.vectorized(T.int64(4)):
                with T.block("x_local"):
                    v0 = T.axis.spatial(n, b)
                    v1 = T.axis.spatial(T.int64(64), t * T.int64(4) + v)
                    x_local[v0, v1] = x[v0, v1]
            for v in range(T.int64(4)):
                with T.block("x_shared"):
                    v0 = T.axis.spatial(n, b)
                    v1 = T.axis.spatial(T.int64(64), t * T.int64(4) + v)
                    x_shared[v0, v1] = x_local[v0, v1] * T.float16(2)
        for t in T.thread_binding(T.int64(16), thread="threadIdx.x"):
            for v in range(T.int64(4)):
                with T.block("y"):
                    v0 = T.axis.spatial(n, b)
                    v1 = T.axis.spatial(T.int64(64), t * T.int64(4) + v)
                    y[v0, v1] = x_shared[v0, T.int64(63) - v1] + T.float16(1)
'''


def test_float16_local_and_shared_arrays():
    func = tir.from_source(HALF_LOCAL_SHARED)
    rng = np.random.default_rng(0)
    gfunc = check_on_opencl(func, lambda n: [_normal(rng, n, 64, dtype="float16"),
                                             np.zeros((n, 64), "float16")], [1, 3, 7])
    # PoCL (no cl_khr_fp16) declares no half arrays: per-thread floats rounded on store, shared ushort bits
    source = opencl_source([gfunc])
    assert "half x_local" not in source and "float x_local" in source and "rs_round_half(" in source
    assert "__local ushort x_shared" in source


# dlight's norms: one thread loop fills a per-thread cache, a sibling loop on the same
# threadIdx.x reads it (the same hardware thread), after a per-row value in shared memory
SIBLING_THREAD_LOOPS = '''
@T.prim_func
def main(var_x: T.handle, w: T.Buffer((T.int64(32),), "float32"), var_y: T.handle):
    T.func_attr({"tir.is_scheduled": True})
    n = T.int64()
    x = T.match_buffer(var_x, (n, T.int64(32)))
    y = T.match_buffer(var_y, (n, T.int64(32)))
    x_local = T.alloc_buffer((n, T.int64(32)), scope="local")
    scale_shared = T.alloc_buffer((n,), scope="shared")
    for b in T.thread_binding(n, thread="blockIdx.x"):
        for t0 in T.thread_binding(T.int64(8), thread="threadIdx.x"):
            for v in T.vectorized(T.int64(4)):
                with T.block("x_local"):
                    v0 = T.axis.spatial(n, b)
                    v1 = T.axis.spatial(T.int64(32), t0 * T.int64(4) + v)
                    x_local[v0, v1] = x[v0, v1]
        with T.block("scale"):
            v0 = T.axis.spatial(n, b)
            scale_shared[v0] = T.Cast("float32", v0) + T.float32(0.5)
        for t1 in T.thread_binding(T.int64(8), thread="threadIdx.x"):
            for v in range(T.int64(4)):
                with T.block("y"):
                    v0 = T.axis.spatial(n, b)
                    v1 = T.axis.spatial(T.int64(32), t1 * T.int64(4) + v)
                    y[v0, v1] = x_local[v0, v1] * scale_shared[v0] + w[v1]
'''


def test_sibling_thread_loops_share_a_local_cache():
    func = tir.from_source(SIBLING_THREAD_LOOPS)
    rng = np.random.default_rng(1)
    gfunc = check_on_opencl(func, lambda n: [_normal(rng, n, 32), _normal(rng, 32),
                                             np.zeros((n, 32), "float32")], [1, 2, 5],
                            tolerance={"rtol": 1e-6, "atol": 1e-6})  # a * b + c may be one fma
    # the cache is the 4 elements of one thread, not the whole row
    assert "x_local[4]" in opencl_source([gfunc])


# dlight's RMSNorm: the thread loop that fills the per-thread cache also holds the reduction over
# its part (the nest from threadIdx.x down to the reduction block is not perfect); every thread
# needs the row's total, not its own partial
ROW_NORM = '''
@T.prim_func
def main(var_x: T.handle, var_y: T.handle):
    T.func_attr({"tir.is_scheduled": True})
    n = T.int64()
    x = T.match_buffer(var_x, (n, T.int64(48)))
    y = T.match_buffer(var_y, (n, T.int64(48)))
    x_local = T.alloc_buffer((n, T.int64(48)), scope="local")
    sq_local = T.alloc_buffer((n, T.int64(48)), scope="local")
    ssq_local = T.alloc_buffer((n,), scope="local")
    inv_shared = T.alloc_buffer((n,), scope="shared")
    for b in T.thread_binding(n, thread="blockIdx.x"):
        for t in T.thread_binding(T.int64(16), thread="threadIdx.x"):
            for v in T.vectorized(T.int64(3)):
                with T.block("x_local"):
                    v0 = T.axis.spatial(n, b)
                    v1 = T.axis.spatial(T.int64(48), t * T.int64(3) + v)
                    x_local[v0, v1] = x[v0, v1]
            for k in range(T.int64(3)):
                with T.block("sq"):
                    v0 = T.axis.spatial(n, b)
                    v1 = T.axis.spatial(T.int64(48), t * T.int64(3) + k)
                    sq_local[v0, v1] = x_local[v0, v1] * x_local[v0, v1]
            for k in range(T.int64(3)):
                with T.block("ssq"):
                    v0 = T.axis.spatial(n, b)
                    vk = T.axis.reduce(T.int64(48), t * T.int64(3) + k)
                    with T.init():
                        ssq_local[v0] = T.float32(0)
                    ssq_local[v0] = ssq_local[v0] + sq_local[v0, vk]
        with T.block("inv"):
            v0 = T.axis.spatial(n, b)
            inv_shared[v0] = T.rsqrt(ssq_local[v0] / T.float32(48) + T.float32(1e-5))
        for t in T.thread_binding(T.int64(16), thread="threadIdx.x"):
            for k in range(T.int64(3)):
                with T.block("y"):
                    v0 = T.axis.spatial(n, b)
                    v1 = T.axis.spatial(T.int64(48), t * T.int64(3) + k)
                    y[v0, v1] = x_local[v0, v1] * inv_shared[v0]
'''


def test_reduction_inside_the_thread_loop_that_fills_the_cache():
    func = tir.from_source(ROW_NORM)
    rng = np.random.default_rng(2)
    check_on_opencl(func, lambda n: [_normal(rng, n, 48), np.zeros((n, 48), "float32")], [1, 3, 6],
                    tolerance={"rtol": 1e-5, "atol": 1e-6})   # the tree sums in another order


def test_a_thread_reduction_left_per_thread_is_refused():
    # a spatial loop between threadIdx.x and the reduction: no per-thread partial may stand for
    # the row's total (it used to, silently: a "local" output looked like a rewritten partial)
    old = """            for k in range(T.int64(3)):
                with T.block("ssq"):
                    v0 = T.axis.spatial(n, b)"""
    new = """            for j, k in T.grid(T.int64(1), T.int64(3)):
                with T.block("ssq"):
                    v0 = T.axis.spatial(n, b + j)"""
    assert old in ROW_NORM
    with pytest.raises(GPULoweringError, match="block 'ssq'.*not a perfect nest"):
        lower_for_gpu("main", tir.from_source(ROW_NORM.replace(old, new)))


# meta-schedule's tiles: a loop on a virtual thread between blockIdx and threadIdx, a shared tile
# and a per-thread accumulator indexed by it
VTHREAD = '''
@T.prim_func
def main(var_a: T.handle, var_c: T.handle):
    T.func_attr({"tir.is_scheduled": True})
    n = T.int64()
    A = T.match_buffer(var_a, (n, T.int64(8), T.int64(16)))
    C = T.match_buffer(var_c, (n, T.int64(8)))
    A_shared = T.alloc_buffer((n, T.int64(8), T.int64(16)), scope="shared")
    C_local = T.alloc_buffer((n, T.int64(8)), scope="local")
    for i0 in T.thread_binding(n, thread="blockIdx.x"):
        for i1 in T.thread_binding(T.int64(2), thread="vthread.x"):
            for i2 in T.thread_binding(T.int64(4), thread="threadIdx.x"):
                for j in range(T.int64(16)):
                    with T.block("A_shared"):
                        vi = T.axis.spatial(n, i0)
                        vr = T.axis.spatial(T.int64(8), i1 * T.int64(4) + i2)
                        vj = T.axis.spatial(T.int64(16), j)
                        A_shared[vi, vr, vj] = A[vi, vr, vj] * T.float32(2)
                for j in range(T.int64(16)):
                    with T.block("C_local"):
                        vi = T.axis.spatial(n, i0)
                        vr = T.axis.spatial(T.int64(8), i1 * T.int64(4) + i2)
                        vj = T.axis.reduce(T.int64(16), j)
                        with T.init():
                            C_local[vi, vr] = T.float32(0)
                        C_local[vi, vr] = C_local[vi, vr] + A_shared[vi, vr, (vj + vr) % T.int64(16)]
                with T.block("C"):
                    vi = T.axis.spatial(n, i0)
                    vr = T.axis.spatial(T.int64(8), i1 * T.int64(4) + i2)
                    C[vi, vr] = C_local[vi, vr]
'''


def test_virtual_thread_loops_run_in_turn():
    func = tir.from_source(VTHREAD)
    rng = np.random.default_rng(3)
    check_on_opencl(func, lambda n: [_normal(rng, n, 8, 16), np.zeros((n, 8), "float32")], [1, 2, 3],
                    tolerance={"rtol": 1e-5, "atol": 1e-6})


# dlight's GEMV with several outputs per block: the serial loop over a block's outputs sits inside
# the threadIdx.x loop of the final cross-thread sum over the rfactor partials
GEMV_OUTPUTS_INSIDE = '''
@T.prim_func
def main(var_w: T.handle, v: T.Buffer((T.int64(64),), "float32"), var_c: T.handle):
    T.func_attr({"tir.is_scheduled": True})
    n = T.int64()
    W = T.match_buffer(var_w, (n, T.int64(4), T.int64(64)))
    C = T.match_buffer(var_c, (n, T.int64(4)))
    C_rf_local = T.alloc_buffer((T.int64(16), n, T.int64(4)), scope="local")
    for b in T.thread_binding(n, thread="blockIdx.x"):
        for t in T.thread_binding(T.int64(16), thread="threadIdx.x"):
            for o in range(T.int64(4)):
                with T.block("rf_init"):
                    vt, vb, vo = T.axis.remap("SSS", [t, b, o])
                    C_rf_local[vt, vb, vo] = T.float32(0)
            for k0, o in T.grid(T.int64(4), T.int64(4)):
                with T.block("rf_update"):
                    vt, vb, vo, vk0 = T.axis.remap("SSSR", [t, b, o, k0])
                    C_rf_local[vt, vb, vo] = C_rf_local[vt, vb, vo] + W[vb, vo, vk0 * T.int64(16) + vt] * v[vk0 * T.int64(16) + vt]
        for t in T.thread_binding(T.int64(16), thread="threadIdx.x"):
            for o in range(T.int64(4)):
                with T.block("C"):
                    vt, vb, vo = T.axis.remap("RSS", [t, b, o])
                    with T.init():
                        C[vb, vo] = T.float32(0)
                    C[vb, vo] = C[vb, vo] + C_rf_local[vt, vb, vo]
'''


def test_outputs_loop_inside_the_thread_reduction_loop():
    func = tir.from_source(GEMV_OUTPUTS_INSIDE)
    rng = np.random.default_rng(4)
    check_on_opencl(func, lambda n: [_normal(rng, n, 4, 64), _normal(rng, 64), np.zeros((n, 4), "float32")],
                    [1, 2, 5], tolerance={"rtol": 1e-5, "atol": 1e-5})


# dlight's GEMV over an int32 `n` (T.int32()) with int64 thread loops: the per-thread
# accumulator is indexed `(T.Cast("int64", b) + ty) % T.Cast("int64", n)` where it is reduced
# and `b % n` where it is read; both must compact to the same single element
MIXED_INDEX_DTYPES = '''
@T.prim_func
def main(A: T.Buffer((4, 64), "float32"), var_x: T.handle, var_y: T.handle):
    T.func_attr({"tir.is_scheduled": True})
    n = T.int32()
    X = T.match_buffer(var_x, (n, 64))
    Y = T.match_buffer(var_y, (4, n))
    acc = T.alloc_buffer((4, n), scope="local")
    for b in T.thread_binding(n * 4, thread="blockIdx.x"):
        for ty in T.thread_binding(T.int64(1), thread="threadIdx.y"):
            for i in range(T.int64(1)):
                for k in range(64):
                    with T.block("dot"):
                        v0 = T.axis.spatial(4, (b + ty + i) // n)
                        v1 = T.axis.spatial(n, (b + ty + i) % n)
                        vk = T.axis.reduce(64, k)
                        with T.init():
                            acc[v0, v1] = T.float32(0)
                        acc[v0, v1] = acc[v0, v1] + A[v0, vk] * X[v1, vk]
        for ty in T.thread_binding(T.int64(1), thread="threadIdx.y"):
            with T.block("out"):
                v0 = T.axis.spatial(4, b // n)
                v1 = T.axis.spatial(n, b % n)
                Y[v0, v1] = acc[v0, v1] * T.float32(2)
'''


def test_mixed_int32_and_int64_indices_of_a_local_cache_compact_to_one_element():
    func = tir.from_source(MIXED_INDEX_DTYPES)
    rng = np.random.default_rng(3)
    gfunc = check_on_opencl(func, lambda n: [_normal(rng, 4, 64), _normal(rng, n, 64),
                                             np.zeros((4, n), "float32")], [1, 3, 6],
                            tolerance={"rtol": 1e-5, "atol": 1e-5})
    assert "acc[1]" in opencl_source([gfunc])


# dlight's cooperative fetch: the copy into a shared tile is bound to threadIdx.x inside the
# compute's own threadIdx.x loop (serially every compute thread copies the whole tile; on the GPU
# each thread copies its part, and a barrier separates the copy from the reads)
NESTED_FETCH = '''
@T.prim_func
def main(var_x: T.handle, var_y: T.handle):
    T.func_attr({"tir.is_scheduled": True})
    n = T.int64()
    X = T.match_buffer(var_x, (n, T.int64(64)))
    Y = T.match_buffer(var_y, (n, T.int64(32)))
    S = T.alloc_buffer((n, T.int64(64)), scope="shared")
    for b in T.thread_binding(n, thread="blockIdx.x"):
        for tx in T.thread_binding(T.int64(32), thread="threadIdx.x"):
            for f in T.thread_binding(T.int64(32), thread="threadIdx.x"):
                for v in T.vectorized(T.int64(2)):
                    with T.block("fetch"):
                        v0 = T.axis.spatial(n, b)
                        v1 = T.axis.spatial(T.int64(64), f * T.int64(2) + v)
                        S[v0, v1] = X[v0, v1]
            with T.block("use"):
                v0, v1 = T.axis.remap("SS", [b, tx])
                Y[v0, v1] = S[v0, T.int64(63) - v1] - S[v0, v1 * T.int64(2)]
'''


def test_a_cooperative_fetch_nested_in_the_same_thread_axis_runs_as_one_index():
    func = tir.from_source(NESTED_FETCH)
    rng = np.random.default_rng(4)
    gfunc = check_on_opencl(func, lambda n: [_normal(rng, n, 64), np.zeros((n, 32), "float32")], [1, 2, 5])
    source = opencl_source([gfunc])
    assert source.count("get_local_id(0)") == 2 and "barrier(" in source


def test_a_nested_same_axis_loop_that_is_not_a_repeatable_copy_is_refused():
    # accumulating into the tile: serially each compute thread adds again, on the GPU once
    text = NESTED_FETCH.replace("S[v0, v1] = X[v0, v1]", "S[v0, v1] = S[v0, v1] + X[v0, v1]")
    assert text != NESTED_FETCH
    with pytest.raises(GPULoweringError, match="not a copy the outer loop may repeat"):
        opencl_source([lower_for_gpu("main", tir.from_source(text))])
    # into a per-thread array: each compute thread needs the whole copy, the GPU gives it one element
    text = NESTED_FETCH.replace('scope="shared"', 'scope="local"')
    assert text != NESTED_FETCH
    with pytest.raises(GPULoweringError, match="per-thread"):
        opencl_source([lower_for_gpu("main", tir.from_source(text))])
    # a fetch that depends on the compute thread's index
    text = NESTED_FETCH.replace("S[v0, v1] = X[v0, v1]", "S[v0, v1] = X[v0, v1] + T.Cast(\"float32\", tx)")
    with pytest.raises(GPULoweringError, match="uses the outer one's index"):
        opencl_source([lower_for_gpu("main", tir.from_source(text))])


# a column sum whose reduction runs on threadIdx.y outside the threadIdx.x of the columns: the
# spatial thread loop moves above the reduction's (thread loops commute)
COLUMN_SUM_THREADS_Y = '''
@T.prim_func
def column_sum_threads_y(var_x: T.handle, var_y: T.handle):
    T.func_attr({"tir.is_scheduled": True})
    n = T.int64()
    X = T.match_buffer(var_x, (T.int64(48), n))
    Y = T.match_buffer(var_y, (n,))
    for b in T.thread_binding((n + T.int64(15)) // T.int64(16), thread="blockIdx.x"):
        for ty in T.thread_binding(T.int64(12), thread="threadIdx.y"):
            for tx in T.thread_binding(T.int64(16), thread="threadIdx.x"):
                for k in range(T.int64(4)):
                    with T.block("colsum"):
                        vj = T.axis.spatial(n, b * T.int64(16) + tx)
                        vk = T.axis.reduce(T.int64(48), ty * T.int64(4) + k)
                        T.where(b * T.int64(16) + tx < n)
                        with T.init():
                            Y[vj] = T.float32(0)
                        Y[vj] = Y[vj] + X[vk, vj]
'''


def test_a_reduction_over_threadidx_y_outside_a_spatial_threadidx_x():
    func = tir.from_source(COLUMN_SUM_THREADS_Y)
    rng = np.random.default_rng(6)
    check_on_opencl(func, lambda n: [_normal(rng, 48, n), np.zeros(n, "float32")], [1, 16, 37],
                    tolerance={"rtol": 1e-5, "atol": 1e-5})


# dlight's tiled matmul: per-thread 4 x 4 accumulators, both operands' k slices fetched into
# dynamic shared memory by threadIdx.y/x loops nested in the compute's own, vectorized, edge rows
# predicated
TILED_MATMUL_SHARED = '''
@T.prim_func
def tiled_matmul_shared(var_a: T.handle, B: T.Buffer((T.int64(32), T.int64(64)), "float32"), var_c: T.handle):
    T.func_attr({"tir.is_scheduled": True})
    n = T.int64()
    A = T.match_buffer(var_a, (n, T.int64(32)))
    C = T.match_buffer(var_c, (n, T.int64(64)))
    A_shared = T.alloc_buffer((n, T.int64(32)), scope="shared.dyn")
    B_shared = T.alloc_buffer((T.int64(32), T.int64(64)), scope="shared.dyn")
    C_local = T.alloc_buffer((n, T.int64(64)), scope="local")
    for by in T.thread_binding((n + T.int64(15)) // T.int64(16), thread="blockIdx.y"):
        for bx in T.thread_binding(T.int64(2), thread="blockIdx.x"):
            for ty in T.thread_binding(T.int64(4), thread="threadIdx.y"):
                for tx in T.thread_binding(T.int64(8), thread="threadIdx.x"):
                    for i, j in T.grid(T.int64(4), T.int64(4)):
                        with T.block("C_init"):
                            vi = T.axis.spatial(n, by * T.int64(16) + ty * T.int64(4) + i)
                            vj = T.axis.spatial(T.int64(64), bx * T.int64(32) + tx * T.int64(4) + j)
                            T.where(by * T.int64(16) + ty * T.int64(4) + i < n)
                            C_local[vi, vj] = T.float32(0)
                    for k0 in range(T.int64(4)):
                        for f in T.thread_binding(T.int64(4), thread="threadIdx.y"):
                            for g in T.thread_binding(T.int64(8), thread="threadIdx.x"):
                                for v in T.vectorized(T.int64(4)):
                                    with T.block("A_shared"):
                                        vi = T.axis.spatial(n, by * T.int64(16) + (f * T.int64(32) + g * T.int64(4) + v) // T.int64(8))
                                        vk = T.axis.spatial(T.int64(32), k0 * T.int64(8) + (g * T.int64(4) + v) % T.int64(8))
                                        T.where(by * T.int64(16) + (f * T.int64(32) + g * T.int64(4) + v) // T.int64(8) < n)
                                        A_shared[vi, vk] = A[vi, vk]
                                for u in range(T.int64(2)):
                                    for v in T.vectorized(T.int64(4)):
                                        with T.block("B_shared"):
                                            vk = T.axis.spatial(T.int64(32), k0 * T.int64(8) + f * T.int64(2) + u)
                                            vj = T.axis.spatial(T.int64(64), bx * T.int64(32) + g * T.int64(4) + v)
                                            B_shared[vk, vj] = B[vk, vj]
                        for k1, i, j in T.grid(T.int64(8), T.int64(4), T.int64(4)):
                            with T.block("C_update"):
                                vi = T.axis.spatial(n, by * T.int64(16) + ty * T.int64(4) + i)
                                vj = T.axis.spatial(T.int64(64), bx * T.int64(32) + tx * T.int64(4) + j)
                                vk = T.axis.reduce(T.int64(32), k0 * T.int64(8) + k1)
                                T.where(by * T.int64(16) + ty * T.int64(4) + i < n)
                                C_local[vi, vj] = C_local[vi, vj] + A_shared[vi, vk] * B_shared[vk, vj]
                    for i, j in T.grid(T.int64(4), T.int64(4)):
                        with T.block("C_store"):
                            vi = T.axis.spatial(n, by * T.int64(16) + ty * T.int64(4) + i)
                            vj = T.axis.spatial(T.int64(64), bx * T.int64(32) + tx * T.int64(4) + j)
                            T.where(by * T.int64(16) + ty * T.int64(4) + i < n)
                            C[vi, vj] = C_local[vi, vj]
'''


def test_a_tiled_matmul_with_cooperative_fetches_into_shared_memory():
    func = tir.from_source(TILED_MATMUL_SHARED)
    rng = np.random.default_rng(7)
    gfunc = check_on_opencl(func, lambda n: [_normal(rng, n, 32), _normal(rng, 32, 64),
                                             np.zeros((n, 64), "float32")], [1, 16, 21],
                            tolerance={"rtol": 1e-5, "atol": 1e-5})
    assert [b.name for b in gfunc.kernels[0].shared] == ["A_shared", "B_shared"]
    assert gfunc.kernels[0].shared_bytes == (16 * 8 + 8 * 32) * 4


# a decode GEMV over 4-bit weights packed in uint32 (all 32 bits random), float16 activations
# and scales, per-thread partials combined by a cross-thread reduction into a float16 output
DECODE_GEMV_Q4 = '''
@T.prim_func
def decode_gemv_q4(x: T.Buffer((1, 1, 256), "float16"), var_w: T.handle, var_s: T.handle, var_y: T.handle):
    T.func_attr({"tir.is_scheduled": True})
    n = T.int64()
    w = T.match_buffer(var_w, (n, T.int64(32)), "uint32")
    s = T.match_buffer(var_s, (n, T.int64(8)), "float16")
    y = T.match_buffer(var_y, (1, 1, n), "float16")
    partial = T.alloc_buffer((T.int64(32), n), "float32", scope="local")
    for j in T.thread_binding(n, thread="blockIdx.x"):
        for t in T.thread_binding(T.int64(32), thread="threadIdx.x"):
            with T.block("init"):
                vt = T.axis.spatial(T.int64(32), t)
                vj = T.axis.spatial(n, j)
                partial[vt, vj] = T.float32(0)
            for k in T.unroll(T.int64(8)):
                with T.block("update"):
                    vt = T.axis.spatial(T.int64(32), t)
                    vj = T.axis.spatial(n, j)
                    vk = T.axis.reduce(T.int64(8), k)
                    partial[vt, vj] = partial[vt, vj] + T.Cast("float32", x[0, 0, vt * T.int64(8) + vk]) * (
                        T.Cast("float32", T.bitwise_and(T.shift_right(w[vj, vt], T.Cast("uint32", vk * T.int64(4))),
                                                        T.uint32(15))) - T.float32(8)) * T.Cast("float32", s[vj, vt // T.int64(4)])
        for t in T.thread_binding(T.int64(32), thread="threadIdx.x"):
            with T.block("combine"):
                vt = T.axis.reduce(T.int64(32), t)
                vj = T.axis.spatial(n, j)
                with T.init():
                    y[0, 0, vj] = T.float16(0)
                y[0, 0, vj] = y[0, 0, vj] + T.Cast("float16", partial[vt, vj])
'''


def test_a_q4_decode_gemv_over_random_packed_bits():
    func = tir.from_source(DECODE_GEMV_Q4)
    rng = np.random.default_rng(8)

    def arrays(n):
        return [_normal(rng, 1, 1, 256, dtype="float16"),
                rng.integers(0, 2 ** 32, (n, 32), dtype="uint64").astype("uint32"),
                (rng.random((n, 8)) * 0.1).astype("float16"), np.zeros((1, 1, n), "float16")]
    # float16: the interpreter rounds every partial sum, the GPU computes them in float32
    check_on_opencl(func, arrays, [1, 5, 33], tolerance={"rtol": 2e-2, "atol": 5e-2})


# dlight's low-batch GEMV: rows in groups of 4, the padded ones excluded by `T.where` on the
# spatial loops. The combined result's store must keep that predicate: it wrote the excluded rows
# (past the output's end when they are padding: heap corruption on PoCL)
PREDICATED_ROWS_GEMV = '''
@T.prim_func
def main(X: T.Buffer((T.int64(8), T.int64(64)), "float32"), W: T.Buffer((T.int64(24), T.int64(64)), "float32"),
         Y: T.Buffer((T.int64(8), T.int64(24)), "float32"), m: T.int64):
    T.func_attr({"tir.is_scheduled": True})
    rf = T.alloc_buffer((T.int64(16), T.int64(8), T.int64(24)), scope="local")
    for b0 in T.thread_binding(T.int64(2), thread="blockIdx.y"):
        for j in T.thread_binding(T.int64(24), thread="blockIdx.x"):
            for t in T.thread_binding(T.int64(16), thread="threadIdx.x"):
                for r in range(T.int64(4)):
                    with T.block("rf_init"):
                        vt, vj = T.axis.remap("SS", [t, j])
                        vb = T.axis.spatial(T.int64(8), b0 * T.int64(4) + r)
                        rf[vt, vb, vj] = T.float32(0)
                    for k in range(T.int64(4)):
                        with T.block("rf_update"):
                            vt, vj, vk = T.axis.remap("SSR", [t, j, k])
                            vb = T.axis.spatial(T.int64(8), b0 * T.int64(4) + r)
                            rf[vt, vb, vj] = rf[vt, vb, vj] + X[vb, vt * T.int64(4) + vk] * W[vj, vt * T.int64(4) + vk]
            for r in range(T.int64(4)):
                for t in T.thread_binding(T.int64(16), thread="threadIdx.x"):
                    with T.block("sum"):
                        vt = T.axis.reduce(T.int64(16), t)
                        vb = T.axis.spatial(T.int64(8), b0 * T.int64(4) + r)
                        vj = T.axis.spatial(T.int64(24), j)
                        T.where(b0 * T.int64(4) + r < m)
                        with T.init():
                            Y[vb, vj] = T.float32(0)
                        Y[vb, vj] = Y[vb, vj] + rf[vt, vb, vj]
'''


@pytest.mark.parametrize("m", [0, 1, 5, 8])
def test_a_cross_thread_reduction_keeps_the_predicate_of_its_outputs(m):
    func = tir.from_source(PREDICATED_ROWS_GEMV)
    rng = np.random.default_rng(9 + m)
    gfunc = lower_for_gpu("main", func)
    source = opencl_source([gfunc])
    x, w, y = _normal(rng, 8, 64), _normal(rng, 24, 64), _normal(rng, 8, 24)   # rows >= m keep their values
    want = y.copy()
    tir.interpret(func, x, w, want, m=m)
    from .gpu_launch import run_opencl
    assert run_opencl(gfunc, source, [x, w, y], {"m": m}) == 0
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(y[m:], want[m:])


def test_a_predicate_mixing_reduction_and_output_loops_stays_on_the_partials():
    # a causal-style `t <= row` beside the padding guard: the partials keep it, the store keeps
    # only the guard (every row has the term t = 0)
    text = PREDICATED_ROWS_GEMV.replace("T.where(b0 * T.int64(4) + r < m)",
                                        "T.where(b0 * T.int64(4) + r < m and t <= b0 * T.int64(4) + r)")
    func = tir.from_source(text)
    rng = np.random.default_rng(12)
    gfunc = lower_for_gpu("main", func)
    from .gpu_launch import run_opencl
    for m in (2, 7):
        x, w, y = _normal(rng, 8, 64), _normal(rng, 24, 64), _normal(rng, 8, 24)
        want = y.copy()
        tir.interpret(func, x, w, want, m=m)
        assert run_opencl(gfunc, opencl_source([gfunc]), [x, w, y], {"m": m}) == 0
        np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(y[m:], want[m:])


# sibling threadIdx.x loops of different extents (a 24-thread sum, then 40 threads writing a row
# with a branch on the index): they must not share one Var, whose range the analyses intersect
# (`tx < 24` was folded to true: the 16 other threads read past the row and skipped the branch)
SIBLING_THREAD_LOOPS_OF_TWO_EXTENTS = '''
@T.prim_func
def short_reduce_in_wide_block(var_x: T.handle, var_y: T.handle, var_z: T.handle):
    T.func_attr({"tir.is_scheduled": True})
    n = T.int64()
    X = T.match_buffer(var_x, (n, T.int64(24)))
    Y = T.match_buffer(var_y, (n,))
    Z = T.match_buffer(var_z, (n, T.int64(40)))
    for b in T.thread_binding(n, thread="blockIdx.x"):
        for tx in T.thread_binding(T.int64(24), thread="threadIdx.x"):
            with T.block("sum"):
                v0 = T.axis.spatial(n, b)
                vk = T.axis.reduce(T.int64(24), tx)
                with T.init():
                    Y[v0] = T.float32(0)
                Y[v0] = Y[v0] + X[v0, vk] * X[v0, vk]
        for tx in T.thread_binding(T.int64(40), thread="threadIdx.x"):
            with T.block("z"):
                v0 = T.axis.spatial(n, b)
                v1 = T.axis.spatial(T.int64(40), tx)
                Z[v0, v1] = T.if_then_else(v1 < T.int64(24), X[v0, T.min(v1, T.int64(23))] / T.sqrt(Y[v0] + T.float32(1)), T.float32(-1))
'''


def test_sibling_thread_loops_of_two_extents_keep_their_own_ranges():
    func = tir.from_source(SIBLING_THREAD_LOOPS_OF_TWO_EXTENTS)
    rng = np.random.default_rng(10)
    gfunc = check_on_opencl(func, lambda n: [_normal(rng, n, 24), np.zeros(n, "float32"),
                                             np.zeros((n, 40), "float32")], [1, 3, 8],
                            tolerance={"rtol": 1e-5, "atol": 1e-6})
    assert "true ?" not in opencl_source([gfunc])


def test_a_reduction_predicate_over_symbolic_sizes_stays_on_the_partials():
    # `t < m + 12` bounds the reduction by a scalar (as the decoder's causal masks do): not an
    # output's loop, so the partials keep it and the outputs are written
    text = PREDICATED_ROWS_GEMV.replace("T.where(b0 * T.int64(4) + r < m)",
                                        "T.where(b0 * T.int64(4) + r < m and t < m + T.int64(12))")
    func = tir.from_source(text)
    rng = np.random.default_rng(11)
    gfunc = lower_for_gpu("main", func)
    from .gpu_launch import run_opencl
    for m in (1, 3, 8):
        x, w, y = _normal(rng, 8, 64), _normal(rng, 24, 64), _normal(rng, 8, 24)
        want = y.copy()
        tir.interpret(func, x, w, want, m=m)
        assert run_opencl(gfunc, opencl_source([gfunc]), [x, w, y], {"m": m}) == 0
        np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)
