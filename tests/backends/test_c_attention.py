"""The generated C kernel of the fused attention (backends/c/attention.py) against NumPy.

What the forms test of FuseAttention does not reach: long contexts split into key chunks
(decode: few row tiles) with ragged last chunks, queries of more than one 16-row tile (the
packed key block shared by the micro tiles), layouts whose keys are transposed once per call,
rows whose keys are all masked, and masked key blocks that are skipped.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import relaxscript as rx
from backends.c.attention import CHUNK_KEYS, KEY_BLOCK, ROW_TILE
from tests.relaxscript.test_fuse_attention_forms import Form, _compiled, _inputs, _reference, forms

HEADS, D = 2, 8


def _check(form: Form, n: int, m: int, seed: int) -> None:
    args = _inputs(form, n, m, np.random.default_rng(seed))
    np.testing.assert_allclose(np.asarray(_compiled(form)(*args)), _reference(form, args), rtol=1e-4, atol=1e-5)


def test_the_generated_kernel_replaces_the_loop_nest():
    exe = rx.build(rx.from_source(Form("cache", 3, "before", "causal").source()), target="c")
    source = exe.c_library.source
    assert "/* fused attention: keys M,B,D (dot), values M,B,DV (outer)" in source


# decode-shaped (rows of a head <= ROW_TILE: the keys split into chunks once past CHUNK_KEYS),
# ragged chunks and blocks, and prefill-shaped (several row tiles, packed key blocks)
LONG = st.sampled_from([CHUNK_KEYS + 1, 2 * CHUNK_KEYS + KEY_BLOCK // 2 + 3, 1000])


@settings(max_examples=5, deadline=None)
@given(form=forms(), n=st.sampled_from([1, 2]), m=LONG, seed=st.integers(0, 2**16))
def test_long_contexts_split_into_chunks_match_numpy(form, n, m, seed):
    _check(form, n, m, seed)


@settings(max_examples=4, deadline=None)
@given(form=forms(), n=st.sampled_from([ROW_TILE + 1, 2 * ROW_TILE + 5]), m=st.sampled_from([1, 33, 150]),
       seed=st.integers(0, 2**16))
def test_queries_of_several_row_tiles_match_numpy(form, n, m, seed):
    _check(form, n, m, seed)


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(form=forms(), n=st.sampled_from([1, 3, ROW_TILE + 3]), m=st.integers(1, 1100), seed=st.integers(0, 2**16))
def test_many_generated_attentions_match_numpy(form, n, m, seed):
    _check(form, n, m, seed)


def _masked_module(kind: str) -> str:
    mask = ('allowed: R.Tensor(("n", "m"), "bool")' if kind == "where" else 'bias: R.Tensor(("n", "m"), "float32")')
    masked = ('R.where(allowed, scores, R.const(-1e30, "float32"))' if kind == "where" else "R.add(scores, bias)")
    return f'''
@R.ir_module
class Module:
    @R.function
    def main(q: R.Tensor(({HEADS}, "n", {D}), "float32"), kt: R.Tensor(({HEADS}, {D}, "m"), "float32"),
             v: R.Tensor(({HEADS}, "m", {D}), "float32"), {mask}):
        n = T.int64()
        m = T.int64()
        with R.dataflow():
            scores = R.matmul(q, kt)
            probs = R.nn.softmax({masked}, axis=-1)
            out = R.matmul(probs, v)
            R.output(out)
        return out
'''


def _numpy_attention(q, kt, v, scores_fn):
    scores = scores_fn(q @ kt)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)) @ v


@pytest.mark.parametrize("n, m", [(5, 300), (ROW_TILE + 2, 2 * KEY_BLOCK + 7)])
def test_rows_masked_entirely_or_until_a_late_block(n, m):
    """A row with no key allowed weighs every key alike (as NumPy's softmax over -1e30s); a row
    allowed only in its last block first sees whole dead blocks with no running max, which
    must not be skipped. Whole dead blocks of the other rows are skipped."""
    rng = np.random.default_rng(n + m)
    q, kt, v = (rng.standard_normal(s).astype(np.float32) for s in ((HEADS, n, D), (HEADS, D, m), (HEADS, m, D)))
    allowed = np.zeros((n, m), dtype=bool)
    allowed[:, :KEY_BLOCK] = rng.random((n, KEY_BLOCK)) < 0.5     # later blocks dead for most rows
    allowed[2] = False                                             # no key at all
    allowed[3] = False
    allowed[3, m - 2:] = True                                      # only in the last block
    run = rx.VirtualMachine(rx.build(rx.from_source(_masked_module("where")), target="c"))["main"]
    expected = _numpy_attention(q, kt, v, lambda s: np.where(allowed, s, np.float32(-1e30)))
    np.testing.assert_allclose(np.asarray(run(q, kt, v, allowed)), expected, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(expected[:, 2], np.broadcast_to(v.mean(axis=1), (HEADS, D)), rtol=1e-4, atol=1e-5)


def test_additive_mask_dead_blocks():
    """An additive mask of -1e9 over whole blocks (causal-like, and a row dead until its last
    block) gives NumPy's result: the skipped blocks' weights are 0 in float32."""
    n, m = 2 * ROW_TILE + 1, 3 * KEY_BLOCK + 5
    rng = np.random.default_rng(7)
    q, kt, v = (rng.standard_normal(s).astype(np.float32) for s in ((HEADS, n, D), (HEADS, D, m), (HEADS, m, D)))
    bias = rng.standard_normal((n, m)).astype(np.float32)
    bias[np.triu_indices(n, k=1, m=m)] = -1e9
    bias[5, :m - 1] = -1e9
    run = rx.VirtualMachine(rx.build(rx.from_source(_masked_module("add")), target="c"))["main"]
    expected = _numpy_attention(q, kt, v, lambda s: s + bias)
    np.testing.assert_allclose(np.asarray(run(q, kt, v, bias)), expected, rtol=1e-4, atol=1e-5)


def test_the_loop_nest_still_builds_when_the_generated_kernel_is_off(monkeypatch):
    monkeypatch.setenv("RELAXSCRIPT_GENERATED_ATTENTION", "0")
    form = Form("prefix", 3, "after", "causal")
    exe = rx.build(rx.from_source(form.source()), target="c")
    assert "/* fused attention" not in exe.c_library.source
    args = _inputs(form, 3, 70, np.random.default_rng(0))
    np.testing.assert_allclose(np.asarray(rx.VirtualMachine(exe)["main"](*args)), _reference(form, args),
                               rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("keys", ["kt", "cache", "prefix"])
@pytest.mark.parametrize("m", [1, KEY_BLOCK // 2 + 1, KEY_BLOCK - 1, KEY_BLOCK + 1, 2 * KEY_BLOCK + 7])
def test_ragged_key_blocks_of_every_key_layout(keys, m):
    """A last key block of fewer than KEY_BLOCK keys: copied (packed per task, or transposed once per
    call) it is zero-padded and its scores are computed over the whole block, of which only the
    valid ones may be read; keys read in place compute only theirs. Several row tiles (n > ROW_TILE,
    packing on) and one micro tile (n = 3), causal and additive (or no) masks."""
    for n, mask in ((ROW_TILE + 5, "causal"), (3, "none" if keys == "prefix" else "add")):
        _check(Form(keys, 1, "before", mask), n, m, m * 7 + n)
