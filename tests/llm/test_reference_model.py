"""The NumPy reference Llama against a straightforward, loop-by-loop computation, and its KV cache."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relaxscript.frontend.gguf import llama_config, read_gguf
from relaxscript.llm.reference import ContextOverflowError, NumpyLlama
from tests.llm.gguf_files import random_llama_weights


def _naive_logits(config, w, ids):
    """Every token, head and rotation pair written out; rotary embedding through complex numbers."""
    c = config

    def rms(x, weight):
        return x / np.sqrt((x.astype(np.float64) ** 2).mean() + c.rms_norm_eps) * weight

    def rotate(vec, pos):
        pairs = vec[0::2] + 1j * vec[1::2]
        freqs = c.rope_theta ** (-np.arange(0, c.head_dim, 2) / c.head_dim)
        turned = pairs * np.exp(1j * pos * freqs)
        out = np.empty(c.head_dim)
        out[0::2], out[1::2] = turned.real, turned.imag
        return out

    xs = [w["token_embd.weight"][t].astype(np.float64) for t in ids]
    for layer in range(c.num_layers):
        p = f"blk.{layer}."
        keys, values, outs = [], [], []
        for pos, x in enumerate(xs):
            h = rms(x, w[p + "attn_norm.weight"])
            q = w[p + "attn_q.weight"] @ h
            k = w[p + "attn_k.weight"] @ h
            v = w[p + "attn_v.weight"] @ h
            keys.append([rotate(k[j * c.head_dim:(j + 1) * c.head_dim], pos) for j in range(c.num_kv_heads)])
            values.append([v[j * c.head_dim:(j + 1) * c.head_dim] for j in range(c.num_kv_heads)])
            heads = []
            for head in range(c.num_heads):
                kv = head // (c.num_heads // c.num_kv_heads)
                qh = rotate(q[head * c.head_dim:(head + 1) * c.head_dim], pos)
                scores = np.array([qh @ keys[s][kv] for s in range(pos + 1)]) / np.sqrt(c.head_dim)
                probs = np.exp(scores - scores.max())
                probs /= probs.sum()
                heads.append(sum(probs[s] * values[s][kv] for s in range(pos + 1)))
            x = x + w[p + "attn_output.weight"] @ np.concatenate(heads)
            h = rms(x, w[p + "ffn_norm.weight"])
            gate, up = w[p + "ffn_gate.weight"] @ h, w[p + "ffn_up.weight"] @ h
            outs.append(x + w[p + "ffn_down.weight"] @ (gate / (1 + np.exp(-gate)) * up))
        xs = outs
    head = w.get("output.weight", w["token_embd.weight"])
    return np.array([head @ rms(x, w["output_norm.weight"]) for x in xs])


@pytest.mark.parametrize("source", ["f32", "q4"])
def test_reference_equals_a_naive_computation(source, tiny_gguf_f32, tiny_gguf_q4):
    gguf_file = read_gguf(tiny_gguf_f32 if source == "f32" else tiny_gguf_q4)
    model = NumpyLlama(gguf_file)
    weights = {name: t.dequantize() for name, t in gguf_file.tensors.items()}
    ids = [1, 5, 17, 40, 3, 95, 60]
    expected = _naive_logits(model.config, weights, ids)
    np.testing.assert_allclose(model.forward(ids), expected, rtol=2e-4, atol=2e-4)
    assert model.position == len(ids)


def test_reference_from_config_and_weights_untied():
    weights = random_llama_weights(layers=1, hidden=32, heads=4, kv_heads=1, ffn=48, vocab=40, seed=7,
                                   tie_embeddings=False)
    from relaxscript.frontend.gguf import LlamaConfig
    config = LlamaConfig(vocab_size=40, hidden_size=32, intermediate_size=48, num_layers=1, num_heads=4,
                         num_kv_heads=1, head_dim=8, rope_theta=500.0, rms_norm_eps=1e-6, context_length=64,
                         tie_word_embeddings=False, bos_id=None, eos_id=None)
    model = NumpyLlama(config, weights)
    ids = [3, 9, 27, 1, 0]
    np.testing.assert_allclose(model.forward(ids), _naive_logits(config, weights, ids), rtol=2e-4, atol=2e-4)
    with pytest.raises(ValueError, match="'output.weight' has shape"):
        NumpyLlama(config, {**weights, "output.weight": weights["output.weight"][:, :16]})


@settings(max_examples=12, deadline=None)
@given(ids=st.lists(st.integers(0, 95), min_size=2, max_size=20), data=st.data())
def test_prefill_then_decode_equals_one_prefill(tiny_gguf_q4_model, ids, data):
    model = tiny_gguf_q4_model
    split = data.draw(st.integers(1, len(ids) - 1))
    model.reset()
    whole = model.prefill(ids)
    model.reset()
    model.prefill(ids[:split])
    for token in ids[split:]:
        logits = model.decode(token)
    np.testing.assert_allclose(logits, whole, rtol=1e-4, atol=1e-4)
    assert model.position == len(ids)


@pytest.fixture(scope="module")
def tiny_gguf_q4_model(tiny_gguf_q4):
    return NumpyLlama(read_gguf(tiny_gguf_q4))


def test_cache_refuses_writes_past_its_bound(tiny_gguf_q4):
    model = NumpyLlama(read_gguf(tiny_gguf_q4), max_context=8)
    model.prefill([1, 2, 3, 4, 5, 6, 7])
    model.decode(8)
    with pytest.raises(ContextOverflowError, match="position 8 would write KV cache entry 8, past its bound of 8"):
        model.decode(9)
    model.reset()
    with pytest.raises(ContextOverflowError, match="past its bound of 8"):
        model.prefill(list(range(9)))
    with pytest.raises(ValueError, match="max_context 300 must be in 1..256"):
        NumpyLlama(read_gguf(tiny_gguf_q4), max_context=300)
    with pytest.raises(ValueError, match="token id 96 is outside the vocabulary"):
        model.prefill([96])
    assert llama_config(read_gguf(tiny_gguf_q4)).context_length == 256
