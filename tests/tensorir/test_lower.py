"""Lowering: each pass on its own, the composed ``lower`` on the catalog and on
random generated functions (same interpreter results, no blocks left, one
index per access, loop kinds kept)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tensorir as tir
from tensorir import T, prim_func
from tensorir.transform import flatten_buffers, lower_blocks, lower_predicates, simplify_indices
from tests.tensorir import catalog
from tests.tensorir.generators import make_inputs, prim_funcs, sym_sizes, tolerance
from tests.tensorir.test_schedule_primitives import chain, matmul
from tests.tensorir.test_schedule_util import assert_same_results


def _nodes(func, cls):
    return tir.collect(func.body, lambda n: isinstance(n, cls))


def assert_fully_lowered(func):
    assert not _nodes(func, tir.Block) and not _nodes(func, tir.BlockRealize)
    for access in _nodes(func, tir.BufferLoad) + _nodes(func, tir.BufferStore):
        assert len(access.indices) == 1, access
        assert len(access.buffer.shape) == 1
    for alloc in _nodes(func, tir.Allocate):
        assert len(alloc.buffer.shape) == 1


def test_lower_predicates_turns_where_into_if():
    sch = tir.Schedule(matmul)
    sch.split(sch.get_loops(sch.get_block("C"))[0], [None, 4])
    out = lower_predicates(sch.func)
    assert all(tir.stmt.is_true(r.predicate) for r in _nodes(out, tir.BlockRealize))
    assert len(_nodes(out, tir.IfThenElse)) == 1
    assert_same_results(sch.func, [out], [{"n": 5}, {"n": 8}])


def test_lower_blocks_places_init_before_innermost_reduction_loops():
    out = lower_blocks(matmul)
    assert not _nodes(out, tir.Block) and not _nodes(out, tir.IfThenElse)
    (k_loop,) = [f for f in _nodes(out, tir.For) if f.loop_var.name == "k"]
    j_loop = [f for f in _nodes(out, tir.For) if f.loop_var.name == "j"][0]
    init, update = j_loop.body.seq
    assert isinstance(init, tir.BufferStore) and update is k_loop
    assert_same_results(matmul, [out], [{"n": 3}])


def test_lower_blocks_guards_init_when_reduction_loop_is_not_innermost():
    sch = tir.Schedule(matmul)
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.reorder(i, k, j)
    out = lower_blocks(sch.func)
    (guard,) = _nodes(out, tir.IfThenElse)
    assert isinstance(guard.condition, tir.EQ) and guard.condition.a.name == "k"
    assert_same_results(matmul, [out], [{"n": 3}])


def test_empty_symbolic_reduction_writes_the_identity_after_lowering():
    from tensorir.compute import compute, create_prim_func, placeholder, reduce_axis, reduce_sum
    n, k = tir.size_var("n"), tir.size_var("k")
    x = placeholder((n, k), "float32", "x")
    r = reduce_axis(k, "r")
    total = compute((n,), lambda i: reduce_sum(x[i, r], [r]), "total")
    out = np.full(3, np.nan, "float32")
    tir.interpret(tir.transform.lower(create_prim_func([x, total])), np.zeros((3, 0), "float32"), out)
    np.testing.assert_array_equal(out, np.zeros(3, "float32"))


def test_lower_blocks_allocates_block_buffers():
    out = lower_blocks(chain)
    (alloc,) = _nodes(out, tir.Allocate)
    assert alloc.buffer.name == "t" and alloc.buffer.ndim == 2
    assert_same_results(chain, [out], [{"n": 3}])


@prim_func
def tiles(a: T.Buffer((8, 6), "float32"), b: T.Buffer((8, 6), "float32")):
    for io in range(4):
        with T.block("tile"):
            vo = T.axis.spatial(4, io)
            src = T.match_buffer(a[vo * 2:vo * 2 + 2, 0:6], (2, 6), "float32")
            dst = T.match_buffer(b[vo * 2:vo * 2 + 2, 0:6], (2, 6), "float32")
            for i, j in T.grid(2, 6):
                dst[i, j] = src[i, j] * T.float32(3)


def test_lower_blocks_rewrites_match_buffer_views_to_their_source():
    out = lower_blocks(tiles)
    assert {ld.buffer.name for ld in _nodes(out, tir.BufferLoad)} == {"a"}
    assert {st.buffer.name for st in _nodes(out, tir.BufferStore)} == {"b"}
    assert_same_results(tiles, [out, tir.lower(tiles)], [{}])


def test_flatten_buffers_linearises_with_symbolic_strides():
    out = flatten_buffers(lower_blocks(chain))
    assert_fully_lowered(out)
    y = chain.params[-1]
    (store,) = [s for s in _nodes(out, tir.BufferStore) if s.buffer.data is y]
    assert store.buffer.name == "y_flat"  # a view of the parameter's storage, not a new buffer
    assert tir.Analyzer().can_prove_equal(store.buffer.shape[0], chain.params[0].shape[0] * 4)
    assert_same_results(chain, [out], [{"n": 1}, {"n": 4}])


def test_simplify_indices_folds_split_indices():
    sch = tir.Schedule(chain)
    i, j = sch.get_loops(sch.get_block("C"))
    sch.fuse(i, j)
    raw = flatten_buffers(lower_blocks(lower_predicates(sch.func)))
    simplified = simplify_indices(raw)
    size = lambda f: sum(len(tir.collect(s.indices[0], lambda n: True))  # noqa: E731
                         for s in _nodes(f, tir.BufferStore))
    assert size(simplified) < size(raw)
    assert_same_results(chain, [simplified], [{"n": 3}])


def test_lower_keeps_loop_kinds_and_annotations():
    sch = tir.Schedule(matmul)
    i, j, _ = sch.get_loops(sch.get_block("C"))
    sch.parallel(i)
    sch.annotate(j, "pragma_x", 2)
    out = tir.lower(sch.func)
    loops = {f.loop_var.name: f for f in _nodes(out, tir.For)}
    assert loops["i"].kind == "parallel" and loops["j"].annotations == {"pragma_x": 2}


def assert_lowered_roundtrip(lowered):
    """The lowered form is first-class script: it re-parses to the same IR, and printing is
    a fixpoint."""
    text = lowered.script()
    parsed = tir.from_source(text)
    tir.assert_structural_equal(parsed, lowered)
    assert parsed.script() == text


def test_lowered_function_prints_and_parses():
    out = tir.lower(chain)
    text = out.script()
    assert "x_flat = T.Buffer((n * 4,), \"float32\", data=x.data)" in text
    assert_lowered_roundtrip(out)
    views = {ld.buffer for ld in _nodes(tir.from_source(text), tir.BufferLoad)}
    assert {v.data.name for v in views if v.data is not None} == {"x"}


@prim_func
def init_in_sequence(x: T.Buffer((4, 3), "float32"), y: T.Buffer((4,), "float32"),
                     z: T.Buffer((4, 3), "float32")):
    for i, k in T.grid(4, 3):
        z[i, k] = x[i, k]
        with T.block("sum"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                y[vi] = 0.0
            y[vi] = y[vi] + x[vi, vk]


def test_lowered_sequences_stay_flat():
    # The lowered block (init guard; update) sits in the loop's sequence: one flat
    # SeqStmt, as the parser would build it, or the round trip fails.
    out = tir.lower(init_in_sequence)
    assert not any(isinstance(c, tir.SeqStmt) for s in _nodes(out, tir.SeqStmt) for c in s.seq)
    assert_lowered_roundtrip(out)
    assert_same_results(init_in_sequence, [out], [{}], num_inputs=1)


@pytest.mark.parametrize("name", sorted(catalog.CATALOG))
def test_lower_catalog(name):
    entry = catalog.CATALOG[name]
    func = entry.func
    lowered = tir.lower(func)
    assert_fully_lowered(lowered)
    assert_lowered_roundtrip(lowered)
    if entry.reference is None:
        return
    arrays = catalog.make_arrays(func, entry.sizes, np.random.default_rng(0))
    expected = [a.copy() for a in arrays]
    tir.interpret(func, *expected, **entry.scalars)
    got = [a.copy() for a in arrays]
    tir.interpret(lowered, *got, vectorize=False, **entry.scalars)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gen=prim_funcs(), data=st.data())
def test_lower_generated_functions(gen, data):
    lowered = tir.lower(gen.func)
    assert_fully_lowered(lowered)
    assert_lowered_roundtrip(lowered)
    sizes = data.draw(sym_sizes(gen))
    arrays = make_inputs(gen, np.random.default_rng(1), sizes)
    expected = gen.numpy_fn(*arrays[:gen.num_inputs])
    tir.interpret(lowered, *arrays, vectorize=False)
    for got, want in zip(arrays[gen.num_inputs:], expected):
        np.testing.assert_allclose(got, want, **tolerance(gen.dtype))
