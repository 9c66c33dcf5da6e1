"""Choosing the next token from logits: greedy, or sampling with temperature, top-k and top-p.

Sampling draws from a seeded ``numpy.random.Generator``, so a seed fixes
the generated text. Top-k keeps the ``k`` most likely tokens (ties at the
k-th value are broken by token id, lowest first); top-p keeps the smallest
set of most likely tokens whose probabilities sum to at least ``p`` (at least
one token); both renormalize what they keep.
"""
from __future__ import annotations

import dataclasses

import numpy as np

__all__ = ["SamplingParams", "Sampler", "greedy", "token_probabilities"]


def greedy(logits: np.ndarray) -> int:
    """The most likely token (the lowest id among equal maxima)."""
    logits = _check_logits(logits)
    return int(np.argmax(logits))


def _check_logits(logits) -> np.ndarray:
    logits = np.asarray(logits)
    if logits.ndim != 1 or logits.size == 0:
        raise ValueError(f"logits must be a non-empty vector, got shape {logits.shape}")
    if np.isnan(logits).any():
        raise ValueError("logits contain NaN (the model produced an invalid result)")
    return logits


@dataclasses.dataclass(frozen=True)
class SamplingParams:
    """``temperature`` > 0 scales logits; ``top_k`` >= 1 and 0 < ``top_p`` <= 1 restrict the candidates."""
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None

    def __post_init__(self):
        if not (isinstance(self.temperature, (int, float)) and self.temperature > 0):
            raise ValueError(f"temperature must be a positive number, got {self.temperature!r}")
        if self.top_k is not None and not (isinstance(self.top_k, (int, np.integer)) and self.top_k >= 1):
            raise ValueError(f"top_k must be an integer >= 1, got {self.top_k!r}")
        if self.top_p is not None and not (isinstance(self.top_p, (int, float)) and 0 < self.top_p <= 1):
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p!r}")


def token_probabilities(logits: np.ndarray, params: SamplingParams) -> np.ndarray:
    """The distribution sampling draws from: float64 probabilities over the vocabulary, zero outside the kept set."""
    logits = _check_logits(logits).astype(np.float64) / params.temperature
    order = np.argsort(-logits, kind="stable")      # most likely first, ties by id
    keep = order.size if params.top_k is None else min(params.top_k, order.size)
    kept = order[:keep]
    weights = np.exp(logits[kept] - logits[kept[0]])
    probs = weights / weights.sum()
    if params.top_p is not None:
        # the smallest prefix whose mass reaches top_p (the token crossing it is kept)
        cutoff = int(np.searchsorted(np.cumsum(probs), params.top_p * (1 - 1e-12))) + 1
        kept, probs = kept[:cutoff], probs[:cutoff] / probs[:cutoff].sum()
    full = np.zeros(logits.size, dtype=np.float64)
    full[kept] = probs
    return full


class Sampler:
    """Draws tokens with ``params`` from a generator seeded with ``seed``."""

    def __init__(self, params: SamplingParams, seed: int | None = None):
        self.params = params
        self.rng = np.random.default_rng(seed)

    def __call__(self, logits: np.ndarray) -> int:
        probs = token_probabilities(logits, self.params)
        return int(self.rng.choice(probs.size, p=probs))
