"""Decode at long contexts: the fused attention's key chunks (flash-decoding past 64 keys), register
tiles and vector softmax in a whole engine, against the NumPy reference with the same float16 cache.

The tiny models of the other tests stop at 48 positions (one chunk); this one has SmolLM2's head
shape (head dim 64, 3 query heads per kv head) and room for 1100.
"""
from __future__ import annotations

import numpy as np
import pytest

from relaxscript.llm.engine import Engine
from relaxscript.llm.reference import NumpyLlama
from tests.llm.gguf_files import write_random_llama_gguf

CONTEXT = 1100


@pytest.fixture(scope="module")
def long_gguf(tmp_path_factory):
    path = tmp_path_factory.mktemp("long") / "long.gguf"
    write_random_llama_gguf(path, layers=2, hidden=384, heads=6, kv_heads=2, ffn=256, vocab=96,
                            context_length=CONTEXT)
    return str(path)


@pytest.fixture(scope="module")
def engine(long_gguf):
    # float32 weights: the cache's float16 rounding, which the reference repeats, is the only rounding
    return Engine.from_gguf(long_gguf, target="c", weights="f32", max_context=CONTEXT, kv_cache="f16")


@pytest.fixture(scope="module")
def q8_engine(long_gguf):
    return Engine.from_gguf(long_gguf, target="c", weights="f32", max_context=CONTEXT, kv_cache="q8")


@pytest.mark.parametrize("cache", ["f16", "q8"])
@pytest.mark.parametrize("context", [16, 256, 1024])
def test_decode_logits_at_long_contexts_match_the_reference(engine, q8_engine, long_gguf, context, cache):
    """Either cache (float16; q8: int8 codes widened by the decode tiles, scales applied to the scores
    and weights) against the reference that rounds its rows the same way."""
    ids = list(np.random.default_rng(context).integers(0, 96, context + 3))
    reference = NumpyLlama(long_gguf, max_context=CONTEXT, kv_cache=cache)
    engine = engine if cache == "f16" else q8_engine
    engine.reset()

    def close(got, want, what):
        # as test_kv_cache_f16's 4e-4, relative to this model's logits (up to ~300: wide random
        # layers): float32 summation order can put one cached element on the other side of a
        # float16 rounding boundary (main's kernel differs from the reference by ~5e-4 here too)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-5 * np.abs(want).max(), err_msg=what)
    close(engine.prefill(ids[:context]), reference.prefill(ids[:context]), f"prefill {context}")
    for token in ids[context:]:
        close(engine.decode(int(token)), reference.decode(int(token)), f"decode at {context}")
