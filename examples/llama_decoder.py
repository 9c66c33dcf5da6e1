"""A Llama-style decoder written in relaxscript, with an independent NumPy reference.

The model: ``layers`` decoder layers over hidden states ``x: (n, hidden)``
with symbolic sequence length ``n`` (upper bound ``max_len``): RMSNorm ->
q/k/v projections -> rotary position embedding -> causal attention over
``heads`` heads -> output projection + residual -> RMSNorm -> SwiGLU MLP +
residual. Rotary tables (``cos``, ``sin``: (n, head_dim)) are inputs, as in
most deployments where they are computed once per position.

Run it: ``python examples/llama_decoder.py`` parses, prints and interprets it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class LlamaConfig:
    hidden: int = 512
    heads: int = 8
    ffn: int = 1408
    layers: int = 2
    max_len: int = 1024
    eps: float = 1e-5

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


TINY = LlamaConfig(hidden=32, heads=4, ffn=48, layers=2, max_len=64)

LAYER_WEIGHTS = ("attn_norm", "wq", "wk", "wv", "wo", "mlp_norm", "w_gate", "w_up", "w_down")


def weight_shapes(cfg: LlamaConfig) -> dict[str, tuple[int, ...]]:
    h, f = cfg.hidden, cfg.ffn
    return {"attn_norm": (h,), "wq": (h, h), "wk": (h, h), "wv": (h, h), "wo": (h, h),
            "mlp_norm": (h,), "w_gate": (h, f), "w_up": (h, f), "w_down": (f, h)}


def llama_source(cfg: LlamaConfig = LlamaConfig()) -> str:
    """The model as relaxscript source text (parsed with ``rx.from_source``)."""
    h, nh, d = cfg.hidden, cfg.heads, cfg.head_dim
    half = d // 2
    shapes = weight_shapes(cfg)
    layer_params = ",\n              ".join(
        f'{name}: R.Tensor({shapes[name]!r}, "float32")' for name in LAYER_WEIGHTS)
    main_params = ",\n             ".join(
        f'{name}_{i}: R.Tensor({shapes[name]!r}, "float32")'
        for i in range(cfg.layers) for name in LAYER_WEIGHTS)
    calls = []
    prev = "x"
    for i in range(cfg.layers):
        args = ", ".join(f"{name}_{i}" for name in LAYER_WEIGHTS)
        calls.append(f"h{i} = cls.layer({prev}, cos, sin, {args})")
        prev = f"h{i}"
    body_calls = "\n        ".join(calls)
    return f'''
@R.ir_module
class Llama:
    @R.function
    def rope(x: R.Tensor(("n", {nh}, {d}), "float32"), cos: R.Tensor(("n", {d}), "float32"),
             sin: R.Tensor(("n", {d}), "float32")) -> R.Tensor(("n", {nh}, {d}), "float32"):
        n = T.int64(upper={cfg.max_len})
        with R.dataflow():
            x1 = R.strided_slice(x, [2], [0], [{half}])
            x2 = R.strided_slice(x, [2], [{half}], [{d}])
            rotated = R.concat((R.negative(x2), x1), axis=2)
            c = R.expand_dims(cos, 1)
            s = R.expand_dims(sin, 1)
            out = R.add(R.multiply(x, c), R.multiply(rotated, s))
            R.output(out)
        return out

    @R.function
    def layer(x: R.Tensor(("n", {h}), "float32"),
              cos: R.Tensor(("n", {d}), "float32"),
              sin: R.Tensor(("n", {d}), "float32"),
              {layer_params}) -> R.Tensor(("n", {h}), "float32"):
        n = T.int64(upper={cfg.max_len})
        with R.dataflow():
            normed = R.nn.rms_norm(x, attn_norm, axes=-1, epsilon={cfg.eps})
            q = R.reshape(R.matmul(normed, wq), R.shape([n, {nh}, {d}]))
            k = R.reshape(R.matmul(normed, wk), R.shape([n, {nh}, {d}]))
            v = R.reshape(R.matmul(normed, wv), R.shape([n, {nh}, {d}]))
            R.output(q, k, v)
        q_rot = cls.rope(q, cos, sin)
        k_rot = cls.rope(k, cos, sin)
        with R.dataflow():
            qh = R.permute_dims(q_rot, [1, 0, 2])
            kt = R.permute_dims(k_rot, [1, 2, 0])
            vh = R.permute_dims(v, [1, 0, 2])
            scores = R.multiply(R.matmul(qh, kt), R.const({float(1.0 / np.sqrt(d))!r}, "float32"))
            mask = R.triu(R.full(R.shape([n, n]), R.const(-1e9, "float32")), k=1)
            probs = R.nn.softmax(R.add(scores, mask), axis=-1)
            attn = R.matmul(probs, vh)
            merged = R.reshape(R.permute_dims(attn, [1, 0, 2]), R.shape([n, {h}]))
            h1 = R.add(x, R.matmul(merged, wo))
            normed2 = R.nn.rms_norm(h1, mlp_norm, axes=-1, epsilon={cfg.eps})
            gate = R.nn.silu(R.matmul(normed2, w_gate))
            up = R.matmul(normed2, w_up)
            out = R.add(h1, R.matmul(R.multiply(gate, up), w_down))
            R.output(out)
        return out

    @R.function
    def main(x: R.Tensor(("n", {h}), "float32"),
             cos: R.Tensor(("n", {d}), "float32"),
             sin: R.Tensor(("n", {d}), "float32"),
             {main_params}) -> R.Tensor(("n", {h}), "float32"):
        n = T.int64(upper={cfg.max_len})
        {body_calls}
        return {prev}
'''


def build_module(cfg: LlamaConfig = LlamaConfig()):
    import relaxscript as rx
    return rx.from_source(llama_source(cfg))


def make_weights(cfg: LlamaConfig = LlamaConfig(), seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    weights = {}
    for i in range(cfg.layers):
        for name, shape in weight_shapes(cfg).items():
            if name.endswith("norm"):
                w = 1.0 + 0.1 * rng.standard_normal(shape)
            else:
                w = rng.standard_normal(shape) / np.sqrt(shape[0])
            weights[f"{name}_{i}"] = w.astype("float32")
    return weights


def rotary_tables(n: int, cfg: LlamaConfig = LlamaConfig()) -> tuple[np.ndarray, np.ndarray]:
    half = cfg.head_dim // 2
    inv_freq = 1.0 / (10000.0 ** (np.arange(half) / half))
    angles = np.outer(np.arange(n), inv_freq)
    angles = np.concatenate([angles, angles], axis=1)
    return np.cos(angles).astype("float32"), np.sin(angles).astype("float32")


def main_args(x: np.ndarray, weights: dict, cfg: LlamaConfig = LlamaConfig()) -> list[np.ndarray]:
    """Positional arguments of ``main`` in order."""
    cos, sin = rotary_tables(x.shape[0], cfg)
    return [x, cos, sin] + [weights[f"{name}_{i}"] for i in range(cfg.layers) for name in LAYER_WEIGHTS]


def numpy_reference(x: np.ndarray, weights: dict, cfg: LlamaConfig = LlamaConfig()) -> np.ndarray:
    """The same model written directly in NumPy (float64 internally), as an independent oracle."""
    n = x.shape[0]
    nh, d = cfg.heads, cfg.head_dim
    cos, sin = rotary_tables(n, cfg)
    cos, sin = cos.astype(np.float64)[:, None, :], sin.astype(np.float64)[:, None, :]

    def rms_norm(v, w):
        return v / np.sqrt(np.mean(v * v, axis=-1, keepdims=True) + cfg.eps) * w

    def rope(v):
        rotated = np.concatenate([-v[..., d // 2:], v[..., : d // 2]], axis=-1)
        return v * cos + rotated * sin

    h = x.astype(np.float64)
    mask = np.triu(np.full((n, n), -1e9), k=1)
    for i in range(cfg.layers):
        w = {name: weights[f"{name}_{i}"].astype(np.float64) for name in LAYER_WEIGHTS}
        normed = rms_norm(h, w["attn_norm"])
        q = rope((normed @ w["wq"]).reshape(n, nh, d)).transpose(1, 0, 2)
        k = rope((normed @ w["wk"]).reshape(n, nh, d)).transpose(1, 2, 0)
        v = (normed @ w["wv"]).reshape(n, nh, d).transpose(1, 0, 2)
        scores = q @ k / np.sqrt(d) + mask
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        probs = scores / scores.sum(axis=-1, keepdims=True)
        attn = (probs @ v).transpose(1, 0, 2).reshape(n, cfg.hidden)
        h = h + attn @ w["wo"]
        normed2 = rms_norm(h, w["mlp_norm"])
        gate = normed2 @ w["w_gate"]
        gate = gate / (1.0 + np.exp(-gate))
        h = h + (gate * (normed2 @ w["w_up"])) @ w["w_down"]
    return h.astype(np.float32)


if __name__ == "__main__":
    import relaxscript as rx
    cfg = TINY
    mod = build_module(cfg)
    print(mod.script())
    weights = make_weights(cfg)
    for n in (1, 5, 9):
        x = np.random.default_rng(n).standard_normal((n, cfg.hidden)).astype("float32")
        got = rx.interpret(mod, "main", *main_args(x, weights, cfg))
        err = np.abs(got - numpy_reference(x, weights, cfg)).max()
        print(f"n={n}: max abs error vs NumPy reference {err:.2e}")
