"""GPU lowering (backends/gpu) of hand-written schedules, one construct each, run on OpenCL.

Every case runs on PoCL's CPU device through pyopencl and is compared with
the loop-level interpreter on several bindings of each symbolic var
(n = 1 and extents the tile sizes do not divide included); the CUDA version
of every kernel is compiled with NVRTC when it is available.
"""
from __future__ import annotations

import numpy as np
import pytest

import tensorir as tir
from backends.c.status import STATUS_ZERO_DIVISION, raise_for_status
from backends.gpu import GPULoweringError, lower_for_gpu
from backends.gpu.cross_thread_reduce import ThreadReduce, lower_cross_thread_reductions
from backends.opencl.codegen import opencl_source
from tensorir.functor import collect

from .gpu_launch import check_on_opencl, require_opencl, run_opencl

FLOAT = {"rtol": 1e-5, "atol": 1e-6}
RNG = np.random.default_rng(7)

MATMUL = '''
@T.prim_func
def mm(A: T.Buffer(("n", "k"), "float32"), B: T.Buffer(("k", "m"), "float32"),
       C: T.Buffer(("n", "m"), "float32")):
    n = T.int64()
    k = T.int64()
    m = T.int64()
    for i, j, r in T.grid(n, m, k):
        with T.block("C"):
            vi, vj, vr = T.axis.remap("SSR", [i, j, r])
            with T.init():
                C[vi, vj] = 0.0
            C[vi, vj] = C[vi, vj] + A[vi, vr] * B[vr, vj]
'''

TWO_STAGES = '''
@T.prim_func
def two(A: T.Buffer(("n", 3), "float32"), B: T.Buffer(("n", 3), "float32")):
    n = T.int64()
    C = T.alloc_buffer((n, 3), "float32")
    for i, j in T.grid(n, 3):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = A[vi, vj] * 2.0
    for i, j in T.grid(n, 3):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = C[n - 1 - vi, vj] + 1.0
'''

ROW_REDUCE = '''
@T.prim_func
def rows(X: T.Buffer(("n", "m"), "float32"), S: T.Buffer(("n",), "float32"),
         M: T.Buffer(("n",), "float32")):
    n = T.int64()
    m = T.int64()
    for i, j in T.grid(n, m):
        with T.block("S"):
            vi, vj = T.axis.remap("SR", [i, j])
            with T.init():
                S[vi] = 0.5
            S[vi] = S[vi] + X[vi, vj]
    for i, j in T.grid(n, m):
        with T.block("M"):
            vi, vj = T.axis.remap("SR", [i, j])
            with T.init():
                M[vi] = T.float32("-inf")
            M[vi] = T.max(M[vi], X[vi, vj])
'''


def _floats(*shape):
    return RNG.uniform(-1, 1, size=shape).astype("float32")


@pytest.fixture(autouse=True)
def _opencl():
    require_opencl()


def _bind_elementwise(func, block_name: str, threads: int):
    sch = tir.Schedule(func)
    block = sch.get_block(block_name)
    fused = sch.fuse(*sch.get_loops(block))
    outer, inner = sch.split(fused, [None, threads])
    sch.bind(outer, "blockIdx.x")
    sch.bind(inner, "threadIdx.x")
    return sch


def test_elementwise_tail_and_unbound_stage_with_workspace():
    sch = _bind_elementwise(tir.from_source(TWO_STAGES), "B", 64)
    gfunc = check_on_opencl(sch.func, lambda n: [_floats(n, 3), np.zeros((n, 3), "float32")],
                            [1, 5, 21, 22, 64, 130], FLOAT)
    unbound, bound = gfunc.kernels
    assert unbound.block == (1, 1, 1) and gfunc.launch_grid({"n": 50})[0] == (1, 1, 1)
    assert bound.block == (64, 1, 1) and gfunc.launch_grid({"n": 50})[1] == (3, 1, 1)  # ceil(150 / 64)
    assert [w.name for w in gfunc.workspaces] == ["C"] and gfunc.workspace_sizes({"n": 50}) == [150]


def _tiled_matmul():
    sch = tir.Schedule(tir.from_source(MATMUL))
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    bi, ti = sch.split(i, [None, 4])
    bj, tj = sch.split(j, [None, 4])
    ko, _ = sch.split(k, [None, 4])
    sch.reorder(bi, bj, ko, ti, tj)
    sch.bind(bi, "blockIdx.y")
    sch.bind(bj, "blockIdx.x")
    sch.bind(ti, "threadIdx.y")
    sch.bind(tj, "threadIdx.x")
    for index in (1, 2):  # A and B tiles in shared memory, loaded by the block's threads
        cached = sch.cache_read(block, index, "shared")
        sch.compute_at(cached, ko)
        rows, cols = sch.get_loops(cached)[-2:]
        sch.bind(rows, "threadIdx.y")
        sch.bind(cols, "threadIdx.x")
    return sch


def test_tiled_matmul_with_shared_tiles_and_barriers():
    sch = _tiled_matmul()
    gfunc = check_on_opencl(
        sch.func, lambda s: [_floats(s[0], s[1]), _floats(s[1], s[2]), np.zeros((s[0], s[2]), "float32")],
        [(1, 1, 1), (5, 7, 3), (8, 8, 8), (9, 4, 13)], FLOAT)
    (kernel,) = gfunc.kernels
    assert kernel.block == (4, 4, 1)
    assert sorted(b.shape[0].value for b in kernel.shared) == [16, 16]   # one 4x4 tile each
    assert kernel.shared_bytes == 2 * 16 * 4
    source = opencl_source([gfunc])
    # after each tile load (before its readers), and at the end of the k loop (before the next load)
    assert source.count("barrier(") == 3


def test_local_accumulator_tile_per_thread():
    sch = tir.Schedule(tir.from_source(MATMUL))
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    bi, ti = sch.split(i, [None, 8])
    jo, ji = sch.split(j, [None, 4])
    sch.reorder(bi, ti, jo, k, ji)
    sch.bind(bi, "blockIdx.x")
    sch.bind(ti, "threadIdx.x")
    sch.reverse_compute_at(sch.cache_write(block, 0, "local"), jo)
    gfunc = check_on_opencl(
        sch.func, lambda s: [_floats(s[0], s[1]), _floats(s[1], s[2]), np.zeros((s[0], s[2]), "float32")],
        [(1, 1, 1), (5, 7, 3), (9, 2, 13)], FLOAT)
    source = opencl_source([gfunc])
    assert "float C_local[4];" in source and "barrier(" not in source


@pytest.mark.parametrize("threads", [1, 3, 8, 32, 64])
def test_cross_thread_row_reductions(threads):
    sch = tir.Schedule(tir.from_source(ROW_REDUCE))
    for name in ("S", "M"):
        i, j = sch.get_loops(sch.get_block(name))
        _, inner = sch.split(j, [None, threads])
        sch.bind(i, "blockIdx.x")
        sch.bind(inner, "threadIdx.x")
    gfunc = check_on_opencl(sch.func, lambda s: [_floats(*s), np.zeros(s[0], "float32"),
                                                 np.zeros(s[0], "float32")],
                            [(1, 1), (3, 5), (2, 64), (4, 100)], FLOAT)
    assert all(k.block == (threads, 1, 1) for k in gfunc.kernels)
    # m = 0: the init (0.5, -inf) is written. The interpreter and C skip the init of a split
    # reduction with a predicate (hoist_init cannot move it), so this is checked directly.
    outs = [np.zeros((3, 0), "float32"), np.zeros(3, "float32"), np.zeros(3, "float32")]
    assert run_opencl(gfunc, opencl_source([gfunc]), outs) == 0
    np.testing.assert_array_equal(outs[1], 0.5)
    np.testing.assert_array_equal(outs[2], -np.inf)


def test_cross_thread_rewrite_shape():
    """Before: out[i] accumulated under a threadIdx-bound reduction loop. After: a per-thread
    partial in local memory, the same loops accumulating into it, then one ThreadReduce
    whose body writes init + result."""
    sch = tir.Schedule(tir.from_source(ROW_REDUCE))
    i, j = sch.get_loops(sch.get_block("S"))
    sch.bind(i, "blockIdx.x")
    sch.bind(j, "threadIdx.x")
    after = lower_cross_thread_reductions(sch.func)
    allocs = collect(after.body, lambda n: isinstance(n, tir.Allocate))
    assert [(a.buffer.name, a.buffer.scope, [d.value for d in a.buffer.shape]) for a in allocs] == \
        [("S_partial", "local", [1])]
    first, loop, reduce = allocs[0].body.seq
    assert isinstance(first, tir.BufferStore) and first.value.value == 0.0
    assert loop.thread_tag == "threadIdx.x"
    assert isinstance(reduce, ThreadReduce) and reduce.op == "sum" and reduce.thread_tag == "threadIdx.x"
    store = reduce.body
    assert store.buffer.name == "S" and isinstance(store.value, tir.Add)  # 0.5 + result
    assert [b.name for b in collect(loop, lambda n: isinstance(n, tir.Block))] == ["S_partial"]
    # the M block is untouched (not bound)
    assert collect(after.body, lambda n: isinstance(n, tir.Block) and n.name == "M")


def test_two_thread_axes_reduce_and_rows_on_y():
    """A block of 4 rows (threadIdx.y) x 16 threads (threadIdx.x) reducing each row."""
    sch = tir.Schedule(tir.from_source(ROW_REDUCE))
    for name in ("S", "M"):
        i, j = sch.get_loops(sch.get_block(name))
        io, ii = sch.split(i, [None, 4])
        _, ji = sch.split(j, [None, 16])
        sch.bind(io, "blockIdx.x")
        sch.bind(ii, "threadIdx.y")
        sch.bind(ji, "threadIdx.x")
    check_on_opencl(sch.func, lambda s: [_floats(*s), np.zeros(s[0], "float32"), np.zeros(s[0], "float32")],
                    [(1, 1), (5, 17), (9, 40)], FLOAT)


def test_integer_division_by_zero_sets_the_status():
    func = tir.from_source('''
@T.prim_func
def div(A: T.Buffer(("n",), "int32"), B: T.Buffer(("n",), "int32"), d: T.int32):
    n = T.int64()
    for i in range(n):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            B[vi] = A[vi] // d + A[vi] % d
''')
    sch = _bind_elementwise(func, "B", 4)
    gfunc = lower_for_gpu("div", sch.func)
    source = opencl_source([gfunc])
    a = np.array([7, -7, 3], "int32")
    out = np.zeros(3, "int32")
    assert run_opencl(gfunc, source, [a, out], {"d": 2}) == 0
    np.testing.assert_array_equal(out, a // 2 + a % 2)
    status = run_opencl(gfunc, source, [a, out], {"d": 0})
    assert status == STATUS_ZERO_DIVISION
    np.testing.assert_array_equal(out, 0)   # 0 in place of each quotient, as the C kernels give
    with pytest.raises(ZeroDivisionError):
        raise_for_status(status, "div")


def test_dtypes_and_intrinsics():
    func = tir.from_source('''
@T.prim_func
def mix(H: T.Buffer(("n",), "float16"), X: T.Buffer(("n",), "float64"), I: T.Buffer(("n",), "int32"),
        O: T.Buffer(("n",), "float32"), Q: T.Buffer(("n",), "bool"), G: T.Buffer(("n",), "float16")):
    n = T.int64()
    for i in range(n):
        with T.block("O"):
            vi = T.axis.remap("S", [i])
            O[vi] = T.exp(T.Cast("float32", H[vi])) + T.sqrt(T.abs(T.Cast("float32", X[vi]))) \
                + T.rsqrt(T.Cast("float32", X[vi]) * T.Cast("float32", X[vi]) + 1.0) \
                + T.tanh(T.Cast("float32", I[vi])) + T.erf(T.Cast("float32", X[vi])) \
                + T.pow(T.abs(T.Cast("float32", X[vi])) + 0.5, 1.5) \
                + T.Select(I[vi] > 0, T.max(T.Cast("float32", I[vi]), 0.25), T.min(T.Cast("float32", I[vi]), -0.25)) \
                + T.Cast("float32", T.sigmoid(X[vi]))
    for i in range(n):
        with T.block("Q"):
            vi = T.axis.remap("S", [i])
            Q[vi] = T.isnan(X[vi]) or I[vi] % 3 == 1 and not T.isinf(X[vi])
    for i in range(n):
        with T.block("G"):
            vi = T.axis.remap("S", [i])
            G[vi] = H[vi] * T.float16(2.0)
''')
    sch = tir.Schedule(func)
    for name in ("O", "Q", "G"):
        (loop,) = sch.get_loops(sch.get_block(name))
        outer, inner = sch.split(loop, [None, 8])
        sch.bind(outer, "blockIdx.x")
        sch.bind(inner, "threadIdx.x")

    def arrays(n):
        x = RNG.uniform(-2, 2, n)
        x[::5] = np.nan
        x[1::7] = np.inf
        return [RNG.uniform(-1, 1, n).astype("float16"), x, RNG.integers(-5, 6, n).astype("int32"),
                np.zeros(n, "float32"), np.zeros(n, bool), np.zeros(n, "float16")]
    check_on_opencl(sch.func, arrays, [1, 9, 40], {"rtol": 2e-3, "atol": 2e-3, "equal_nan": True})


def test_symbolic_thread_count_is_rejected():
    sch = tir.Schedule(tir.from_source(TWO_STAGES))
    i, j = sch.get_loops(sch.get_block("B"))
    sch.bind(i, "threadIdx.x")
    with pytest.raises(GPULoweringError, match="threadIdx.x has the symbolic extent n"):
        lower_for_gpu("two", sch.func)


def test_shared_buffer_across_launches_is_rejected():
    func = tir.from_source(TWO_STAGES.replace('C = T.alloc_buffer((n, 3), "float32")',
                                              'C = T.alloc_buffer((n, 3), "float32", scope="shared")'))
    with pytest.raises(GPULoweringError, match="shared buffer 'C' is used by 2 separate launches"):
        lower_for_gpu("two", func)


def test_imperfect_cross_thread_nest_is_split():
    # the thread loop is split around the reduction (cross_thread_reduce._split): S is the row's
    # total, Y is written once per row (the rejection of a nest that cannot be split:
    # test_gpu_tvmscript.test_a_thread_reduction_left_per_thread_is_refused)
    func = tir.from_source('''
@T.prim_func
def imperfect(X: T.Buffer((4, 8), "float32"), S: T.Buffer((4,), "float32"), Y: T.Buffer((4,), "float32")):
    for i in T.thread_binding(4, thread="blockIdx.x"):
        for j in T.thread_binding(8, thread="threadIdx.x"):
            with T.block("S"):
                vi, vj = T.axis.remap("SR", [i, j])
                with T.init():
                    S[vi] = 0.0
                S[vi] = S[vi] + X[vi, vj]
            with T.block("Y"):
                vi = T.axis.spatial(4, i)
                Y[vi] = X[vi, 0]
''')
    rng = np.random.default_rng(5)
    check_on_opencl(func, lambda _: [rng.standard_normal((4, 8)).astype("float32"),
                                     np.zeros(4, "float32"), np.zeros(4, "float32")], [None],
                    tolerance={"rtol": 1e-5, "atol": 1e-6})


NORMALIZE = '''
@T.prim_func
def norm(X: T.Buffer(("n", "m"), "float32"), Y: T.Buffer(("n", "m"), "float32")):
    n = T.int64()
    m = T.int64()
    S = T.alloc_buffer((n,), "float32")
    for i, j in T.grid(n, m):
        with T.block("S"):
            vi, vj = T.axis.remap("SR", [i, j])
            with T.init():
                S[vi] = 1.0
            S[vi] = S[vi] + X[vi, vj] * X[vi, vj]
    for i, j in T.grid(n, m):
        with T.block("Y"):
            vi, vj = T.axis.remap("SS", [i, j])
            Y[vi, vj] = X[vi, vj] / S[vi]
'''


@pytest.mark.parametrize("scope", ["global", "shared", "local"])
def test_stitched_row_reduce_and_use_in_one_kernel(scope):
    """A row per block: the sum is reduced across threads and every thread then reads it
    (from a workspace, shared memory or its own local copy); one launch."""
    sch = tir.Schedule(tir.from_source(NORMALIZE))
    row, col = sch.get_loops(sch.get_block("Y"))
    _, col_inner = sch.split(col, [None, 16])
    sch.bind(row, "blockIdx.x")
    sch.bind(col_inner, "threadIdx.x")
    s_block = sch.get_block("S")
    sch.compute_at(s_block, row)
    _, red_inner = sch.split(sch.get_loops(s_block)[-1], [None, 16])
    sch.bind(red_inner, "threadIdx.x")
    if scope != "global":
        sch.set_scope(s_block, 0, scope)
    gfunc = check_on_opencl(sch.func, lambda s: [_floats(*s), np.zeros(s, "float32")],
                            [(1, 1), (3, 17), (2, 40)], FLOAT)
    assert len(gfunc.kernels) == 1
    assert [w.name for w in gfunc.workspaces] == (["S"] if scope == "global" else [])
    source = opencl_source([gfunc])
    # the sum's store is thread 0's, then a barrier, unless each thread keeps its own copy
    assert ("get_local_id(0) == 0" in source) == (scope != "local")


def test_barrier_under_a_thread_guard_is_rejected():
    func = tir.from_source('''
@T.prim_func
def racy(X: T.Buffer((8,), "float32"), Y: T.Buffer((8,), "float32")):
    S = T.alloc_buffer((4,), "float32", scope="shared")
    for bx in T.thread_binding(2, thread="blockIdx.x"):
        for tx in T.thread_binding(4, thread="threadIdx.x"):
            with T.block("Y0"):
                vb, vt = T.axis.remap("SS", [bx, tx])
                Y[vb * 4 + vt] = 0.0
        for tx in T.thread_binding(3, thread="threadIdx.x"):
            with T.block("S"):
                vb, vt = T.axis.remap("SS", [bx, tx])
                S[vt] = X[vb * 4 + vt]
            with T.block("Y"):
                vb, vt = T.axis.remap("SS", [bx, tx])
                Y[vb * 4 + vt] = S[2 - vt]
''')
    gfunc = lower_for_gpu("racy", func)
    with pytest.raises(GPULoweringError, match=r"\(S\) needs a barrier.*depends on the thread"):
        opencl_source([gfunc])


def test_clipped_tile_fetch_by_fewer_threads_than_rows():
    """8x8 output tiles by 4x4 threads (2x2 each); the 8-row operand tiles are fetched in two
    passes of 4 threads, so the fetch's extent is clipped at the edge and rounded to 4."""
    sch = tir.Schedule(tir.from_source(MATMUL))
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    bi, ti, ii = sch.split(i, [None, 4, 2])
    bj, tj, jj = sch.split(j, [None, 4, 2])
    ko, ki = sch.split(k, [None, 4])
    sch.reorder(bi, bj, ko, ti, tj, ki, ii, jj)
    for loop, tag in ((bi, "blockIdx.y"), (bj, "blockIdx.x"), (ti, "threadIdx.y"), (tj, "threadIdx.x")):
        sch.bind(loop, tag)
    for index in (1, 2):
        cached = sch.cache_read(block, index, "shared")
        sch.compute_at(cached, ko)
        rows, cols = sch.get_loops(cached)[-2:]
        _, rows_inner = sch.split(rows, [None, 4])
        _, cols_inner = sch.split(cols, [None, 4])
        sch.bind(rows_inner, "threadIdx.y")
        sch.bind(cols_inner, "threadIdx.x")
    gfunc = check_on_opencl(
        sch.func, lambda s: [_floats(s[0], s[1]), _floats(s[1], s[2]), np.zeros((s[0], s[2]), "float32")],
        [(1, 1, 1), (9, 5, 11), (16, 8, 16)], FLOAT)
    (kernel,) = gfunc.kernels
    assert kernel.block == (4, 4, 1)
    assert sorted(b.shape[0].value for b in kernel.shared) == [32, 32]   # 8x4 and 4x8 tiles


def test_cache_read_at_two_unrelated_tiles_reads_the_source():
    """C[i, j] = A[i] * A[j]: a shared copy of A for a block would span both its row and its
    column tile (no constant size), so the kernel reads A itself."""
    sch = tir.Schedule(tir.from_source('''
@T.prim_func
def outer(A: T.Buffer(("n",), "float32"), C: T.Buffer(("n", "n"), "float32")):
    n = T.int64()
    for i, j in T.grid(n, n):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = A[vi] * A[vj]
'''))
    block = sch.get_block("C")
    i, j = sch.get_loops(block)
    bi, ti = sch.split(i, [None, 4])
    bj, tj = sch.split(j, [None, 4])
    sch.reorder(bi, bj, ti, tj)
    for loop, tag in ((bi, "blockIdx.y"), (bj, "blockIdx.x"), (ti, "threadIdx.y"), (tj, "threadIdx.x")):
        sch.bind(loop, tag)
    sch.compute_at(sch.cache_read(block, 0, "shared"), bj)
    gfunc = check_on_opencl(sch.func, lambda n: [_floats(n), np.zeros((n, n), "float32")], [1, 6, 9], FLOAT)
    assert gfunc.kernels[0].shared == [] and "A_shared" not in opencl_source([gfunc])
