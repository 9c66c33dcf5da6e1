"""s13: rfactor, blockize and decompose_reduction give TVM's documented result block for block
(compared as TVM compares: block names ignored), and the result still computes the original
function (interpreter before and after lowering, and the C build).

The functions and expected results are written here from TVM's rules for those primitives
(their placement of iter vars, what each binding becomes), on shapes of our own."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tensorir as tir
from backends.target import build_kernels
from tests.tensorir.test_schedule_util import assert_replays, assert_roundtrip, assert_same_results

HYPOTHESIS = settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _parse(text: str):
    return tir.from_source(text)


def _check_equal(sch, expected_text: str):
    tir.assert_structural_equal(sch.func, _parse(expected_text), ignore_block_names=True)


def _check_computes(sch, original):
    assert_same_results(original, [sch.func, tir.lower(sch.func)], [{}])
    assert_roundtrip(sch.func)
    assert_replays(sch, original)
    # the C build of the scheduled function agrees with the interpreter on the original
    kernel = build_kernels("c", {"f": sch.func})["f"]
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal([int(d.value) for d in b.shape]).astype(b.dtype)
              for b in original.buffer_params]
    expected = [a.copy() for a in arrays]
    tir.interpret(original, *expected)
    got = [a.copy() for a in arrays]
    kernel(*got)
    for want, have in zip(expected, got):
        np.testing.assert_allclose(have, want, rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- rfactor
DOT_SPLIT = '''
@T.prim_func
def dot(A: T.Buffer((6, 24), "float32"), B: T.Buffer((5, 24), "float32"),
        C: T.Buffer((6, 5), "float32")):
    for i, j, k0, k1, k2 in T.grid(6, 5, 2, 3, 4):
        with T.block("acc"):
            vi, vj = T.axis.remap("SS", [i, j])
            vk = T.axis.reduce(24, k0 * 12 + k1 * 4 + k2)
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vj, vk]
'''

# rfactor(k1, 1): the rf block's first iter var follows k1 (spatial); vk, whose binding uses k1,
# becomes one reduce iter var per other loop of its binding (k0, then k2, in binding order);
# the write-back block reduces over the partials first, under copies of i, j, k1.
DOT_SPLIT_RF = '''
@T.prim_func
def dot(A: T.Buffer((6, 24), "float32"), B: T.Buffer((5, 24), "float32"),
        C: T.Buffer((6, 5), "float32")):
    C_rf = T.alloc_buffer((6, 3, 5), "float32")
    for i, j, k0, k1, k2 in T.grid(6, 5, 2, 3, 4):
        with T.block("acc_rf"):
            vk1 = T.axis.spatial(3, k1)
            vi = T.axis.spatial(6, i)
            vj = T.axis.spatial(5, j)
            vk0 = T.axis.reduce(2, k0)
            vk2 = T.axis.reduce(4, k2)
            with T.init():
                C_rf[vi, vk1, vj] = T.float32(0)
            C_rf[vi, vk1, vj] = C_rf[vi, vk1, vj] + A[vi, vk0 * 12 + vk1 * 4 + vk2] * B[vj, vk0 * 12 + vk1 * 4 + vk2]
    for i, j, k1 in T.grid(6, 5, 3):
        with T.block("acc"):
            vk1 = T.axis.reduce(3, k1)
            vi = T.axis.spatial(6, i)
            vj = T.axis.spatial(5, j)
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + C_rf[vi, vk1, vj]
'''


def test_rfactor_of_a_split_reduction_is_tvms_form():
    original = _parse(DOT_SPLIT)
    sch = tir.Schedule(original)
    loops = sch.get_loops(sch.get_block("acc"))
    rf = sch.rfactor(loops[3], 1)
    assert sch._block_name(rf) == "acc_rf"
    _check_equal(sch, DOT_SPLIT_RF)
    _check_computes(sch, original)


PLANE_SUM = '''
@T.prim_func
def plane_sum(A: T.Buffer((4, 6, 10), "float32"), S: T.Buffer((4,), "float32")):
    for b, r, c in T.grid(4, 6, 10):
        with T.block("S"):
            T.block_attr({"note": 1})
            vb, vr, vc = T.axis.remap("SRR", [b, r, c])
            with T.init():
                S[vb] = T.float32(0)
            S[vb] = S[vb] + A[vb, vr, vc]
'''

# rfactor(c, 0): vr does not use c and stays as it is; the annotation goes to both blocks.
PLANE_SUM_RF = '''
@T.prim_func
def plane_sum(A: T.Buffer((4, 6, 10), "float32"), S: T.Buffer((4,), "float32")):
    S_rf = T.alloc_buffer((10, 4), "float32")
    for b, r, c in T.grid(4, 6, 10):
        with T.block("S_rf"):
            T.block_attr({"note": 1})
            vc, vb, vr = T.axis.remap("SSR", [c, b, r])
            with T.init():
                S_rf[vc, vb] = T.float32(0)
            S_rf[vc, vb] = S_rf[vc, vb] + A[vb, vr, vc]
    for b, c in T.grid(4, 10):
        with T.block("S"):
            T.block_attr({"note": 1})
            vc, vb = T.axis.remap("RS", [c, b])
            with T.init():
                S[vb] = T.float32(0)
            S[vb] = S[vb] + S_rf[vc, vb]
'''


def test_rfactor_keeps_reduce_iter_vars_that_do_not_use_the_loop():
    original = _parse(PLANE_SUM)
    sch = tir.Schedule(original)
    _, _, c = sch.get_loops(sch.get_block("S"))
    sch.rfactor(c, 0)
    _check_equal(sch, PLANE_SUM_RF)
    _check_computes(sch, original)


def test_rfactor_of_a_let_named_update_reads_it_as_the_store():
    with_let = _parse(PLANE_SUM.replace(
        "S[vb] = S[vb] + A[vb, vr, vc]", "v_S: T.float32 = S[vb] + A[vb, vr, vc]\n            S[vb] = v_S"))
    sch = tir.Schedule(with_let)
    _, _, c = sch.get_loops(sch.get_block("S"))
    sch.rfactor(c, 0)
    _check_equal(sch, PLANE_SUM_RF)
    _check_computes(sch, with_let)


FUSED_UNIT = '''
@T.prim_func
def fused(A: T.Buffer((3, 8, 8), "float32"), S: T.Buffer((3,), "float32")):
    for b, f, u in T.grid(3, 64, 1):
        with T.block("S"):
            vb = T.axis.spatial(3, b)
            vr = T.axis.reduce(8, f // 8)
            vc = T.axis.reduce(8, f % 8)
            with T.init():
                S[vb] = T.float32(0)
            S[vb] = S[vb] + A[vb, vr, vc]
'''

# A unit loop no binding uses may be factored (TVM accepts it): a size-1 partials axis.
FUSED_UNIT_RF = '''
@T.prim_func
def fused(A: T.Buffer((3, 8, 8), "float32"), S: T.Buffer((3,), "float32")):
    S_rf = T.alloc_buffer((1, 3), "float32")
    for b, f, u in T.grid(3, 64, 1):
        with T.block("S_rf"):
            vu, vb = T.axis.remap("SS", [u, b])
            vr = T.axis.reduce(8, f // 8)
            vc = T.axis.reduce(8, f % 8)
            with T.init():
                S_rf[vu, vb] = T.float32(0)
            S_rf[vu, vb] = S_rf[vu, vb] + A[vb, vr, vc]
    for b, u in T.grid(3, 1):
        with T.block("S"):
            vu, vb = T.axis.remap("RS", [u, b])
            with T.init():
                S[vb] = T.float32(0)
            S[vb] = S[vb] + S_rf[vu, vb]
'''


def test_rfactor_of_a_unit_loop_no_binding_uses():
    original = _parse(FUSED_UNIT)
    sch = tir.Schedule(original)
    _, _, u = sch.get_loops(sch.get_block("S"))
    sch.rfactor(u, 0)
    _check_equal(sch, FUSED_UNIT_RF)
    _check_computes(sch, original)


def test_rfactor_refuses_a_reduction_loop_that_is_not_serial():
    sch = tir.Schedule(_parse(PLANE_SUM))
    _, r, c = sch.get_loops(sch.get_block("S"))
    sch.bind(r, "threadIdx.x")          # a cross-thread reduction loop
    before = sch.func
    with pytest.raises(tir.ScheduleError, match="not serial"):
        sch.rfactor(c, 0)
    tir.assert_structural_equal(sch.func, before)


@HYPOTHESIS
@given(k0=st.integers(1, 3), k1=st.integers(1, 4), k2=st.integers(1, 3), axis=st.integers(-3, 2),
       which=st.integers(0, 2))
def test_rfactor_of_any_split_level_computes_the_sum(k0, k1, k2, axis, which):
    n = k0 * k1 * k2
    text = f'''
@T.prim_func
def dot(A: T.Buffer((3, {n}), "float32"), B: T.Buffer((2, {n}), "float32"),
        C: T.Buffer((3, 2), "float32")):
    for i, j, a, b, c in T.grid(3, 2, {k0}, {k1}, {k2}):
        with T.block("acc"):
            vi, vj = T.axis.remap("SS", [i, j])
            vk = T.axis.reduce({n}, a * {k1 * k2} + b * {k2} + c)
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vj, vk]
'''
    original = _parse(text)
    sch = tir.Schedule(original)
    loops = sch.get_loops(sch.get_block("acc"))
    sch.rfactor(loops[2 + which], axis)
    assert [iv.kind for iv in StmtIndex_realize(sch, "acc").block.iter_vars] == ["R", "S", "S"]
    assert_same_results(original, [sch.func, tir.lower(sch.func)], [{}])
    assert_replays(sch, original)


def StmtIndex_realize(sch, name):
    from tensorir.schedule.state import StmtIndex
    return StmtIndex(sch.func).realize(name)


# ---------------------------------------------------------------- blockize
SCALE = '''
@T.prim_func
def scale(A: T.Buffer((12, 20), "float32"), B: T.Buffer((12, 20), "float32")):
    for i, j in T.grid(12, 20):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(3)
'''

# blockize(i): no loop outside, so every outer iter var has extent 1 bound to 0.
SCALE_OUTER = '''
@T.prim_func
def scale(A: T.Buffer((12, 20), "float32"), B: T.Buffer((12, 20), "float32")):
    with T.block("B_o"):
        vi_o = T.axis.spatial(1, 0)
        vj_o = T.axis.spatial(1, 0)
        for i, j in T.grid(12, 20):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] * T.float32(3)
'''

# blockize(j): vi is wholly outside (inner extent 1: the inner block reads the outer var).
SCALE_INNER = '''
@T.prim_func
def scale(A: T.Buffer((12, 20), "float32"), B: T.Buffer((12, 20), "float32")):
    for i in range(12):
        with T.block("B_o"):
            vi = T.axis.spatial(12, i)
            vj_o = T.axis.spatial(1, 0)
            for j in range(20):
                with T.block("B"):
                    vj = T.axis.spatial(20, j)
                    B[vi, vj] = A[vi, vj] * T.float32(3)
'''


@pytest.mark.parametrize("which, expected", [(0, SCALE_OUTER), (1, SCALE_INNER)])
def test_blockize_of_an_elementwise_block(which, expected):
    original = _parse(SCALE)
    sch = tir.Schedule(original)
    loop = sch.get_loops(sch.get_block("B"))[which]
    assert sch._block_name(sch.blockize(loop)) == "B_o"
    _check_equal(sch, expected)
    _check_computes(sch, original)


TILED = '''
@T.prim_func
def tiled(A: T.Buffer((T.int64(8), T.int64(48)), "float32"),
          B: T.Buffer((T.int64(8), T.int64(48)), "float32")):
    for i0, j0, i1, j1 in T.grid(T.int64(1), T.int64(6), T.int64(8), T.int64(8)):
        with T.block("B"):
            vi = T.axis.spatial(T.int64(8), i0 * T.int64(8) + i1)
            vj = T.axis.spatial(T.int64(48), j0 * T.int64(8) + j1)
            B[vi, vj] = A[vi, vj] - T.float32(1)
'''

TILED_BLOCKIZED = '''
@T.prim_func
def tiled(A: T.Buffer((T.int64(8), T.int64(48)), "float32"),
          B: T.Buffer((T.int64(8), T.int64(48)), "float32")):
    for i0, j0 in T.grid(T.int64(1), T.int64(6)):
        with T.block("B_o"):
            vi_o = T.axis.spatial(T.int64(1), {unit})
            vj_o = T.axis.spatial(T.int64(6), j0)
            for i1, j1 in T.grid(T.int64(8), T.int64(8)):
                with T.block("B"):
                    vi_i, vj_i = T.axis.remap("SS", [i1, j1])
                    B[vi_i, vj_o * T.int64(8) + vj_i] = A[vi_i, vj_o * T.int64(8) + vj_i] - T.float32(1)
'''


@pytest.mark.parametrize("preserve", [True, False])
def test_blockize_divides_tiled_bindings_and_unit_loops(preserve):
    original = _parse(TILED)
    sch = tir.Schedule(original)
    sch.blockize(sch.get_loops(sch.get_block("B"))[2], preserve_unit_iters=preserve)
    _check_equal(sch, TILED_BLOCKIZED.format(unit="i0" if preserve else "T.int64(0)"))
    _check_computes(sch, original)


ROWSUM = '''
@T.prim_func
def rowsum(A: T.Buffer((10, 12), "float32"), B: T.Buffer((10,), "float32")):
    for k, i in T.grid(12, 10):
        with T.block("B"):
            vk, vi = T.axis.remap("RS", [k, i])
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk]
'''

# The outer block reduces, so the init moves to it: a loop over the inner spatial loop.
ROWSUM_BLOCKIZED = '''
@T.prim_func
def rowsum(A: T.Buffer((10, 12), "float32"), B: T.Buffer((10,), "float32")):
    with T.block("B_o"):
        vk_o = T.axis.reduce(1, 0)
        vi_o = T.axis.spatial(1, 0)
        with T.init():
            for i in range(10):
                with T.block("B_init"):
                    vi_init = T.axis.spatial(10, i)
                    B[vi_init] = T.float32(0)
        for k, i in T.grid(12, 10):
            with T.block("B"):
                vk, vi = T.axis.remap("RS", [k, i])
                B[vi] = B[vi] + A[vi, vk]
'''


def test_blockize_of_a_reduction_moves_the_init_to_the_outer_block():
    original = _parse(ROWSUM)
    sch = tir.Schedule(original)
    sch.blockize(sch.get_loops(sch.get_block("B"))[0])
    _check_equal(sch, ROWSUM_BLOCKIZED)
    _check_computes(sch, original)


@HYPOTHESIS
@given(outer=st.integers(1, 4), inner=st.integers(1, 5), cols=st.integers(1, 6),
       at=st.integers(1, 2))
def test_blockize_of_split_loops_computes_the_same(outer, inner, cols, at):
    text = f'''
@T.prim_func
def f(A: T.Buffer(({outer * inner}, {cols}), "float32"), B: T.Buffer(({outer * inner},), "float32")):
    for io, ii, k in T.grid({outer}, {inner}, {cols}):
        with T.block("B"):
            vi = T.axis.spatial({outer * inner}, io * {inner} + ii)
            vk = T.axis.reduce({cols}, k)
            with T.init():
                B[vi] = T.float32(0)
            B[vi] = B[vi] + A[vi, vk] * A[vi, vk]
'''
    original = _parse(text)
    sch = tir.Schedule(original)
    sch.blockize(sch.get_loops(sch.get_block("B"))[at])
    assert_same_results(original, [sch.func, tir.lower(sch.func)], [{}])
    assert_roundtrip(sch.func)
    assert_replays(sch, original)


# ---------------------------------------------------------------- decompose_reduction
def test_decompose_reduction_init_keeps_the_block_annotations():
    original = _parse(PLANE_SUM)
    sch = tir.Schedule(original)
    b, _, _ = sch.get_loops(sch.get_block("S"))
    init = sch.decompose_reduction(sch.get_block("S"), b)
    from tensorir.schedule.state import StmtIndex
    assert StmtIndex(sch.func).realize(sch._block_name(init)).block.annotations == {"note": 1}
    _check_computes(sch, original)


# ---------------------------------------------------------------- cache_read placement
TWO_READERS = '''
@T.prim_func
def two_readers(X: T.Buffer((24,), "float32"), Y: T.Buffer((24,), "float32"),
                Z: T.Buffer((24,), "float32")):
    P = T.alloc_buffer((24,))
    for i in range(4):
        for j in range(6):
            with T.block("P"):
                vi = T.axis.spatial(24, i * 6 + j)
                P[vi] = X[vi] * T.float32(2)
        for j in range(6):
            with T.block("Y"):
                vi = T.axis.spatial(24, i * 6 + j)
                Y[vi] = P[vi] + T.float32(1)
    for i in range(24):
        with T.block("Z"):
            vi = T.axis.spatial(24, i)
            Z[vi] = P[vi] * P[vi]
'''

# The writer and a reader share loop i: the copy goes into that loop, right before the
# reader's statement, over the writer's region relaxed over j; every later reader reads it.
TWO_READERS_CACHED = '''
@T.prim_func
def two_readers(X: T.Buffer((24,), "float32"), Y: T.Buffer((24,), "float32"),
                Z: T.Buffer((24,), "float32")):
    P = T.alloc_buffer((24,))
    P_local = T.alloc_buffer((24,), scope="local")
    for i in range(4):
        for j in range(6):
            with T.block("P"):
                vi = T.axis.spatial(24, i * 6 + j)
                P[vi] = X[vi] * T.float32(2)
        for ax0 in range(6):
            with T.block("P_local"):
                v0 = T.axis.spatial(24, i * 6 + ax0)
                P_local[v0] = P[v0]
        for j in range(6):
            with T.block("Y"):
                vi = T.axis.spatial(24, i * 6 + j)
                Y[vi] = P_local[vi] + T.float32(1)
    for i in range(24):
        with T.block("Z"):
            vi = T.axis.spatial(24, i)
            Z[vi] = P_local[vi] * P_local[vi]
'''


def test_cache_read_inside_the_loop_the_writer_shares_with_the_reader():
    original = _parse(TWO_READERS)
    sch = tir.Schedule(original)
    sch.cache_read(sch.get_block("Y"), 0, "local")
    _check_equal(sch, TWO_READERS_CACHED)
    _check_computes(sch, original)


@HYPOTHESIS
@given(n=st.integers(1, 13), tile=st.integers(1, 5))
def test_cache_read_after_a_guarded_writer_stays_in_bounds(n, tile):
    tiles = -(-n // tile)
    text = f'''
@T.prim_func
def guarded(X: T.Buffer(({n},), "float32"), Y: T.Buffer(({n},), "float32")):
    P = T.alloc_buffer(({n},))
    for i in range({tiles}):
        for j in range({tile}):
            with T.block("P"):
                T.where(i * {tile} + j < {n})
                vi = T.axis.spatial({n}, i * {tile} + j)
                P[vi] = X[vi] + T.float32(1)
        for j in range({tile}):
            with T.block("Y"):
                T.where(i * {tile} + j < {n})
                vi = T.axis.spatial({n}, i * {tile} + j)
                Y[vi] = P[vi] * T.float32(3)
'''
    original = _parse(text)
    sch = tir.Schedule(original)
    sch.cache_read(sch.get_block("Y"), 0, "global")
    _check_computes(sch, original)


# ---------------------------------------------------------------- compute_at bindings
PAIR = '''
@T.prim_func
def pair(A: T.Buffer((12, 10), "float32"), C: T.Buffer((12, 10), "float32")):
    B = T.alloc_buffer((12, 10))
    for i, j in T.grid(12, 10):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for io, jo, ii, ji in T.grid(3, 2, 4, 5):
        with T.block("C"):
            vi = T.axis.spatial(12, io * 4 + ii)
            vj = T.axis.spatial(10, jo * 5 + ji)
            C[vi, vj] = B[vi, vj] + T.float32(1)
'''

# The producer's new bindings read the region's start, then the new loop (TVM's order).
PAIR_AT = '''
@T.prim_func
def pair(A: T.Buffer((12, 10), "float32"), C: T.Buffer((12, 10), "float32")):
    B = T.alloc_buffer((12, 10))
    for io, jo in T.grid(3, 2):
        for ax0, ax1 in T.grid(4, 5):
            with T.block("B"):
                vi = T.axis.spatial(12, io * 4 + ax0)
                vj = T.axis.spatial(10, jo * 5 + ax1)
                B[vi, vj] = A[vi, vj] * T.float32(2)
        for ii, ji in T.grid(4, 5):
            with T.block("C"):
                vi = T.axis.spatial(12, io * 4 + ii)
                vj = T.axis.spatial(10, jo * 5 + ji)
                C[vi, vj] = B[vi, vj] + T.float32(1)
'''


def test_compute_at_binds_the_region_start_then_the_loop():
    original = _parse(PAIR)
    sch = tir.Schedule(original)
    sch.compute_at(sch.get_block("B"), sch.get_loops(sch.get_block("C"))[1])
    _check_equal(sch, PAIR_AT)
    _check_computes(sch, original)


TILED_PRODUCER = '''
@T.prim_func
def tiled_producer(A: T.Buffer(({rows}, 8), "float32"), C: T.Buffer(({rows}, 8), "float32")):
    B = T.alloc_buffer(({rows}, 8))
    for io, jo in T.grid({tiles}, 2):
        with T.block("B_o"):
            vio, vjo = T.axis.remap("SS", [io, jo])
            for ii, ji in T.grid(4, 4):
                with T.block("B"):
                    vi = T.axis.spatial({rows}, vio * 4 + ii)
                    vj = T.axis.spatial(8, vjo * 4 + ji)
                    B[vi, vj] = A[vi, vj] * T.float32(2)
    for i0, j0, i1, j1 in T.grid({outer}, 2, {inner}, 4):
        with T.block("C"):
            vi = T.axis.spatial({rows}, i0 * {inner} + i1)
            vj = T.axis.spatial(8, j0 * 4 + j1)
            C[vi, vj] = B[vi, vj] + T.float32(1)
'''

# compute_at of a block that writes 4x4 tiles: the tiles covering what C needs per (i0, j0).
TILED_PRODUCER_AT = '''
@T.prim_func
def tiled_producer(A: T.Buffer((16, 8), "float32"), C: T.Buffer((16, 8), "float32")):
    B = T.alloc_buffer((16, 8))
    for i0, j0 in T.grid(2, 2):
        for ax0, ax1 in T.grid(2, 1):
            with T.block("B_o"):
                vio = T.axis.spatial(4, i0 * 2 + ax0)
                vjo = T.axis.spatial(2, j0 + ax1)
                for ii, ji in T.grid(4, 4):
                    with T.block("B"):
                        vi = T.axis.spatial(16, vio * 4 + ii)
                        vj = T.axis.spatial(8, vjo * 4 + ji)
                        B[vi, vj] = A[vi, vj] * T.float32(2)
        for i1, j1 in T.grid(8, 4):
            with T.block("C"):
                vi = T.axis.spatial(16, i0 * 8 + i1)
                vj = T.axis.spatial(8, j0 * 4 + j1)
                C[vi, vj] = B[vi, vj] + T.float32(1)
'''


def test_compute_at_of_a_block_writing_tiles():
    original = _parse(TILED_PRODUCER.format(rows=16, tiles=4, outer=2, inner=8))
    sch = tir.Schedule(original)
    sch.compute_at(sch.get_block("B_o"), sch.get_loops(sch.get_block("C"))[1])
    _check_equal(sch, TILED_PRODUCER_AT)
    _check_computes(sch, original)


@pytest.mark.parametrize("outer, inner", [(4, 4), (8, 2), (2, 8), (1, 16)])
def test_reverse_compute_at_under_a_block_writing_tiles(outer, inner):
    original = _parse(TILED_PRODUCER.format(rows=16, tiles=4, outer=outer, inner=inner))
    sch = tir.Schedule(original)
    sch.reverse_compute_at(sch.get_block("C"), sch.get_loops(sch.get_block("B_o"))[1])
    _check_computes(sch, original)


@pytest.mark.parametrize("outer, inner", [(2, 6), (3, 4), (4, 3), (6, 2)])
def test_compute_at_of_tiles_that_straddle_the_consumer_steps(outer, inner):
    """12 rows in 4-row tiles against a consumer stepping 6 / 4 / 3 / 2 rows: some tiles are
    computed twice, the result is the same."""
    original = _parse(TILED_PRODUCER.format(rows=12, tiles=3, outer=outer, inner=inner))
    sch = tir.Schedule(original)
    sch.compute_at(sch.get_block("B_o"), sch.get_loops(sch.get_block("C"))[1])
    _check_computes(sch, original)


# ---------------------------------------------------------------- transform_layout
CHAIN = '''
@T.prim_func
def chain(A: T.Buffer((24, 12), "float32"), C: T.Buffer((24, 12), "float32")):
    B = T.alloc_buffer((24, 12))
    for i, j in T.grid(24, 12):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(24, 12):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] + T.float32(1)
'''

# B stored as (j // 4, i // 8, j % 4, i % 8): every access reads the mapped indices.
CHAIN_TILED_B = '''
@T.prim_func
def chain(A: T.Buffer((24, 12), "float32"), C: T.Buffer((24, 12), "float32")):
    B = T.alloc_buffer((3, 3, 4, 8))
    for i, j in T.grid(24, 12):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vj // 4, vi // 8, vj % 4, vi % 8] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(24, 12):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vj // 4, vi // 8, vj % 4, vi % 8] + T.float32(1)
'''


def test_transform_layout_of_an_intermediate_buffer():
    original = _parse(CHAIN)
    sch = tir.Schedule(original)
    sch.transform_layout(sch.get_sblock("B"), ("write", 0), lambda i, j: (j // 4, i // 8, j % 4, i % 8))
    _check_equal(sch, CHAIN_TILED_B)
    _check_computes(sch, original)


def test_transform_layout_of_a_parameter_changes_the_signature():
    original = _parse(CHAIN)
    sch = tir.Schedule(original)
    sch.transform_layout("B", "A", lambda i, j: (j, i))
    assert [int(d.value) for d in sch.func.buffer_params[0].shape] == [12, 24]
    assert_roundtrip(sch.func)
    assert_replays(sch, original)
    a = np.random.default_rng(4).standard_normal((24, 12)).astype("float32")
    want, got = np.zeros((24, 12), "float32"), np.zeros((24, 12), "float32")
    tir.interpret(original, a, want)
    tir.interpret(sch.func, np.ascontiguousarray(a.T), got)
    np.testing.assert_array_equal(got, want)
    kernel = build_kernels("c", {"f": sch.func})["f"]
    got_c = np.zeros((24, 12), "float32")
    kernel(np.ascontiguousarray(a.T), got_c)
    np.testing.assert_allclose(got_c, want, rtol=1e-6)


def test_transform_layout_maps_a_box_region_to_the_bounds_of_its_image():
    """An outer block of blockize reads a 4x4 tile of B; after B becomes (i // 4, j // 4,
    i % 4, j % 4) it reads B[vi_o, vj_o, 0:4, 0:4]."""
    original = _parse(CHAIN.replace("(24, 12)", "(8, 8)").replace("24, 12", "8, 8"))
    sch = tir.Schedule(original)
    i, j = sch.get_loops(sch.get_block("C"))
    io, ii = sch.split(i, [None, 4])
    jo, ji = sch.split(j, [None, 4])
    sch.reorder(io, jo, ii, ji)
    outer = sch.blockize(ii)
    sch.transform_layout("B", "B", lambda i, j: (i // 4, j // 4, i % 4, j % 4))
    from tensorir.schedule.state import StmtIndex
    reads = StmtIndex(sch.func).realize(sch._block_name(outer)).block.reads
    tile = next(r for r in reads if r.buffer.name == "B")
    assert [str(r.extent) for r in tile.region] == ["1", "1", "4", "4"]
    _check_computes(sch, original)


@pytest.mark.parametrize("index_map, message", [
    (lambda i, j: (i // 5, j, i % 5), "padding"),          # 24 rows in fives: 25 slots
    (lambda i, j: (i // 2, j), "padding"),                 # fewer slots than elements
    (lambda i: (i,), "takes 1 indices"),
])
def test_transform_layout_refuses_maps_that_do_not_hold_the_buffer_exactly(index_map, message):
    sch = tir.Schedule(_parse(CHAIN))
    before = sch.func
    with pytest.raises(tir.ScheduleError, match=message):
        sch.transform_layout(sch.get_sblock("B"), ("write", 0), index_map)
    tir.assert_structural_equal(sch.func, before)


def test_transform_layout_refuses_a_non_injective_map_of_the_right_size():
    sch = tir.Schedule(_parse(CHAIN))
    with pytest.raises(tir.ScheduleError, match="same place"):
        # (i % 12, j, i // 12 * 0 + (i % 2)) has 24 * 12 slots but sends i and i + 12 together
        sch.transform_layout(sch.get_sblock("B"), ("write", 0),
                             lambda i, j: (i % 12, j, (i % 2) + (i // 12) * 0))


@HYPOTHESIS
@given(fi=st.sampled_from([1, 2, 3, 4, 6]), fj=st.sampled_from([1, 2, 3, 4]),
       order=st.permutations([0, 1, 2, 3]))
def test_transform_layout_by_any_exact_split_and_permutation_computes_the_same(fi, fj, order):
    original = _parse(CHAIN)

    def index_map(i, j):
        parts = (i // fi, j // fj, i % fi, j % fj)
        return tuple(parts[k] for k in order)
    sch = tir.Schedule(original)
    sch.transform_layout(sch.get_sblock("C"), ("read", 0), index_map)
    shape = [int(d.value) for d in StmtIndex_realize(sch, "B").block.writes[0].buffer.shape]
    assert sorted(shape) == sorted([24 // fi, 12 // fj, fi, fj])
    assert_same_results(original, [sch.func, tir.lower(sch.func)], [{}])


def test_rfactor_refuses_an_unused_loop_longer_than_one():
    """A loop no binding uses repeats the block, its init included: not a reduction axis."""
    sch = tir.Schedule(_parse(FUSED_UNIT.replace("T.grid(3, 64, 1)", "T.grid(3, 64, 2)")))
    _, _, u = sch.get_loops(sch.get_block("S"))
    with pytest.raises(tir.ScheduleError, match="only reduction iter vars"):
        sch.rfactor(u, 0)


READERS_AROUND = '''
@T.prim_func
def around(X: T.Buffer((24,), "float32"), Q: T.Buffer((24,), "float32"),
           Y1: T.Buffer((24,), "float32"), Y2: T.Buffer((24,), "float32")):
    P = T.alloc_buffer((24,))
    for i in range(4):
        for j in range(6):
            with T.block("P"):
                vi = T.axis.spatial(24, i * 6 + j)
                P[vi] = X[vi] * T.float32(2)
            with T.block("Q"):
                vi = T.axis.spatial(24, i * 6 + j)
                Q[vi] = P[vi] - T.float32(1)
        for j in range(6):
            with T.block("Y1"):
                vi = T.axis.spatial(24, i * 6 + j)
                Y1[vi] = P[vi] + T.float32(1)
        for j in range(6):
            with T.block("Y2"):
                vi = T.axis.spatial(24, i * 6 + j)
                Y2[vi] = P[vi] * P[vi]
'''


def test_cache_read_goes_before_the_first_later_reader_and_only_later_readers_read_it():
    original = _parse(READERS_AROUND)
    sch = tir.Schedule(original)
    sch.cache_read(sch.get_block("Y2"), 0, "local")
    from tensorir.schedule.state import StmtIndex
    index = StmtIndex(sch.func)
    reads = {name: [r.buffer.name for r in index.realize(name).block.reads] for name in ("Q", "Y1", "Y2")}
    assert reads == {"Q": ["P"], "Y1": ["P_local"], "Y2": ["P_local"]}
    _check_computes(sch, original)


def test_cache_read_inside_a_loop_refuses_a_buffer_with_two_writers():
    two_writers = _parse(TWO_READERS.replace(
        "    for i in range(4):",
        "    for i in range(24):\n        with T.block(\"P0\"):\n            vi = T.axis.spatial(24, i)\n"
        "            P[vi] = T.float32(0)\n    for i in range(4):", 1))
    sch = tir.Schedule(two_writers)
    with pytest.raises(tir.ScheduleError, match="written in the same statement"):
        sch.cache_read(sch.get_block("Y"), 0, "local")
