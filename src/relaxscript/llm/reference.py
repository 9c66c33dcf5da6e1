"""A plain NumPy float32 Llama-family model (llama, qwen2) with a KV cache: the reference the compiled
model is checked against.

It implements the step protocol every model of ``relaxscript.llm`` follows
(``reset``, ``prefill(ids) -> logits``, ``decode(token) -> logits``,
``position``, ``max_context``), so the generation loop, the chat command and
the benchmarks run it the same way as the compiled engine.

Conventions (the same as ``LlamaConfig``'s): rotary embedding rotates the
pairs ``config.rope_style`` names, computed as written, from the file's own row
order: adjacent pairs ``(2i, 2i+1)`` ("pairs", llama) or the halves
``(i, i + head_dim/2)`` ("halves", qwen2; the engine instead reorders the rows
once and rotates pairs, so the two check each other); ``config.qkv_bias`` adds
``attn_q/k/v.bias`` to the projections; query head ``h`` reads key/value
head ``h // (num_heads // num_kv_heads)``; RMSNorm is
``x / sqrt(mean(x**2) + eps) * weight``; the MLP is
``down(silu(gate(x)) * up(x))``.

``activations="q8"`` rounds the input of every matmul with a quantized weight to 8-bit
block codes first (``quantization.fake_quantize_numpy``), as the engine's default q4 path
does: which weights are quantized comes from the file's tensor types (or ``quantized``).
``kv_cache="f16"`` stores the keys (after rotation) and values rounded to float16 (NumPy's
``astype``: round to nearest even), as the engine's float16 cache does; attention computes
with them widened back to float32. ``kv_cache="q8"`` stores each new (position, head) row of keys
and of values quantized to 8-bit codes with one scale and dequantized again
(``kv_cache.quantize_rows_numpy``: the engine's append kernel's float32 steps), so the same
greedy tokens can be compared.
"""
from __future__ import annotations

import numpy as np

from relaxscript.frontend.gguf import GGUFFile, LlamaConfig, expected_tensor_shapes, llama_config, read_gguf
from relaxscript.quantization.activations import fake_quantize_numpy

from .kv_cache import quantize_rows_numpy

ACTIVATIONS = ("f32", "q8")
KV_CACHE_DTYPES = {"f32": np.float32, "f16": np.float16, "q8": np.float32}   # q8: rows kept dequantized
_FLOAT_TYPES = ("F32", "F16", "BF16")   # the GGUF types the engine computes as float32 (all others quantized)

__all__ = ["NumpyLlama", "ContextOverflowError", "rope_tables", "apply_rope"]


class ContextOverflowError(ValueError):
    """A write to the KV cache past its bound (the context length)."""


def rope_tables(positions: np.ndarray, head_dim: int, theta: float) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin of shape ``(len(positions), head_dim // 2)`` for the adjacent-pair rotation."""
    inv_freq = theta ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    angles = np.outer(np.asarray(positions, dtype=np.float64), inv_freq)
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def apply_rope(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, style: str = "pairs") -> np.ndarray:
    """Rotate the pairs of ``x[tokens, heads, head_dim]`` by the angles: ``(x[..., 2i], x[..., 2i+1])``
    with ``style="pairs"``, ``(x[..., i], x[..., i + head_dim/2])`` with ``style="halves"``."""
    half = x.shape[-1] // 2
    first, second = {"pairs": (np.s_[..., 0::2], np.s_[..., 1::2]),
                     "halves": (np.s_[..., :half], np.s_[..., half:])}[style]
    a, b = x[first], x[second]
    c, s = cos[:, None, :], sin[:, None, :]
    out = np.empty_like(x)
    out[first] = a * c - b * s
    out[second] = a * s + b * c
    return out


def _rms_norm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight


class NumpyLlama:
    """``NumpyLlama(gguf_file_or_path)`` or ``NumpyLlama(config, weights)``.

    ``weights`` maps llama.cpp's tensor names to float32 arrays of row-major
    shape (a GGUF file's tensors are dequantized once). ``max_context``
    bounds the KV cache (default: the model's context length); a prefill or
    decode past it raises ``ContextOverflowError``. ``activations="q8"`` rounds the
    inputs of the matmuls whose weights are quantized (the file's tensors of a quantized type,
    or the names in ``quantized``; default with a config: every matmul).
    ``kv_cache="f16"`` keeps the cache in float16 (the engine's default with q4 weights), ``"q8"``
    rounds its rows to 8-bit codes with a scale per (position, head) as the engine's q8 cache.
    """

    def __init__(self, source: GGUFFile | LlamaConfig | str, weights: dict[str, np.ndarray] | None = None,
                 *, max_context: int | None = None, activations: str = "f32", quantized=None,
                 kv_cache: str = "f32"):
        if activations not in ACTIVATIONS:
            raise ValueError(f"NumpyLlama: activations must be one of {ACTIVATIONS}, got {activations!r}")
        if kv_cache not in KV_CACHE_DTYPES:
            raise ValueError(f"NumpyLlama: kv_cache must be one of {tuple(KV_CACHE_DTYPES)}, got {kv_cache!r}")
        self.kv_cache = kv_cache
        if isinstance(source, str):
            source = read_gguf(source)
        if isinstance(source, GGUFFile):
            if weights is not None:
                raise TypeError("NumpyLlama: pass weights only with a LlamaConfig")
            config = llama_config(source)
            weights = {name: source.tensor(name).dequantize() for name in expected_tensor_shapes(config)}
            if quantized is None:
                quantized = {name for name in weights if source.tensor(name).qtype not in _FLOAT_TYPES
                             and len(source.tensor(name).shape) == 2}
        elif isinstance(source, LlamaConfig):
            if weights is None:
                raise TypeError("NumpyLlama(config, weights): the weights are missing")
            config = source
        else:
            raise TypeError(f"NumpyLlama: expected a GGUFFile, a path or a LlamaConfig, got {type(source).__name__}")
        for name, shape in expected_tensor_shapes(config).items():
            if name not in weights:
                raise ValueError(f"NumpyLlama: weight {name!r} is missing")
            if tuple(weights[name].shape) != shape:
                raise ValueError(f"NumpyLlama: weight {name!r} has shape {tuple(weights[name].shape)}, "
                                 f"expected {shape}")
        self.config = config
        self.weights = {name: np.ascontiguousarray(value, dtype=np.float32) for name, value in weights.items()}
        self.lm_head_name = "output.weight" if "output.weight" in self.weights else "token_embd.weight"
        self.lm_head = self.weights[self.lm_head_name]
        self.activations = activations
        self._rounded = set(self.weights if quantized is None else quantized) if activations == "q8" else set()
        self.max_context = config.context_length if max_context is None else int(max_context)
        if not 1 <= self.max_context <= config.context_length:
            raise ValueError(f"NumpyLlama: max_context {max_context} must be in 1..{config.context_length}")
        self.eos_id = config.eos_id
        self._keys: list[np.ndarray] = []
        self._values: list[np.ndarray] = []
        self.reset()

    def _linear(self, x: np.ndarray, name: str) -> np.ndarray:
        """``x @ weight.T`` (the named weight), its input rounded first where it is quantized."""
        if name in self._rounded:
            x = fake_quantize_numpy(np.ascontiguousarray(x, dtype=np.float32))
        return x @ self.weights[name].T

    def _projection(self, x: np.ndarray, prefix: str) -> np.ndarray:
        """A q/k/v projection, with its bias where the architecture has one."""
        y = self._linear(x, prefix + ".weight")
        return y + self.weights[prefix + ".bias"] if self.config.qkv_bias else y

    def reset(self) -> None:
        """Empty the KV cache."""
        self.position = 0
        self._keys = []
        self._values = []

    def _grow_cache(self, needed: int) -> None:
        # capacity doubles (up to max_context) so a long context does not allocate its bound up front
        capacity = self._keys[0].shape[1] if self._keys else 0
        if needed <= capacity:
            return
        new_capacity = min(self.max_context, max(needed, 2 * capacity, 16))
        c = self.config
        for store in (self._keys, self._values):
            for layer in range(c.num_layers):
                grown = np.zeros((c.num_kv_heads, new_capacity, c.head_dim), dtype=KV_CACHE_DTYPES[self.kv_cache])
                if store[layer:layer + 1]:
                    grown[:, :capacity] = store[layer]
                    store[layer] = grown
                else:
                    store.append(grown)

    def forward(self, ids: list[int] | np.ndarray, *, last_only: bool = False) -> np.ndarray:
        """Run ``ids`` at the next positions, append them to the cache.

        Returns the logits ``(len(ids), vocab)``, or only the last token's row
        ``(1, vocab)`` with ``last_only`` (the LM head is the largest matmul).
        """
        c, w = self.config, self.weights
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        n = ids.size
        if n == 0:
            raise ValueError("NumpyLlama: no tokens to run")
        if ids.min() < 0 or ids.max() >= c.vocab_size:
            bad = int(ids[(ids < 0) | (ids >= c.vocab_size)][0])
            raise ValueError(f"NumpyLlama: token id {bad} is outside the vocabulary 0..{c.vocab_size - 1}")
        start, end = self.position, self.position + n
        if end > self.max_context:
            raise ContextOverflowError(f"NumpyLlama: {n} tokens at position {start} would write KV cache "
                                       f"entry {end - 1}, past its bound of {self.max_context} tokens")
        self._grow_cache(end)
        cos, sin = rope_tables(np.arange(start, end), c.head_dim, c.rope_theta)
        group = c.num_heads // c.num_kv_heads
        scale = np.float32(1.0 / np.sqrt(c.head_dim))
        # causal mask over the cached keys: token i (at start + i) sees keys 0..start + i
        mask = np.where(np.arange(end)[None, :] <= np.arange(start, end)[:, None], 0.0, -np.inf).astype(np.float32)
        x = w["token_embd.weight"][ids]
        for layer in range(c.num_layers):
            p = f"blk.{layer}."
            h = _rms_norm(x, w[p + "attn_norm.weight"], c.rms_norm_eps)
            q, k, v = (self._projection(h, p + part) for part in ("attn_q", "attn_k", "attn_v"))
            q = q.reshape(n, c.num_heads, c.head_dim)
            k = k.reshape(n, c.num_kv_heads, c.head_dim)
            v = v.reshape(n, c.num_kv_heads, c.head_dim)
            q, k = apply_rope(q, cos, sin, c.rope_style), apply_rope(k, cos, sin, c.rope_style)
            if self.kv_cache == "q8":    # each (position, head) row rounded as the engine writes it
                k, v = quantize_rows_numpy(k), quantize_rows_numpy(v)
            self._keys[layer][:, start:end] = k.transpose(1, 0, 2)
            self._values[layer][:, start:end] = v.transpose(1, 0, 2)
            # (kv_heads, end, head_dim), widened from a float16 cache (its writes rounded above)
            keys = self._keys[layer][:, :end].astype(np.float32, copy=False)
            values = self._values[layer][:, :end].astype(np.float32, copy=False)
            qg = q.transpose(1, 0, 2).reshape(c.num_kv_heads, group * n, c.head_dim)
            scores = (qg @ keys.transpose(0, 2, 1)).reshape(c.num_kv_heads, group, n, end) * scale + mask
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            probs = (scores / scores.sum(axis=-1, keepdims=True)).reshape(c.num_kv_heads, group * n, end)
            attn = (probs @ values).reshape(c.num_heads, n, c.head_dim).transpose(1, 0, 2).reshape(n, -1)
            x = x + self._linear(attn, p + "attn_output.weight")
            h = _rms_norm(x, w[p + "ffn_norm.weight"], c.rms_norm_eps)
            gate = self._linear(h, p + "ffn_gate.weight")
            up = self._linear(h, p + "ffn_up.weight")
            x = x + self._linear(gate / (1.0 + np.exp(-gate)) * up, p + "ffn_down.weight")
        self.position = end
        if last_only:
            x = x[-1:]
        return self._linear(_rms_norm(x, w["output_norm.weight"], c.rms_norm_eps), self.lm_head_name)

    def prefill(self, ids: list[int]) -> np.ndarray:
        """Logits ``(vocab,)`` of the last of ``ids``, run after what the cache holds."""
        return self.forward(ids, last_only=True)[0]

    def decode(self, token: int) -> np.ndarray:
        """Logits ``(vocab,)`` of one more token."""
        return self.forward([token])[0]
