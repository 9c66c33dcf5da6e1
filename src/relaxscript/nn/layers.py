"""Layers of ``relaxscript.nn``, named and laid out as in ``torch.nn``.

``Linear.weight`` is ``(out_features, in_features)`` and ``forward`` is
``x @ weight.T`` (DispatchLibrary sends the transposed product to BLAS
without copying the weight). A layer whose weight is stored quantized takes
a ``weight_format`` (see ``nn.quantized``): its parameters are then the
format's arrays standing for the ``(in_features, out_features)`` matrix
(an embedding's ``(embedding_dim, num_embeddings)``), and ``forward``
decodes them with ``R.dequantize``, which the pipeline fuses into the
consuming kernel.
"""
from __future__ import annotations

from .. import op as R
from .module import Module, Parameter


class Linear(Module):
    """``y = x @ weight.T (+ bias)``; ``weight``: (out_features, in_features)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = False,
                 dtype: str = "float32", weight_format=None):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.weight_format = weight_format
        if weight_format is None:
            self.weight = Parameter((out_features, in_features), dtype)
        else:
            self.weight = weight_format.declare((in_features, out_features))
        self.bias = Parameter((out_features,), dtype) if bias else None

    def forward(self, x):
        if self.weight_format is None:
            y = R.matmul(x, R.permute_dims(self.weight))
        else:
            y = R.matmul(x, self.weight_format.decode(self.weight))
        return y if self.bias is None else R.add(y, self.bias)


class Embedding(Module):
    """Rows of ``weight`` (num_embeddings, embedding_dim) picked by integer ids."""

    def __init__(self, num_embeddings: int, embedding_dim: int, dtype: str = "float32",
                 weight_format=None):
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.weight_format = weight_format
        if weight_format is None:
            self.weight = Parameter((num_embeddings, embedding_dim), dtype)
        else:
            self.weight = weight_format.declare((embedding_dim, num_embeddings))

    def forward(self, ids):
        if self.weight_format is None:
            return R.take(self.weight, ids, axis=0)
        return R.permute_dims(self.weight_format.decode_columns(self.weight, ids))


class RMSNorm(Module):
    """``x / sqrt(mean(x^2) + eps) * weight`` over the last axis."""

    def __init__(self, normalized_shape: int, eps: float = 1e-5, dtype: str = "float32"):
        super().__init__()
        self.eps = eps
        self.weight = Parameter((normalized_shape,), dtype)

    def forward(self, x):
        return R.nn.rms_norm(x, self.weight, axes=-1, epsilon=self.eps)


class LayerNorm(Module):
    """``(x - mean) / sqrt(var + eps) * weight + bias`` over the last axis."""

    def __init__(self, normalized_shape: int, eps: float = 1e-5, dtype: str = "float32"):
        super().__init__()
        self.eps = eps
        self.weight = Parameter((normalized_shape,), dtype)
        self.bias = Parameter((normalized_shape,), dtype)

    def forward(self, x):
        return R.nn.layer_norm(x, self.weight, self.bias, axes=-1, epsilon=self.eps)


class SiLU(Module):
    def forward(self, x):
        return R.nn.silu(x)


class GELU(Module):
    """GELU, exact (``erf``) or with the tanh approximation (``approximate="tanh"``)."""

    def __init__(self, approximate: str = "none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate is 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, x):
        return R.nn.gelu_tanh(x) if self.approximate == "tanh" else R.nn.gelu(x)


class ReLU(Module):
    def forward(self, x):
        return R.nn.relu(x)


def silu(x):
    return R.nn.silu(x)


def gelu(x):
    return R.nn.gelu(x)


def relu(x):
    return R.nn.relu(x)


def softmax(x, axis: int = -1):
    return R.nn.softmax(x, axis=axis)
