"""``Engine``: a GGUF Llama-family model (llama, qwen2) compiled by relaxscript, with its tokenizer
and generation.

::

    engine = Engine.from_gguf(path, target="c", weights="q4")   # or weights="f32"
    # weights="q4" keeps the KV cache in float16 (kv_cache="f16", as llama.cpp); "f32" with f32 weights;
    # kv_cache="q8": 8-bit codes with a float32 scale per (position, head), about half f16's bytes
    # weights="q4" rounds the matmuls' inputs to 8-bit codes (activations="q8", as llama.cpp);
    # activations="f32" keeps them exact; weights="q4" keeps the blocks' scales in float16 (scales="f16",
    # GGUF's own values); scales="f32" widens them at load
    engine.generate(engine.tokenizer.encode("Hello"), max_new_tokens=32)   # greedy token ids
    print(engine.chat("What is the capital of France?"))

The engine holds the compiled module (``prefill`` and ``decode``, see
``llm.model``), the weight arrays in the order the functions take them, and
the KV caches (NumPy arrays the kernels update in place). It implements the
step protocol of ``llm.reference.NumpyLlama`` (``reset``, ``prefill``,
``decode``, ``position``, ``max_context``), so ``llm.generation.generate``
drives both the same way.
"""
from __future__ import annotations

import dataclasses
import os
import time
from typing import Iterator

import numpy as np

from .. import nn
from ..frontend.gguf import GGUFFile, llama_config, read_gguf
from ..quantization.gguf_convert import FLOAT_TYPES, conversion_report, convert_weight
from .generation import GenerationStats, generate
from . import build_cache, kv_cache, weight_arena
from .kv_cache import CacheOverflowError
from .kv_cache import cache_dtype as _cache_dtype
from .model import LlamaForCausalLM, gguf_sources, rope_tables, with_pair_rows
from .sampling import Sampler, SamplingParams, greedy
from .tokenizer import Tokenizer

DEFAULT_MAX_CONTEXT = 2048        # KV cache positions unless asked (the file may allow more)
SCALE_DTYPES = {"f16": "float16", "f32": "float32"}   # scales option -> the block scales' dtype
DEFAULT_SCALES = "f16"


# Tokens of the load-time warm-up prefill: a chat prompt's usual length (the storages it sizes serve
# every shorter prompt without growing)
WARM_UP_PROMPT_TOKENS = 64


class Engine:
    """A compiled Llama model with KV caches, tokenizer and generation."""

    def __init__(self, config, exported: nn.Exported | None, executable, arrays: dict, *,
                 capacity: int, tokenizer: Tokenizer | None = None, lowered_mod=None,
                 activations: str = "f32", kv_cache_dtype: str = "f32", scales: str | None = None,
                 conversions: dict | None = None, param_names=None, rebuild=None):
        """``exported=None`` (an executable from the build cache): ``param_names`` gives the
        functions' parameter order and ``rebuild()`` returns ``(exported, lowered_mod)`` when
        they are first asked for."""
        import relaxscript as rx
        self.config, self._exported, self.executable = config, exported, executable
        self._lowered_mod = lowered_mod   # the module after the pipeline (memory plan, kernels)
        self._rebuild = rebuild
        param_names = list(exported.param_names if exported is not None else param_names)
        self.activations = activations    # "q8": quantized matmuls' inputs rounded to 8-bit codes
        self.tokenizer = tokenizer
        self.kv_cache = kv_cache_dtype    # "f16" / "f32" / "q8": the cache tensors' dtype
        self.scales = scales              # "f16" / "f32": the quantized blocks' scales (None: no quantized weights)
        # GGUF tensor name -> ConvertedWeight: how each quantized weight of the file is computed
        # (copied, repacked or requantized, with its measured error); empty with weights="f32".
        # Kept without their arrays (the weights below hold them, maybe packed into one block)
        self.weight_conversions = {name: dataclasses.replace(conv, arrays=())
                                   for name, conv in (conversions or {}).items()}
        self.max_context = capacity
        self.eos_id = config.eos_id
        self._vm = rx.VirtualMachine(executable)
        self._prefill, self._decode = self._vm["prefill"], self._vm["decode"]
        self._weights = [arrays[name] for name in param_names]
        if weight_arena.arena_enabled():   # one block in huge pages (weight_arena: TLB misses of a step)
            self._weights = weight_arena.pack(self._weights)
        self._caches = kv_cache.allocate_caches(config.num_layers, capacity, config.num_kv_heads,
                                                config.head_dim, kv_cache.cache_dtype(kv_cache_dtype))
        self._token = np.zeros((1,), np.int64)
        # caches and weights are the same arrays on every step: checked once (vm.bind), not per token
        fixed = dict(enumerate(self._caches + self._weights, start=2))
        self._prefill_step = self._vm.bind("prefill", fixed)
        self._decode_step = self._vm.bind("decode", fixed)
        self.position = 0
        self.last_stats = GenerationStats()

    # ---------------------------------------------------------------- construction
    @classmethod
    def from_gguf(cls, path, target: str = "c", weights: str = "q4", max_context: int | None = None,
                  tokenizer: bool = True, activations: str | None = None,
                  warm_up: bool | None = None, kv_cache: str | None = None,
                  scales: str | None = None, cache: bool = True) -> "Engine":
        """Read, build and compile a GGUF file of a Llama-family architecture
        (``frontend.gguf.ARCHITECTURES``: llama, qwen2; another is an ``UnsupportedModelError``).

        ``weights="q4"`` computes with the file's quantized blocks: Q4_0/Q4_1/Q8_0 as they
        are, Q5_0 exactly as q8_0, Q4_K repacked as q4_1 (one scale and min per 32 values),
        every other dequantizable type (Q5_1, Q2_K, Q3_K, Q5_K, Q6_K, IQ*, ...) requantized
        to q8_0 (``quantization.gguf_convert``; ``weight_conversions`` and
        ``conversion_report()`` say what happened, with the error each choice measured);
        ``"f32"`` dequantizes every tensor once at load (the checking path: exactly the
        file's values). F16 and BF16 tensors are float32 either way.
        ``max_context`` bounds the KV cache (default: the file's context length,
        at most 2048). ``activations="q8"`` (the default with q4 weights, what llama.cpp
        computes) rounds the input of every quantized matmul to 8-bit block codes, so the
        decode GEMVs use integer dot products; ``"f32"`` (the default with f32 weights) keeps
        the inputs exact. ``kv_cache="f16"`` (the default with q4 weights, as llama.cpp) keeps the
        KV cache in float16 (keys and values rounded to nearest even as they are written; half
        the bytes attention reads per step), ``"f32"`` (the default with f32 weights: the exact
        checking path) in float32, ``"q8"`` as 8-bit codes with one float32 scale per position and
        kv head (each new row's absmax maps to 127, rounded to nearest; 68 bytes per 64 values, a
        little over half of float16's: the bytes a long-context decode step's attention reads;
        ``kv_cache.quantize_rows_numpy`` is the rounding). ``scales="f16"`` (the default with q4
        weights) keeps the blocks' scales and mins in float16, GGUF's own values (q4_1: 20 bytes per
        32 weights, not 24: a decode step streams fewer weight bytes); ``"f32"`` widens them to float32 at load. Both
        dequantize to the same values. ``warm_up`` (default: on for the C target) runs one placeholder
        prefill and decode step before returning (see ``warm_up``). ``cache`` (default on) reuses the
        executable built before for the same model, options, machine and compiler sources
        (``llm.build_cache``): a warm load skips the export and the pass pipeline."""
        import relaxscript as rx
        gguf = path if isinstance(path, GGUFFile) else read_gguf(path)
        config = llama_config(gguf)
        tok = Tokenizer.from_gguf(gguf) if tokenizer else None   # an unsupported tokenizer fails before the build
        weights_file = with_pair_rows(gguf, config)   # qwen2: Q/K rows reordered for the pair rotation
        if weights not in ("q4", "f32"):
            raise ValueError(f"Engine.from_gguf: weights must be 'q4' (the file's quantized blocks) or "
                             f"'f32', got {weights!r}")
        if activations is None:
            activations = "q8" if weights == "q4" else "f32"
        if activations not in ("q8", "f32"):
            raise ValueError(f"Engine.from_gguf: activations must be 'q8' (8-bit block codes) or 'f32', "
                             f"got {activations!r}")
        if kv_cache is None:
            kv_cache_option = "f16" if weights == "q4" else "f32"
        else:
            kv_cache_option = kv_cache
        _cache_dtype(kv_cache_option, "Engine.from_gguf: kv_cache")
        scales_option = scales if scales is not None else DEFAULT_SCALES
        if scales_option not in SCALE_DTYPES:
            raise ValueError(f"Engine.from_gguf: scales must be one of {sorted(SCALE_DTYPES)}, got {scales!r}")
        capacity = max_context if max_context is not None else min(config.context_length, DEFAULT_MAX_CONTEXT)
        if not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"Engine.from_gguf: max_context must be a positive int, got {max_context!r}")
        scale_dtype = SCALE_DTYPES[scales_option]
        conversions = convert_weights(weights_file, scale_dtype) if weights == "q4" else {}
        formats = _weight_formats(weights_file, scale_dtype, conversions) if weights == "q4" else {}
        # RELAXSCRIPT_MERGE_GATE_UP=0: gate and up as two launches (to compare; bench_decode_ab.py does)
        merge_gate_up = os.environ.get("RELAXSCRIPT_MERGE_GATE_UP", "1") != "0"
        model = LlamaForCausalLM(config, capacity, formats, kv_cache_dtype=kv_cache_option,
                                 merge_gate_up=merge_gate_up)
        spec = dataclasses.replace(model.export_spec(), activations=activations)

        def lower():
            exported = nn.export(model, spec)
            lowered = exported.mod
            for step in rx.get_pipeline(target):
                lowered = step(lowered)
            return exported, lowered
        exported = lowered = None
        cache = cache and build_cache.keeps_builds(target)   # native targets keep them
        key = build_cache.build_key(_build_description(gguf, config, capacity, formats, target, activations,
                                                       kv_cache_option, merge_gate_up), target) if cache else None
        cached = build_cache.load(key, target) if cache else None
        if cached is not None:
            executable, param_names = cached
        else:
            exported, lowered = lower()
            executable, param_names = rx.build(lowered, target=target, pipeline=[]), exported.param_names
            if cache:
                build_cache.store(key, executable, param_names, target)
        arrays = load_parameters(weights_file, param_names, config, capacity, scale_dtype, conversions)
        engine = cls(config, exported, executable, arrays, capacity=capacity, tokenizer=tok,
                     lowered_mod=lowered, activations=activations, kv_cache_dtype=kv_cache_option,
                     scales=scales_option if formats else None, conversions=conversions,
                     param_names=param_names, rebuild=lower)
        if warm_up if warm_up is not None else target == "c":
            engine.warm_up()
        return engine

    @property
    def exported(self) -> nn.Exported:
        """The exported model (``prefill``/``decode`` before the pipeline; rebuilt when first asked
        for after a load from the build cache)."""
        if self._exported is None:
            self._exported, self._lowered_mod = self._rebuild()
        return self._exported

    @property
    def lowered_mod(self):
        """The module after the pass pipeline (memory plan, kernels)."""
        if self._lowered_mod is None and self._rebuild is not None:
            self._exported, self._lowered_mod = self._rebuild()
        return self._lowered_mod

    def warm_up(self, prompt_tokens: int = WARM_UP_PROMPT_TOKENS) -> None:
        """A placeholder prefill of ``prompt_tokens`` and one decode step, then ``reset()``.

        The first calls of a fresh engine fault in the planned storages, the cache's pages and
        the kernel library's code and start the thread team: measured on SmolLM2, the first
        42-token prefill took 271 ms against 77 ms after, the first decode step 21 ms against
        8, so a short first answer reported half its steady rates. llama.cpp warms up at load
        for the same reason. Longer prompts than ``prompt_tokens`` grow the prefill storages
        once more on their first call."""
        count = max(1, min(int(prompt_tokens), self.max_context - 1))
        self.reset()
        self.prefill([0] * count)
        if self.position < self.max_context:
            self.decode(0)
        self.reset()

    def conversion_report(self) -> list[str]:
        """Lines saying how the file's quantized weights are computed (copied, repacked,
        requantized to q8_0 with the largest error measured, or float32)."""
        if not self.weight_conversions:
            return ["all weights float32 (weights='f32': the file's dequantized values)"]
        return conversion_report(self.weight_conversions)

    def kv_cache_bytes(self) -> int:
        """Bytes of the KV caches (every layer's keys and values at the capacity)."""
        from .memory_report import kv_cache_bytes
        return kv_cache_bytes(self.exported.mod, "decode")

    def activation_memory(self) -> dict:
        """Per function (prefill, decode): activation bytes with the static plan and without."""
        from .memory_report import activation_memory
        return activation_memory(self.lowered_mod)

    # ---------------------------------------------------------------- step protocol
    def reset(self) -> None:
        """Forget the cached tokens (the cache rows are overwritten, never read stale)."""
        self.position = 0

    def _check_room(self, count: int) -> None:
        if self.position + count > self.max_context:
            raise CacheOverflowError(
                f"the KV cache holds {self.max_context} positions: {self.position} are used and "
                f"{count} more do not fit (reset() the engine or build it with a larger max_context)")

    def prefill(self, ids) -> np.ndarray:
        """Append ``ids`` to the cache; the logits (vocab,) after the last one."""
        tokens = np.asarray(list(ids), dtype=np.int64)
        if tokens.ndim != 1 or tokens.size == 0:
            raise ValueError("prefill: needs a non-empty list of token ids")
        self._check_ids(tokens)
        self._check_room(tokens.size)
        logits = self._prefill_step(tokens, (self.position,))
        self.position += int(tokens.size)
        return logits

    def decode(self, token: int) -> np.ndarray:
        """Append one token; the logits (vocab,) after it."""
        self._token[0] = int(token)
        self._check_ids(self._token)
        self._check_room(1)
        logits = self._decode_step(self._token, (self.position,))
        self.position += 1
        return logits

    def _check_ids(self, tokens: np.ndarray) -> None:
        vocab = self.config.vocab_size
        if tokens.min() < 0 or tokens.max() >= vocab:
            bad = int(tokens[(tokens < 0) | (tokens >= vocab)][0])
            raise ValueError(f"token id {bad} is outside the vocabulary (0 .. {vocab - 1})")

    # ---------------------------------------------------------------- generation
    def generate(self, prompt_ids, max_new_tokens: int = 32, **kwargs) -> list[int]:
        """New token ids after ``prompt_ids`` (greedy unless temperature/top_k/top_p are given;
        never stops early unless ``stop_ids`` or ``stop_at_eos`` ask)."""
        self.last_stats = kwargs.pop("stats", None) or GenerationStats()
        return generate(self, prompt_ids, max_new_tokens, stats=self.last_stats, **kwargs)

    def _require_tokenizer(self) -> Tokenizer:
        if self.tokenizer is None:
            raise ValueError("this engine was built without a tokenizer")
        return self.tokenizer

    def chat_prompt(self, text: str, system: str | None = None) -> list[int]:
        """Token ids of a one-turn conversation with the file's chat template."""
        tok = self._require_tokenizer()
        messages = ([{"role": "system", "content": system}] if system else []) + \
            [{"role": "user", "content": text}]
        return tok.encode(tok.apply_chat_template(messages, add_generation_prompt=True), add_bos=False)

    def stop_ids(self) -> list[int]:
        tok = self._require_tokenizer()
        stops = [tok.eos_id] if tok.eos_id is not None else []
        end_of_turn = tok.token_to_id("<|im_end|>")
        return stops + ([end_of_turn] if end_of_turn is not None else [])

    def chat_stream(self, text: str, max_new_tokens: int = 256, *, system: str | None = None,
                    temperature: float | None = 0.0, top_k: int | None = None,
                    top_p: float | None = None, seed: int | None = None) -> Iterator[str]:
        """The answer to ``text`` as pieces of text, each as soon as its token is chosen;
        ``last_stats`` holds the prefill and decode times."""
        tok = self._require_tokenizer()
        prompt = self.chat_prompt(text, system)
        stops = set(self.stop_ids())
        sampled = bool(temperature) or top_k is not None or top_p is not None
        choose = Sampler(SamplingParams(temperature or 1.0, top_k, top_p), seed) if sampled else greedy
        room = self.max_context - len(prompt)
        if room < 1:
            raise CacheOverflowError(f"the prompt has {len(prompt)} tokens; the KV cache holds "
                                     f"{self.max_context}")
        stats = self.last_stats = GenerationStats()
        stats.prompt_tokens, stats.new_tokens, stats.decode_steps = len(prompt), 0, 0
        stats.prefill_s = stats.decode_s = 0.0
        self.reset()
        start = time.perf_counter()
        logits = self.prefill(prompt)
        stats.prefill_s = time.perf_counter() - start
        decoder = tok.stream_decoder()
        for step in range(min(max_new_tokens, room)):
            token = choose(logits)
            if token in stops:
                break
            stats.new_tokens += 1
            piece = decoder.feed(token)
            if piece:
                yield piece
            if step + 1 == min(max_new_tokens, room):
                break
            start = time.perf_counter()
            logits = self.decode(token)
            stats.decode_s += time.perf_counter() - start
            stats.decode_steps += 1
        rest = decoder.flush()
        if rest:
            yield rest

    def chat(self, text: str, max_new_tokens: int = 256, **kwargs) -> str:
        """The answer to ``text`` (one user turn with the chat template)."""
        return "".join(self.chat_stream(text, max_new_tokens, **kwargs))


def convert_weights(gguf: GGUFFile, scale_dtype: str = "float32") -> dict:
    """GGUF tensor name -> ``ConvertedWeight`` for every quantized 2-D tensor (``convert_weight``:
    copied, repacked or requantized into a kernel format, or float32 where none fits)."""
    return {name: convert_weight(tensor.qtype, tensor.raw, tensor.shape, scale_dtype)
            for name, tensor in gguf.tensors.items()
            if tensor.qtype not in FLOAT_TYPES and len(tensor.shape) == 2}


def _build_description(gguf: GGUFFile, config, capacity: int, formats: dict, target: str, activations: str,
                       kv_cache: str, merge_gate_up: bool) -> dict:
    """What decides an engine's executable besides the compiler and the machine (``build_cache``):
    the hyperparameters, every tensor's name, type and shape, the weights' formats, the options."""
    return {"config": repr(config), "capacity": capacity, "target": str(target), "activations": activations,
            "kv_cache": kv_cache, "merge_gate_up": merge_gate_up,
            "formats": sorted((name, repr(fmt)) for name, fmt in formats.items()),
            "tensors": sorted((t.name, t.qtype, list(t.shape)) for t in gguf.tensors.values())}


def _weight_formats(gguf: GGUFFile, scale_dtype: str = "float32", conversions: dict | None = None) -> dict:
    """GGUF tensor name -> ``nn.Quantized`` (scales in ``scale_dtype``) for the weights computed
    quantized; float weights (and any a conversion left in float32) are absent."""
    if conversions is None:
        conversions = convert_weights(gguf, scale_dtype)
    return {name: nn.Quantized(conv.format, scale_dtype) for name, conv in conversions.items()
            if conv.format is not None}


def _converted_arrays(gguf: GGUFFile, param_name: str, conversions: dict, scale_dtype: str) -> tuple:
    """The op's arrays of a quantized parameter: its source tensors' converted arrays, stacked
    along the output axis (the columns of the ``(in, out)`` layout) for a merged projection."""
    parts = []
    for source in gguf_sources(param_name):
        if source not in conversions:
            tensor = gguf.tensor(source)
            conversions[source] = convert_weight(tensor.qtype, tensor.raw, tensor.shape, scale_dtype)
        parts.append(conversions[source].arrays)
    if len(parts) == 1:
        return parts[0]
    return tuple(np.concatenate(arrays, axis=1) for arrays in zip(*parts))


def load_parameters(gguf: GGUFFile, param_names, config, capacity: int, scale_dtype: str = "float32",
                    conversions: dict | None = None) -> dict:
    """The array of every exported parameter: converted blocks for quantized weights (scales in
    ``scale_dtype``; ``conversions`` from ``convert_weights``, made here when absent), float32
    values otherwise, and the rotary tables. ``gguf`` is the file as the model reads it: a
    "halves" architecture's through ``model.with_pair_rows`` (``from_gguf`` does that)."""
    cos, sin = rope_tables(capacity, config.head_dim, config.rope_theta)
    arrays = {"rope.cos": cos, "rope.sin": sin}
    conversions = {} if conversions is None else dict(conversions)
    for name in param_names:
        if name in arrays:
            continue
        part = name.rsplit(".", 1)[-1]
        if part in ("data", "scale", "min"):
            converted = _converted_arrays(gguf, name.rsplit(".", 1)[0], conversions, scale_dtype)
            arrays[name] = converted[("data", "scale", "min").index(part)]
        else:
            # a merged projection's sources may be of different types: each dequantized, then stacked
            values = [gguf.tensor(source).dequantize() for source in gguf_sources(name)]
            arrays[name] = np.ascontiguousarray(np.concatenate(values, axis=0) if len(values) > 1 else values[0],
                                                dtype=np.float32)
    return arrays
