"""The compiled model's embedding lookup (a gather of quantized columns) checks its token ids
itself: past the engine's own check, a token id outside the vocabulary raises from the kernel
(IndexOutOfRangeError naming it), never a read outside the table."""
import numpy as np
import pytest

from relaxscript.llm.engine import Engine
from tensorir.errors import IndexOutOfRangeError


@pytest.fixture(scope="module")
def q4_engine(tiny_gguf_q4):
    return Engine.from_gguf(tiny_gguf_q4, target="c", max_context=16)


@pytest.mark.parametrize("bad", [10 ** 6, -10 ** 6])
def test_a_token_id_outside_the_vocabulary_raises_in_the_kernel(q4_engine, bad):
    engine = q4_engine
    vocab = engine.config.vocab_size
    with pytest.raises(ValueError, match=f"token id {bad} is outside the vocabulary"):
        engine.decode(bad)   # the engine's own check
    engine.reset()
    token = np.array([bad], np.int64)
    with pytest.raises(IndexOutOfRangeError, match=f"index {bad} is out of range for an axis of size {vocab}"):
        engine._decode(token, (0,), *engine._caches, *engine._weights)
    engine.reset()
    assert np.isfinite(engine.decode(vocab - 1)).all()   # the last id is a real token
