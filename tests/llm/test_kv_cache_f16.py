"""The float16 KV cache (``Engine.from_gguf(kv_cache="f16")``, the default with q4 weights).

The compiled model with a float16 cache equals the NumPy reference with the same rounding
(``NumpyLlama(kv_cache="f16")``) token for token, and that rounding is what separates it from
the float32 cache; prefill followed by decode (and a second prefill) equals one longer prefill;
the cache still refuses writes past its bound; the fused attention reads the float16 cache in
place (C kernel vs the loop-level interpreter and NumPy at several lengths, ragged blocks and
chunks, with and without F16C); bad option values are clear errors.
"""
from functools import lru_cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import relaxscript as rx
from backends.c.attention import CHUNK_KEYS, DIRECT_BLOCK, KEY_BLOCK
from relaxscript.interpreter import ShapeTuple
from relaxscript.llm import kv_cache
from relaxscript.llm.engine import Engine
from relaxscript.llm.memory_report import kv_cache_bytes
from relaxscript.llm.model import LlamaForCausalLM
from relaxscript.llm.reference import NumpyLlama
from relaxscript.transform import DeadCodeElimination, FuseAttention
from tests.llm.cache_checks import (assert_continuation_matches_one_prefill, assert_refuses_a_write_past_its_bound,
                                   assert_rounded_cache_matches_its_reference)

PROMPTS = ([1, 2, 3], [5, 17, 33, 60, 2, 9, 11], list(range(3, 60, 3)))


@pytest.fixture(scope="module")
def f16_engine(tiny_gguf_q4):
    # float32 weights: the cache's rounding is the only difference from the exact path
    return Engine.from_gguf(tiny_gguf_q4, target="c", weights="f32", max_context=48, kv_cache="f16")


@pytest.fixture(scope="module")
def f16_reference(tiny_gguf_q4):
    return NumpyLlama(tiny_gguf_q4, max_context=48, kv_cache="f16")


def test_the_caches_are_float16_tensors(f16_engine):
    assert f16_engine.kv_cache == "f16"
    assert all(c.dtype == np.float16 for c in f16_engine._caches)
    decode = f16_engine.exported.mod["decode"]
    caches = [p for p in decode.params if p.name_hint.startswith("cache_")]
    assert caches and all(p.struct_info.dtype == "float16" for p in caches)
    source = f16_engine.executable.c_library.source
    assert source.count("float16 keys, float16 values */") == 2    # prefill's and decode's kernels


@pytest.mark.parametrize("prompt", PROMPTS)
def test_greedy_f16_cache_equals_the_reference_with_the_same_rounding(f16_engine, f16_reference, tiny_gguf_q4,
                                                                      prompt):
    # float32 summation order (vector width, blocking) can put one cached element on the other side
    # of a float16 rounding boundary: one half ulp (2^-11 relative) moves the logits by ~1e-4
    # (measured up to 1.7e-4 on the 19-token prompt with AVX-512; ~5e-6 with no flip), while the
    # rounding itself moves them by 2e-3..7e-3, which the last assertion keeps 10x apart
    # the float16 rounding moves the logits far more than the engine differs from its reference
    # (from the first position on: prefill's own keys are read back rounded)
    assert_rounded_cache_matches_its_reference(f16_engine, f16_reference, NumpyLlama(tiny_gguf_q4, max_context=48), prompt,
                                               least_rounding=1e-4)


@pytest.mark.parametrize("split", [1, 4, 9])
def test_prefill_then_decode_equals_one_longer_prefill(f16_engine, split):
    # the same rounded keys and values are written either way: only float32 summation order differs;
    # a second prefill reads the float16 rows the first one wrote
    assert_continuation_matches_one_prefill(f16_engine, split, after_decode=True)


def test_the_f16_cache_refuses_a_write_past_its_bound(f16_engine):
    assert_refuses_a_write_past_its_bound(f16_engine, 48)


def test_the_memory_report_counts_half_the_cache_bytes(f16_engine):
    config = f16_engine.config
    per_layer = 2 * config.num_kv_heads * config.head_dim * 48
    for name in ("prefill", "decode"):
        assert kv_cache_bytes(f16_engine.exported.mod, name) == config.num_layers * per_layer * 2
    assert f16_engine.kv_cache_bytes() == sum(c.nbytes for c in f16_engine._caches) == config.num_layers * per_layer * 2


def test_option_values_are_checked(tiny_gguf_q4):
    with pytest.raises(ValueError, match="kv_cache must be one of 'f16', 'f32', 'q8', got 'f8'"):
        Engine.from_gguf(tiny_gguf_q4, weights="f32", kv_cache="f8")
    with pytest.raises(ValueError, match="kv_cache must be one of"):
        NumpyLlama(tiny_gguf_q4, kv_cache="float16")
    with pytest.raises(ValueError, match="kv_cache_dtype must be one of"):
        LlamaForCausalLM(NumpyLlama(tiny_gguf_q4).config, 16, kv_cache_dtype="bf16")
    with pytest.raises(ValueError, match="kv_cache must be one of"):
        kv_cache.cache_dtype("f64")
    assert kv_cache.allocate_caches(2, 8, 1, 4, "float16")[1].dtype == np.float16


def test_written_rows_round_to_nearest_even_like_numpy(f16_engine, tiny_gguf_q4):
    # the cache rows after a prefill are the reference's float32 keys/values rounded by astype
    reference = NumpyLlama(tiny_gguf_q4, max_context=48)
    prompt = PROMPTS[1]
    f16_engine.reset()
    f16_engine.prefill(prompt)
    reference.prefill(prompt)
    n = len(prompt)
    keys = f16_engine._caches[0][:, :, :n]                 # (kv, d, n)
    values = f16_engine._caches[1][:, :n, :]               # (kv, n, d)
    want_k = reference._keys[0][:, :n].transpose(0, 2, 1).astype(np.float16)
    want_v = reference._values[0][:, :n].astype(np.float16)
    # equal up to one float16 step where float32 noise straddles a rounding boundary
    for got, want in ((keys, want_k), (values, want_v)):
        steps = np.abs(got.astype(np.float32) - want.astype(np.float32)) / np.spacing(np.abs(want))
        assert steps.max() <= 1 and (got == want).mean() > 0.99


# ---------------------------------------------------------------- the fused kernel alone
KV, GROUP, D, CAPACITY = 2, 3, 16, 1300


def _attention_source(dtype: str) -> str:
    widen = "" if dtype == "float32" else '''
            keys = R.astype(keys, "float32")
            values = R.astype(values, "float32")'''
    return f'''
@R.ir_module
class Module:
    @R.function
    def main(q: R.Tensor(({KV}, {GROUP}, "n", {D}), "float32"),
             kt: R.Tensor(({KV}, {D}, {CAPACITY}), "{dtype}"),
             vt: R.Tensor(({KV}, {CAPACITY}, {D}), "{dtype}"), pos: R.Shape(["t"])):
        n = T.int64(upper={CAPACITY})
        t = T.int64(upper={CAPACITY})
        with R.dataflow():
            grouped = R.reshape(q, R.shape([{KV}, {GROUP} * n, {D}]))
            keys = R.strided_slice(kt, R.shape([2]), R.shape([0]), R.shape([t + n]), R.shape([1]))
            values = R.strided_slice(vt, R.shape([1]), R.shape([0]), R.shape([t + n]), R.shape([1])){widen}
            scores = R.multiply(R.matmul(grouped, keys), R.const(0.25, "float32"))
            scores = R.reshape(scores, R.shape([{KV}, {GROUP}, n, T.min(t + n, {CAPACITY})]))
            key_pos = R.arange(R.prim_value(0), R.prim_value(T.min(t + n, {CAPACITY})), R.prim_value(1), dtype="int64")
            query_pos = R.reshape(R.arange(R.prim_value(t), R.prim_value(t + n), R.prim_value(1), dtype="int64"),
                                  R.shape([n, 1]))
            scores = R.where(R.less_equal(key_pos, query_pos), scores, R.const(-1e30, "float32"))
            probs = R.reshape(R.nn.softmax(scores, axis=-1), R.shape([{KV}, {GROUP} * n, T.min(t + n, {CAPACITY})]))
            out = R.matmul(probs, values)
            R.output(out)
        return out
'''


@lru_cache(maxsize=None)
def _executable():
    return rx.build(rx.from_source(_attention_source("float16")), target="c")


def _compiled():
    return rx.VirtualMachine(_executable())["main"]


def _inputs(n: int, t: int, seed: int):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((KV, GROUP, n, D)).astype(np.float32)
    kt = rng.standard_normal((KV, D, CAPACITY)).astype(np.float16)
    vt = rng.standard_normal((KV, CAPACITY, D)).astype(np.float16)
    return q, kt, vt, (t,)


def _numpy(q, kt, vt, pos) -> np.ndarray:
    (t,) = pos
    n = q.shape[2]
    keys, values = kt[:, :, :t + n].astype(np.float32), vt[:, :t + n].astype(np.float32)
    scores = np.einsum("bgnd,bdm->bgnm", q, keys) * np.float32(0.25)
    allowed = np.arange(t + n)[None, :] <= (t + np.arange(n))[:, None]
    scores = np.where(allowed, scores, np.float32(-1e30))
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return np.einsum("bgnm,bmd->bgnd", e / e.sum(axis=-1, keepdims=True), values).reshape(KV, GROUP * n, D)


def test_the_float16_cache_is_read_in_place():
    mod = DeadCodeElimination()(FuseAttention()(rx.from_source(_attention_source("float16"))))
    text = mod["main"].script()
    assert "R.astype" not in text and "R.strided_slice" not in text and "softmax" not in text
    kernel = mod["fused_attention"].script()
    assert 'kt: T.Buffer((2, 16, 1300), "float16")' in kernel and 'v: T.Buffer((2, 1300, 16), "float16")' in kernel
    assert 'T.Cast("float32", kt[' in kernel and 'T.Cast("float32", v[' in kernel


# decode rows (one 512-key block per chunk, ragged last chunk/block and vector tails) and prefill
# rows (several micro tiles: the packed 32-key blocks), context lengths around every block size
LENGTHS = st.sampled_from([0, 5, KEY_BLOCK - 1, KEY_BLOCK + 3, 2 * KEY_BLOCK + 9, DIRECT_BLOCK + 1,
                           CHUNK_KEYS * 2 + 7, 1000, CAPACITY - 2])


@settings(max_examples=8, deadline=None)
@given(n=st.sampled_from([1, 2]), t=LENGTHS, seed=st.integers(0, 2**16))
def test_generated_kernel_reads_float16_like_numpy(n, t, seed):
    args = _inputs(n, min(t, CAPACITY - n), seed)
    np.testing.assert_allclose(np.asarray(_compiled()(*args)), _numpy(*args), rtol=1e-4, atol=1e-5)


@settings(max_examples=3, deadline=None)
@given(n=st.sampled_from([1, 2]), t=st.sampled_from([3, KEY_BLOCK + 1, 70]), seed=st.integers(0, 2**16))
def test_the_loop_level_interpreter_agrees(n, t, seed):
    mod = FuseAttention()(rx.from_source(_attention_source("float16")))
    q, kt, vt, pos = _inputs(n, t, seed)
    interpreted = np.asarray(rx.interpret(mod, "main", q, kt, vt, ShapeTuple(pos)))
    np.testing.assert_allclose(interpreted, _numpy(q, kt, vt, pos), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(_compiled()(q, kt, vt, pos)), interpreted, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("flag", ["-DRS_ATT_NO_F16C", "-mno-f16c"])
def test_the_portable_conversion_without_f16c(monkeypatch, flag):
    """Without F16C (or with it turned off) the kernel widens float16 with the prelude's exact
    bit conversion: the same results."""
    from backends.c import compiler
    default_library = _executable().c_library.path      # built before the flag is added
    monkeypatch.setattr(compiler, "DEFAULT_FLAGS", compiler.DEFAULT_FLAGS + (flag,))
    exe = rx.build(rx.from_source(_attention_source("float16")), target="c")
    assert exe.c_library.path != default_library     # compiled under the flag
    run = rx.VirtualMachine(exe)["main"]
    for n, t in ((1, DIRECT_BLOCK + 37), (2, 3 * KEY_BLOCK + 5), (1, 7)):
        args = _inputs(n, t, seed=n + t)
        np.testing.assert_allclose(np.asarray(run(*args)), _numpy(*args), rtol=1e-4, atol=1e-5)
    # special values widen exactly as well: subnormals, the largest half, signed zeros
    q, kt, vt, pos = _inputs(1, 40, seed=3)
    specials = np.array([6.0e-8, -6.1e-5, 65504.0, -0.0, 0.0, 1e-7], np.float16)
    vt[0, :6, 0] = specials
    np.testing.assert_allclose(np.asarray(run(q, kt, vt, pos)), _numpy(q, kt, vt, pos), rtol=1e-4, atol=1e-5)


def test_cache_kernels_are_built_once_per_signature():
    # every layer asks for the same append kernel: one parse serves all; another dtype is another kernel
    from relaxscript.llm.kv_cache import rotated_append_kernel, write_kernel
    args = (32, 3, 64, (960, 576), (960, 768))
    assert rotated_append_kernel(*args, "float16") is rotated_append_kernel(*args, "float16")
    assert rotated_append_kernel(*args, "float16") is not rotated_append_kernel(*args, "float32")
    assert write_kernel(32, 3, 64, True, "float16") is write_kernel(32, 3, 64, True, "float16")
    assert write_kernel(32, 3, 64, True, "float16") is not write_kernel(32, 3, 64, False, "float16")
