"""``R.nn.attention`` (BSNH): scores, masked max-subtracted softmax over the keys,
and the weighted sum of values, in the accumulation dtype (float32 for float16)."""
from __future__ import annotations


import numpy as np

from tensorir import expr as E
from tensorir.compute import compute, reduce_axis, reduce_max, reduce_sum

from .common import accumulation_dtype, broadcast_index
from .registry import register_legalize


@register_legalize("relax.nn.attention")
def _attention(ctx, call):
    if call.struct_info.shape is None or any(a.struct_info.shape is None for a in call.args):
        return None
    te = ctx.te(call)
    q = te.placeholder(call.args[0], "query")
    k = te.placeholder(call.args[1], "key")
    v = te.placeholder(call.args[2], "value")
    bias = te.placeholder(call.args[3], "bias") if len(call.args) == 4 else None
    dtype = q.dtype
    acc = accumulation_dtype(dtype)
    batch, seq, heads, head_dim = q.shape
    seq_kv = k.shape[1]
    scale = call.attrs["scale"]
    if scale is None:
        scale_value = E.const(1.0, acc) / E.call_intrin("sqrt", E.cast(acc, head_dim))
    else:
        scale_value = E.const(float(scale), acc)
    mask = call.attrs["causal_mask"]
    lowest = E.const(float(np.finfo(acc).min), acc)

    def scores(b, h, i, j):
        r = reduce_axis(head_dim, "r")
        return reduce_sum(E.cast(acc, q[b, i, h, r.var]) * E.cast(acc, k[b, j, h, r.var]), [r])

    raw = compute([batch, heads, seq, seq_kv], scores, "T_scores", acc)

    def logits(b, h, i, j):
        value = raw[b, h, i, j] * scale_value
        if bias is not None:
            value = value + E.cast(acc, bias[broadcast_index(te, bias.shape, (b, h, i, j))])
        if mask is not None:
            limit = i if mask == "TopLeft" else i + seq_kv - seq
            value = E.select(E.LE(j, limit), value, lowest)
        return value

    logit = compute([batch, heads, seq, seq_kv], logits, "T_logits", acc)

    def row(combine, value_of, name):
        def body(b, h, i):
            j = reduce_axis(seq_kv, "j")
            return combine(value_of(b, h, i, j.var), [j])
        return compute([batch, heads, seq], body, name, acc)

    peak = row(reduce_max, lambda b, h, i, j: logit[b, h, i, j], "T_max")
    exp = compute([batch, heads, seq, seq_kv],
                  lambda b, h, i, j: E.call_intrin("exp", logit[b, h, i, j] - peak[b, h, i]), "T_exp")
    total = row(reduce_sum, lambda b, h, i, j: exp[b, h, i, j], "T_sum")

    def weighted(b, i, h, d):
        j = reduce_axis(seq_kv, "j")
        return reduce_sum(exp[b, h, i, j.var] * E.cast(acc, v[b, j.var, h, d]), [j])

    out_shape = te.out_shape()
    numerator = compute(out_shape, weighted, "T_weighted", acc)
    out = compute(out_shape, lambda b, i, h, d: numerator[b, i, h, d] / total[b, h, i],
                  "T_attention", dtype)
    return te.emit("attention", out)


