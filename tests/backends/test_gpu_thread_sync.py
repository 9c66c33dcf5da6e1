"""TVM's lowered GPU TIR: ``T.tvm_storage_sync`` barriers, warp shuffles, ``T.tvm_warp_activemask``
and ``T.tvm_thread_allreduce`` (``tensorir.thread_sync``). The interpreter runs a block's threads
in turns between them (``interpreter/block_threads``); the kernels run on OpenCL (PoCL) against it
on random inputs with the symbolic row count bound to several values, block sizes that are and are
not whole warps, and compile to PTX with NVRTC."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tensorir as tir
from backends.cuda.codegen import cuda_source
from backends.gpu import GPULoweringError, lower_for_gpu
from backends.opencl.codegen import opencl_source
from tensorir.errors import ParseError
from tensorir.interpreter import InterpretError
from tensorir.script.printer import print_prim_func
from tensorir.structural import structural_equal

from .gpu_launch import check_on_opencl, require_nvrtc, require_opencl


@pytest.fixture
def _opencl():
    require_opencl()


def _compile_cuda(func) -> None:
    require_nvrtc()
    from backends.cuda.nvrtc import compile_ptx
    gfunc = lower_for_gpu(func.name, func)
    ptx = compile_ptx(cuda_source([gfunc]))
    assert all(f".entry {k.symbol}(".encode() in ptx for k in gfunc.kernels)


# ---------------------------------------------------------------- TVM's two-stage warp reduction
def warp_row_sum(threads: int, length: int) -> str:
    """A row sum as TVM's LowerThreadAllreduce writes it for ``threads`` (whole warps): shuffles
    down within each warp, one partial per warp through shared memory, shuffles again, a
    broadcast; symbolic rows, one block each."""
    warps = threads // 32
    lines = [f'''
@T.prim_func
def warp_row_sum(var_a: T.handle, var_b: T.handle):
    n = T.int64()
    A = T.match_buffer(var_a, (n, {length}), "float32")
    B = T.match_buffer(var_b, (n,), "float32")
    blockIdx_x = T.launch_thread("blockIdx.x", n)
    total = T.allocate([1], "float32", "shared")
    T.attr(total, "volatile_scope", 1)
    threadIdx_x = T.launch_thread("threadIdx.x", {threads})
    total_1 = T.Buffer((1,), data=total, scope="shared")
    part = T.decl_buffer([1], "float32", scope="local")
    mask = T.decl_buffer([1], "uint32", scope="local")
    t0 = T.decl_buffer([1], "float32", scope="local")
    staging = T.decl_buffer([{warps}], "float32", scope="shared")
    part[0] = T.float32(0)
    for k in range({-(-length // threads)}):
        if k * {threads} + threadIdx_x < {length}:
            part[0] = part[0] + A[blockIdx_x, k * {threads} + threadIdx_x]
    mask[0] = T.tvm_warp_activemask()''']
    for off in (16, 8, 4, 2, 1):
        lines += [f"    t0[0] = T.tvm_warp_shuffle_down(mask[0], part[0], {off}, 32, 32)",
                  "    part[0] = part[0] + t0[0]"]
    lines += ["    if threadIdx_x % 32 == 0:",
              "        staging[threadIdx_x // 32] = part[0]",
              '    T.tvm_storage_sync("shared")',
              f"    if threadIdx_x < {warps}:",
              "        part[0] = staging[threadIdx_x]",
              "    mask[0] = T.tvm_warp_activemask()"]
    off = warps // 2
    while off >= 1:
        lines += [f"    t0[0] = T.tvm_warp_shuffle_down(mask[0], part[0], {off}, 32, 32)",
                  "    part[0] = part[0] + t0[0]"]
        off //= 2
    lines += ["    part[0] = T.tvm_warp_shuffle(mask[0], part[0], 0, 32, 32)",
              "    if threadIdx_x == 0:",
              "        total_1[0] = part[0]",
              '    T.tvm_storage_sync("shared")',
              "    if threadIdx_x == 0:",
              "        B[blockIdx_x] = total_1[0]"]
    return "\n".join(lines) + "\n"


def _rows(n, length, rng):
    return [rng.standard_normal((n, length)).astype("float32"), np.zeros((n,), "float32")]


def _check_warp_reduction(warps, length, seed, sizes):
    func = tir.from_source(warp_row_sum(32 * warps, length))
    rng = np.random.default_rng(seed)
    arrays = _rows(1, length, rng)
    expected = [a.copy() for a in arrays]
    tir.interpret(func, *expected)
    np.testing.assert_allclose(expected[1], arrays[0].sum(axis=1), rtol=1e-4, atol=1e-4)
    check_on_opencl(func, lambda n: _rows(n, length, rng), sizes, tolerance={"rtol": 1e-5, "atol": 1e-5})


@pytest.mark.usefixtures("_opencl")
@settings(max_examples=3, deadline=None)
@given(warps=st.sampled_from([1, 2, 4]), length=st.integers(1, 200), seed=st.integers(0, 2 ** 16))
def test_tvm_warp_reduction_matches_the_interpreter_and_numpy(warps, length, seed):
    _check_warp_reduction(warps, length, seed, [1, 2])


@pytest.mark.slow
@pytest.mark.usefixtures("_opencl")
@settings(max_examples=12, deadline=None)
@given(warps=st.sampled_from([1, 2, 4, 8, 16]), length=st.integers(1, 600), seed=st.integers(0, 2 ** 16))
def test_tvm_warp_reduction_matches_the_interpreter_and_numpy_large(warps, length, seed):
    _check_warp_reduction(warps, length, seed, [1, 3, 4])


# ---------------------------------------------------------------- allreduce over two axes
def allreduce_rows(rows: int, threads: int, length: int, combine: str, identity: str) -> str:
    """``rows`` rows per block on threadIdx.y, each reduced by ``threads`` threads on threadIdx.x
    with T.tvm_thread_allreduce (TVM's form before LowerThreadAllreduce); the last block's rows
    past n contribute nothing (the condition) and store nothing."""
    return f'''
@T.prim_func
def allreduce_rows(var_a: T.handle, var_b: T.handle):
    n = T.int64()
    A = T.match_buffer(var_a, (n, {length}), "float32")
    B = T.match_buffer(var_b, (n,), "float32")
    blockIdx_x = T.launch_thread("blockIdx.x", (n + {rows - 1}) // {rows})
    threadIdx_y = T.launch_thread("threadIdx.y", {rows})
    acc = T.allocate([1], "float32", "local")
    res = T.allocate([1], "float32", "local")
    threadIdx_x = T.launch_thread("threadIdx.x", {threads})
    acc_1 = T.Buffer((1,), data=acc, scope="local")
    res_1 = T.Buffer((1,), data=res, scope="local")
    acc_1[0] = {identity}
    for k in range({-(-length // threads)}):
        if blockIdx_x * {rows} + T.int64(threadIdx_y) < n and k * {threads} + threadIdx_x < {length}:
            acc_1[0] = {combine.format(x="acc_1[0]", y=f"A[blockIdx_x * {rows} + T.int64(threadIdx_y), k * {threads} + threadIdx_x]")}
    with T.attr(T.comm_reducer(lambda x, y: {combine.format(x="x", y="y")}, [{identity}]), "reduce_scope",
                T.reinterpret("handle", T.uint64(0))):
        T.tvm_thread_allreduce(T.uint32(1), acc_1[0], blockIdx_x * {rows} + T.int64(threadIdx_y) < n, res_1[0],
                               threadIdx_x)
    if threadIdx_x == 0 and blockIdx_x * {rows} + T.int64(threadIdx_y) < n:
        B[blockIdx_x * {rows} + T.int64(threadIdx_y)] = res_1[0]
'''


REDUCERS = {"sum": ("{x} + {y}", "T.float32(0)", np.sum),
            "max": ("T.max({x}, {y})", 'T.min_value("float32")', np.max),
            "min": ("T.min({x}, {y})", "T.float32(3.0e38)", np.min)}


@pytest.mark.usefixtures("_opencl")
@settings(max_examples=3, deadline=None)
@given(rows=st.sampled_from([1, 2, 3]), threads=st.sampled_from([5, 24, 32, 48, 100]),
       op=st.sampled_from(sorted(REDUCERS)), length=st.integers(1, 130), seed=st.integers(0, 2 ** 16))
def test_allreduce_over_rows_matches_the_interpreter_and_numpy(rows, threads, op, length, seed):
    combine, identity, reference = REDUCERS[op]
    func = tir.from_source(allreduce_rows(rows, threads, length, combine, identity))
    rng = np.random.default_rng(seed)
    arrays = _rows(5, length, rng)
    expected = [a.copy() for a in arrays]
    tir.interpret(func, *expected)
    np.testing.assert_allclose(expected[1], reference(arrays[0], axis=1), rtol=1e-4, atol=1e-4)
    check_on_opencl(func, lambda n: _rows(n, length, rng), [1, 4], tolerance={"rtol": 1e-5, "atol": 1e-5})


# ---------------------------------------------------------------- one shuffle, every lane rule
def one_shuffle(op: str, threads: int, lane: str, width: int, dtype: str) -> str:
    return f'''
@T.prim_func
def one_shuffle(var_a: T.handle, var_b: T.handle):
    n = T.int64()
    A = T.match_buffer(var_a, (n, {threads}), "{dtype}")
    B = T.match_buffer(var_b, (n, {threads}), "{dtype}")
    blockIdx_x = T.launch_thread("blockIdx.x", n)
    threadIdx_x = T.launch_thread("threadIdx.x", {threads})
    v = T.decl_buffer([1], "{dtype}", scope="local")
    v[0] = A[blockIdx_x, threadIdx_x]
    v[0] = T.{op}(T.tvm_warp_activemask(), v[0], {lane}, {width}, 32)
    B[blockIdx_x, threadIdx_x] = v[0]
'''


def cuda_lane(op: str, lane: int, arg: int, width: int) -> int:
    """The lane CUDA's __shfl*_sync reads (its documented rules, written out independently)."""
    first = lane - lane % width
    if op == "tvm_warp_shuffle":
        return first + arg % width
    delta = arg % 32
    if op == "tvm_warp_shuffle_down":
        return lane + delta if lane + delta < first + width else lane
    return lane - delta if lane - delta >= first else lane


def _data(dtype, shape, rng):
    if dtype.startswith("float"):
        return rng.standard_normal(shape).astype(dtype)
    return rng.integers(-100, 100, shape).astype(dtype)


@settings(max_examples=40, deadline=None)
@given(op=st.sampled_from(["tvm_warp_shuffle", "tvm_warp_shuffle_up", "tvm_warp_shuffle_down"]),
       warps=st.integers(1, 3), width=st.sampled_from([1, 2, 4, 8, 16, 32]), scale=st.integers(-3, 3),
       offset=st.integers(-40, 70), seed=st.integers(0, 2 ** 16))
def test_the_interpreter_reads_the_lanes_cuda_documents(op, warps, width, scale, offset, seed):
    threads = 32 * warps
    if op != "tvm_warp_shuffle":
        scale = 0   # a delta is an unsigned count: keep it a constant in [0, 70]
        offset = abs(offset)
    func = tir.from_source(one_shuffle(op, threads, f"threadIdx_x * {scale} + {offset}", width, "float32"))
    rng = np.random.default_rng(seed)
    a = _data("float32", (2, threads), rng)
    b = np.zeros_like(a)
    tir.interpret(func, a, b)
    for t in range(threads):
        lane, base = t % 32, t - t % 32
        assert b[1, t] == a[1, base + cuda_lane(op, lane, t * scale + offset, width)]


@pytest.mark.usefixtures("_opencl")
@settings(max_examples=8, deadline=None)
@given(op=st.sampled_from(["tvm_warp_shuffle", "tvm_warp_shuffle_up", "tvm_warp_shuffle_down"]),
       warps=st.integers(1, 3), width=st.sampled_from([1, 4, 16, 32]), offset=st.integers(0, 40),
       dtype=st.sampled_from(["float32", "int32", "int8", "float64"]), seed=st.integers(0, 2 ** 16))
def test_shuffles_on_opencl_match_the_interpreter(op, warps, width, offset, dtype, seed):
    threads = 32 * warps
    lane = f"threadIdx_x * 3 + {offset}" if op == "tvm_warp_shuffle" else str(offset)
    func = tir.from_source(one_shuffle(op, threads, lane, width, dtype))
    rng = np.random.default_rng(seed)
    check_on_opencl(func, lambda n: [_data(dtype, (n, threads), rng), np.zeros((n, threads), dtype)], [1, 3])


# a block of 48 threads: warp 1 has 16 lanes, whole segments of width 16 (a scan with shuffle_up)
SEGMENT_SCAN = '''
@T.prim_func
def segment_scan(var_a: T.handle, var_b: T.handle):
    n = T.int64()
    A = T.match_buffer(var_a, (n, 48), "int32")
    B = T.match_buffer(var_b, (n, 48), "int32")
    blockIdx_x = T.launch_thread("blockIdx.x", n)
    threadIdx_x = T.launch_thread("threadIdx.x", 48)
    v = T.decl_buffer([1], "int32", scope="local")
    t = T.decl_buffer([1], "int32", scope="local")
    mask = T.decl_buffer([1], "uint32", scope="local")
    v[0] = A[blockIdx_x, threadIdx_x]
    mask[0] = T.tvm_warp_activemask()
    for i in range(4):
        t[0] = T.tvm_warp_shuffle_up(mask[0], v[0], T.shift_left(1, i), 16, 32)
        if threadIdx_x % 16 >= T.shift_left(1, i):
            v[0] = v[0] + t[0]
    B[blockIdx_x, threadIdx_x] = v[0] * 1000 + T.Cast("int32", T.shift_right(mask[0], T.uint32(16)) % T.uint32(2))
'''


@pytest.mark.usefixtures("_opencl")
@settings(max_examples=4, deadline=None)
@given(seed=st.integers(0, 2 ** 16))
def test_a_scan_in_a_block_that_is_not_whole_warps(seed):
    func = tir.from_source(SEGMENT_SCAN)
    rng = np.random.default_rng(seed)
    a = rng.integers(-50, 50, (3, 48)).astype("int32")
    b = np.zeros_like(a)
    tir.interpret(func, a, b)
    scans = np.cumsum(a.reshape(3, 3, 16), axis=2).reshape(3, 48)
    present = np.array([1] * 32 + [0] * 16)   # lane 16 of warp 1 is past the block
    np.testing.assert_array_equal(b, scans * 1000 + present)
    check_on_opencl(func, lambda n: [rng.integers(-50, 50, (n, 48)).astype("int32"), np.zeros((n, 48), "int32")],
                    [1, 2, 5])


# ---------------------------------------------------------------- barriers
REVERSE = '''
@T.prim_func
def reverse(var_a: T.handle, var_b: T.handle):
    n = T.int64()
    A = T.match_buffer(var_a, (n, 40), "float32")
    B = T.match_buffer(var_b, (n, 40), "float32")
    blockIdx_x = T.launch_thread("blockIdx.x", n)
    tile = T.allocate([40], "float32", "shared")
    threadIdx_x = T.launch_thread("threadIdx.x", 40)
    tile_1 = T.Buffer((40,), data=tile, scope="shared")
    for r in range(3):
        tile_1[threadIdx_x] = A[blockIdx_x, threadIdx_x] * T.float32(r + 1)
        T.tvm_storage_sync("shared")
        B[blockIdx_x, threadIdx_x] = B[blockIdx_x, threadIdx_x] + tile_1[39 - threadIdx_x]
        T.tvm_storage_sync("shared")
'''


@pytest.mark.usefixtures("_opencl")
def test_a_barrier_makes_the_other_threads_stores_visible():
    func = tir.from_source(REVERSE)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 40)).astype("float32")
    b = np.zeros_like(a)
    tir.interpret(func, a, b)
    np.testing.assert_allclose(b, 6 * a[:, ::-1], rtol=1e-6)
    check_on_opencl(func, lambda n: [rng.standard_normal((n, 40)).astype("float32"), np.zeros((n, 40), "float32")],
                    [1, 3, 6], tolerance={"rtol": 1e-6, "atol": 0})


def test_a_barrier_some_threads_skip_is_refused_everywhere():
    text = REVERSE.replace('''        T.tvm_storage_sync("shared")
        B[''', '''        if threadIdx_x < 20:
            T.tvm_storage_sync("shared")
        B[''')
    func = tir.from_source(text, filename="reverse.py")
    a = np.ones((1, 40), "float32")
    with pytest.raises(InterpretError, match="do not reach the same synchronization"):
        tir.interpret(func, a, np.zeros_like(a))
    with pytest.raises(GPULoweringError, match=r"T.tvm_storage_sync at reverse.py:\d+ runs under a condition"):
        opencl_source([lower_for_gpu("reverse", func)])
    with pytest.raises(GPULoweringError, match="tvm_storage_sync"):
        cuda_source([lower_for_gpu("reverse", func)])


# ---------------------------------------------------------------- refusals
def test_reading_a_lane_past_the_block_is_an_error_in_the_interpreter():
    # 48 threads: lane 0 of warp 1 reads lane 16, which does not exist (undefined in CUDA)
    func = tir.from_source(one_shuffle("tvm_warp_shuffle_down", 48, "16", 32, "float32"))
    a = np.ones((1, 48), "float32")
    with pytest.raises(InterpretError, match="lane 0 of warp 1 .* reads lane 16"):
        tir.interpret(func, a, np.zeros_like(a))


def test_a_mask_without_the_calling_lane_is_an_error():
    text = one_shuffle("tvm_warp_shuffle", 32, "0", 32, "float32").replace("T.tvm_warp_activemask()", "T.uint32(1)")
    func = tir.from_source(text)
    a = np.ones((1, 32), "float32")
    with pytest.raises(InterpretError, match="lane 1 of warp 0 calls it with mask 0x1"):
        tir.interpret(func, a, np.zeros_like(a))


def test_a_width_that_is_not_a_power_of_two_is_refused():
    func = tir.from_source(one_shuffle("tvm_warp_shuffle_down", 32, "1", 12, "float32"))
    a = np.ones((1, 32), "float32")
    with pytest.raises(InterpretError, match="width 12 is not a power of two"):
        tir.interpret(func, a, np.zeros_like(a))
    with pytest.raises(GPULoweringError, match="width 12"):
        opencl_source([lower_for_gpu("one_shuffle", func)])


def test_a_shuffle_under_a_thread_condition_compiles_for_cuda_and_is_refused_on_opencl():
    text = one_shuffle("tvm_warp_shuffle_down", 32, "1", 32, "float32").replace(
        "    v[0] = T.tvm_warp_shuffle_down", "    if threadIdx_x < 16:\n        v[0] = T.tvm_warp_shuffle_down")
    func = tir.from_source(text, filename="divergent.py")
    with pytest.raises(GPULoweringError, match=r"T.tvm_warp_shuffle_down at divergent.py:\d+ runs under a condition"):
        opencl_source([lower_for_gpu("one_shuffle", func)])
    assert "__shfl_down_sync" in cuda_source([lower_for_gpu("one_shuffle", func)])
    _compile_cuda(func)


ARGMAX = '''
@T.prim_func
def argmax(A: T.Buffer((2, 32), "float32"), I: T.Buffer((2,), "int32")):
    threadIdx_y = T.launch_thread("threadIdx.y", 2)
    threadIdx_x = T.launch_thread("threadIdx.x", 32)
    idx = T.decl_buffer([1], "int32", scope="local")
    val = T.decl_buffer([1], "float32", scope="local")
    with T.attr(T.comm_reducer(lambda i0, v0, i1, v1: (T.Select(v0 >= v1, i0, i1), T.max(v0, v1)),
                               [-1, T.min_value("float32")]), "reduce_scope", T.reinterpret("handle", T.uint64(0))):
        T.tvm_thread_allreduce(T.uint32(2), T.Cast("int32", threadIdx_x), A[threadIdx_y, threadIdx_x], T.bool(True),
                               idx[0], val[0],
                               threadIdx_x)
    if threadIdx_x == 0:
        I[threadIdx_y] = idx[0]
'''


def test_a_two_value_reducer_runs_in_the_interpreter_and_is_refused_by_the_gpu_lowering():
    func = tir.from_source(ARGMAX, filename="argmax.py")
    a = np.random.default_rng(1).standard_normal((2, 32)).astype("float32")
    out = np.zeros(2, "int32")
    tir.interpret(func, a, out)
    np.testing.assert_array_equal(out, a.argmax(axis=1))
    with pytest.raises(GPULoweringError, match=r"T.tvm_thread_allreduce at argmax.py:\d+: its reducer"):
        lower_for_gpu("argmax", func)


def test_a_grid_wide_barrier_and_a_foreign_warp_size_are_refused():
    grid = tir.from_source(REVERSE.replace('T.tvm_storage_sync("shared")', 'T.tvm_storage_sync("global")'))
    with pytest.raises(GPULoweringError, match="every block of the grid"):
        opencl_source([lower_for_gpu("reverse", grid)])
    wide = tir.from_source(one_shuffle("tvm_warp_shuffle", 64, "0", 32, "float32").replace(", 32, 32)", ", 32, 64)"))
    with pytest.raises(GPULoweringError, match="warp of 64 lanes"):
        cuda_source([lower_for_gpu("one_shuffle", wide)])
    a = np.ones((1, 64), "float32")
    with pytest.raises(InterpretError, match="warp size 64"):
        tir.interpret(wide, a, np.zeros_like(a))


def test_an_allreduce_outside_its_reduce_scope_is_a_parse_error():
    text = ARGMAX.replace('''    with T.attr(T.comm_reducer(lambda i0, v0, i1, v1: (T.Select(v0 >= v1, i0, i1), T.max(v0, v1)),
                               [-1, T.min_value("float32")]), "reduce_scope", T.reinterpret("handle", T.uint64(0))):
''', "    if True:\n")
    with pytest.raises(ParseError, match="must be inside T.attr"):
        tir.from_source(text)


def test_a_synchronization_outside_any_thread_loop_is_an_interpreter_error():
    func = tir.from_source('''
@T.prim_func
def lonely(A: T.Buffer((4,), "float32")):
    T.tvm_storage_sync("shared")
    A[0] = T.float32(1)
''')
    with pytest.raises(InterpretError, match="outside a threadIdx loop"):
        tir.interpret(func, np.zeros(4, "float32"))


# ---------------------------------------------------------------- printing and NVRTC
@pytest.mark.parametrize("text", [warp_row_sum(64, 100), allreduce_rows(2, 24, 50, *REDUCERS["max"][:2]),
                                  SEGMENT_SCAN, REVERSE, ARGMAX], ids=["warp", "allreduce", "scan", "reverse", "argmax"])
def test_printing_reparses_to_the_same_function(text):
    func = tir.from_source(text)
    printed = print_prim_func(func)
    again = tir.from_source(printed)
    assert structural_equal(func, again)
    assert print_prim_func(again) == printed


@pytest.mark.parametrize("text", [warp_row_sum(128, 300), allreduce_rows(3, 48, 70, *REDUCERS["sum"][:2]),
                                  SEGMENT_SCAN, REVERSE, one_shuffle("tvm_warp_shuffle", 64, "threadIdx_x + 3", 8, "int8")],
                         ids=["warp", "allreduce", "scan", "reverse", "int8"])
def test_cuda_kernels_compile(text):
    _compile_cuda(tir.from_source(text))


# ---------------------------------------------------------------- warp memory
def warp_rotate(x: int, y: int) -> str:
    """Each warp's lanes pass their values one lane down through a "warp" buffer (TVM's warp
    memory: one copy per warp, visible to its lanes after T.tvm_storage_sync("warp"))."""
    return f'''
@T.prim_func
def warp_rotate(var_a: T.handle, var_b: T.handle):
    n = T.int64()
    A = T.match_buffer(var_a, (n, {x * y}), "float32")
    B = T.match_buffer(var_b, (n, {x * y}), "float32")
    blockIdx_x = T.launch_thread("blockIdx.x", n)
    threadIdx_y = T.launch_thread("threadIdx.y", {y})
    threadIdx_x = T.launch_thread("threadIdx.x", {x})
    W = T.allocate([32], "float32", "warp")
    W_1 = T.Buffer((32,), data=W, scope="warp")
    W_1[(threadIdx_y * {x} + threadIdx_x) % 32] = A[blockIdx_x, threadIdx_y * {x} + threadIdx_x]
    T.tvm_storage_sync("warp")
    B[blockIdx_x, threadIdx_y * {x} + threadIdx_x] = W_1[(threadIdx_y * {x} + threadIdx_x + 1) % 32] * T.float32(2)
'''


@pytest.mark.usefixtures("_opencl")
@pytest.mark.parametrize("x, y", [(32, 1), (16, 4), (8, 8), (64, 2)])
def test_warp_memory_is_one_copy_per_warp(x, y):
    func = tir.from_source(warp_rotate(x, y))
    rng = np.random.default_rng(x * y)
    a = rng.standard_normal((3, x * y)).astype("float32")
    b = np.zeros_like(a)
    tir.interpret(func, a, b)
    lanes = np.arange(x * y)
    np.testing.assert_array_equal(b, 2 * a[:, lanes - lanes % 32 + (lanes + 1) % 32])
    check_on_opencl(func, lambda n: [rng.standard_normal((n, x * y)).astype("float32"),
                                     np.zeros((n, x * y), "float32")], [1, 2, 5])
    _compile_cuda(func)


# ---------------------------------------------------------------- blocks without axes in thread loops
# TVM's opaque `with T.block():` under thread loops (CompactBufferRegion's tests): its loop vars
# index the stores of the blocks inside, so they are spatial axes, not a cross-thread reduction
# (they were, and the build refused it); its "shared" buffer is one per GPU block though
# allocated under threadIdx (compacted per thread, each thread overwrote the others' rows)
OPAQUE_SHARED = '''
@T.prim_func
def opaque_shared(a: T.handle, c: T.handle):
    n = T.int64()
    A = T.match_buffer(a, (n, 8, 16), "float32")
    C = T.match_buffer(c, (n, 8, 16), "float32")
    for i0 in T.thread_binding(n, thread="blockIdx.x"):
        for i1 in T.thread_binding(2, thread="vthread"):
            for i2 in T.thread_binding(4, thread="threadIdx.x"):
                with T.block():
                    T.reads(A[i0, i1 * 4 + i2, 0:16])
                    T.writes(C[i0, i1 * 4 + i2, 0:16])
                    B = T.alloc_buffer((n, 8, 16), "float32", scope="{scope}")
                    for j in range(0, 16):
                        with T.block():
                            T.reads(A[i0, i1 * 4 + i2, j])
                            T.writes(B[i0, i1 * 4 + i2, j])
                            B[i0, i1 * 4 + i2, j] = A[i0, i1 * 4 + i2, j] + 1.0
                    for j in range(0, 16):
                        with T.block():
                            T.reads(B[i0, i1 * 4 + i2, 15 - j])
                            T.writes(C[i0, i1 * 4 + i2, j])
                            C[i0, i1 * 4 + i2, j] = B[i0, i1 * 4 + i2, 15 - j] * 2.0
'''


def test_a_block_without_axes_takes_the_loops_its_inner_stores_use_as_spatial_axes():
    func = tir.from_source(OPAQUE_SHARED.replace("{scope}", "shared"))
    assert 'T.axis.remap("SSS", [i0, i1, i2])' in print_prim_func(func)


@pytest.mark.usefixtures("_opencl")
@pytest.mark.parametrize("scope", ["shared", "warp", "local"])
def test_a_buffer_allocated_under_thread_loops_matches_the_interpreter(scope):
    func = tir.from_source(OPAQUE_SHARED.replace("{scope}", scope))
    rng = np.random.default_rng(7)
    a = rng.standard_normal((2, 8, 16)).astype("float32")
    c = np.zeros_like(a)
    tir.interpret(func, a, c)
    np.testing.assert_allclose(c, 2 * (a[:, :, ::-1] + 1), rtol=1e-6)
    check_on_opencl(func, lambda n: [rng.standard_normal((n, 8, 16)).astype("float32"),
                                     np.zeros((n, 8, 16), "float32")], [1, 2, 3])


# ---------------------------------------------------------------- LowerCrossThreadReduction's block form
# each thread's partial in a block without init over a thread-bound reduce var (its own, not a
# cross-thread reduction: TVM's pass has run), then the allreduce in a block of its own
LOWERED_BLOCKS = '''
@T.prim_func
def lowered_blocks(a: T.handle, b: T.handle):
    n = T.int64()
    A = T.match_buffer(a, (n, {cols}), "float32")
    B = T.match_buffer(b, (n,), "float32")
    reduce_temp0 = T.alloc_buffer([1], dtype="float32", strides=[1], scope="local")
    normal_reduce_temp0 = T.alloc_buffer([1], dtype="float32", strides=[1], scope="local")
    for i in T.thread_binding(n, thread="blockIdx.x"):
        for ki in T.thread_binding(0, {threads}, thread="threadIdx.x"):
            with T.block("B_in_thread_init"):
                T.reads([])
                T.writes([normal_reduce_temp0[0]])
                normal_reduce_temp0[0] = T.float32(0)
            for ko in T.serial(0, {outer}):
                with T.block("B_normal_reduction"):
                    vi = T.axis.spatial(n, i)
                    vk = T.axis.reduce({cols}, ko * {threads} + ki)
                    T.where(ko * {threads} + ki < {cols})
                    T.reads([A[vi, vk]])
                    T.writes([normal_reduce_temp0[0]])
                    normal_reduce_temp0[0] = normal_reduce_temp0[0] + A[vi, vk]
            with T.block("B_cross_thread_reduction"):
                T.reads([normal_reduce_temp0[0]])
                T.writes([reduce_temp0[0]])
                T.attr(T.comm_reducer(lambda x, y: x + y, [T.float32(0)]), "reduce_scope",
                       T.reinterpret(T.uint64(0), dtype="handle"))
                T.evaluate(T.tvm_thread_allreduce(T.uint32(1), normal_reduce_temp0[0], True, reduce_temp0[0], ki,
                                                  dtype="handle"))
            with T.block("B_write_back"):
                vi = T.axis.spatial(n, i)
                T.where(ki == 0)
                T.reads([reduce_temp0[0]])
                T.writes([B[vi]])
                B[vi] = reduce_temp0[0]
'''


@pytest.mark.usefixtures("_opencl")
@settings(max_examples=4, deadline=None)
@given(threads=st.sampled_from([8, 32, 40, 64]), cols=st.integers(1, 150), seed=st.integers(0, 2 ** 16))
def test_tvm_lowered_cross_thread_reduction_blocks(threads, cols, seed):
    text = LOWERED_BLOCKS.format(threads=threads, cols=cols, outer=-(-cols // threads))
    func = tir.from_source(text)
    rng = np.random.default_rng(seed)
    arrays = _rows(3, cols, rng)
    expected = [a.copy() for a in arrays]
    tir.interpret(func, *expected)
    np.testing.assert_allclose(expected[1], arrays[0].sum(axis=1), rtol=1e-4, atol=1e-4)
    check_on_opencl(func, lambda n: _rows(n, cols, rng), [1, 3, 4], tolerance={"rtol": 1e-5, "atol": 1e-5})
