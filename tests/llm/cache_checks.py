"""The cache continuation check both caches (float32, float16) must pass."""
import numpy as np

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
