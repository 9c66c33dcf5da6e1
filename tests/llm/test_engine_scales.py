"""Engine block scales (``Engine.from_gguf(scales=...)``): float16 as the file stores them (the q4
default) or widened to float32 at load. Widening is exact, so both engines compute with the same
weight values and the same kernel arithmetic: identical logits, the same tokens as the reference."""
import numpy as np
import pytest

from relaxscript.llm.engine import Engine
from relaxscript.llm.generation import generate
from relaxscript.llm.reference import NumpyLlama

PROMPTS = ([1, 2, 3], [5, 17, 33, 60, 2, 9, 11], list(range(3, 60, 3)))


@pytest.fixture(scope="module")
def engines(tiny_gguf_q4):
    return {scales: Engine.from_gguf(tiny_gguf_q4, target="c", weights="q4", max_context=48, scales=scales)
            for scales in (None, "f32")}


def test_q4_weights_default_to_float16_scales(engines):
    default, widened = engines[None], engines["f32"]
    assert default.scales == "f16" and widened.scales == "f32"
    names = default.exported.param_names
    scale_names = [n for n in names if n.rsplit(".", 1)[-1] in ("scale", "min")]
    assert scale_names
    assert all(default._weights[names.index(n)].dtype == np.float16 for n in scale_names)
    assert all(widened._weights[names.index(n)].dtype == np.float32 for n in scale_names)
    # every quantized product (layers, embedding gather aside, LM head; decode and prefill) still
    # runs a generated kernel, now reading float16 scales: as many as with float32 scales
    f16, f32 = default.executable.c_library.source, widened.executable.c_library.source
    for kind in (" gemv ", " gemm n x "):
        count = f32.count(kind)
        assert count > 0 and f16.count(kind) == count, kind
    assert f16.count("float16 scales */") == f16.count(" gemv ") + f16.count(" gemm n x ")
    assert "float16 scales */" not in f32


@pytest.mark.parametrize("prompt", PROMPTS)
def test_float16_scales_give_the_same_logits_and_tokens(engines, tiny_gguf_q4, prompt):
    default, widened = engines[None], engines["f32"]
    for engine in (default, widened):
        engine.reset()
    np.testing.assert_array_equal(default.prefill(prompt), widened.prefill(prompt))
    for token in (4, 8, 15):
        np.testing.assert_array_equal(default.decode(token), widened.decode(token))
    reference = NumpyLlama(tiny_gguf_q4, max_context=48, activations="q8", kv_cache="f16")
    assert default.generate(prompt, max_new_tokens=8) == generate(reference, prompt, 8)


def test_unknown_scales_option(tiny_gguf_q4):
    with pytest.raises(ValueError, match="scales must be one of"):
        Engine.from_gguf(tiny_gguf_q4, weights="q4", scales="bf16")
