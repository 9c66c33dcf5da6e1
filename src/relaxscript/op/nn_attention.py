"""``R.nn.attention(query, key, value, bias=None, scale=None, causal_mask=None)``
in TVM's BSNH layout.

``query`` is ``(batch, seq, heads, head_dim)``, ``key`` ``(batch, seq_kv, heads,
head_dim)``, ``value`` ``(batch, seq_kv, heads, head_dim_v)``; the result is
``(batch, seq, heads, head_dim_v)``. Scores are ``q . k * scale`` (default
``1 / sqrt(head_dim)``) plus ``bias`` (broadcast to ``(batch, heads, seq,
seq_kv)``). ``causal_mask="TopLeft"`` hides key ``j > i``, ``"BottomRight"``
key ``j > i + seq_kv - seq``; hidden scores take the dtype's lowest finite
value (as TVM's legalization), so a row with every key hidden averages all
values uniformly instead of giving NaN. float16 is computed in float32.
"""
from __future__ import annotations

import numpy as np

from tensorir import dtype as dt

from ..struct_info import TensorStructInfo
from ._convert import as_tensor, check_attr_number, make_call
from ._infer_util import (broadcast_shapes, format_sinfo, prove_not_equal, same_dtype, tensor_arg)
from .registry import OpAttributeError, register_op

CAUSAL_MASKS = ("TopLeft", "BottomRight")


def attention(query, key, value, bias=None, scale=None, causal_mask=None, window_size=None):
    """R.nn.attention(query, key, value, bias=None, scale=None, causal_mask=None)."""
    op = "nn.attention"
    if scale is not None:
        scale = float(check_attr_number(scale, op, "scale"))
    if causal_mask is not None and causal_mask not in CAUSAL_MASKS:
        raise OpAttributeError(f"R.{op}: causal_mask must be None, 'TopLeft' or 'BottomRight', "
                               f"got {causal_mask!r}")
    if window_size is not None:
        raise OpAttributeError(f"R.{op}: window_size (sliding-window attention) is not supported")
    args = [as_tensor(query), as_tensor(key), as_tensor(value)]
    if bias is not None:
        args.append(as_tensor(bias))
    return make_call("relax.nn.attention", args, {"scale": scale, "causal_mask": causal_mask})


def _infer_attention(call, ctx) -> TensorStructInfo:
    names = ("query", "key", "value", "bias")
    q, k, v = (tensor_arg(call, i, ctx, names[i]) for i in range(3))
    operands = [q, k, v]
    if len(call.args) == 4:
        operands.append(tensor_arg(call, 3, ctx, "bias"))
    dtype = same_dtype(ctx, call, operands)
    if dtype is not None and not dt.is_float(dtype):
        ctx.error(f"relax.nn.attention requires floating-point tensors, got {format_sinfo(q)}")
    for name, sinfo in zip(names, (q, k, v)):
        if sinfo.ndim >= 0 and sinfo.ndim != 4:
            ctx.error(f"relax.nn.attention: {name} must have 4 dims (batch, seq, heads, head_dim), "
                      f"got {format_sinfo(sinfo)}")
    if q.shape is None or k.shape is None or v.shape is None:
        return TensorStructInfo(None, dtype, 4)
    checks = [("batch", 0, q, k, "query", "key"), ("batch", 0, k, v, "key", "value"),
              ("heads", 2, q, k, "query", "key"), ("heads", 2, k, v, "key", "value"),
              ("head_dim", 3, q, k, "query", "key"), ("seq_kv", 1, k, v, "key", "value")]
    for what, axis, a, b, a_name, b_name in checks:
        if prove_not_equal(ctx, a.shape[axis], b.shape[axis]):
            ctx.error(f"relax.nn.attention: {what} of {a_name} {format_sinfo(a)} and {b_name} "
                      f"{format_sinfo(b)} differ")
    if len(call.args) == 4:
        scores = TensorStructInfo([q.shape[0], q.shape[2], q.shape[1], k.shape[1]], dtype)
        bias = operands[3]
        if bias.ndim > 4:
            ctx.error(f"relax.nn.attention: bias {format_sinfo(bias)} has more dims than the scores "
                      f"{format_sinfo(scores)}")
        broadcast_shapes(ctx, call, [scores, bias])  # raises on a provable mismatch
    return TensorStructInfo([q.shape[0], q.shape[1], q.shape[2], v.shape[3]], dtype)


def attention_reference(query, key, value, bias=None, scale=None, causal_mask=None):
    out_dtype = query.dtype
    acc = "float32" if out_dtype == np.float16 else out_dtype
    q, k, v = (np.transpose(t.astype(acc), (0, 2, 1, 3)) for t in (query, key, value))
    if scale is None:
        scale = 1.0 / np.sqrt(query.shape[3])
    scores = np.matmul(q, np.swapaxes(k, -1, -2)) * np.asarray(scale, acc)
    if bias is not None:
        scores = scores + bias.astype(acc)
    seq, seq_kv = scores.shape[-2:]
    if causal_mask is not None:
        shift = 0 if causal_mask == "TopLeft" else seq_kv - seq
        hidden = np.arange(seq_kv)[None, :] > np.arange(seq)[:, None] + shift
        scores = np.where(hidden, np.finfo(acc).min, scores)
    peak = np.max(scores, axis=-1, keepdims=True, initial=-np.inf)
    e = np.exp(scores - peak)
    with np.errstate(invalid="ignore"):  # an empty key sequence: 0 / 0
        probs = e / np.sum(e, axis=-1, keepdims=True)
    out = np.matmul(probs, v)
    return np.ascontiguousarray(np.transpose(out, (0, 2, 1, 3))).astype(out_dtype)


register_op("relax.nn.attention", _infer_attention, attention_reference,
            attr_names=("scale", "causal_mask"), constructor=attention)

__all__ = ["attention"]
