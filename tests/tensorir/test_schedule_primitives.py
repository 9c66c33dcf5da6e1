"""Each schedule primitive on hand-written functions: the resulting structure,
unchanged results (interpreter, several n including non-divisible ones),
print/parse round trip, and lowering."""
from __future__ import annotations

import pytest

import tensorir as tir
from tensorir import T, prim_func
from tensorir.schedule.state import StmtIndex
from tests.tensorir.test_schedule_util import (assert_replays, assert_roundtrip,
                                               assert_same_results)

SIZES = [{"n": 1}, {"n": 5}, {"n": 7}, {"n": 12}]


@prim_func
def matmul(a: T.Buffer(("n", 6), "float32"), b: T.Buffer((6, 5), "float32"),
           c: T.Buffer(("n", 5), "float32")):
    n = T.int64()
    for i, j, k in T.grid(n, 5, 6):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                c[vi, vj] = T.float32(0)
            c[vi, vj] = c[vi, vj] + a[vi, vk] * b[vk, vj]


@prim_func
def chain(x: T.Buffer(("n", 4), "float32"), y: T.Buffer(("n", 4), "float32")):
    n = T.int64()
    t = T.alloc_buffer((n, 4), "float32")
    for i, j in T.grid(n, 4):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            t[vi, vj] = T.exp(x[vi, vj])
    for i, j in T.grid(n, 4):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            y[vi, vj] = t[vi, vj] * T.float32(2) + x[vi, vj]


@prim_func
def row_sum(x: T.Buffer(("n", 12), "float32"), y: T.Buffer(("n",), "float32")):
    n = T.int64()
    for i, k in T.grid(n, 12):
        with T.block("S"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                y[vi] = T.float32(0)
            y[vi] = y[vi] + x[vi, vk]


def _check(sch, original):
    assert_same_results(original, [sch.func, tir.lower(sch.func)], SIZES)
    assert_roundtrip(sch.func)
    assert_replays(sch, original)


def _kinds(func):
    return [(f.loop_var.name, f.kind) for f in tir.collect(func.body, lambda n: isinstance(n, tir.For))]


def test_split_non_dividing_factor_adds_predicate():
    sch = tir.Schedule(matmul)
    i, _, _ = sch.get_loops(sch.get_block("C"))
    outer, inner = sch.split(i, [None, 4])
    realize = StmtIndex(sch.func).realize("C")
    assert not tir.stmt.is_true(realize.predicate)
    assert [lp.loop_var.name for lp in StmtIndex(sch.func).loops_of(realize)][:2] == ["i_0", "i_1"]
    _check(sch, matmul)


def test_split_dividing_factor_has_no_predicate():
    sch = tir.Schedule(matmul)
    _, _, k = sch.get_loops(sch.get_block("C"))
    sch.split(k, [2, None, 1])
    assert tir.stmt.is_true(StmtIndex(sch.func).realize("C").predicate)
    _check(sch, matmul)


def test_fuse_then_split_and_reorder():
    sch = tir.Schedule(matmul)
    i, j, k = sch.get_loops(sch.get_block("C"))
    fused = sch.fuse(i, j)
    outer, inner = sch.split(fused, [None, 3])
    sch.reorder(k, inner)
    names = [lp.loop_var.name for lp in StmtIndex(sch.func).loops_of(StmtIndex(sch.func).realize("C"))]
    assert names == ["i_j_fused_0", "k", "i_j_fused_1"]
    _check(sch, matmul)


def test_loop_kinds_bind_and_annotations():
    sch = tir.Schedule(matmul)
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    sch.parallel(i)
    sch.vectorize(j)
    sch.unroll(k)
    sch.annotate(k, "pragma_unroll_explicit", 1)
    sch.annotate(block, "meta", "x")
    assert dict(_kinds(sch.func)) == {"i": "parallel", "j": "vectorized", "k": "unrolled"}
    lowered = tir.lower(sch.func)
    assert dict(_kinds(lowered)) == dict(_kinds(sch.func))
    k_loop = [f for f in tir.collect(lowered.body, lambda n: isinstance(n, tir.For)) if f.loop_var.name == "k"]
    assert k_loop[0].annotations == {"pragma_unroll_explicit": 1}
    sch.unannotate(block, "meta")
    assert StmtIndex(sch.func).realize("C").block.annotations == {}
    _check(sch, matmul)
    gpu = tir.Schedule(matmul)
    gi, gj, _ = gpu.get_loops(gpu.get_block("C"))
    gpu.bind(gi, "blockIdx.x")
    gpu.bind(gj, "threadIdx.x")
    assert {f.thread_tag for f in tir.collect(gpu.func.body, lambda n: isinstance(n, tir.For))} \
        >= {"blockIdx.x", "threadIdx.x"}
    _check(gpu, matmul)


def test_get_child_blocks_producers_consumers():
    sch = tir.Schedule(chain)
    root = sch.get_block("root")
    names = [sch._block_name(b) for b in sch.get_child_blocks(root)]
    assert names == ["B", "C"]
    assert [sch._block_name(b) for b in sch.get_producers(sch.get_block("C"))] == ["B"]
    assert [sch._block_name(b) for b in sch.get_consumers(sch.get_block("B"))] == ["C"]
    i, _ = sch.get_loops(sch.get_block("C"))
    assert [sch._block_name(b) for b in sch.get_child_blocks(i)] == ["C"]


@pytest.mark.parametrize("at", [0, 1])
def test_compute_at_under_split_consumer(at):
    sch = tir.Schedule(chain)
    i, j = sch.get_loops(sch.get_block("C"))
    outer, inner = sch.split(i, [None, 3])
    sch.compute_at(sch.get_block("B"), [outer, inner][at])
    index = StmtIndex(sch.func)
    assert index.is_ancestor(index.loop(sch._loop_var(outer)), index.realize("B"))
    _check(sch, chain)


def test_reverse_compute_at_under_producer_loop():
    sch = tir.Schedule(chain)
    i, _ = sch.get_loops(sch.get_block("B"))
    sch.reverse_compute_at(sch.get_block("C"), i)
    index = StmtIndex(sch.func)
    assert index.is_ancestor(index.loop(sch._loop_var(i)), index.realize("C"))
    _check(sch, chain)


def test_compute_inline_and_reverse_compute_inline():
    sch = tir.Schedule(chain)
    sch.compute_inline(sch.get_block("B"))
    assert "B" not in StmtIndex(sch.func).realize_by_name
    assert sch.func.root_block.alloc_buffers == ()
    _check(sch, chain)
    rev = tir.Schedule(chain)
    rev.reverse_compute_inline(rev.get_block("C"))
    assert "C" not in StmtIndex(rev.func).realize_by_name
    _check(rev, chain)


def test_cache_read_and_cache_write():
    sch = tir.Schedule(matmul)
    block = sch.get_block("C")
    a_local = sch.cache_read(block, 1, "shared")
    c_local = sch.cache_write(block, 0, "local")
    scopes = {b.name: b.scope for b in sch.func.root_block.alloc_buffers}
    assert scopes == {"a_shared": "shared", "c_local": "local"}
    assert [sch._block_name(b) for b in (a_local, c_local)] == ["a_shared", "c_local"]
    _check(sch, matmul)


def test_set_scope_and_storage_align():
    sch = tir.Schedule(chain)
    block = sch.get_block("B")
    sch.set_scope(block, 0, "shared")
    sch.storage_align(block, 0, 0, 8, 1)
    assert sch.func.root_block.alloc_buffers[0].scope == "shared"
    lowered = tir.lower(sch.func)
    (alloc,) = tir.collect(lowered.body, lambda n: isinstance(n, tir.Allocate))
    # Row stride 4 padded to 8k + 1 = 9: n rows of 9 elements.
    assert tir.Analyzer().can_prove_equal(alloc.buffer.shape[0], sch.func.params[0].shape[0] * 9)
    _check(sch, chain)


def test_decompose_reduction_places_init_before_loop():
    sch = tir.Schedule(matmul)
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    init = sch.decompose_reduction(block, j)
    index = StmtIndex(sch.func)
    init_realize = index.realize(sch._block_name(init))
    assert index.realize("C").block.init is None
    assert [lp.loop_var.name for lp in index.loops_of(init_realize)] == ["i", "j_init"]
    _check(sch, matmul)


def test_rfactor_two_stage_reduction():
    sch = tir.Schedule(row_sum)
    _, k = sch.get_loops(sch.get_block("S"))
    ko, ki = sch.split(k, [None, 4])
    rf = sch.rfactor(ki, 1)
    index = StmtIndex(sch.func)
    assert sch._block_name(rf) == "S_rf"
    rf_buf = [b for b in sch.func.root_block.alloc_buffers if b.name == "y_rf"][0]
    assert len(rf_buf.shape) == 2 and rf_buf.shape[1].value == 4
    # TVM's order: the write-back block reduces over the partials' axis first.
    assert [iv.kind for iv in index.realize("S").block.iter_vars] == ["R", "S"]
    _check(sch, row_sum)


def test_blockize_wraps_inner_loops():
    sch = tir.Schedule(matmul)
    i, j, k = sch.get_loops(sch.get_block("C"))
    outer = sch.blockize(j)
    index = StmtIndex(sch.func)
    outer_realize = index.realize(sch._block_name(outer))
    assert [iv.kind for iv in outer_realize.block.iter_vars] == ["S"]
    assert index.child_realizes(outer_realize)[0].block.name == "C"
    _check(sch, matmul)


def test_schedule_accepts_module_dict_and_functions_attribute():
    class Module:
        functions = {"mm": matmul, "chain": chain}
    sch = tir.Schedule(Module(), "chain")
    sch.compute_inline(sch.get_block("B"))
    assert set(sch.mod) == {"mm", "chain"}
    tir.assert_structural_equal(sch.mod["mm"], matmul)
    with pytest.raises(ValueError, match="func_name"):
        tir.Schedule({"a": matmul, "b": chain})
    assert tir.Schedule({"only": chain}).func is chain
