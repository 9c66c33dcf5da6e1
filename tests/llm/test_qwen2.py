"""The ``qwen2`` architecture (Qwen2 / Qwen2.5 GGUF files from llama.cpp's converter).

It differs from ``llama`` in three ways the tests pin down: q/k/v projections add biases
(``blk.N.attn_q.bias`` ...), rotary embedding rotates the halves of a head (the converter keeps
Hugging Face's Q/K row order), and the tokenizer splits text with Qwen2's regex (pre-tokenizer
``qwen2``). The NumPy reference is checked against a float64 transcription of Hugging Face's
Qwen2 forward written here (and that check is shown to fail without the biases or with the
other rotation), the compiled engine against the reference, the qwen2 split against a
transcription of the regex's alternatives.
"""
import dataclasses
import unicodedata

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relaxscript.frontend.gguf import (ARCHITECTURES, GGUFFormatError, UnsupportedModelError, llama_config,
                                       pair_rows, read_gguf)
from relaxscript.llm.engine import Engine
from relaxscript.llm.generation import generate
from relaxscript.llm.model import with_pair_rows
from relaxscript.llm.reference import NumpyLlama, apply_rope, rope_tables
from relaxscript.llm.tokenizer import Tokenizer, default_system_message
from relaxscript.quantization.formats import dequantize_numpy
from relaxscript.quantization.gguf_convert import convert_weight
from tests.llm.cache_checks import assert_continuation_matches_one_prefill
from tests.llm.gguf_files import CORPUS, write_random_llama_gguf

PROMPTS = ([1, 2, 3], [5, 17, 33, 60, 2, 9, 11], [40], list(range(3, 60, 3)))
QWEN_THETA, QWEN_EPS = 1000000.0, 1e-6    # Qwen2's rope base and RMSNorm epsilon (read from the metadata)
# Qwen2.5-Instruct's template, abridged: a tools branch opens a system block whose content is
# the first message's, before the branch with the default message
QWEN25_TEMPLATE = (
    "{%- if tools %}\n    {{- '<|im_start|>system\\n' }}\n    {%- if messages[0]['role'] == 'system' %}\n"
    "        {{- messages[0]['content'] }}\n    {%- else %}\n"
    "        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}\n    {%- endif %}\n"
    "    {{- \"\\n\\n# Tools\\n\\n<tools>\" }}\n    {{- \"\\n</tools><|im_end|>\\n\" }}\n{%- else %}\n"
    "    {%- if messages[0]['role'] == 'system' %}\n"
    "        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n    {%- else %}\n"
    "        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant."
    "<|im_end|>\\n' }}\n    {%- endif %}\n{%- endif %}\n{%- for message in messages %}\n"
    "        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}\n"
    "{%- endfor %}\n{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n' }}\n{%- endif %}\n")
QWEN_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."


def _qwen2_file(path, **kwargs):
    options = dict(architecture="qwen2", qtypes="F32", tie_embeddings=False, rope_theta=QWEN_THETA,
                   rms_eps=QWEN_EPS, chat_template=QWEN25_TEMPLATE, seed=5)
    options.update(kwargs)
    return write_random_llama_gguf(path, **options)


@pytest.fixture(scope="module")
def qwen2_f32(tmp_path_factory):
    return _qwen2_file(tmp_path_factory.mktemp("qwen2") / "qwen2_f32.gguf")


@pytest.fixture(scope="module")
def qwen2_q4(tmp_path_factory):
    return _qwen2_file(tmp_path_factory.mktemp("qwen2") / "qwen2_q4.gguf", qtypes=("Q4_1", "Q8_0"), seed=6)


@pytest.fixture(scope="module")
def f32_engine(qwen2_f32):
    # room for the chat prompt (the Qwen system message)
    return Engine.from_gguf(qwen2_f32, weights="f32", max_context=128)


@pytest.fixture(scope="module")
def reference(qwen2_f32):
    return NumpyLlama(qwen2_f32, max_context=128)


# ------------------------------------------------------------------ an independent float64 forward
def hf_qwen2_logits(weights: dict, config, ids) -> np.ndarray:
    """Logits of every position of ``ids``, float64, written after Hugging Face's Qwen2 (no cache):
    ``q = x Wq^T + bq``, ``rotate_half`` rotary embedding (``q cos + rotate_half(q) sin`` with the
    angles repeated over both halves), key/value heads repeated for their query groups."""
    w = {name: value.astype(np.float64) for name, value in weights.items()}
    c, n = config, len(ids)
    d, half, group = c.head_dim, c.head_dim // 2, c.num_heads // c.num_kv_heads
    inv_freq = 1.0 / c.rope_theta ** (np.arange(0, d, 2) / d)
    angles = np.outer(np.arange(n), inv_freq)
    cos, sin = np.cos(np.concatenate([angles, angles], -1)), np.sin(np.concatenate([angles, angles], -1))

    def rotate_half(t):
        return np.concatenate([-t[..., half:], t[..., :half]], -1)

    def rms_norm(t, gain):
        return t / np.sqrt(np.mean(t * t, -1, keepdims=True) + c.rms_norm_eps) * gain

    x = w["token_embd.weight"][ids]
    causal = np.triu(np.full((n, n), -np.inf), 1)
    for layer in range(c.num_layers):
        p = f"blk.{layer}."
        h = rms_norm(x, w[p + "attn_norm.weight"])
        heads = {}
        for part, count in (("q", c.num_heads), ("k", c.num_kv_heads), ("v", c.num_kv_heads)):
            y = h @ w[p + f"attn_{part}.weight"].T + w[p + f"attn_{part}.bias"]
            heads[part] = y.reshape(n, count, d).transpose(1, 0, 2)          # (heads, n, d)
        q = heads["q"] * cos + rotate_half(heads["q"]) * sin
        k = heads["k"] * cos + rotate_half(heads["k"]) * sin
        k, v = np.repeat(k, group, axis=0), np.repeat(heads["v"], group, axis=0)
        scores = q @ k.transpose(0, 2, 1) / np.sqrt(d) + causal
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        attn = (probs @ v).transpose(1, 0, 2).reshape(n, c.num_heads * d)
        x = x + attn @ w[p + "attn_output.weight"].T
        h = rms_norm(x, w[p + "ffn_norm.weight"])
        gate, up = h @ w[p + "ffn_gate.weight"].T, h @ w[p + "ffn_up.weight"].T
        x = x + (gate / (1 + np.exp(-gate)) * up) @ w[p + "ffn_down.weight"].T
    head = w.get("output.weight", w["token_embd.weight"])
    return rms_norm(x, w["output_norm.weight"]) @ head.T


def test_config_comes_from_the_qwen2_keys(qwen2_f32, tmp_path):
    config = llama_config(read_gguf(qwen2_f32))
    assert (config.architecture, config.rope_style, config.qkv_bias) == ("qwen2", "halves", True)
    assert config.rope_theta == QWEN_THETA and config.rms_norm_eps == pytest.approx(QWEN_EPS)
    assert not config.tie_word_embeddings and (config.bos_id, config.eos_id) == (1, 2)
    assert ARCHITECTURES["llama"].rope_style == "pairs" and not ARCHITECTURES["llama"].qkv_bias
    tied = _qwen2_file(tmp_path / "tied.gguf", tie_embeddings=True, layers=1)
    assert llama_config(read_gguf(tied)).tie_word_embeddings
    # a qwen2 file without its biases is corrupt, not silently run without them
    no_bias = _qwen2_file(tmp_path / "nobias.gguf", layers=1, qkv_bias=False)
    with pytest.raises(GGUFFormatError, match="needs 12 layer tensors|'blk.0.attn_q.bias' is missing"):
        llama_config(read_gguf(no_bias))


def test_architectures_outside_the_table_are_named(tmp_path):
    path = write_random_llama_gguf(tmp_path / "q3.gguf", architecture="qwen3", qtypes="F32", layers=1)
    with pytest.raises(UnsupportedModelError, match=r"architecture 'qwen3' is not supported \(supported: "
                                                    r"llama, qwen2\)"):
        llama_config(read_gguf(path))


def test_reference_equals_the_hugging_face_forward(qwen2_f32):
    """The reference (float32, half rotation as written) equals the float64 transcription; the same
    comparison fails by far when the biases are dropped or the adjacent-pair rotation is used,
    so it would catch either mistake."""
    gguf_file = read_gguf(qwen2_f32)
    config = llama_config(gguf_file)
    weights = {name: t.dequantize() for name, t in gguf_file.tensors.items()}
    ids = PROMPTS[3]
    want = hf_qwen2_logits(weights, config, ids)
    got = NumpyLlama(gguf_file, max_context=48).forward(ids)
    scale = np.abs(want).max()
    assert np.abs(got - want).max() < 1e-4 * scale
    no_bias = {name: (np.zeros_like(v) if name.endswith(".bias") else v) for name, v in weights.items()}
    wrong = {"no biases": NumpyLlama(config, no_bias, max_context=48).forward(ids),
             "pair rotation": NumpyLlama(dataclasses.replace(config, rope_style="pairs"), weights,
                                         max_context=48).forward(ids)}
    for mistake, logits in wrong.items():
        assert np.abs(logits - want).max() > 0.05 * scale, mistake


def test_reordered_rows_turn_the_half_rotation_into_pairs():
    rng = np.random.default_rng(0)
    heads, d, n = 3, 8, 5
    order = pair_rows(heads * d, d)
    assert sorted(order) == list(range(heads * d))
    x = rng.standard_normal((n, heads * d)).astype(np.float32)
    cos, sin = rope_tables(np.arange(7, 7 + n), d, QWEN_THETA)
    halves = apply_rope(x.reshape(n, heads, d), cos, sin, "halves").reshape(n, -1)
    pairs = apply_rope(x[:, order].reshape(n, heads, d), cos, sin, "pairs").reshape(n, -1)
    np.testing.assert_array_equal(pairs, halves[:, order])


def test_reordering_moves_quantized_rows_exactly(qwen2_q4):
    gguf_file = read_gguf(qwen2_q4)
    config = llama_config(gguf_file)
    reordered = with_pair_rows(gguf_file, config)
    for name in ("blk.0.attn_q.weight", "blk.1.attn_k.weight", "blk.0.attn_k.bias", "blk.1.attn_q.bias"):
        before, after = gguf_file.tensor(name), reordered.tensor(name)
        assert after.qtype == before.qtype and after.shape == before.shape
        order = pair_rows(before.shape[0], config.head_dim)
        np.testing.assert_array_equal(after.dequantize(), before.dequantize()[order])
    assert reordered.tensor("blk.0.attn_v.weight") is gguf_file.tensor("blk.0.attn_v.weight")
    llama = dataclasses.replace(config, rope_style="pairs")
    assert with_pair_rows(gguf_file, llama) is gguf_file


def test_reordering_a_block_quantized_bias(tmp_path):
    # no converter writes one, but a file may: its values move (as float32), the engine still follows
    path = _qwen2_file(tmp_path / "qbias.gguf", layers=1, tensor_qtypes={"blk.0.attn_k.bias": "Q8_0"})
    gguf_file = read_gguf(path)
    config = llama_config(gguf_file)
    before = gguf_file.tensor("blk.0.attn_k.bias")
    after = with_pair_rows(gguf_file, config).tensor("blk.0.attn_k.bias")
    assert (before.qtype, after.qtype) == ("Q8_0", "F32")
    np.testing.assert_array_equal(after.dequantize(), before.dequantize()[pair_rows(32, config.head_dim)])
    engine = Engine.from_gguf(path, weights="f32", max_context=32)
    assert engine.generate(PROMPTS[1], max_new_tokens=6) == generate(NumpyLlama(path, max_context=32),
                                                                      PROMPTS[1], 6)


# ------------------------------------------------------------------ the compiled engine
@pytest.mark.parametrize("prompt", PROMPTS)
def test_greedy_f32_engine_equals_the_reference(f32_engine, reference, prompt):
    assert f32_engine.generate(prompt, max_new_tokens=10) == generate(reference, prompt, 10)
    reference.reset()
    f32_engine.reset()
    np.testing.assert_allclose(f32_engine.prefill(prompt), reference.prefill(prompt), rtol=1e-3, atol=1e-3)
    for token in (4, 8, 15):
        np.testing.assert_allclose(f32_engine.decode(token), reference.decode(token), rtol=1e-3, atol=1e-3)


def test_generation_is_not_degenerate(reference):
    # the untied random head makes varied tokens: token-for-token equality tests something
    assert len(set(generate(reference, PROMPTS[1], 10))) >= 4


@pytest.mark.parametrize("split", [1, 4, 9])
def test_prefill_then_decode_equals_one_longer_prefill(f32_engine, split):
    assert_continuation_matches_one_prefill(f32_engine, split, after_decode=True)


def test_separate_projections_carry_their_biases(qwen2_q4):
    """A layer whose q, k and v have different types keeps three projections, each with its bias
    (the merged one stacks the three)."""
    path = qwen2_q4.replace(".gguf", "_mixed.gguf")
    _qwen2_file(path, qtypes=("Q4_1", "Q8_0"), seed=6, layers=1, tensor_qtypes={"blk.0.attn_v.weight": "Q8_0"})
    engine = Engine.from_gguf(path, weights="q4", activations="f32", kv_cache="f32", max_context=48)
    names = engine.exported.param_names
    assert "layers.0.self_attn.q_proj.bias" in names and "layers.0.self_attn.v_proj.bias" in names
    reference = NumpyLlama(path, max_context=48)
    for prompt in PROMPTS[:3]:
        assert engine.generate(prompt, max_new_tokens=8) == generate(reference, prompt, 8)


def test_q4_engine_follows_the_reference(qwen2_q4):
    """Q4_1/Q8_0 blocks as they are, exact activations: the reference on the file's values."""
    engine = Engine.from_gguf(qwen2_q4, weights="q4", activations="f32", kv_cache="f32", max_context=48)
    assert "layers.0.self_attn.qkv_proj.bias" in engine.exported.param_names
    reference = NumpyLlama(qwen2_q4, max_context=48)
    for prompt in PROMPTS:
        assert engine.generate(prompt, max_new_tokens=8) == generate(reference, prompt, 8)
    engine.reset(); reference.reset()
    np.testing.assert_allclose(engine.prefill(PROMPTS[1]), reference.prefill(PROMPTS[1]), rtol=1e-3, atol=2e-3)


def test_q4_engine_defaults_stay_close(qwen2_q4):
    """The q4 defaults (8-bit activations, float16 cache) follow the reference with the same
    rounding and stay close to the exact one."""
    engine = Engine.from_gguf(qwen2_q4, weights="q4", max_context=48)
    assert engine.activations == "q8" and engine.kv_cache == "f16"
    rounded = NumpyLlama(qwen2_q4, max_context=48, activations="q8", kv_cache="f16")
    exact = NumpyLlama(qwen2_q4, max_context=48)
    for prompt in PROMPTS[:3]:
        assert engine.generate(prompt, max_new_tokens=6) == generate(rounded, prompt, 6)
    engine.reset(); exact.reset()
    got, want = engine.prefill(PROMPTS[1]), exact.prefill(PROMPTS[1])
    assert np.abs(got - want).max() < 3e-2 * np.abs(want).max()


def test_k_quant_engine_computes_the_converted_weights(tmp_path):
    """Q4_K q/k (repacked to q4_1 after their rows are reordered), Q6_K v and output (requantized):
    the engine equals the reference on the converted weights, in the file's own row order."""
    kinds = {"blk.0.attn_q.weight": "Q4_K", "blk.0.attn_k.weight": "Q4_K", "blk.0.attn_v.weight": "Q6_K",
             "output.weight": "Q6_K", "blk.0.ffn_down.weight": "Q5_K"}
    path = _qwen2_file(tmp_path / "k.gguf", hidden=256, heads=4, kv_heads=2, ffn=256, layers=1,
                       tensor_qtypes=kinds, seed=7)
    engine = Engine.from_gguf(path, weights="q4", activations="f32", kv_cache="f32", max_context=40)
    conversions = engine.weight_conversions
    assert conversions["blk.0.attn_q.weight"].method == "repacked"
    gguf_file = read_gguf(path)
    weights = {name: t.dequantize() for name, t in gguf_file.tensors.items()}
    for name in conversions:
        tensor = gguf_file.tensor(name)
        again = convert_weight(tensor.qtype, tensor.raw, tensor.shape, "float16")
        weights[name] = dequantize_numpy(*again.arrays, format=again.format).T
    reference = NumpyLlama(llama_config(gguf_file), weights, max_context=40)
    for prompt in PROMPTS[:3]:
        assert engine.generate(prompt, max_new_tokens=8) == generate(reference, prompt, 8)
    engine.reset(); reference.reset()
    np.testing.assert_allclose(engine.prefill(PROMPTS[1]), reference.prefill(PROMPTS[1]), rtol=1e-3, atol=2e-3)


def test_chat_uses_the_qwen_template(f32_engine):
    prompt = f32_engine.chat_prompt("hello there")
    text = (f"<|im_start|>system\n{QWEN_SYSTEM}<|im_end|>\n<|im_start|>user\nhello there<|im_end|>\n"
            "<|im_start|>assistant\n")
    assert f32_engine.tokenizer.apply_chat_template([{"role": "user", "content": "hello there"}]) == text
    assert prompt == f32_engine.tokenizer.encode(text, add_bos=False)
    answer = f32_engine.chat("hello there", max_new_tokens=5)
    assert answer == "".join(f32_engine.chat_stream("hello there", max_new_tokens=5))
    assert f32_engine.last_stats.prompt_tokens == len(prompt)


# ------------------------------------------------------------------ the qwen2 pre-tokenizer
_WHITE_SPACE = set("\t\n\x0b\x0c\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000") | \
    {chr(c) for c in range(0x2000, 0x200B)}     # Unicode's White_Space property (regex \s)


def _letter(ch):
    return unicodedata.category(ch).startswith("L")


def _number(ch):
    return unicodedata.category(ch).startswith("N")


def _space(ch):
    return ch in _WHITE_SPACE


def qwen2_split(text: str) -> list[str]:
    """Qwen2's split regex transcribed branch by branch (leftmost, first branch that matches,
    each branch as the regex engine backtracks it):
    ``(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*
    |\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+``."""
    pieces, i, n = [], 0, len(text)

    def run(j, accept):
        while j < n and accept(text[j]):
            j += 1
        return j

    def other(ch):
        return not (_space(ch) or _letter(ch) or _number(ch))

    while i < n:
        ch = text[i]
        end = None
        if ch == "'":
            for suffix in ("s", "t", "re", "ve", "m", "ll", "d"):
                if text[i + 1:i + 1 + len(suffix)].lower() == suffix:
                    end = i + 1 + len(suffix)
                    break
        if end is None and ch not in "\r\n" and not _letter(ch) and not _number(ch) \
                and i + 1 < n and _letter(text[i + 1]):
            end = run(i + 1, _letter)
        if end is None and _letter(ch):
            end = run(i, _letter)
        if end is None and _number(ch):
            end = i + 1
        if end is None:
            start = i + 1 if ch == " " and i + 1 < n and other(text[i + 1]) else i
            if other(text[start]):
                end = run(run(start, other), lambda c: c in "\r\n")
        if end is None and _space(ch):
            spaces = run(i, _space)
            newlines = [j for j in range(i, spaces) if text[j] in "\r\n"]
            if newlines:
                end = newlines[-1] + 1
            elif spaces == n or spaces - 1 == i:
                end = spaces
            else:
                end = spaces - 1          # leave the last space to the next word
        pieces.append(text[i:end])
        i = end
    return pieces


TRICKY = ["Hello world! 12345", "I'm sure you'll see THEY'RE done, we'D go", "don't  DON'T 'x",
          "3.14159 and 1,000,000 items", "日本語のテキストと中文，还有 한국어!", "tabs\tand\n\nnewlines\r\n  end  ",
          "   leading spaces and trailing   ", "a\n\n\n  b", "email@example.com (#1) -> [ok]...!!!\n",
          "x²+y³=z½ ٣٤ Ⅻ", "emoji 🙂🙂 mixed🙂text", "new\nline\n \n", " 'll'll", "...\n\n...", "   \n",
          "Hello\u3000world\u00a0here", "can't\r\nstop"]


@pytest.fixture(scope="module")
def qwen_tokenizer(qwen2_f32):
    return Tokenizer.from_gguf(qwen2_f32)


def _pre_split(tokenizer, text):
    return [text[a:b] for _, (a, b) in tokenizer.backend.pre_tokenizer.pre_tokenize_str(text)]


@pytest.mark.parametrize("text", TRICKY)
def test_qwen2_split_matches_the_regex(qwen_tokenizer, text):
    assert "".join(qwen2_split(text)) == text
    assert _pre_split(qwen_tokenizer, text) == qwen2_split(text)


def test_qwen2_split_differs_from_the_llama_ones(qwen_tokenizer):
    # one digit per piece (GPT-2's regex keeps runs), a space stays with the letters after it
    assert _pre_split(qwen_tokenizer, "in 1990 ok") == ["in", " ", "1", "9", "9", "0", " ok"]
    assert _pre_split(qwen_tokenizer, "HE'S\n\n  x") == ["HE", "'S", "\n\n", " ", " x"]


_ALPHABET = list("aZé日 \t\n\r'sStTrRdDlLvVmM019٣½.,!?-_#🙂\u3000\u00a0") + ["'ll", "'re", "'VE"]


@settings(max_examples=150, deadline=None)
@given(parts=st.lists(st.sampled_from(_ALPHABET), max_size=24))
def test_qwen2_split_matches_the_regex_on_random_text(qwen_tokenizer, parts):
    text = "".join(parts)
    assert _pre_split(qwen_tokenizer, text) == qwen2_split(text)


@settings(max_examples=40, deadline=None)
@given(text=st.text(alphabet=sorted(set(CORPUS)), max_size=40))
def test_qwen2_tokenizer_round_trips(qwen_tokenizer, text):
    # the tiny vocabulary holds the corpus's characters only
    assert qwen_tokenizer.decode(qwen_tokenizer.encode(text)) == text


def test_qwen2_tokenizer_splits_digits(qwen_tokenizer):
    assert qwen_tokenizer.encode("the 42") == qwen_tokenizer.encode("the") + qwen_tokenizer.encode(" ") + \
        qwen_tokenizer.encode("4") + qwen_tokenizer.encode("2")


def test_default_system_message_of_qwen_templates():
    assert default_system_message(QWEN25_TEMPLATE) == QWEN_SYSTEM
    qwen2 = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
             "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}"
             "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
             "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
    assert default_system_message(qwen2) == "You are a helpful assistant."
    # only a system block built from the first message's content: no default message
    own = "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    assert default_system_message(own) is None
    assert default_system_message("<|im_start|>system\nIt's \\'quoted\\'<|im_end|>") == "It's \\'quoted\\'"
