"""The generation loop over any model with the step protocol.

A model has ``reset()``, ``prefill(ids) -> logits`` (of the last token),
``decode(token) -> logits``, ``position`` (tokens in its cache) and
``max_context``; ``NumpyLlama`` and the compiled ``Engine`` both do.
"""
from __future__ import annotations

import time
from typing import Callable, Iterable

from .sampling import Sampler, SamplingParams, greedy

__all__ = ["generate", "GenerationStats"]


class GenerationStats:
    """Timings of the last ``generate`` call: prefill and decode seconds and token counts."""

    def __init__(self):
        self.prompt_tokens = self.new_tokens = self.decode_steps = 0
        self.prefill_s = self.decode_s = 0.0

    @property
    def prefill_tokens_per_s(self) -> float:
        return self.prompt_tokens / self.prefill_s if self.prefill_s else float("nan")

    @property
    def decode_tokens_per_s(self) -> float:
        return self.decode_steps / self.decode_s if self.decode_s else float("nan")


def _choose(temperature, top_k, top_p, seed) -> Callable:
    """Greedy unless a sampling argument is given (a temperature of 0 or None alone means greedy)."""
    if not temperature and top_k is None and top_p is None:
        if seed is not None:
            raise ValueError("generate: seed is given but no sampling argument (temperature, top_k, top_p); "
                             "greedy decoding does not use it")
        return greedy
    return Sampler(SamplingParams(temperature=temperature or 1.0, top_k=top_k, top_p=top_p), seed)


def generate(model, prompt_ids: Iterable[int], max_new_tokens: int, *, temperature: float | None = 0.0,
             top_k: int | None = None, top_p: float | None = None, seed: int | None = None,
             stop_ids: Iterable[int] = (), stop_at_eos: bool = False,
             on_token: Callable[[int], object] | None = None, stats: GenerationStats | None = None) -> list[int]:
    """Generate up to ``max_new_tokens`` tokens after ``prompt_ids``; returns the new ids.

    The model's cache is reset first. Decoding is greedy unless
    ``temperature`` (> 0), ``top_k`` or ``top_p`` is given; ``seed`` fixes
    the draws. Generation runs the full ``max_new_tokens`` unless asked to
    stop: at a token of ``stop_ids``, or at the model's ``eos_id`` with
    ``stop_at_eos``; the stop token is not returned. ``on_token(id)`` is
    called for every returned token as soon as it is chosen (streaming).
    """
    prompt = [int(t) for t in prompt_ids]
    if not prompt:
        raise ValueError("generate: the prompt is empty (a model needs at least one token to start from)")
    if not isinstance(max_new_tokens, int) or max_new_tokens < 0:
        raise ValueError(f"generate: max_new_tokens must be a non-negative integer, got {max_new_tokens!r}")
    stops = {int(t) for t in stop_ids}
    if stop_at_eos:
        eos = getattr(model, "eos_id", None)
        if eos is None:
            raise ValueError("generate: stop_at_eos needs a model with an eos_id")
        stops.add(int(eos))
    # the last new token is never fed back, so the cache holds prompt + max_new_tokens - 1 tokens
    needed = len(prompt) + max(max_new_tokens - 1, 0)
    if needed > model.max_context:
        raise ValueError(f"generate: {len(prompt)} prompt tokens + {max_new_tokens} new tokens need a context "
                         f"of {needed} tokens, the model's bound is {model.max_context}")
    choose = _choose(temperature, top_k, top_p, seed)
    stats = stats if stats is not None else GenerationStats()
    stats.prompt_tokens, stats.new_tokens, stats.decode_steps = len(prompt), 0, 0
    stats.prefill_s = stats.decode_s = 0.0
    model.reset()
    if max_new_tokens == 0:
        return []
    start = time.perf_counter()
    logits = model.prefill(prompt)
    stats.prefill_s = time.perf_counter() - start
    new: list[int] = []
    while True:
        token = choose(logits)
        if token in stops:
            break
        new.append(token)
        stats.new_tokens = len(new)
        if on_token is not None:
            on_token(token)
        if len(new) == max_new_tokens:
            break
        start = time.perf_counter()
        logits = model.decode(token)
        stats.decode_s += time.perf_counter() - start
        stats.decode_steps += 1
    return new
