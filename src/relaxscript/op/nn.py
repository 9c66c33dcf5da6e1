"""Neural-network operators under ``R.nn``: activations, softmax, normalisation.

All but ``relu`` require floating-point tensors (``relu`` also accepts
integers). ``gelu`` is the exact erf form; ``gelu_tanh`` the tanh
approximation. Normalisation parameters (``gamma``, ``beta``, ``weight``)
have the shape of the normalised axes, in the order the axes are given.
"""
from __future__ import annotations

import math

import numpy as np

from tensorir import dtype as dt

from ..struct_info import TensorStructInfo
from ._convert import as_tensor, check_attr_number, make_call
from ._infer_util import (attr_axes, attr_int, format_sinfo, normalize_axes, normalize_axis,
                          prove_not_equal, tensor_arg)
from .registry import OpAttributeError, register_op
from .unary import erf_numpy


def _require_float(ctx, call, sinfo: TensorStructInfo) -> None:
    if sinfo.dtype is not None and not dt.is_float(sinfo.dtype):
        ctx.error(f"{call.op.name} requires a floating-point tensor, got {format_sinfo(sinfo)}")


# ---------------------------------------------------------------- activations
def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


_ACTIVATIONS = {
    "relu": lambda x: np.maximum(x, 0),
    "gelu": lambda x: 0.5 * x * (1.0 + erf_numpy(x / math.sqrt(2.0))),
    "gelu_tanh": lambda x: 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi)
                                                    * (x + 0.044715 * x ** 3))),
    "silu": lambda x: x * _sigmoid(x),
}


def _make_activation(name: str, fn):
    op_name = "relax.nn." + name

    def constructor(x):
        return make_call(op_name, [as_tensor(x)])

    def infer(call, ctx):
        x = tensor_arg(call, 0, ctx)
        if name != "relu":
            _require_float(ctx, call, x)
        return TensorStructInfo(x.shape, x.dtype, x.ndim)

    constructor.__name__ = name
    constructor.__doc__ = f"R.nn.{name}(x): elementwise {name}."
    register_op(op_name, infer, lambda x: np.asarray(fn(x), dtype=x.dtype), constructor=constructor)
    return constructor


for _name, _fn in _ACTIVATIONS.items():
    globals()[_name] = _make_activation(_name, _fn)


# ---------------------------------------------------------------- softmax
# initial=-inf: the max of an empty axis is its identity (the result is empty anyway)
def _softmax_numpy(x, axis):
    shifted = x - np.max(x, axis=axis, keepdims=True, initial=-np.inf)
    e = np.exp(shifted)
    return e / np.sum(e, axis=axis, keepdims=True)


def _log_softmax_numpy(x, axis):
    shifted = x - np.max(x, axis=axis, keepdims=True, initial=-np.inf)
    with np.errstate(divide="ignore"):   # log(0) of an empty axis's sum: -inf, never used
        return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


def _infer_softmax(call, ctx) -> TensorStructInfo:
    x = tensor_arg(call, 0, ctx)
    _require_float(ctx, call, x)
    if x.ndim >= 0:
        normalize_axis(ctx, call, call.attrs["axis"], x.ndim, x)
    return TensorStructInfo(x.shape, x.dtype, x.ndim)


def _make_softmax(name: str, fn):
    def constructor(x, axis: int = -1):
        return make_call("relax.nn." + name, [as_tensor(x)], {"axis": attr_int(axis, name, "axis")})

    constructor.__name__ = name
    constructor.__doc__ = f"R.nn.{name}(x, axis=-1)."
    register_op("relax.nn." + name, _infer_softmax,
                lambda x, axis=-1: np.asarray(fn(x, axis), dtype=x.dtype), attr_names=("axis",),
                constructor=constructor)
    return constructor


softmax = _make_softmax("softmax", _softmax_numpy)
log_softmax = _make_softmax("log_softmax", _log_softmax_numpy)


# ---------------------------------------------------------------- layer_norm / rms_norm
def _norm_attrs(op: str, axes, epsilon) -> dict:
    axes = attr_axes(axes, op, "axes")
    if not axes:
        raise OpAttributeError(f"R.nn.{op}: axes must name at least one axis")
    epsilon = check_attr_number(epsilon, op, "epsilon")
    if epsilon < 0:
        raise OpAttributeError(f"R.nn.{op}: epsilon must be non-negative, got {epsilon}")
    return {"axes": axes, "epsilon": float(epsilon)}


def layer_norm(x, gamma, beta, axes=-1, epsilon: float = 1e-5, center: bool = True,
               scale: bool = True):
    """R.nn.layer_norm(x, gamma, beta, axes=-1, epsilon=1e-5, center=True, scale=True).

    TVM's ``center=False`` / ``scale=False`` (no ``beta`` / no ``gamma``) are kept as
    a zero ``beta`` / unit ``gamma`` (``R.zeros_like`` / ``R.ones_like``), so the op
    itself has no such attributes."""
    from .create import ones_like, zeros_like
    for name, flag in (("center", center), ("scale", scale)):
        if not isinstance(flag, (bool, np.bool_)):
            raise OpAttributeError(f"R.nn.layer_norm: {name} must be a bool, got {flag!r}")
    gamma, beta = as_tensor(gamma), as_tensor(beta)
    if not scale:
        gamma = ones_like(gamma)
    if not center:
        beta = zeros_like(beta)
    return make_call("relax.nn.layer_norm", [as_tensor(x), gamma, beta],
                     _norm_attrs("layer_norm", axes, epsilon))


def rms_norm(x, weight, axes=-1, epsilon: float = 1e-5):
    """R.nn.rms_norm(x, weight, axes=-1, epsilon=1e-5)."""
    return make_call("relax.nn.rms_norm", [as_tensor(x), as_tensor(weight)],
                     _norm_attrs("rms_norm", axes, epsilon))


def _infer_norm(call, ctx) -> TensorStructInfo:
    x = tensor_arg(call, 0, ctx)
    params = [tensor_arg(call, i, ctx) for i in range(1, len(call.args))]
    _require_float(ctx, call, x)
    for p in params:
        if x.dtype is not None and p.dtype is not None and p.dtype != x.dtype:
            ctx.error(f"{call.op.name}: parameter {format_sinfo(p)} does not match the dtype of "
                      f"{format_sinfo(x)}")
    if x.ndim < 0:
        return TensorStructInfo(None, x.dtype)
    axes = normalize_axes(ctx, call, call.attrs["axes"], x.ndim, x)
    for p in params:
        if p.ndim >= 0 and p.ndim != len(axes):
            ctx.error(f"{call.op.name}: parameter {format_sinfo(p)} must have {len(axes)} dims "
                      f"for axes {call.attrs['axes']} of {format_sinfo(x)}")
        if p.shape is not None and x.shape is not None:
            for a, d in zip(axes, p.shape):
                if prove_not_equal(ctx, d, x.shape[a]):
                    ctx.error(f"{call.op.name}: parameter {format_sinfo(p)} does not match axis {a} "
                              f"of {format_sinfo(x)}")
    return TensorStructInfo(x.shape, x.dtype, x.ndim)


def _param_for(param, ndim: int, axes) -> np.ndarray:
    """Lay a parameter of shape x.shape[axes] out for broadcasting against x."""
    order = np.argsort(axes)
    laid = np.transpose(param, order)
    shape = [1] * ndim
    for a, d in zip(sorted(axes), laid.shape):
        shape[a] = d
    return laid.reshape(shape)


def _layer_norm_reference(x, gamma, beta, axes=(-1,), epsilon=1e-5):
    axes = [a % x.ndim for a in axes]
    mean = np.mean(x, axis=tuple(axes), keepdims=True)
    var = np.var(x, axis=tuple(axes), keepdims=True)
    out = (x - mean) / np.sqrt(var + epsilon)
    out = out * _param_for(gamma, x.ndim, axes) + _param_for(beta, x.ndim, axes)
    return np.asarray(out, dtype=x.dtype)


def _rms_norm_reference(x, weight, axes=(-1,), epsilon=1e-5):
    axes = [a % x.ndim for a in axes]
    rms = np.sqrt(np.mean(np.square(x), axis=tuple(axes), keepdims=True) + epsilon)
    return np.asarray(x / rms * _param_for(weight, x.ndim, axes), dtype=x.dtype)


register_op("relax.nn.layer_norm", _infer_norm, _layer_norm_reference,
            attr_names=("axes", "epsilon"), constructor=layer_norm)
register_op("relax.nn.rms_norm", _infer_norm, _rms_norm_reference,
            attr_names=("axes", "epsilon"), constructor=rms_norm)

__all__ = [*_ACTIVATIONS, "softmax", "log_softmax", "layer_norm", "rms_norm"]

# convolutions and pools live in their own files; R.nn exposes them here
from .nn_conv import conv1d, conv2d, conv2d_transpose, conv3d, conv3d_transpose  # noqa: E402
from .nn_attention import attention  # noqa: E402
from .nn_pool import (adaptive_avg_pool2d, adaptive_avg_pool3d, avg_pool2d, avg_pool3d,  # noqa: E402
                      max_pool2d, max_pool3d)

__all__ += ["attention", "conv1d", "conv2d", "conv3d", "conv2d_transpose", "conv3d_transpose",
            "max_pool2d", "avg_pool2d",
            "adaptive_avg_pool2d", "max_pool3d", "avg_pool3d", "adaptive_avg_pool3d"]
from .nn_norm import batch_norm, group_norm, instance_norm, prelu  # noqa: E402

__all__ += ["batch_norm", "group_norm", "instance_norm", "prelu"]
from .nn_extra import (cross_entropy_with_logits, dropout, leakyrelu, nll_loss,  # noqa: E402
                       pixel_shuffle, selu, softplus)

__all__ += ["cross_entropy_with_logits", "dropout", "leakyrelu", "nll_loss", "pixel_shuffle", "selu",
            "softplus"]
from .nn_pad import pad  # noqa: E402

__all__ += ["pad"]
