"""The tokenizer a GGUF file describes, built with the ``tokenizers`` library, and its chat template.

A GGUF file of a byte-level BPE model (``tokenizer.ggml.model == "gpt2"``)
stores the vocabulary (``tokenizer.ggml.tokens``, the token strings in GPT-2's
byte-to-unicode alphabet), the merges (``"left right"`` strings, in priority
order), the token types (control and user-defined tokens are matched whole,
before BPE) and the pre-tokenizer's name (``tokenizer.ggml.pre``). We rebuild
that BPE with ``tokenizers`` (its Rust implementation is fast and exact)
instead of writing our own BPE.

The chat template is rendered by a ChatML implementation, not a Jinja engine:
``<|im_start|>{role}\\n{content}<|im_end|>\\n`` per message, then
``<|im_start|>assistant\\n`` for the generation prompt. When the file's
``tokenizer.chat_template`` inserts a default system message for
conversations that do not start with one (SmolLM2's does), that message is
taken from the template's text. A template that is not ChatML is refused with
an error naming it, rather than rendered wrongly.
"""
from __future__ import annotations

import re

import numpy as np

from relaxscript.frontend.gguf import GGUFFile, GGUFFormatError, UnsupportedModelError, read_gguf

__all__ = ["Tokenizer", "StreamDecoder", "render_chatml"]

# token types of tokenizer.ggml.token_type (llama.cpp's llama_token_type)
_CONTROL, _USER_DEFINED = 3, 4
# Qwen2's split (llama.cpp's LLAMA_VOCAB_PRE_TYPE_QWEN2, the Split of Hugging Face's Qwen2
# tokenizer.json): contractions in any case, letters with at most one leading non-letter,
# *one* digit per piece, punctuation runs with their trailing newlines, newline runs, spaces
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
               r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# tokenizer.ggml.pre -> how the text is split before BPE: "gpt2" (GPT-2's regex, inside
# ByteLevel), "digits" (digits one by one, then GPT-2's regex: llama.cpp's "smollm"), or a
# split regex applied before the byte-level mapping. A name not here is refused: a wrong
# split silently changes the tokens
_PRE_TOKENIZERS = {"default": "gpt2", "gpt2": "gpt2", "smollm": "digits",
                   "qwen2": QWEN2_SPLIT, "deepseek-r1-qwen": QWEN2_SPLIT}
_SUPPORTED_PRE = tuple(_PRE_TOKENIZERS)
_SYSTEM_START = re.compile(r"<\|im_start\|>system(?:\n|\\n)")


def default_system_message(template: str) -> str | None:
    """The default system message of a ChatML template: the text between a
    ``<|im_start|>system`` line and the next ``<|im_end|>`` inside one string literal.

    A system line whose literal closes first is where a message's own content goes
    (``'<|im_start|>system\\n' + messages[0]['content']``, or Qwen2.5's tools branch before
    its default-message branch): those are skipped, else template code would become the
    message. Linear: each ``<|im_end|>`` search resumes where the last one ended (one lazy
    regex over both ends rescanned the rest of the text from every start marker, quadratic
    in a file's template: 2 MB took minutes)."""
    end = -1
    for start in _SYSTEM_START.finditer(template):
        if end < start.end():
            end = template.find("<|im_end|>", start.end())
            if end < 0:
                return None
        quote = template[start.start() - 1:start.start()]
        text = template[start.end():end]
        if quote in ("'", '"'):
            if quote not in text.replace("\\" + quote, ""):   # the literal runs on to <|im_end|>
                return text
        elif "{{" not in text and "{%" not in text:
            return text
    return None


def _pre_tokenizer(name: str, path: str):
    from tokenizers import Regex, pre_tokenizers
    if name not in _PRE_TOKENIZERS:
        raise UnsupportedModelError(f"{path}: tokenizer pre-tokenizer {name!r} is not supported "
                                    f"(supported: {', '.join(_SUPPORTED_PRE)})")
    kind = _PRE_TOKENIZERS[name]
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    if kind == "gpt2":
        return byte_level
    if kind == "digits":   # digits split one by one before GPT-2's regex (llama.cpp's "smollm")
        return pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
    # the pieces the regex matches (and nothing else: every character matches some branch),
    # then the byte-level alphabet without GPT-2's own regex
    return pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(kind), behavior="isolated"),
                                    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])


def render_chatml(messages: list[dict], *, add_generation_prompt: bool = True,
                  default_system: str | None = None) -> str:
    """ChatML text of ``messages`` (dicts with ``role`` and ``content``)."""
    parts = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str) \
                or not isinstance(message.get("content"), str):
            raise ValueError(f"chat message #{index} must be a dict with string 'role' and 'content', "
                             f"got {message!r}")
        if index == 0 and default_system is not None and message["role"] != "system":
            parts.append(f"<|im_start|>system\n{default_system}<|im_end|>\n")
        parts.append(f"<|im_start|>{message['role']}\n{message['content']}<|im_end|>\n")
    if add_generation_prompt:
        parts.append("<|im_start|>assistant\n")
    return "".join(parts)


class Tokenizer:
    """Encode/decode text with a GGUF file's byte-level BPE; ``Tokenizer.from_gguf(file_or_path)``."""

    def __init__(self, backend, *, bos_id: int | None, eos_id: int | None, add_bos: bool,
                 chat_template: str | None, path: str = "<tokenizer>", same_text: list[int] | None = None):
        self.backend = backend
        self.bos_id, self.eos_id, self.add_bos = bos_id, eos_id, add_bos
        self.chat_template = chat_template
        self.path = path
        # a file may list the same text under two ids; the backend's vocabulary (text -> id) keeps the
        # first, so ``same_text[i]`` is the id the backend knows for id i's text (ids stay the file's)
        self.same_text = same_text
        self.vocab_size = len(same_text) if same_text is not None else backend.get_vocab_size(with_added_tokens=True)

    @classmethod
    def from_gguf(cls, gguf: GGUFFile | str) -> "Tokenizer":
        from tokenizers import AddedToken, decoders, models
        from tokenizers import Tokenizer as Backend
        if isinstance(gguf, str):
            gguf = read_gguf(gguf)
        path = gguf.path
        kind = gguf.get_typed("tokenizer.ggml.model", str)
        if kind != "gpt2":
            raise UnsupportedModelError(f"{path}: tokenizer model {kind!r} is not supported "
                                        f"(only byte-level BPE, 'gpt2')")
        tokens = gguf.get("tokenizer.ggml.tokens")
        merges = gguf.get("tokenizer.ggml.merges")
        for key, value in (("tokens", tokens), ("merges", merges)):
            if not isinstance(value, list) or not all(isinstance(item, str) for item in value) \
                    or (key == "tokens" and not value):
                raise GGUFFormatError(f"{path}: tokenizer.ggml.{key} is missing or not a list of strings")
        types = gguf.get("tokenizer.ggml.token_type")
        if types is not None and not (isinstance(types, np.ndarray) and types.dtype.kind in "iu"
                                      and len(types) == len(tokens)):
            raise GGUFFormatError(f"{path}: tokenizer.ggml.token_type must be {len(tokens)} integers "
                                  f"(one per token)")
        vocab: dict[str, int] = {}
        for index, token in enumerate(tokens):
            vocab.setdefault(token, index)
        pairs = []
        for index, merge in enumerate(merges):
            left, sep, right = merge.partition(" ")
            if not sep or left not in vocab or right not in vocab or left + right not in vocab:
                raise GGUFFormatError(f"{path}: tokenizer merge #{index} {merge!r} does not join two "
                                      f"tokens of the vocabulary into one")
            pairs.append((left, right))
        backend = Backend(models.BPE(vocab=vocab, merges=pairs, fuse_unk=False))
        backend.pre_tokenizer = _pre_tokenizer(gguf.get_typed("tokenizer.ggml.pre", str, "default"), path)
        backend.decoder = decoders.ByteLevel()
        if types is not None:
            specials = [AddedToken(tokens[i], special=int(t) == _CONTROL, normalized=False)
                        for i, t in enumerate(types) if int(t) in (_CONTROL, _USER_DEFINED)]
            backend.add_tokens(specials)
        ids = {}
        for key in ("bos", "eos"):
            value = gguf.get_typed(f"tokenizer.ggml.{key}_token_id", int)
            if value is not None and not 0 <= value < len(tokens):
                raise GGUFFormatError(f"{path}: tokenizer.ggml.{key}_token_id {value!r} is not a token id")
            ids[key] = value
        return cls(backend, bos_id=ids["bos"], eos_id=ids["eos"], same_text=[vocab[t] for t in tokens],
                   add_bos=gguf.get_typed("tokenizer.ggml.add_bos_token", bool, False),
                   chat_template=gguf.get_typed("tokenizer.chat_template", str), path=path)

    def encode(self, text: str, add_bos: bool | None = None) -> list[int]:
        """Token ids of ``text``; special tokens written in it (``<|im_start|>``) are single tokens.

        ``add_bos`` defaults to the file's ``tokenizer.ggml.add_bos_token``.
        """
        ids = self.backend.encode(text, add_special_tokens=False).ids
        if (self.add_bos if add_bos is None else add_bos) and self.bos_id is not None:
            ids = [self.bos_id] + ids
        return ids

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        bad = [i for i in ids if not 0 <= int(i) < self.vocab_size]
        if bad:
            raise ValueError(f"{self.path}: token id {bad[0]} is outside the vocabulary 0..{self.vocab_size - 1}")
        known = [int(i) for i in ids] if self.same_text is None else [self.same_text[int(i)] for i in ids]
        return self.backend.decode(known, skip_special_tokens=skip_special_tokens)

    def token_to_id(self, token: str) -> int | None:
        return self.backend.token_to_id(token)

    def apply_chat_template(self, messages: list[dict], add_generation_prompt: bool = True) -> str:
        """The prompt text of a conversation, following the file's ChatML template."""
        default_system = None
        if self.chat_template is not None:
            if "<|im_start|>" not in self.chat_template:
                raise UnsupportedModelError(f"{self.path}: chat template is not ChatML (the only kind supported): "
                                            f"{self.chat_template[:120]!r}")
            default_system = default_system_message(self.chat_template)
        return render_chatml(messages, add_generation_prompt=add_generation_prompt, default_system=default_system)

    def stream_decoder(self, skip_special_tokens: bool = True) -> "StreamDecoder":
        return StreamDecoder(self, skip_special_tokens)


class StreamDecoder:
    """Turns token ids arriving one at a time into text pieces, holding back incomplete UTF-8 characters.

    A byte-level token can end inside a multi-byte character; its text is
    emitted once the token that completes the character arrives. Only the
    tokens since the last emitted piece are decoded again, so streaming is
    linear in the output length.
    """

    def __init__(self, tokenizer: Tokenizer, skip_special_tokens: bool = True):
        self.tokenizer, self.skip = tokenizer, skip_special_tokens
        self.pending: list[int] = []

    def feed(self, token: int) -> str:
        self.pending.append(int(token))
        text = self.tokenizer.decode(self.pending, skip_special_tokens=self.skip)
        if text.endswith("\ufffd"):
            return ""
        self.pending = []
        return text

    def flush(self) -> str:
        text = self.tokenizer.decode(self.pending, skip_special_tokens=self.skip) if self.pending else ""
        self.pending = []
        return text
