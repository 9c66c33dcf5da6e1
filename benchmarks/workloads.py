"""Model workloads shared by the benchmarks: relaxscript source, NumPy and PyTorch versions.

Each workload is float32 with a symbolic leading dimension ``n``; weights are
drawn from a fixed seed. The NumPy versions are hand-written float32 code
(what a user would write without a compiler); the PyTorch versions run in
eager mode. ``Workload.inputs(n)`` gives the positional arguments of
``main``, in the same order for all three implementations.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
for _path in (ROOT, os.path.join(ROOT, "src")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from examples import llama_decoder as llama  # noqa: E402

LLAMA_CONFIG = llama.LlamaConfig(hidden=512, heads=8, ffn=1408, layers=2, max_len=512)
MLP_HIDDEN, MLP_FFN = 1024, 4096
NORM_WIDTH = 4096
GELU_C = float(np.sqrt(2.0 / np.pi))


@dataclass
class Workload:
    """One benchmark model: its relaxscript text and two independent implementations."""
    name: str
    description: str
    source: str
    sizes: tuple[int, ...]
    make_weights: Callable[[], list[np.ndarray]]
    make_activations: Callable[[int, np.random.Generator], list[np.ndarray]]
    numpy_fn: Callable[..., np.ndarray]
    torch_fn: Callable[..., object]            # takes torch tensors, returns a torch tensor
    flops: Callable[[int], float] | None = None   # multiply-adds x 2 at n rows (None: not GEMM-bound)
    _weights: list = field(default=None, repr=False)

    def inputs(self, n: int, seed: int = 0) -> list[np.ndarray]:
        return self.activations(n, seed) + self.weights()

    def weights(self) -> list[np.ndarray]:
        if self._weights is None:
            self._weights = self.make_weights()
        return self._weights

    def activations(self, n: int, seed: int = 0) -> list[np.ndarray]:
        """The leading (non-weight) arguments of ``main`` for ``n`` rows."""
        return self.make_activations(n, np.random.default_rng(seed + n))

    def module(self, bound_weights: bool):
        """The relaxscript module; with ``bound_weights`` its weights are constants (``BindParams``)
        and ``main`` takes only the activations, as onnxruntime's initializers are."""
        import relaxscript as rx
        from relaxscript.transform import BindParams
        mod = rx.from_source(self.source)
        mod = mod if isinstance(mod, rx.IRModule) else rx.IRModule({"main": mod})
        if not bound_weights:
            return mod
        params = mod["main"].params
        weights = self.weights()
        names = [p.name_hint for p in params[len(params) - len(weights):]]
        return BindParams("main", dict(zip(names, weights)))(mod)


def _randn(rng, shape, scale=1.0):
    return (scale * rng.standard_normal(shape)).astype(np.float32)


# ---------------------------------------------------------------- (a) MLP block

MLP_SOURCE = f'''
@R.ir_module
class Mlp:
    @R.function
    def main(x: R.Tensor(("n", {MLP_HIDDEN}), "float32"), w1: R.Tensor(({MLP_HIDDEN}, {MLP_FFN}), "float32"),
             b1: R.Tensor(({MLP_FFN},), "float32"), w2: R.Tensor(({MLP_FFN}, {MLP_HIDDEN}), "float32"),
             b2: R.Tensor(({MLP_HIDDEN},), "float32")) -> R.Tensor(("n", {MLP_HIDDEN}), "float32"):
        n = T.int64(upper=2048)
        with R.dataflow():
            hidden = R.nn.gelu_tanh(R.add(R.matmul(x, w1), b1))
            out = R.add(R.add(R.matmul(hidden, w2), b2), x)
            R.output(out)
        return out
'''


def _mlp_weights():
    rng = np.random.default_rng(1)
    return [_randn(rng, (MLP_HIDDEN, MLP_FFN), MLP_HIDDEN ** -0.5), _randn(rng, (MLP_FFN,), 0.1),
            _randn(rng, (MLP_FFN, MLP_HIDDEN), MLP_FFN ** -0.5), _randn(rng, (MLP_HIDDEN,), 0.1)]


def _gelu_tanh_np(v):
    return 0.5 * v * (1.0 + np.tanh(np.float32(GELU_C) * (v + np.float32(0.044715) * v * v * v)))


def mlp_numpy(x, w1, b1, w2, b2):
    return _gelu_tanh_np(x @ w1 + b1) @ w2 + b2 + x


def mlp_torch(x, w1, b1, w2, b2):
    import torch.nn.functional as F
    return F.gelu(x @ w1 + b1, approximate="tanh") @ w2 + b2 + x


# ------------------------------------------------ (b) layer_norm -> scale -> softmax

NORM_SOURCE = f'''
@R.ir_module
class NormSoftmax:
    @R.function
    def main(x: R.Tensor(("n", {NORM_WIDTH}), "float32"), gamma: R.Tensor(({NORM_WIDTH},), "float32"),
             beta: R.Tensor(({NORM_WIDTH},), "float32")) -> R.Tensor(("n", {NORM_WIDTH}), "float32"):
        n = T.int64(upper=2048)
        with R.dataflow():
            normed = R.nn.layer_norm(x, gamma, beta, axes=-1, epsilon=1e-05)
            scaled = R.multiply(normed, R.const(0.125, "float32"))
            out = R.nn.softmax(scaled, axis=-1)
            R.output(out)
        return out
'''


def _norm_weights():
    rng = np.random.default_rng(2)
    return [(1.0 + _randn(rng, (NORM_WIDTH,), 0.1)).astype(np.float32), _randn(rng, (NORM_WIDTH,), 0.1)]


def norm_numpy(x, gamma, beta):
    mean = x.mean(axis=-1, keepdims=True)
    centered = x - mean
    var = np.mean(centered * centered, axis=-1, keepdims=True)
    scaled = (centered / np.sqrt(var + np.float32(1e-5)) * gamma + beta) * np.float32(0.125)
    e = np.exp(scaled - scaled.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def norm_torch(x, gamma, beta):
    import torch.nn.functional as F
    return F.softmax(F.layer_norm(x, (NORM_WIDTH,), gamma, beta, 1e-5) * 0.125, dim=-1)


# ------------------------------------------------ (c) 2-layer Llama-style prefill

def _llama_weights():
    weights = llama.make_weights(LLAMA_CONFIG, seed=3)
    return [weights[f"{name}_{i}"] for i in range(LLAMA_CONFIG.layers) for name in llama.LAYER_WEIGHTS]


def _llama_activations(n, rng):
    cos, sin = llama.rotary_tables(n, LLAMA_CONFIG)
    return [_randn(rng, (n, LLAMA_CONFIG.hidden)), cos, sin]


def _llama_layers(weights):
    count = len(llama.LAYER_WEIGHTS)
    return [dict(zip(llama.LAYER_WEIGHTS, weights[i * count:(i + 1) * count]))
            for i in range(LLAMA_CONFIG.layers)]


def llama_numpy(x, cos, sin, *weights):
    cfg = LLAMA_CONFIG
    n, nh, d = x.shape[0], cfg.heads, cfg.head_dim
    cos, sin = cos[:, None, :], sin[:, None, :]
    mask = np.triu(np.full((n, n), -1e9, dtype=np.float32), k=1)
    scale = np.float32(1.0 / np.sqrt(d))

    def rms_norm(v, w):
        return v / np.sqrt(np.mean(v * v, axis=-1, keepdims=True) + np.float32(cfg.eps)) * w

    def rope(v):
        rotated = np.concatenate([-v[..., d // 2:], v[..., :d // 2]], axis=-1)
        return v * cos + rotated * sin

    h = x
    for w in _llama_layers(weights):
        normed = rms_norm(h, w["attn_norm"])
        q = rope((normed @ w["wq"]).reshape(n, nh, d)).transpose(1, 0, 2)
        k = rope((normed @ w["wk"]).reshape(n, nh, d)).transpose(1, 2, 0)
        v = (normed @ w["wv"]).reshape(n, nh, d).transpose(1, 0, 2)
        scores = q @ k * scale + mask
        e = np.exp(scores - scores.max(axis=-1, keepdims=True))
        attn = (e / e.sum(axis=-1, keepdims=True)) @ v
        h = h + attn.transpose(1, 0, 2).reshape(n, cfg.hidden) @ w["wo"]
        normed2 = rms_norm(h, w["mlp_norm"])
        gate = normed2 @ w["w_gate"]
        h = h + (gate / (1.0 + np.exp(-gate)) * (normed2 @ w["w_up"])) @ w["w_down"]
    return h


def llama_torch(x, cos, sin, *weights):
    import torch
    import torch.nn.functional as F
    cfg = LLAMA_CONFIG
    n, nh, d = x.shape[0], cfg.heads, cfg.head_dim
    cos, sin = cos[:, None, :], sin[:, None, :]
    mask = torch.triu(torch.full((n, n), -1e9), diagonal=1)

    def rms_norm(v, w):
        return v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + cfg.eps) * w

    def rope(v):
        return v * cos + torch.cat([-v[..., d // 2:], v[..., :d // 2]], dim=-1) * sin

    h = x
    for w in _llama_layers(weights):
        normed = rms_norm(h, w["attn_norm"])
        q = rope((normed @ w["wq"]).view(n, nh, d)).transpose(0, 1)
        k = rope((normed @ w["wk"]).view(n, nh, d)).permute(1, 2, 0)
        v = (normed @ w["wv"]).view(n, nh, d).transpose(0, 1)
        probs = torch.softmax(q @ k * (1.0 / d ** 0.5) + mask, dim=-1)
        h = h + (probs @ v).transpose(0, 1).reshape(n, cfg.hidden) @ w["wo"]
        normed2 = rms_norm(h, w["mlp_norm"])
        h = h + (F.silu(normed2 @ w["w_gate"]) * (normed2 @ w["w_up"])) @ w["w_down"]
    return h


# ---------------------------------------------------------------- FLOPs (the roofline's numerator)

def mlp_flops(n: int) -> float:
    return 2.0 * n * MLP_HIDDEN * MLP_FFN * 2


def llama_flops(n: int) -> float:
    """The projections plus the causal attention's two products (a row attends to itself and
    the rows before it: n (n + 1) / 2 scores a head)."""
    cfg = LLAMA_CONFIG
    # merged q/k/v, the output projection, merged gate/up, down
    h, f = cfg.hidden, cfg.ffn
    projections = h * 3 * h + h * h + h * 2 * f + f * h
    attention = 2 * cfg.heads * cfg.head_dim * n * (n + 1) / 2
    return 2.0 * cfg.layers * (n * projections + attention)


# ---------------------------------------------------------------- registry

WORKLOADS = {
    "mlp": Workload(
        "mlp", f"x[n,{MLP_HIDDEN}] -> linear {MLP_FFN} + gelu(tanh) -> linear {MLP_HIDDEN} + residual",
        MLP_SOURCE, (1, 16, 128, 512), _mlp_weights,
        lambda n, rng: [_randn(rng, (n, MLP_HIDDEN))], mlp_numpy, mlp_torch, mlp_flops),
    "norm_softmax": Workload(
        "norm_softmax", f"layer_norm -> *0.125 -> softmax over x[n,{NORM_WIDTH}]",
        NORM_SOURCE, (1, 64, 512, 2048), _norm_weights,
        lambda n, rng: [_randn(rng, (n, NORM_WIDTH))], norm_numpy, norm_torch),
    "llama": Workload(
        "llama", "2-layer Llama-style prefill (hidden 512, 8x64 heads, RoPE, causal, SwiGLU 1408)",
        llama.llama_source(LLAMA_CONFIG), (1, 32, 128, 512), _llama_weights,
        _llama_activations, llama_numpy, llama_torch, llama_flops),
}
