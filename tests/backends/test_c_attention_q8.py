"""The fused attention over a q8 KV cache (int8 codes, one float32 scale per head and position:
``kv_cache="q8"``) against float64 NumPy: the generated kernel's decode form (1-4 query rows per kv
head, keys and values widened by the register tiles as they are loaded, each score times its key's
scale, each weight times its value's scale) and its prefill forms (the row form's packed blocks for
5-16 rows per head, the column form past 16), at key counts from 1 to past two flash-decoding chunks
with every block edge; the scales past the used positions are NaN (never read). Also built for AVX2
(8 lanes), SSE (4 lanes) and with the portable int8 widening (``RS_ATT_NO_I8VEC``), compiled
without the wider instructions; and the loop nest (``RELAXSCRIPT_GENERATED_ATTENTION=0``'s path).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from backends.c.attention import CHUNK_KEYS, DIRECT_BLOCK, KEY_BLOCK, MICRO_ROWS
from backends.c.quantized_gemv import detect_features
from tests.backends.attention_builds import attention_main

CAPACITY = 1100


def _source(heads: int, groups: int, d: int, n: int) -> str:
    """``n`` query tokens at positions ``t .. t+n-1`` over the first ``t + n`` positions of a q8
    cache of CAPACITY, the engine's form (model.Attention with ``kv_cache="q8"``)."""
    total = f"T.min(t + {n}, {CAPACITY})"
    return f'''
@R.ir_module
class Module:
    @R.function
    def main(q: R.Tensor(({heads}, {groups * n}, {d}), "float32"), kt: R.Tensor(({heads}, {d}, {CAPACITY}), "int8"),
             vt: R.Tensor(({heads}, {CAPACITY}, {d}), "int8"), ks: R.Tensor(({heads}, 1, {CAPACITY}), "float32"),
             vs: R.Tensor(({heads}, {CAPACITY}, 1), "float32"), pos: R.Shape(["t"])):
        t = T.int64()
        with R.dataflow():
            keys = R.strided_slice(kt, R.shape([2]), R.shape([0]), R.shape([t + {n}]), R.shape([1]))
            values = R.strided_slice(vt, R.shape([1]), R.shape([0]), R.shape([t + {n}]), R.shape([1]))
            key_scales = R.strided_slice(ks, R.shape([2]), R.shape([0]), R.shape([t + {n}]), R.shape([1]))
            value_scales = R.strided_slice(vs, R.shape([1]), R.shape([0]), R.shape([t + {n}]), R.shape([1]))
            keys = R.multiply(R.astype(keys, "float32"), key_scales)
            values = R.multiply(R.astype(values, "float32"), value_scales)
            scores = R.multiply(R.matmul(q, keys), R.const({1 / d ** 0.5!r}, "float32"))
            scores = R.reshape(scores, R.shape([{heads}, {groups}, {n}, {total}]))
            key_pos = R.arange(R.prim_value(0), R.prim_value({total}), R.prim_value(1), dtype="int64")
            query_pos = R.reshape(R.arange(R.prim_value(t), R.prim_value(t + {n}), R.prim_value(1), dtype="int64"),
                                  R.shape([{n}, 1]))
            scores = R.where(R.less_equal(key_pos, query_pos), scores, R.const(-1e30, "float32"))
            probs = R.reshape(R.nn.softmax(scores, axis=-1), R.shape([{heads}, {groups * n}, {total}]))
            out = R.matmul(probs, values)
            R.output(out)
        return out
'''


def _check(key: tuple, m: int, seed: int, flags: tuple = (), lanes: int | None = None, main=None) -> None:
    """``m`` used positions (the last ``n`` of them the queries'); ``main``: the compiled module
    (default: ``attention_main``'s build, which has the generated kernel)."""
    heads, groups, d, n = key
    m = max(m, n)
    rng = np.random.default_rng(seed)
    q = (rng.standard_normal((heads, groups * n, d)) * 2).astype(np.float32)
    kt = rng.integers(-127, 128, (heads, d, CAPACITY)).astype(np.int8)
    vt = rng.integers(-127, 128, (heads, CAPACITY, d)).astype(np.int8)
    ks = rng.uniform(0.001, 0.03, (heads, 1, CAPACITY)).astype(np.float32)
    vs = rng.uniform(0.001, 0.03, (heads, CAPACITY, 1)).astype(np.float32)
    ks[:, :, m:] = np.nan      # past the used positions: never read (a NaN there would show)
    vs[:, m:] = np.nan
    main = main or attention_main(_source(*key), flags, lanes)
    out = np.asarray(main(q, kt, vt, ks, vs, (m - n,)))
    keys = kt[:, :, :m].astype(np.float64) * ks[:, :, :m]
    values = vt[:, :m].astype(np.float64) * vs[:, :m]
    scores = np.einsum("brd,bdm->brm", q.astype(np.float64), keys) * np.float64(np.float32(1 / d ** 0.5))
    query_pos = (m - n + np.arange(n))[None, :].repeat(groups, 0).reshape(-1)    # row g * n + i: token i
    scores = np.where(np.arange(m)[None, None, :] <= query_pos[None, :, None], scores, -np.inf)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    expected = np.einsum("brm,bmd->brd", e / e.sum(axis=-1, keepdims=True), values)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5, err_msg=str((key, m, flags, lanes)))


DECODE = st.tuples(st.sampled_from([1, 3]), st.integers(1, MICRO_ROWS), st.sampled_from([64, 24]), st.just(1))
EDGES = [1, 2, 15, 16, 17, 31, 33, 64, 65, 111, 112, 113, 127, 129, DIRECT_BLOCK - 1, DIRECT_BLOCK,
         DIRECT_BLOCK + 1, 2 * CHUNK_KEYS, 2 * CHUNK_KEYS + 1, 1024 + 37, CAPACITY]
COUNTS = st.one_of(st.sampled_from(EDGES), st.integers(1, CAPACITY))


@settings(max_examples=10, deadline=None)
@given(key=DECODE, m=COUNTS, seed=st.integers(0, 2**16))
def test_decode_matches_numpy(key, m, seed):
    _check(key, m, seed)


@pytest.mark.parametrize("m", [1, 17, 113, 700, 1024, CAPACITY])
def test_the_engine_shape(m):
    """SmolLM2's decode: 3 kv heads of 3 query heads, head dim 64."""
    _check((3, 3, 64, 1), m, m)


@pytest.mark.parametrize("n", [2, 5, 7, 40])
@pytest.mark.parametrize("m", [7, KEY_BLOCK + 3, 300])
def test_prefill_forms(n, m):
    """3 query heads x n tokens per kv head: the row form's packed blocks (6-15 rows: widened with
    their scales per block of KEY_BLOCK keys) and the column form (more than 16 rows)."""
    _check((2, 3, 64, n), m, 100 * n + m)


@pytest.mark.parametrize("flags, lanes", [(("-mno-avx512f",), 8), (("-mno-avx", "-mno-sse4.1"), 4),
                                          (("-DRS_ATT_NO_I8VEC",), None),
                                          (("-mno-avx512f", "-DRS_ATT_NO_I8VEC"), 8)])
@settings(max_examples=3, deadline=None)
@given(data=st.data())
def test_narrower_vectors_and_portable_widening(flags, lanes, data):
    """AVX2 (8 lanes, ``vpmovsxbd`` of 8 codes), SSE (4 lanes: the scalar widening), the scalar
    widening at the native and the AVX2 width; decode and prefill."""
    if detect_features().lanes < (lanes or 0):
        pytest.skip("the machine's vectors are narrower")
    key = (data.draw(st.sampled_from([1, 3])), data.draw(st.integers(1, MICRO_ROWS)),
           data.draw(st.sampled_from([64, 24])), data.draw(st.sampled_from([1, 1, 3, 9])))
    _check(key, data.draw(COUNTS), data.draw(st.integers(0, 2**16)), flags, lanes)


def test_the_generated_kernel_reads_the_codes_in_place():
    """The kernel takes the int8 cache and its scales themselves (no float32 copy of the keys)."""
    import relaxscript as rx
    exe = rx.build(rx.from_source(_source(3, 3, 64, 1)), target="c")
    source = exe.c_library.source
    assert "int8 keys, int8 values */" in source and "rs_att_outer_b(" in source


def test_the_loop_nest_matches(monkeypatch):
    """Without the generated kernel, the fused attention's loop nest (its meaning) reads the codes
    times their scales."""
    import relaxscript as rx
    monkeypatch.setenv("RELAXSCRIPT_GENERATED_ATTENTION", "0")
    for key, m in (((3, 3, 64, 1), 70), ((2, 3, 24, 3), 40)):
        exe = rx.build(rx.from_source(_source(*key)), target="c")
        assert "/* fused attention" not in exe.c_library.source and "kt_scale" in exe.c_library.source
        _check(key, m, m, main=rx.VirtualMachine(exe)["main"])
