"""Checks every KV cache format (float32, float16, q8) must pass."""
import numpy as np
import pytest

from relaxscript.llm.generation import generate
from relaxscript.llm.kv_cache import CacheOverflowError

SPLIT_TOKENS = [7, 3, 90, 12, 44, 5, 61, 2, 33, 18]


def assert_continuation_matches_one_prefill(engine, split: int, tokens=SPLIT_TOKENS,
                                            after_decode: bool = False) -> None:
    """Prefill of ``tokens[:split]`` then one decode per remaining token, and prefill of the first
    part then a second prefill of the rest (and, with ``after_decode``, a prefill after decode
    steps), all give the logits of one prefill of ``tokens``."""
    engine.reset()
    whole = engine.prefill(tokens)
    engine.reset()
    logits = engine.prefill(tokens[:split])
    for token in tokens[split:]:
        logits = engine.decode(token)
    np.testing.assert_allclose(logits, whole, rtol=1e-4, atol=1e-4)
    # a second prefill continues the cache as well (it reads the rows the first one wrote)
    engine.reset()
    engine.prefill(tokens[:split])
    np.testing.assert_allclose(engine.prefill(tokens[split:]), whole, rtol=1e-4, atol=1e-4)
    if after_decode:
        engine.reset()
        engine.prefill(tokens[:2])
        engine.decode(tokens[2])
        np.testing.assert_allclose(engine.prefill(tokens[3:]), whole, rtol=1e-4, atol=1e-4)


def assert_rounded_cache_matches_its_reference(engine, reference, exact, prompt, least_rounding: float) -> None:
    """Greedy tokens and logits of an engine with a rounded cache equal its NumPy reference
    rounding alike, while the rounding itself (against ``exact``, an unrounded reference) moves the
    logits by more than ``least_rounding`` and 10x more than the engine's difference."""
    assert engine.generate(prompt, max_new_tokens=10) == generate(reference, prompt, 10)
    for model in (reference, engine, exact):
        model.reset()
    want, got, unrounded = reference.prefill(prompt), engine.prefill(prompt), exact.prefill(prompt)
    steps = [(engine.decode(t), reference.decode(t), exact.decode(t)) for t in (4, 8, 15)]
    for engine_logits, reference_logits, _ in [(got, want, unrounded)] + steps:
        np.testing.assert_allclose(engine_logits, reference_logits, rtol=1e-4, atol=4e-4)
    rounding = max(np.abs(r - e).max() for _, r, e in steps)
    engine_error = max(np.abs(g - r).max() for g, r, _ in steps)
    assert rounding > least_rounding and engine_error < rounding / 10, (rounding, engine_error)


def assert_refuses_a_write_past_its_bound(engine, capacity: int) -> None:
    """The engine's own check names the bound; the VM's check stands behind it."""
    engine.reset()
    engine.prefill(list(range(1, capacity)))
    engine.decode(5)
    with pytest.raises(CacheOverflowError, match=f"holds {capacity} positions: {capacity} are used and 1 more"):
        engine.decode(6)
    engine.reset()
    with pytest.raises(ValueError):     # the VM's own check, past the engine's
        engine._decode(np.array([1]), (capacity,), *engine._caches, *engine._weights)
