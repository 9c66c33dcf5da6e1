"""The 8-bit KV cache (``Engine.from_gguf(kv_cache="q8")``): int8 codes with one float32 scale per
(position, kv head), keys after rotation.

The compiled model equals the NumPy reference with the same rounding (``NumpyLlama(kv_cache="q8")``,
``kv_cache.quantize_rows_numpy``) token for token, and that rounding is what separates it from the
float32 cache; prefill followed by decode (and a second prefill) equals one longer prefill; the
cache still refuses writes past its bound; the rows written are the reference's codes and scales;
the memory report counts the codes and the scales.
"""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import relaxscript as rx
from relaxscript import nn
from relaxscript.llm import kv_cache
from relaxscript.llm.engine import Engine
from relaxscript.llm.kv_cache import quantize_rows_codes, quantize_rows_numpy
from relaxscript.llm.reference import NumpyLlama, apply_rope, rope_tables
from tests.llm.cache_checks import (assert_continuation_matches_one_prefill, assert_refuses_a_write_past_its_bound,
                                   assert_rounded_cache_matches_its_reference)

PROMPTS = ([1, 2, 3], [5, 17, 33, 60, 2, 9, 11], list(range(3, 60, 3)))


@pytest.fixture(scope="module")
def q8_engine(tiny_gguf_q4):
    # float32 weights: the cache's rounding is the only difference from the exact path
    return Engine.from_gguf(tiny_gguf_q4, target="c", weights="f32", max_context=48, kv_cache="q8")


@pytest.fixture(scope="module")
def q8_reference(tiny_gguf_q4):
    return NumpyLlama(tiny_gguf_q4, max_context=48, kv_cache="q8")


def test_the_caches_are_int8_codes_and_float32_scales(q8_engine):
    assert q8_engine.kv_cache == "q8"
    config = q8_engine.config
    assert len(q8_engine._caches) == 4 * config.num_layers
    assert [c.dtype for c in q8_engine._caches[:4]] == [np.int8, np.int8, np.float32, np.float32]
    decode = q8_engine.exported.mod["decode"]
    caches = [p for p in decode.params if p.name_hint.startswith("cache_")]
    assert [p.struct_info.dtype for p in caches[:4]] == ["int8", "int8", "float32", "float32"]
    source = q8_engine.executable.c_library.source
    assert source.count("int8 keys, int8 values */") == 2    # prefill's and decode's kernels


@pytest.mark.parametrize("prompt", PROMPTS)
def test_greedy_q8_cache_equals_the_reference_with_the_same_rounding(q8_engine, q8_reference, tiny_gguf_q4,
                                                                     prompt):
    # the 8-bit rounding moves the logits far more than the engine differs from its reference
    assert_rounded_cache_matches_its_reference(q8_engine, q8_reference, NumpyLlama(tiny_gguf_q4, max_context=48), prompt,
                                               least_rounding=1e-3)


@pytest.mark.parametrize("split", [1, 4, 9])
def test_prefill_then_decode_equals_one_longer_prefill(q8_engine, split):
    # each row is quantized on its own: the same codes and scales are written either way
    assert_continuation_matches_one_prefill(q8_engine, split, after_decode=True)


def test_the_q8_cache_refuses_a_write_past_its_bound(q8_engine):
    assert_refuses_a_write_past_its_bound(q8_engine, 48)


def test_the_memory_report_counts_codes_and_scales(q8_engine):
    config = q8_engine.config
    per_layer = 2 * config.num_kv_heads * 48 * (config.head_dim + 4)    # int8 codes + a float32 scale a row
    assert q8_engine.kv_cache_bytes() == sum(c.nbytes for c in q8_engine._caches) == config.num_layers * per_layer


def test_written_rows_are_the_reference_codes_and_scales(q8_engine, tiny_gguf_q4):
    reference = NumpyLlama(tiny_gguf_q4, max_context=48)    # float32 rows, rounded here
    prompt = PROMPTS[2]
    q8_engine.reset()
    q8_engine.prefill(prompt)
    reference.prefill(prompt)
    n = len(prompt)
    for layer in (0,):    # the first layer's keys and values do not depend on the cache's rounding
        codes_k, codes_v, scale_k, scale_v = q8_engine._caches[4 * layer: 4 * layer + 4]
        want_k, want_ks = quantize_rows_codes(reference._keys[layer][:, :n])      # (kv, n, d), (kv, n, 1)
        want_v, want_vs = quantize_rows_codes(reference._values[layer][:, :n])
        got = [(codes_k[:, :, :n].transpose(0, 2, 1), want_k), (codes_v[:, :n], want_v)]
        # the reference's float32 keys and values differ from the engine's by summation order: equal
        # codes up to one step where that noise straddles a rounding boundary, scales within ulps
        for codes, want in got:
            steps = np.abs(codes.astype(np.int32) - want.astype(np.int32))
            assert steps.max() <= 1 and (steps == 0).mean() > 0.99 and np.abs(codes).max() == 127
        np.testing.assert_allclose(scale_k[:, 0, :n], want_ks[:, :, 0], rtol=1e-5)
        np.testing.assert_allclose(scale_v[:, :n], want_vs, rtol=1e-5)


def test_quantize_rows_numpy():
    x = np.array([[0.0, 0.0, 0.0], [1.0, -0.5, 0.25], [-3.0, 1.0, 1.5]], np.float32)
    q = quantize_rows_numpy(x)
    assert (q[0] == 0).all()
    np.testing.assert_allclose(q[1], [1.0, -64 / 127, 32 / 127], rtol=1e-6)    # 63.5 rounds to even 64
    np.testing.assert_allclose(q[2], np.array([-127, 42, 64]) * 3 / 127, rtol=1e-6)   # 42.33, 63.5 -> 64
    assert q.dtype == np.float32


def test_option_values_are_checked(tiny_gguf_q4):
    with pytest.raises(ValueError, match="kv_cache must be one of 'f16', 'f32', 'q8', got 'q4'"):
        Engine.from_gguf(tiny_gguf_q4, weights="f32", kv_cache="q4")
    with pytest.raises(ValueError, match="an int8 .q8. cache is written by append_rotated"):
        kv_cache.write_kernel and kv_cache._append(_FakeCache(), None, 0, keys=True)
    caches = kv_cache.allocate_caches(2, 8, 1, 4, "int8")
    assert [c.shape for c in caches[:4]] == [(1, 4, 8), (1, 8, 4), (1, 1, 8), (1, 8, 1)]
    assert len(caches) == 8 and not any(np.shares_memory(a, b) for i, a in enumerate(caches) for b in caches[i + 1:])


class _FakeCache:
    class struct_info:
        dtype = "int8"


# ---------------------------------------------------------------- the append kernel alone
KV, D, CAP = 2, 8, 12


class _Append(nn.Module):
    def forward(self, cache_k, cache_v, scale_k, scale_v, src, cos, sin, pos):
        (t,) = pos.struct_info.values
        out = kv_cache.append_rotated(cache_k, cache_v, src, 0, src, KV * D, cos, sin, t, (scale_k, scale_v))
        return nn.emit(rx.op.sum(rx.op.add(rx.op.sum(out[2]), rx.op.sum(out[3]))), "total")


_APPEND = {}


def _append_module():
    shapes = kv_cache.cache_shapes(CAP, KV, D, "int8")
    spec = nn.ExportSpec(methods={"forward": {
        **{name: nn.Tensor(shape, dtype) for name, (shape, dtype) in zip(("cache_k", "cache_v", "scale_k", "scale_v"),
                                                                        shapes)},
        "src": nn.Tensor(("n", 2 * KV * D), "float32"), "cos": nn.Tensor(("n", D // 2), "float32"),
        "sin": nn.Tensor(("n", D // 2), "float32"), "pos": nn.Shape(["t"])}}, dims={"n": CAP, "t": CAP})
    return nn.export(_Append(), spec).mod


@pytest.mark.parametrize("target", ["reference", "c"])
@settings(max_examples=8, deadline=None)
@given(n=st.integers(1, 5), t=st.integers(0, CAP), seed=st.integers(0, 2**16), zero_row=st.booleans())
def test_q8_append_equals_numpy(target, n, t, seed, zero_row):
    """Codes and scales of the new rows as ``quantize_rows_codes`` computes them (an all-zero row:
    codes 0, scale 0); rows past the capacity and every other position are left as they were."""
    rng = np.random.default_rng(seed)
    caches = [rng.integers(-127, 128, kv_cache.key_shape(CAP, KV, D)).astype(np.int8),
              rng.integers(-127, 128, kv_cache.value_shape(CAP, KV, D)).astype(np.int8),
              rng.uniform(0.1, 1, kv_cache.key_scale_shape(CAP, KV, D)).astype(np.float32),
              rng.uniform(0.1, 1, kv_cache.value_scale_shape(CAP, KV, D)).astype(np.float32)]
    src = (rng.standard_normal((n, 2 * KV * D)) * rng.uniform(0.01, 100)).astype(np.float32)
    if zero_row:
        src[0] = 0
    cos, sin = rope_tables(np.arange(t, t + n), D, 10000.0)
    keys = apply_rope(src[:, :KV * D].reshape(n, KV, D), cos, sin)        # (n, kv, d)
    values = src[:, KV * D:].reshape(n, KV, D)
    want = [c.copy() for c in caches]
    rows = max(0, min(n, CAP - t))            # rows past the capacity are never written
    (kc, ks), (vc, vs) = quantize_rows_codes(keys[:rows]), quantize_rows_codes(values[:rows])
    want[0][:, :, t:t + rows] = kc.transpose(1, 2, 0)
    want[1][:, t:t + rows, :] = vc.transpose(1, 0, 2)
    want[2][:, 0, t:t + rows] = ks[:, :, 0].T
    want[3][:, t:t + rows, 0] = vs[:, :, 0].T
    if target == "reference":
        rx.interpret(_append_module(), "forward", *caches, src, cos, sin, (t,))
    else:
        if "c" not in _APPEND:
            _APPEND["c"] = rx.VirtualMachine(rx.build(_append_module(), target="c"))["forward"]
        _APPEND["c"](*caches, src, cos, sin, (t,))
    # the rotation's float32 rounding (an FMA in C) may move a key across a code's rounding boundary
    assert np.abs(caches[0].astype(np.int32) - want[0]).max() <= 1
    np.testing.assert_array_equal(caches[1], want[1])
    np.testing.assert_allclose(caches[2], want[2], rtol=1e-6)
    np.testing.assert_array_equal(caches[3], want[3])
