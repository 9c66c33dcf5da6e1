"""TVM's ``R.nn.batch_norm``, ``group_norm``, ``instance_norm`` and ``prelu``.

- ``batch_norm(data, gamma, beta, moving_mean, moving_var, axis, epsilon=1e-5,
  center=True, scale=True, momentum=0.1, training=True)`` gives the tuple
  ``(out, new_mean, new_var)``. Training normalises with the batch statistics
  (every axis but ``axis``; the variance divides by the count, as TVM's) and moves
  the running ones: ``new = (1 - momentum) * old + momentum * batch``. Inference
  normalises with ``moving_mean``/``moving_var`` and returns them unchanged.
- ``group_norm(data, gamma, beta, num_groups, channel_axis, axes, ...)``: statistics
  over each group of ``C / num_groups`` consecutive channels and ``axes``;
  ``instance_norm(data, gamma, beta, channel_axis=1, axes=None, ...)`` is the case of
  one channel per group (``axes=None``: every axis but the first and the channel).
  ``gamma``/``beta`` have shape ``(C,)``.
- ``prelu(x, alpha, axis=1)``: ``x`` where ``x >= 0``, else ``alpha[c] * x`` (``alpha``
  of length ``C`` or 1).
"""
from __future__ import annotations

import numpy as np

from tensorir import expr as E

from ..struct_info import TensorStructInfo, TupleStructInfo
from ._convert import as_tensor, check_attr_number, make_call
from ._infer_util import (attr_axes, attr_int, const_value, format_sinfo, normalize_axes,
                          normalize_axis, prove_not_equal, tensor_arg)
from .nn import _require_float
from .registry import OpAttributeError, register_op


def _flag(value, op: str, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise OpAttributeError(f"R.nn.{op}: {name} must be a bool, got {value!r}")
    return bool(value)


def _epsilon(value, op: str) -> float:
    value = check_attr_number(value, op, "epsilon")
    if value < 0:
        raise OpAttributeError(f"R.nn.{op}: epsilon must be non-negative, got {value}")
    return float(value)


def _check_channel_params(ctx, call, x: TensorStructInfo, channel: int, params, what: str = "parameter",
                          mismatch: str | None = None) -> None:
    """Each parameter (a norm's scale and shift, a loss's class weights) is a 1-D tensor of x's
    dtype with x.shape[channel] elements; ``what`` names them in the errors, ``mismatch`` says
    what a wrong length misses (default "does not match axis <channel>")."""
    for p in params:
        if x.dtype is not None and p.dtype is not None and p.dtype != x.dtype:
            ctx.error(f"{call.op.name}: {what} {format_sinfo(p)} does not match the dtype of "
                      f"{format_sinfo(x)}")
        if p.ndim >= 0 and p.ndim != 1:
            ctx.error(f"{call.op.name}: {what} {format_sinfo(p)} must be 1-D")
        if p.shape is not None and x.shape is not None and prove_not_equal(
                ctx, p.shape[0], x.shape[channel]):
            ctx.error(f"{call.op.name}: {what} {format_sinfo(p)} "
                      f"{mismatch or f'does not match axis {channel}'} of {format_sinfo(x)}")


def _along(values: np.ndarray, ndim: int, axis: int) -> np.ndarray:
    """A 1-D array laid out along ``axis`` for broadcasting against an ``ndim``-D one."""
    shape = [1] * ndim
    shape[axis] = values.shape[0]
    return values.reshape(shape)


# ---------------------------------------------------------------- batch_norm
def batch_norm(data, gamma, beta, moving_mean, moving_var, axis: int, epsilon: float = 1e-5,
               center: bool = True, scale: bool = True, momentum: float = 0.1,
               training: bool = True):
    """R.nn.batch_norm(data, gamma, beta, moving_mean, moving_var, axis, epsilon=1e-5,
    center=True, scale=True, momentum=0.1, training=True)."""
    op = "batch_norm"
    return make_call("relax.nn.batch_norm",
                     [as_tensor(t) for t in (data, gamma, beta, moving_mean, moving_var)],
                     {"axis": attr_int(axis, op, "axis"), "epsilon": _epsilon(epsilon, op),
                      "center": _flag(center, op, "center"), "scale": _flag(scale, op, "scale"),
                      "momentum": float(check_attr_number(momentum, op, "momentum")),
                      "training": _flag(training, op, "training")})


def _infer_batch_norm(call, ctx) -> TupleStructInfo:
    x = tensor_arg(call, 0, ctx, "data")
    params = [tensor_arg(call, i, ctx) for i in range(1, 5)]
    _require_float(ctx, call, x)
    if x.ndim >= 0:
        axis = normalize_axis(ctx, call, call.attrs["axis"], x.ndim, x)
        _check_channel_params(ctx, call, x, axis, params)
    return TupleStructInfo([TensorStructInfo(x.shape, x.dtype, x.ndim), params[2], params[3]])


def _batch_norm_reference(data, gamma, beta, moving_mean, moving_var, axis, epsilon=1e-5,
                          center=True, scale=True, momentum=0.1, training=True):
    axis %= data.ndim
    others = tuple(a for a in range(data.ndim) if a != axis)
    work = data.astype(np.float64)
    if training:
        mean, var = work.mean(axis=others), work.var(axis=others)
    else:
        mean, var = moving_mean.astype(np.float64), moving_var.astype(np.float64)
    out = (work - _along(mean, data.ndim, axis)) / np.sqrt(_along(var, data.ndim, axis) + epsilon)
    if scale:
        out = out * _along(gamma, data.ndim, axis)
    if center:
        out = out + _along(beta, data.ndim, axis)
    if training:
        new_mean = (1 - momentum) * moving_mean + momentum * mean
        new_var = (1 - momentum) * moving_var + momentum * var
    else:
        new_mean, new_var = moving_mean, moving_var
    return (out.astype(data.dtype), np.asarray(new_mean, dtype=moving_mean.dtype),
            np.asarray(new_var, dtype=moving_var.dtype))


register_op("relax.nn.batch_norm", _infer_batch_norm, _batch_norm_reference,
            attr_names=("axis", "epsilon", "center", "scale", "momentum", "training"),
            constructor=batch_norm)


# ---------------------------------------------------------------- group_norm / instance_norm
def group_norm(data, gamma, beta, num_groups: int, channel_axis: int, axes, epsilon: float = 1e-5,
               center: bool = True, scale: bool = True):
    """R.nn.group_norm(data, gamma, beta, num_groups, channel_axis, axes, epsilon=1e-5,
    center=True, scale=True)."""
    op = "group_norm"
    groups = attr_int(num_groups, op, "num_groups")
    if groups < 1:
        raise OpAttributeError(f"R.nn.group_norm: num_groups must be positive, got {groups}")
    return make_call("relax.nn.group_norm", [as_tensor(data), as_tensor(gamma), as_tensor(beta)],
                     {"num_groups": groups, "channel_axis": attr_int(channel_axis, op, "channel_axis"),
                      "axes": attr_axes(axes, op, "axes") or (), "epsilon": _epsilon(epsilon, op),
                      "center": _flag(center, op, "center"), "scale": _flag(scale, op, "scale")})


def instance_norm(data, gamma, beta, channel_axis: int = 1, axes=None, epsilon: float = 1e-5,
                  center: bool = True, scale: bool = True):
    """R.nn.instance_norm(data, gamma, beta, channel_axis=1, axes=None, epsilon=1e-5,
    center=True, scale=True)."""
    op = "instance_norm"
    return make_call("relax.nn.instance_norm", [as_tensor(data), as_tensor(gamma), as_tensor(beta)],
                     {"channel_axis": attr_int(channel_axis, op, "channel_axis"),
                      "axes": attr_axes(axes, op, "axes"), "epsilon": _epsilon(epsilon, op),
                      "center": _flag(center, op, "center"), "scale": _flag(scale, op, "scale")})


def instance_axes(ndim: int, channel: int, axes) -> list[int]:
    """``axes`` of instance_norm normalised; None means every axis but 0 and the channel."""
    if axes is None:
        return [a for a in range(1, ndim) if a != channel]
    return [a % ndim for a in axes]


def _infer_group_norm(call, ctx) -> TensorStructInfo:
    x = tensor_arg(call, 0, ctx, "data")
    params = [tensor_arg(call, i, ctx) for i in (1, 2)]
    _require_float(ctx, call, x)
    if x.ndim < 0:
        return TensorStructInfo(None, x.dtype)
    a = call.attrs
    channel = normalize_axis(ctx, call, a["channel_axis"], x.ndim, x)
    if a["axes"] is not None:
        axes = normalize_axes(ctx, call, a["axes"], x.ndim, x)
        if channel in axes:
            ctx.error(f"{call.op.name}: axes {a['axes']} include the channel axis {a['channel_axis']}")
    _check_channel_params(ctx, call, x, channel, params)
    if "num_groups" in a and x.shape is not None:
        channels = const_value(x.shape[channel])
        if channels is not None and channels % a["num_groups"]:
            ctx.error(f"{call.op.name}: {channels} channels of {format_sinfo(x)} do not split into "
                      f"{a['num_groups']} groups")
    return TensorStructInfo(x.shape, x.dtype, x.ndim)


def group_norm_numpy(data, gamma, beta, groups, channel, axes, epsilon, center, scale):
    channel %= data.ndim
    size = data.shape[channel] // groups
    work = data.astype(np.float64)
    stats_axes = tuple(sorted({channel, *[a % data.ndim for a in axes]}))
    parts = []
    for g in range(groups):
        part = np.take(work, np.arange(g * size, (g + 1) * size), axis=channel)
        mean = part.mean(axis=stats_axes, keepdims=True)
        var = part.var(axis=stats_axes, keepdims=True)
        parts.append((part - mean) / np.sqrt(var + epsilon))
    out = np.concatenate(parts, axis=channel) if parts else work
    if scale:
        out = out * _along(gamma, data.ndim, channel)
    if center:
        out = out + _along(beta, data.ndim, channel)
    return out.astype(data.dtype)


def _group_norm_reference(data, gamma, beta, num_groups, channel_axis, axes, epsilon=1e-5,
                          center=True, scale=True):
    return group_norm_numpy(data, gamma, beta, num_groups, channel_axis, axes, epsilon, center,
                            scale)


def _instance_norm_reference(data, gamma, beta, channel_axis=1, axes=None, epsilon=1e-5,
                             center=True, scale=True):
    channel = channel_axis % data.ndim
    return group_norm_numpy(data, gamma, beta, data.shape[channel], channel,
                            instance_axes(data.ndim, channel, axes), epsilon, center, scale)


register_op("relax.nn.group_norm", _infer_group_norm, _group_norm_reference,
            attr_names=("num_groups", "channel_axis", "axes", "epsilon", "center", "scale"),
            constructor=group_norm)
register_op("relax.nn.instance_norm", _infer_group_norm, _instance_norm_reference,
            attr_names=("channel_axis", "axes", "epsilon", "center", "scale"),
            constructor=instance_norm)


# ---------------------------------------------------------------- prelu
def prelu(x, alpha, axis: int = 1):
    """R.nn.prelu(x, alpha, axis=1): ``x`` where ``x >= 0``, else ``alpha[c] * x``."""
    return make_call("relax.nn.prelu", [as_tensor(x), as_tensor(alpha)],
                     {"axis": attr_int(axis, "prelu", "axis")})


def _infer_prelu(call, ctx) -> TensorStructInfo:
    x = tensor_arg(call, 0, ctx, "x")
    alpha = tensor_arg(call, 1, ctx, "alpha")
    _require_float(ctx, call, x)
    if x.ndim >= 0:
        axis = normalize_axis(ctx, call, call.attrs["axis"], x.ndim, x)
        if x.dtype is not None and alpha.dtype is not None and alpha.dtype != x.dtype:
            ctx.error(f"relax.nn.prelu: alpha {format_sinfo(alpha)} does not match the dtype of "
                      f"{format_sinfo(x)}")
        if alpha.ndim >= 0 and alpha.ndim != 1:
            ctx.error(f"relax.nn.prelu: alpha {format_sinfo(alpha)} must be 1-D")
        if alpha.shape is not None and x.shape is not None:
            n = alpha.shape[0]
            if prove_not_equal(ctx, n, x.shape[axis]) and prove_not_equal(ctx, n, E.IntImm(1)):
                ctx.error(f"relax.nn.prelu: alpha {format_sinfo(alpha)} must have 1 or "
                          f"{x.shape[axis]} elements for axis {axis} of {format_sinfo(x)}")
    return TensorStructInfo(x.shape, x.dtype, x.ndim)


def _prelu_reference(x, alpha, axis=1):
    slope = _along(alpha, x.ndim, axis % x.ndim) if x.ndim else alpha.reshape(())
    return np.where(x < 0, slope * x, x).astype(x.dtype)


register_op("relax.nn.prelu", _infer_prelu, _prelu_reference, attr_names=("axis",),
            constructor=prelu)

__all__ = ["batch_norm", "group_norm", "instance_norm", "prelu"]
