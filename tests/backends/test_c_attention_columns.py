"""The fused attention's column form (backends/c/attention.py, ``column_body``: heads of more than
ROW_TILE query rows, i.e. prefill) against float64 NumPy.

What the forms tests (head dim 8) do not reach: head dims that are a whole number of vectors (the
q and output tiles transposed by vector shuffles) and that are not, key and value layouts read in
place (float32 keys in every layout, values whose rows are not 4 KiB apart) or packed per key block
(float16 caches widened, values 4 KiB apart), ragged row tiles and key blocks,
causal masks computed from positions, additive and ``where`` mask operands, grouped-query rows;
and the same kernels built for AVX2 (16 registers, 8 lanes) and SSE (4 lanes, no FMA, no F16C)
on a machine with AVX-512, and the vector exp against float64.
"""
from __future__ import annotations

import ctypes

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from backends.c.attention import (COLUMN_TILE, EXP_FLOOR, KEY_BLOCK, ROW_TILE, _micro_kernels, _vector_exp,
                                  column_tile_shapes, even_rows, tile_shape)
from backends.c.quantized_gemv import detect_features
from tests.backends.attention_builds import attention_main

CAPACITY = 300


def _source(layout: str, heads: int, groups: int, d: int, mask: str, dtype: str = "float32") -> str:
    """An attention over ``heads`` kv heads of ``groups`` query heads each, head dim ``d``:
    keys/values as ``layout`` ("kt": (heads, d, m) and (heads, m, d) operands; "rows": (m, heads, d)
    permuted, the Llama workload's; "prefix": a (heads, d, CAPACITY) / (heads, CAPACITY, d) cache's
    first t + n positions), mask "none", "causal" (from positions), "add" ((n, m) operand) or
    "where" ((1, m) operand)."""
    rows = f"{groups} * n" if groups > 1 else "n"
    total = f"T.min(t + n, {CAPACITY})" if layout == "prefix" else "m"
    params = [f'q: R.Tensor(({heads}, {groups}, "n", {d}), "float32")']
    if layout == "kt":
        params += [f'kt: R.Tensor(({heads}, {d}, "m"), "float32")', f'vt: R.Tensor(({heads}, "m", {d}), "float32")']
        lines = ["keys = kt", "values = vt"]
    elif layout == "rows":
        params += [f'k: R.Tensor(("m", {heads}, {d}), "float32")', f'v: R.Tensor(("m", {heads}, {d}), "float32")']
        lines = ["keys = R.permute_dims(k, [1, 2, 0])", "values = R.permute_dims(v, [1, 0, 2])"]
    else:
        params += [f'kt: R.Tensor(({heads}, {d}, {CAPACITY}), "{dtype}")',
                   f'vt: R.Tensor(({heads}, {CAPACITY}, {d}), "{dtype}")', 'pos: R.Shape(["t"])']
        lines = ["keys = R.strided_slice(kt, R.shape([2]), R.shape([0]), R.shape([t + n]), R.shape([1]))",
                 "values = R.strided_slice(vt, R.shape([1]), R.shape([0]), R.shape([t + n]), R.shape([1]))"]
        if dtype != "float32":    # the widening is fused into the kernel's loads
            lines += ['keys = R.astype(keys, "float32")', 'values = R.astype(values, "float32")']
    if mask == "add":
        params.append(f'bias: R.Tensor(("n", "{total}"), "float32")')
    elif mask == "where":
        params.append(f'allowed: R.Tensor((1, "{total}"), "bool")')
    lines = [f"grouped = R.reshape(q, R.shape([{heads}, {rows}, {d}]))", *lines,
             f'scores = R.multiply(R.matmul(grouped, keys), R.const({1 / d ** 0.5!r}, "float32"))']
    if groups > 1:
        lines.append(f"scores = R.reshape(scores, R.shape([{heads}, {groups}, n, {total}]))")
    if mask == "add":
        lines.append("scores = R.add(scores, bias)")
    elif mask == "where":
        lines.append('scores = R.where(allowed, scores, R.const(-1e30, "float32"))')
    elif mask == "causal":
        start = "t" if layout == "prefix" else "0"
        lines += [f'key_pos = R.arange(R.prim_value(0), R.prim_value({total}), R.prim_value(1), dtype="int64")',
                  f'query_pos = R.reshape(R.arange(R.prim_value({start}), R.prim_value({start} + n), '
                  'R.prim_value(1), dtype="int64"), R.shape([n, 1]))',
                  'scores = R.where(R.less_equal(key_pos, query_pos), scores, R.const(-1e30, "float32"))']
    lines.append("probs = R.nn.softmax(scores, axis=-1)")
    if groups > 1:
        lines.append(f"probs = R.reshape(probs, R.shape([{heads}, {rows}, {total}]))")
    lines.append("out = R.matmul(probs, values)")
    decls = "\n".join(f"        {v} = T.int64()" for v in (["n", "t"] if layout == "prefix" else ["n", "m"]))
    body = "\n".join(" " * 12 + line for line in lines)
    return f'''
@R.ir_module
class Module:
    @R.function
    def main({", ".join(params)}):
{decls}
        with R.dataflow():
{body}
            R.output(out)
        return out
'''


def _run(key: tuple, flags: tuple = (), lanes: int | None = None):
    """The compiled main of ``_source(*key)`` (``attention_main``)."""
    return attention_main(_source(*key), flags, lanes)


def _inputs(key: tuple, n: int, m: int, rng):
    layout, heads, groups, d, mask, *rest = key
    dtype = rest[0] if rest else "float32"
    f = lambda *shape: rng.standard_normal(shape).astype(np.float32)  # noqa: E731
    args = [f(heads, groups, n, d)]
    if layout == "kt":
        args += [f(heads, d, m), f(heads, m, d)]
    elif layout == "rows":
        args += [f(m, heads, d), f(m, heads, d)]
    else:
        m = max(n, min(m, CAPACITY))
        args += [f(heads, d, CAPACITY).astype(dtype), f(heads, CAPACITY, d).astype(dtype), (m - n,)]
    if mask == "add":
        args.append(np.where(rng.random((n, m)) < 0.3, np.float32(-1e9), f(n, m)).astype(np.float32))
    elif mask == "where":
        allowed = rng.random((1, m)) < 0.6
        allowed[0, rng.integers(m)] = True
        args.append(allowed)
    return args


def _reference(key: tuple, args) -> np.ndarray:
    layout, heads, groups, d, mask, *_ = key
    q = args[0].astype(np.float64)
    n = q.shape[2]
    if layout == "kt":
        keys, values, start = args[1], args[2], 0
    elif layout == "rows":
        keys, values, start = args[1].transpose(1, 2, 0), args[2].transpose(1, 0, 2), 0
    else:
        (start,) = args[3]
        keys, values = args[1][:, :, :start + n], args[2][:, :start + n]
    keys, values = keys.astype(np.float64), values.astype(np.float64)
    m = keys.shape[2]
    scores = np.einsum("bgnd,bdm->bgnm", q, keys) * np.float64(np.float32(1 / d ** 0.5))
    if mask == "add":     # in float32, as the model's add: -1e9 + a score is -1e9 there
        scores = (scores.astype(np.float32) + args[3]).astype(np.float64)
    elif mask == "where":
        scores = np.where(args[3], scores, -1e30)
    elif mask == "causal":
        scores = np.where(np.arange(m)[None, :] <= (start + np.arange(n))[:, None], scores, -1e30)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return np.einsum("bgnm,bmd->bgnd", e / e.sum(axis=-1, keepdims=True), values).reshape(heads, groups * n, d)


def _check(key, n, m, seed, flags=(), lanes=None):
    args = _inputs(key, n, m, np.random.default_rng(seed))
    out = np.asarray(_run(key, flags, lanes)(*args))
    np.testing.assert_allclose(out, _reference(key, args), rtol=1e-4, atol=1e-5, err_msg=str((key, n, m)))


KEYS = st.tuples(st.sampled_from(["kt", "rows", "prefix"]), st.sampled_from([1, 2]), st.sampled_from([1, 3]),
                 st.sampled_from([64, 16, 24]), st.sampled_from(["none", "causal", "add", "where"])).filter(
    lambda k: not (k[0] == "prefix" and k[4] in ("add", "where")))
# ragged: not a whole number of column tiles, key blocks or register tiles; ROW_TILE or fewer rows
# take the other bodies (one row tile per head), 1 row included
ROWS = st.one_of(st.integers(ROW_TILE + 1, 3 * COLUMN_TILE + 7), st.sampled_from([1, 5, ROW_TILE]))


@settings(max_examples=12, deadline=None)
@given(key=KEYS, n=ROWS, extra=st.sampled_from([0, 1, KEY_BLOCK - 1, 70]), seed=st.integers(0, 2**16))
def test_column_form_matches_numpy(key, n, extra, seed):
    _check(key, n, n + extra, seed)


@pytest.mark.parametrize("layout, mask", [("rows", "causal"), ("kt", "add"), ("prefix", "causal"), ("rows", "where")])
@pytest.mark.parametrize("n", [ROW_TILE + 1, COLUMN_TILE, COLUMN_TILE + 1, 2 * COLUMN_TILE + 13])
def test_column_form_whole_and_ragged_tiles(layout, mask, n):
    """The Llama form (a key's D values contiguous, 64-wide heads), keys (heads, D, m), a cache prefix
    with rows offset by t, at tile edges; 3 query heads per kv head (the row's position is
    ``row % n``, per-row locals read from the task's arrays)."""
    _check((layout, 2, 3, 64, mask), n, n + 5, n)


def test_values_4k_apart_are_packed_and_match():
    """16 heads x 64 floats: the rows of the values are 4 KiB apart, packed per key block (vpack)."""
    for n in (ROW_TILE + 3, 70):
        _check(("rows", 16, 1, 64, "causal"), n, n, n)


@pytest.mark.parametrize("n", [ROW_TILE + 1, 45, 2 * COLUMN_TILE])
def test_float16_cache_prefill(n):
    """A float16 cache (kv, D, capacity): each key block's keys and values widened by the task."""
    _check(("prefix", 3, 3, 64, "causal", "float16"), n, n + 40, n)


def test_dead_rows_and_late_blocks():
    """Rows whose keys are all masked weigh every key alike (NumPy over -1e30s); a row allowed only
    in its last block sees whole dead blocks first, which must not be skipped for it."""
    key = ("kt", 1, 1, 64, "add")
    n, m = COLUMN_TILE + 3, 3 * KEY_BLOCK + 5
    rng = np.random.default_rng(3)
    args = _inputs(key, n, m, rng)
    bias = np.full((n, m), -1e9, np.float32)
    bias[:, :KEY_BLOCK] = np.where(rng.random((n, KEY_BLOCK)) < 0.5, 0, -1e9)
    bias[4] = -1e9                    # no key at all
    bias[7, m - 2:] = 0               # only in the last block
    args[3] = bias
    out = np.asarray(_run(key)(*args))
    np.testing.assert_allclose(out, _reference(key, args), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("flags, lanes", [(("-mno-avx512f",), 8), (("-mno-avx", "-DRS_ATT_NO_F16C"), 4)])
def test_narrower_vectors(flags, lanes):
    """The kernels generated for AVX2 (8 lanes, 16 registers: other register tiles) and SSE (4 lanes,
    no FMA, float16 widened by the portable conversion), compiled without the wider instructions."""
    if detect_features().lanes < lanes:
        pytest.skip("the machine's vectors are narrower")
    for key, n in ((("rows", 2, 1, 64, "causal"), 45), (("kt", 1, 3, 24, "add"), ROW_TILE + 2),
                   (("prefix", 2, 3, 64, "causal", "float16"), 40), (("rows", 2, 1, 16, "none"), 5)):
        _check(key, n, n + 3, n, flags, lanes)


def test_tile_shapes():
    # AVX-512: 32 registers; AVX2/SSE: 16; accumulators + a register per loaded vector + a broadcast
    assert tile_shape(2, 16) == (12, 2) and tile_shape(4, 16) == (6, 4)
    assert tile_shape(4, 8) == (6, 2) and tile_shape(8, 4) == (6, 2)
    for lanes in (4, 8, 16):
        for vectors in (1, 2, 4, 8):
            rows, group = tile_shape(vectors, lanes)
            assert rows * group + group + 1 <= (32 if lanes == 16 else 16) and vectors % group == 0
    assert even_rows(32, 12) == 11 and even_rows(64, 12) == 11 and even_rows(24, 12) == 12
    assert column_tile_shapes(16, 64) == ((11, 2), (11, 2))


@pytest.mark.parametrize("lanes, flags", [(16, ()), (8, ("-mno-avx512f",)), (4, ("-mno-avx",))])
def test_vector_exp_against_float64(lanes, flags):
    """rs_att_vexp within 1.5 ulp of float64 exp on [EXP_FLOOR, 0] (measured: 0.93 ulp with FMA,
    1.2 without), 0 below EXP_FLOOR and for -inf, NaN for NaN."""
    from backends.c.compiler import compile_shared
    if detect_features().lanes < lanes:
        pytest.skip("the machine's vectors are narrower")
    source = ("#include <stdint.h>\n#include <string.h>\n#include <math.h>\n" + _micro_kernels(lanes) + "\n"
              + _vector_exp(lanes) + f"\nvoid vexp(const float* x, float* y, int64_t n) {{ for (int64_t i = 0; "
              f"i + {lanes} <= n; i += {lanes}) rs_af_store(y + i, rs_att_vexp(rs_af_load(x + i))); }}\n")
    library = ctypes.CDLL(str(compile_shared(source, extra_flags=flags)[0]))
    x = np.concatenate([np.linspace(EXP_FLOOR, 0, 1 << 20, dtype=np.float32),
                        -np.abs(np.random.default_rng(0).standard_normal(1 << 16)).astype(np.float32) * 3,
                        np.repeat(np.array([-np.inf, np.nan, -81, -1e30], np.float32), lanes)])
    y = np.empty_like(x)
    library.vexp(x.ctypes.data_as(ctypes.c_void_p), y.ctypes.data_as(ctypes.c_void_p), ctypes.c_int64(len(x)))
    inside = x >= EXP_FLOOR
    exact = np.exp(x[inside].astype(np.float64))
    ulps = np.abs(y[inside] - exact) / np.spacing(exact.astype(np.float32))
    assert ulps.max() <= 1.5, ulps.max()
    assert (y[~inside & ~np.isnan(x)] == 0).all() and np.isnan(y[np.isnan(x)]).all()
