"""More of TVM's ``R.nn``: ``leakyrelu``, ``softplus``, ``selu`` (elementwise, float),
``cross_entropy_with_logits`` and ``nll_loss`` (scalar losses, or per element for
``nll_loss(reduction="none")``).

- ``leakyrelu(x, alpha=0.01)``: ``x`` where ``x >= 0``, else ``alpha * x``;
- ``softplus(x, beta=1.0, threshold=20.0)``: ``log(1 + exp(beta * x)) / beta``, and ``x``
  where ``beta * x > threshold`` (PyTorch's rule);
- ``selu(x)``: ``scale * (max(x, 0) + min(alpha * (exp(x) - 1), 0))`` with the constants
  of Klambauer et al.;
- ``cross_entropy_with_logits(p, y)``: ``-sum(p * y)``, divided by ``p.shape[0]`` when
  ``p`` has two or more dims;
- ``nll_loss(p, t, weights=None, reduction="mean", ignore_index=-100)``: for
  ``p: (N, C, d...)`` (or ``(C,)``) and ``t: (N, d...)`` (or ``()``), each element loses
  ``-p[n, t, d...] * w[t]`` (0 where ``t == ignore_index``); ``"sum"`` adds them,
  ``"mean"`` divides the sum by the weights of the targets not ignored, ``"none"`` keeps them.
"""
from __future__ import annotations

import numpy as np

from tensorir import dtype as dt

from ..struct_info import TensorStructInfo
from ._convert import as_tensor, check_attr_number, make_call
from ._infer_util import attr_int, format_sinfo, prove_not_equal, tensor_arg
from .nn import _require_float
from .nn_norm import _check_channel_params
from .registry import OpAttributeError, register_op

SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


def _unary_infer(call, ctx) -> TensorStructInfo:
    x = tensor_arg(call, 0, ctx)
    _require_float(ctx, call, x)
    return TensorStructInfo(x.shape, x.dtype, x.ndim)


def leakyrelu(x, alpha: float = 0.01):
    """R.nn.leakyrelu(x, alpha=0.01)."""
    return make_call("relax.nn.leakyrelu", [as_tensor(x)],
                     {"alpha": float(check_attr_number(alpha, "nn.leakyrelu", "alpha"))})


def softplus(x, beta: float = 1.0, threshold: float = 20.0):
    """R.nn.softplus(x, beta=1.0, threshold=20.0)."""
    beta = float(check_attr_number(beta, "nn.softplus", "beta"))
    if beta == 0:
        raise OpAttributeError("R.nn.softplus: beta must not be 0")
    return make_call("relax.nn.softplus", [as_tensor(x)], {
        "beta": beta, "threshold": float(check_attr_number(threshold, "nn.softplus", "threshold"))})


def selu(x):
    """R.nn.selu(x)."""
    return make_call("relax.nn.selu", [as_tensor(x)])


def _leakyrelu_reference(x, alpha=0.01):
    return np.where(x >= 0, x, x * np.asarray(alpha, x.dtype)).astype(x.dtype)


def _softplus_reference(x, beta=1.0, threshold=20.0):
    wide = x.astype(np.float64)
    with np.errstate(over="ignore"):
        soft = np.log1p(np.exp(beta * wide)) / beta
    return np.where(beta * wide > threshold, wide, soft).astype(x.dtype)


def _selu_reference(x):
    wide = x.astype(np.float64)
    return (SELU_SCALE * (np.maximum(wide, 0) + np.minimum(SELU_ALPHA * np.expm1(wide), 0))
            ).astype(x.dtype)


register_op("relax.nn.leakyrelu", _unary_infer, _leakyrelu_reference, attr_names=("alpha",),
            constructor=leakyrelu)
register_op("relax.nn.softplus", _unary_infer, _softplus_reference,
            attr_names=("beta", "threshold"), constructor=softplus)
register_op("relax.nn.selu", _unary_infer, _selu_reference, constructor=selu)


# ---------------------------------------------------------------- cross_entropy_with_logits
def cross_entropy_with_logits(predictions, labels):
    """R.nn.cross_entropy_with_logits(predictions, labels)."""
    return make_call("relax.nn.cross_entropy_with_logits", [as_tensor(predictions), as_tensor(labels)])


def _infer_cross_entropy(call, ctx) -> TensorStructInfo:
    p, y = tensor_arg(call, 0, ctx, "predictions"), tensor_arg(call, 1, ctx, "labels")
    _require_float(ctx, call, p)
    if p.dtype is not None and y.dtype is not None and p.dtype != y.dtype:
        ctx.error(f"{call.op.name}: {format_sinfo(p)} and {format_sinfo(y)} differ in dtype")
    if p.ndim >= 0 and y.ndim >= 0 and p.ndim != y.ndim:
        ctx.error(f"{call.op.name}: {format_sinfo(p)} and {format_sinfo(y)} differ in rank")
    if p.ndim == 0:
        ctx.error(f"{call.op.name}: predictions must have at least one dim, got {format_sinfo(p)}")
    if p.shape is not None and y.shape is not None:
        for a, b in zip(p.shape, y.shape):
            if prove_not_equal(ctx, a, b):
                ctx.error(f"{call.op.name}: {format_sinfo(p)} and {format_sinfo(y)} differ in shape")
    return TensorStructInfo([], p.dtype)


def _cross_entropy_reference(predictions, labels):
    total = -np.sum(predictions.astype(np.float64) * labels)
    if predictions.ndim >= 2:
        total = total / predictions.shape[0]
    return np.asarray(total, dtype=predictions.dtype)


register_op("relax.nn.cross_entropy_with_logits", _infer_cross_entropy, _cross_entropy_reference,
            constructor=cross_entropy_with_logits)


# ---------------------------------------------------------------- nll_loss
REDUCTIONS = ("mean", "sum", "none")


def nll_loss(predictions, targets, weights=None, reduction: str = "mean", ignore_index: int = -100):
    """R.nn.nll_loss(predictions, targets, weights=None, reduction="mean", ignore_index=-100)."""
    if reduction not in REDUCTIONS:
        raise OpAttributeError(f"R.nn.nll_loss: reduction must be one of {', '.join(REDUCTIONS)}, "
                               f"got {reduction!r}")
    args = [as_tensor(predictions), as_tensor(targets)]
    if weights is not None:
        args.append(as_tensor(weights))
    return make_call("relax.nn.nll_loss", args, {
        "reduction": reduction, "ignore_index": attr_int(ignore_index, "nn.nll_loss", "ignore_index")})


def _infer_nll_loss(call, ctx) -> TensorStructInfo:
    p, t = tensor_arg(call, 0, ctx, "predictions"), tensor_arg(call, 1, ctx, "targets")
    _require_float(ctx, call, p)
    if t.dtype is not None and not dt.is_int(t.dtype):
        ctx.error(f"{call.op.name}: targets must be an integer tensor, got {format_sinfo(t)}")
    if p.ndim == 0:
        ctx.error(f"{call.op.name}: predictions must have at least one dim, got {format_sinfo(p)}")
    if p.ndim >= 0 and t.ndim >= 0 and t.ndim != max(p.ndim - 1, 0):
        ctx.error(f"{call.op.name}: targets {format_sinfo(t)} must have one dim less than "
                  f"predictions {format_sinfo(p)}")
    channel = 1 if p.ndim != 1 else 0
    if p.shape is not None and t.shape is not None and p.ndim >= 2:
        for a, b in zip([p.shape[0], *p.shape[2:]], t.shape):
            if prove_not_equal(ctx, a, b):
                ctx.error(f"{call.op.name}: targets {format_sinfo(t)} do not match predictions "
                          f"{format_sinfo(p)}")
    if len(call.args) > 2:   # class weights: one per class of the predictions
        _check_channel_params(ctx, call, p, channel, [tensor_arg(call, 2, ctx, "weights")], what="weights",
                              mismatch="do not match the classes")
    if call.attrs["reduction"] == "none":
        return TensorStructInfo(t.shape, p.dtype, t.ndim)
    return TensorStructInfo([], p.dtype)


def nll_terms(predictions, targets, weights, ignore_index):
    """Per-element loss and weight (float64), 0 where the target is ignored."""
    if predictions.ndim == 1:
        predictions, targets = predictions[None], np.asarray(targets)[None]
    classes = predictions.shape[1]
    if weights is None:
        weights = np.ones(classes)
    keep = targets != ignore_index
    safe = np.where(keep, targets, 0)
    if np.any((safe < -classes) | (safe >= classes)):   # negative ones count from the end,
        raise IndexError(f"nll_loss: a target is outside [-{classes}, {classes})")  # as take's
    safe = np.where(safe < 0, safe + classes, safe)
    picked = np.take_along_axis(predictions.astype(np.float64), safe[:, None], axis=1)[:, 0]
    w = np.where(keep, np.asarray(weights, np.float64)[safe], 0.0)
    return -picked * w, w


def _nll_loss_reference(predictions, targets, weights=None, reduction="mean", ignore_index=-100):
    losses, w = nll_terms(predictions, targets, weights, ignore_index)
    if reduction == "none":
        out = losses.reshape(np.shape(targets))
    elif reduction == "sum":
        out = losses.sum()
    else:
        with np.errstate(invalid="ignore", divide="ignore"):
            out = losses.sum() / w.sum()
    return np.asarray(out, dtype=predictions.dtype)


register_op("relax.nn.nll_loss", _infer_nll_loss, _nll_loss_reference,
            attr_names=("reduction", "ignore_index"), constructor=nll_loss)

__all__ = ["leakyrelu", "softplus", "selu", "cross_entropy_with_logits", "nll_loss"]


# ---------------------------------------------------------------- pixel_shuffle
def pixel_shuffle(data, upscale_factor: int):
    """R.nn.pixel_shuffle(data, upscale_factor): ``(..., C * r * r, H, W)`` to
    ``(..., C, H * r, W * r)``; output ``[c, h, w]`` reads input
    ``[c * r * r + (h % r) * r + w % r, h // r, w // r]`` (PyTorch's order)."""
    r = attr_int(upscale_factor, "nn.pixel_shuffle", "upscale_factor")
    if r < 1:
        raise OpAttributeError(f"R.nn.pixel_shuffle: upscale_factor must be positive, got {r}")
    return make_call("relax.nn.pixel_shuffle", [as_tensor(data)], {"upscale_factor": r})


def _infer_pixel_shuffle(call, ctx) -> TensorStructInfo:
    from ._infer_util import simplify
    x = tensor_arg(call, 0, ctx, "data")
    r = call.attrs["upscale_factor"]
    if x.ndim >= 0 and x.ndim < 3:
        ctx.error(f"{call.op.name}: data must have at least 3 dims (C, H, W), got {format_sinfo(x)}")
    if x.shape is None:
        return TensorStructInfo(None, x.dtype, x.ndim)
    *lead, c, h, w = x.shape
    if prove_not_equal(ctx, c % (r * r), 0):
        ctx.error(f"{call.op.name}: {c} channels of {format_sinfo(x)} are not a multiple of "
                  f"upscale_factor ** 2 = {r * r}")
    return TensorStructInfo([*lead, simplify(ctx, c // (r * r)), simplify(ctx, h * r),
                             simplify(ctx, w * r)], x.dtype)


def _pixel_shuffle_reference(data, upscale_factor):
    r = upscale_factor
    *lead, c, h, w = data.shape
    split = data.reshape(*lead, c // (r * r), r, r, h, w)
    n = len(lead)
    order = [*range(n), n, n + 3, n + 1, n + 4, n + 2]
    return np.ascontiguousarray(split.transpose(order)).reshape(*lead, c // (r * r), h * r, w * r)


register_op("relax.nn.pixel_shuffle", _infer_pixel_shuffle, _pixel_shuffle_reference,
            attr_names=("upscale_factor",), constructor=pixel_shuffle)

__all__ += ["pixel_shuffle"]


# ---------------------------------------------------------------- dropout
def dropout(data, rate: float = 0.5):
    """R.nn.dropout(data, rate=0.5): the tuple ``(out, mask)``. Executed as at inference
    (this compiler runs models, it does not train them): ``out`` is ``data`` and ``mask``
    is all ones; TVM leaves the op to the frontends the same way."""
    rate = float(check_attr_number(rate, "nn.dropout", "rate"))
    if not 0.0 <= rate < 1.0:
        raise OpAttributeError(f"R.nn.dropout: rate must be in [0, 1), got {rate}")
    return make_call("relax.nn.dropout", [as_tensor(data)], {"rate": rate})


def _infer_dropout(call, ctx):
    from ..struct_info import TupleStructInfo
    x = _unary_infer(call, ctx)
    return TupleStructInfo([x, TensorStructInfo(x.shape, x.dtype, x.ndim)])


def _dropout_reference(data, rate=0.5):
    return data.copy(), np.ones_like(data)


register_op("relax.nn.dropout", _infer_dropout, _dropout_reference, attr_names=("rate",),
            constructor=dropout)

__all__ += ["dropout"]
