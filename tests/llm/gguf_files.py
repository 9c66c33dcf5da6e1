"""Small GGUF files written by the tests: a random Llama-family model (llama, qwen2) with a tiny
byte-level BPE tokenizer.

The files are written with the ``gguf`` package's writer (an independent
implementation of the format), so the project's reader is checked against it.
"""
from __future__ import annotations

import collections
import os

import numpy as np
import pytest

gguf = pytest.importorskip("gguf", reason="the gguf package writes the test model files (extra 'llm')")

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
BOS_ID, EOS_ID = 1, 2
# ChatML, like SmolLM2's template (a default system message when the first message is not one)
CHAT_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a tiny test model.<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
# the text the tiny tokenizer's merges are learned from; its characters are the base vocabulary
CORPUS = ("the quick brown fox jumps over the lazy dog. hello there, this is a tiny test model! "
          "what is the answer? it is 42 or 7 or 1990. THE END\nsee you\n")
# byte offsets of the float16 fields (scales, mins) of a block: the values are linear in them
# together, so scaling them scales the tensor; every other byte of a block may be anything
SCALE_FIELDS = {"Q4_0": (0,), "Q4_1": (0, 2), "Q5_0": (0,), "Q5_1": (0, 2), "Q8_0": (0,),
                "Q2_K": (80, 82), "Q3_K": (108,), "Q4_K": (0, 2), "Q5_K": (0, 2), "Q6_K": (208,),
                "IQ2_XXS": (0,), "IQ2_XS": (0,), "IQ2_S": (0,), "IQ3_XXS": (0,), "IQ3_S": (0,),
                "IQ1_S": (0,), "IQ4_NL": (0,), "IQ4_XS": (0,), "TQ1_0": (52,), "TQ2_0": (64,)}


def random_blocks(qtype: str, rows: int, cols: int, rng, std: float | None = None) -> np.ndarray:
    """Random ``(rows, cols)`` weights of ggml type ``qtype`` as raw blocks ``(rows, bytes per row)``:
    random bytes with finite float16 fields (random sign, magnitude within a factor 2), scaled so
    the values' standard deviation is ``std`` (default: 1/sqrt(cols), a linear layer's)."""
    gtype = gguf.GGMLQuantizationType[qtype]
    block, nbytes = gguf.GGML_QUANT_SIZES[gtype]
    raw = rng.integers(0, 256, (rows, cols // block, nbytes), dtype=np.uint8)
    fields = SCALE_FIELDS.get(qtype, ())
    units = rng.choice([-1.0, 1.0], (len(fields), rows, cols // block)) * rng.uniform(0.5, 1.0, (len(fields), rows, cols // block))

    def put(factor):
        for field, unit in zip(fields, units):
            raw[:, :, field:field + 2] = (unit * factor).astype("<f2").view(np.uint8).reshape(rows, -1, 2)

    put(1.0)
    values = gguf.quants.dequantize(raw.reshape(rows, -1), gtype)
    if fields:
        put((std or 1.0 / np.sqrt(cols)) / max(float(values.std()), 1e-30))
    return raw.reshape(rows, -1)


def _encode(value: np.ndarray, qtype: str, rng) -> np.ndarray:
    """``value`` in ``qtype``: gguf's quantizer where it has one, else random blocks of the same
    shape and standard deviation (gguf 0.19 does not quantize the K-quants)."""
    gtype = gguf.GGMLQuantizationType[qtype]
    try:
        return gguf.quants.quantize(value, gtype)
    except NotImplementedError:
        return random_blocks(qtype, value.shape[0], value.shape[1], rng, float(value.std()))


def _byte_to_unicode() -> dict[int, str]:
    """GPT-2's byte-level alphabet: printable bytes map to themselves, the rest above U+0100."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    mapping, extra = {}, 0
    for byte in range(256):
        if byte in printable:
            mapping[byte] = chr(byte)
        else:
            mapping[byte] = chr(256 + extra)
            extra += 1
    return mapping


def tiny_bpe(vocab: int) -> tuple[list[str], list[str]]:
    """Tokens and merges of a byte-level BPE with ``vocab`` tokens learned from ``CORPUS``.

    The base tokens are the corpus's characters (so only text made of them
    encodes); the merges are the most frequent adjacent pairs within words.
    """
    to_unicode = _byte_to_unicode()
    words = []
    for index, piece in enumerate(CORPUS.replace("\n", " \n ").split(" ")):
        text = piece if index == 0 or piece == "\n" else " " + piece
        words.append([to_unicode[b] for b in text.encode()])
    tokens = list(SPECIAL_TOKENS) + sorted({ch for word in words for ch in word})
    if len(tokens) > vocab:
        raise ValueError(f"vocab {vocab} is smaller than the {len(tokens)} base tokens")
    merges = []
    while len(tokens) < vocab:
        pairs = collections.Counter((a, b) for word in words for a, b in zip(word, word[1:]))
        if not pairs:
            tokens.append(f"<unused{len(tokens)}>")   # padding the corpus cannot produce
            continue
        (left, right), _ = max(pairs.items(), key=lambda item: (item[1], item[0]))
        merges.append(f"{left} {right}")
        tokens.append(left + right)
        merged_words = []
        for word in words:
            out, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and word[i] == left and word[i + 1] == right:
                    out.append(left + right)
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            merged_words.append(out)
        words = merged_words
    return tokens, merges


def random_llama_weights(*, layers: int, hidden: int, heads: int, kv_heads: int, ffn: int, vocab: int,
                         seed: int, tie_embeddings: bool = True, qkv_bias: bool = False,
                         bias_std: float = 0.5) -> dict[str, np.ndarray]:
    """float32 weights under llama.cpp's tensor names, scaled so activations stay near 1;
    ``qkv_bias`` adds ``attn_q/k/v.bias`` (std ``bias_std``, drawn from their own generator so
    the other weights of a seed stay the same)."""
    rng = np.random.default_rng(seed)
    head_dim = hidden // heads

    def dense(rows, cols):
        return (rng.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float32)

    def norm():
        return (1.0 + 0.1 * rng.standard_normal(hidden)).astype(np.float32)

    weights = {"token_embd.weight": rng.standard_normal((vocab, hidden)).astype(np.float32),
               "output_norm.weight": norm()}
    if not tie_embeddings:
        weights["output.weight"] = dense(vocab, hidden)
    for i in range(layers):
        weights.update({
            f"blk.{i}.attn_norm.weight": norm(), f"blk.{i}.attn_q.weight": dense(heads * head_dim, hidden),
            f"blk.{i}.attn_k.weight": dense(kv_heads * head_dim, hidden),
            f"blk.{i}.attn_v.weight": dense(kv_heads * head_dim, hidden),
            f"blk.{i}.attn_output.weight": dense(hidden, heads * head_dim), f"blk.{i}.ffn_norm.weight": norm(),
            f"blk.{i}.ffn_gate.weight": dense(ffn, hidden), f"blk.{i}.ffn_up.weight": dense(ffn, hidden),
            f"blk.{i}.ffn_down.weight": dense(hidden, ffn)})
    if qkv_bias:
        bias_rng = np.random.default_rng(seed + 2000)
        for i in range(layers):
            for part, rows in (("attn_q", heads), ("attn_k", kv_heads), ("attn_v", kv_heads)):
                weights[f"blk.{i}.{part}.bias"] = (bias_std * bias_rng.standard_normal(rows * head_dim)
                                                   ).astype(np.float32)
    return weights


def write_random_llama_gguf(path: str | os.PathLike, *, layers: int = 2, hidden: int = 64, heads: int = 4,
                            kv_heads: int = 2, ffn: int = 128, vocab: int = 96,
                            qtypes: tuple[str, str] | str = ("Q4_1", "Q8_0"), seed: int = 0,
                            context_length: int = 256, rope_theta: float = 10000.0,
                            tie_embeddings: bool = True, architecture: str = "llama",
                            tensor_qtypes: dict[str, str] | None = None, qkv_bias: bool | None = None,
                            pre: str | None = None, chat_template: str = CHAT_TEMPLATE,
                            rms_eps: float = 1e-5) -> str:
    """Write a random Llama model with a tiny tokenizer to ``path``; returns the path.

    ``qtypes`` is ``(projections, token embedding)`` or one type for both;
    ``tensor_qtypes`` overrides the type of named tensors (any ggml type: those
    gguf cannot quantize are random blocks, ``random_blocks``); norm weights are
    F32 unless named there. ``architecture`` other than "llama" writes
    the same tensors under another name (for the unsupported-architecture error);
    ``qkv_bias`` (default: with "qwen2") adds q/k/v biases; ``pre`` is the
    pre-tokenizer's name (default: "qwen2" for qwen2, else "smollm").
    """
    if qkv_bias is None:
        qkv_bias = architecture == "qwen2"
    if pre is None:
        pre = "qwen2" if architecture == "qwen2" else "smollm"
    proj_type, embd_type = (qtypes, qtypes) if isinstance(qtypes, str) else qtypes
    weights = random_llama_weights(layers=layers, hidden=hidden, heads=heads, kv_heads=kv_heads, ffn=ffn,
                                   vocab=vocab, seed=seed, tie_embeddings=tie_embeddings, qkv_bias=qkv_bias)
    tokens, merges = tiny_bpe(vocab)
    path = os.fspath(path)
    writer = gguf.GGUFWriter(path, architecture)
    writer.add_name("random test llama")
    writer.add_block_count(layers)
    writer.add_context_length(context_length)
    writer.add_embedding_length(hidden)
    writer.add_feed_forward_length(ffn)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_rope_freq_base(rope_theta)
    writer.add_layer_norm_rms_eps(rms_eps)
    writer.add_rope_dimension_count(hidden // heads)
    writer.add_vocab_size(vocab)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(pre)
    writer.add_token_list(tokens)
    writer.add_token_types([gguf.TokenType.CONTROL if t in SPECIAL_TOKENS else gguf.TokenType.NORMAL
                            for t in tokens])
    writer.add_token_merges(merges)
    writer.add_bos_token_id(BOS_ID)
    writer.add_eos_token_id(EOS_ID)
    writer.add_chat_template(chat_template)
    rng = np.random.default_rng(seed + 1000)
    for name, value in weights.items():
        qtype = "F32" if value.ndim == 1 else embd_type if name == "token_embd.weight" else proj_type
        qtype = (tensor_qtypes or {}).get(name, qtype)
        if qtype == "F32":
            writer.add_tensor(name, value)
        else:
            gtype = gguf.GGMLQuantizationType[qtype]
            writer.add_tensor(name, _encode(value, qtype, rng), raw_dtype=gtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
