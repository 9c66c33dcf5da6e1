"""The fused attention's decode path (backends/c/attention.py: at most MICRO_ROWS query rows per kv
head, keys and values read in place from a cache) against float64 NumPy.

The engine's form: a cache ``(kv, D, capacity)`` of keys and ``(kv, capacity, D)`` of values in
float32 or float16, its first ``t + 1`` positions used, grouped-query rows (1-4 query heads per kv
head: the rows of one register tile), the causal mask from positions. Key counts from 1 to past
two flash-decoding chunks, ragged for every block the kernel has (vector, register tile of
columns, sweep group, chunk); head dims of whole vectors and not; and the kernels generated for
AVX2 (8 lanes, 16 registers: other register tiles) and SSE (4 lanes, the portable float16
widening), and AVX-512 with the portable widening, compiled without the wider instructions.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from backends.c.attention import CHUNK_KEYS, DIRECT_BLOCK, MICRO_ROWS, decode_widths
from backends.c.quantized_gemv import detect_features
from tests.backends.attention_builds import attention_main

CAPACITY = 1100


def _source(heads: int, groups: int, d: int, dtype: str) -> str:
    """One decode step's attention over a cache of CAPACITY positions, the engine's form."""
    widen = ('\n            keys = R.astype(keys, "float32")\n            values = R.astype(values, "float32")'
             if dtype != "float32" else "")
    return f'''
@R.ir_module
class Module:
    @R.function
    def main(q: R.Tensor(({heads}, {groups}, 1, {d}), "float32"), kt: R.Tensor(({heads}, {d}, {CAPACITY}), "{dtype}"),
             vt: R.Tensor(({heads}, {CAPACITY}, {d}), "{dtype}"), pos: R.Shape(["t"])):
        t = T.int64()
        with R.dataflow():
            grouped = R.reshape(q, R.shape([{heads}, {groups}, {d}]))
            keys = R.strided_slice(kt, R.shape([2]), R.shape([0]), R.shape([t + 1]), R.shape([1]))
            values = R.strided_slice(vt, R.shape([1]), R.shape([0]), R.shape([t + 1]), R.shape([1])){widen}
            scores = R.multiply(R.matmul(grouped, keys), R.const({1 / d ** 0.5!r}, "float32"))
            scores = R.reshape(scores, R.shape([{heads}, {groups}, 1, T.min(t + 1, {CAPACITY})]))
            key_pos = R.arange(R.prim_value(0), R.prim_value(T.min(t + 1, {CAPACITY})), R.prim_value(1), dtype="int64")
            query_pos = R.reshape(R.arange(R.prim_value(t), R.prim_value(t + 1), R.prim_value(1), dtype="int64"),
                                  R.shape([1, 1]))
            scores = R.where(R.less_equal(key_pos, query_pos), scores, R.const(-1e30, "float32"))
            probs = R.reshape(R.nn.softmax(scores, axis=-1), R.shape([{heads}, {groups}, T.min(t + 1, {CAPACITY})]))
            out = R.matmul(probs, values)
            R.output(out)
        return out
'''


def _run(key: tuple, flags: tuple = (), lanes: int | None = None):
    """The compiled main of ``_source(*key)`` (``attention_main``)."""
    return attention_main(_source(*key), flags, lanes)


def _check(key: tuple, m: int, seed: int, flags: tuple = (), lanes: int | None = None) -> None:
    heads, groups, d, dtype = key
    rng = np.random.default_rng(seed)
    q = (rng.standard_normal((heads, groups, 1, d)) * 2).astype(np.float32)
    kt = rng.standard_normal((heads, d, CAPACITY)).astype(dtype)
    vt = rng.standard_normal((heads, CAPACITY, d)).astype(dtype)
    kt[:, :, m:] = np.nan      # past the used positions: never read (a NaN there would show)
    vt[:, m:] = np.nan
    out = np.asarray(_run(key, flags, lanes)(q, kt, vt, (m - 1,)))
    keys, values = kt[:, :, :m].astype(np.float64), vt[:, :m].astype(np.float64)
    scores = np.einsum("bgd,bdm->bgm", q[:, :, 0].astype(np.float64), keys) * np.float64(np.float32(1 / d ** 0.5))
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    expected = np.einsum("bgm,bmd->bgd", e / e.sum(axis=-1, keepdims=True), values)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5, err_msg=str((key, m, flags, lanes)))


KEYS = st.tuples(st.sampled_from([1, 3]), st.integers(1, MICRO_ROWS), st.sampled_from([64, 24]),
                 st.sampled_from(["float16", "float32"]))
# 1 key, vector / register-tile / chunk edges and past them, two chunks and a ragged third
EDGES = [1, 2, 15, 16, 17, 31, 33, 64, 65, 111, 112, 113, 127, 129, DIRECT_BLOCK - 1, DIRECT_BLOCK,
         DIRECT_BLOCK + 1, 2 * CHUNK_KEYS, 2 * CHUNK_KEYS + 1, 1024 + 37, CAPACITY]
COUNTS = st.one_of(st.sampled_from(EDGES), st.integers(1, CAPACITY))


@settings(max_examples=10, deadline=None)
@given(key=KEYS, m=COUNTS, seed=st.integers(0, 2**16))
def test_decode_matches_numpy(key, m, seed):
    _check(key, m, seed)


@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("m", [1, 17, 113, 700, 1024, CAPACITY])
def test_the_engine_shape(dtype, m):
    """SmolLM2's: 3 kv heads of 3 query heads, head dim 64."""
    _check((3, 3, 64, dtype), m, m)


@pytest.mark.parametrize("flags, lanes", [(("-mno-avx512f",), 8), (("-mno-avx", "-DRS_ATT_NO_F16C"), 4),
                                          (("-DRS_ATT_NO_F16C",), None)])
@settings(max_examples=3, deadline=None)
@given(data=st.data())
def test_narrower_vectors_and_portable_widening(flags, lanes, data):
    """AVX2 (8 lanes, 16 registers), SSE (4 lanes, no FMA, float16 widened by the bit conversion) and
    the native width with the bit conversion, compiled without the wider instructions."""
    if detect_features().lanes < (lanes or 0):
        pytest.skip("the machine's vectors are narrower")
    key = (data.draw(st.sampled_from([1, 3])), data.draw(st.integers(1, MICRO_ROWS)), data.draw(st.sampled_from([64, 24])),
           data.draw(st.sampled_from(["float16", "float32"])))
    _check(key, data.draw(COUNTS), data.draw(st.integers(0, 2**16)), flags, lanes)


def test_decode_widths_fit_the_registers():
    """Accumulators of the widest column block and one loaded vector per column fit the registers;
    the narrower blocks step down so that any column count ends in at most one of each."""
    for lanes in (4, 8, 16):
        registers = 32 if lanes >= 16 else 16
        for rows in range(1, MICRO_ROWS + 1):
            widths = decode_widths(lanes, rows)
            assert rows * widths[0] + widths[0] + 1 <= registers
            assert list(widths) == sorted(set(widths), reverse=True) and widths[-1] == 1
            assert all(w in (4, 2, 1) for w in widths[1:])
    assert decode_widths(16, 3)[:2] == (7, 4)     # SmolLM2's 3 rows: a head dim of 64 in one block of 4
