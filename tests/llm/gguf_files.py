"""Small GGUF files written by the tests: a random Llama model with a tiny byte-level BPE tokenizer.

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
_QTYPES = {"F32": gguf.GGMLQuantizationType.F32, "F16": gguf.GGMLQuantizationType.F16,
           "Q8_0": gguf.GGMLQuantizationType.Q8_0, "Q4_1": gguf.GGMLQuantizationType.Q4_1,
           "Q4_0": gguf.GGMLQuantizationType.Q4_0}


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
                         seed: int, tie_embeddings: bool = True) -> dict[str, np.ndarray]:
    """float32 weights under llama.cpp's tensor names, scaled so activations stay near 1."""
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
    return weights


def write_random_llama_gguf(path: str | os.PathLike, *, layers: int = 2, hidden: int = 64, heads: int = 4,
                            kv_heads: int = 2, ffn: int = 128, vocab: int = 96,
                            qtypes: tuple[str, str] | str = ("Q4_1", "Q8_0"), seed: int = 0,
                            context_length: int = 256, rope_theta: float = 10000.0,
                            tie_embeddings: bool = True, architecture: str = "llama") -> str:
    """Write a random Llama model with a tiny tokenizer to ``path``; returns the path.

    ``qtypes`` is ``(projections, token embedding)`` or one type for both;
    norm weights are always F32. ``architecture`` other than "llama" writes
    the same tensors under another name (for the unsupported-architecture error).
    """
    proj_type, embd_type = (qtypes, qtypes) if isinstance(qtypes, str) else qtypes
    weights = random_llama_weights(layers=layers, hidden=hidden, heads=heads, kv_heads=kv_heads, ffn=ffn,
                                   vocab=vocab, seed=seed, tie_embeddings=tie_embeddings)
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
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_dimension_count(hidden // heads)
    writer.add_vocab_size(vocab)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("smollm")
    writer.add_token_list(tokens)
    writer.add_token_types([gguf.TokenType.CONTROL if t in SPECIAL_TOKENS else gguf.TokenType.NORMAL
                            for t in tokens])
    writer.add_token_merges(merges)
    writer.add_bos_token_id(BOS_ID)
    writer.add_eos_token_id(EOS_ID)
    writer.add_chat_template(CHAT_TEMPLATE)
    for name, value in weights.items():
        qtype = "F32" if value.ndim == 1 else embd_type if name == "token_embd.weight" else proj_type
        if qtype == "F32":
            writer.add_tensor(name, value)
        else:
            writer.add_tensor(name, gguf.quants.quantize(value, _QTYPES[qtype]), raw_dtype=_QTYPES[qtype])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
