"""``R.nn.leakyrelu`` / ``softplus`` / ``selu`` (elementwise, as the references),
``cross_entropy_with_logits`` (one full reduction) and ``nll_loss`` (a gather of each
target's prediction through ``T.checked_index``, then the reduction)."""
from __future__ import annotations

from tensorir import expr as E
from tensorir.compute import compute, reduce_axis, reduce_sum

from ...op.nn_extra import SELU_ALPHA, SELU_SCALE
from .common import accumulation_dtype, guarded
from .elementwise import _elementwise
from .registry import register_legalize


@register_legalize("relax.nn.leakyrelu")
def _leakyrelu(ctx, call):
    def fn(x):
        return E.select(E.GE(x, E.const(0, x.dtype)), x, x * E.const(call.attrs["alpha"], x.dtype))
    return _elementwise(call, ctx, fn)


@register_legalize("relax.nn.softplus")
def _softplus(ctx, call):
    beta, threshold = call.attrs["beta"], call.attrs["threshold"]

    def fn(x):
        scaled = E.const(beta, x.dtype) * x
        soft = E.call_intrin("log1p", E.call_intrin("exp", scaled)) / E.const(beta, x.dtype)
        return E.select(E.GT(scaled, E.const(threshold, x.dtype)), x, soft)
    return _elementwise(call, ctx, fn)


@register_legalize("relax.nn.selu")
def _selu(ctx, call):
    def fn(x):
        zero = E.const(0, x.dtype)
        neg = E.const(SELU_ALPHA, x.dtype) * (E.call_intrin("exp", x) - E.const(1, x.dtype))
        return E.const(SELU_SCALE, x.dtype) * (E.max_(x, zero) + E.min_(neg, zero))
    return _elementwise(call, ctx, fn)


def _total(shape, value_of, name: str, dtype: str):
    """``sum(value_of(index))`` over every index of ``shape``: a 0-d stage."""
    def body():
        axes = [reduce_axis(d, f"k{i}") for i, d in enumerate(shape)]
        return reduce_sum(value_of(tuple(a.var for a in axes)), axes)
    return compute([], body, name, dtype)


@register_legalize("relax.nn.cross_entropy_with_logits")
def _cross_entropy(ctx, call):
    te = ctx.te(call)
    p = te.placeholder(call.args[0], "predictions")
    y = te.placeholder(call.args[1], "labels")
    acc = accumulation_dtype(p.dtype)
    total = _total(p.shape, lambda i: E.cast(acc, p[i]) * E.cast(acc, y[i]), "T_sum", acc)
    count = E.cast(acc, p.shape[0]) if p.ndim >= 2 else E.const(1, acc)
    out = compute([], lambda: E.cast(p.dtype, E.const(0, acc) - total[()] / count),
                  "T_cross_entropy", p.dtype)
    return te.emit("cross_entropy_with_logits", out)


@register_legalize("relax.nn.nll_loss")
def _nll_loss(ctx, call):
    te = ctx.te(call)
    p = te.placeholder(call.args[0], "predictions")
    t = te.placeholder(call.args[1], "targets")
    w = te.placeholder(call.args[2], "weights") if len(call.args) > 2 else None
    acc = accumulation_dtype(p.dtype)
    ignore = call.attrs["ignore_index"]
    classes = p.shape[0] if p.ndim == 1 else p.shape[1]

    def parts(i):
        """The loss and the weight of target element ``i`` (both 0 when it is ignored)."""
        target = t[i]
        keep = E.NE(target, E.const(ignore, t.dtype))
        cls = E.checked_index(E.select(keep, target, E.const(0, t.dtype)), classes)
        index = (cls,) if p.ndim == 1 else (i[0], cls, *i[1:])
        weight = E.cast(acc, w[(cls,)]) if w is not None else E.const(1, acc)
        weight = E.select(keep, weight, E.const(0, acc))
        return E.const(0, acc) - E.cast(acc, p[index]) * weight, weight

    reduction = call.attrs["reduction"]
    if reduction == "none":
        out = compute(t.shape, lambda *i: E.cast(p.dtype, parts(i)[0]), "T_nll_loss", p.dtype)
        return te.emit("nll_loss", out)
    losses = _total(t.shape, lambda i: parts(i)[0], "T_loss_sum", acc)
    if reduction == "sum":
        out = compute([], lambda: E.cast(p.dtype, losses[()]), "T_nll_loss", p.dtype)
    else:
        weights = _total(t.shape, lambda i: parts(i)[1], "T_weight_sum", acc)
        out = compute([], lambda: E.cast(p.dtype, losses[()] / weights[()]), "T_nll_loss", p.dtype)
    return te.emit("nll_loss", out)



@register_legalize("relax.nn.pad")
def _pad(ctx, call):
    """Each output element reads ``x`` at its index minus the leading width; outside ``x``
    it is ``pad_value`` (constant), the clamped index (edge) or the mirrored one (reflect)."""
    te = ctx.te(call)
    x = te.placeholder(call.args[0], "x")
    widths = call.attrs["pad_width"]
    mode = call.attrs["pad_mode"]
    out_shape = te.out_shape()

    def body(*idx):
        te.bind_loops(idx, out_shape)
        index, inside = [], []
        for i, d, before in zip(idx, x.shape, widths[0::2]):
            source = te.simplify(i - E.IntImm(before))
            if mode == "edge":
                source = E.max_(E.min_(source, d - 1), E.IntImm(0))
            elif mode == "reflect":
                # mirror at 0 and d - 1 (period 2 * (d - 1)); a one-element axis repeats it
                period = E.max_(d * 2 - 2, E.IntImm(1))
                folded = E.floormod(source, period)
                source = E.min_(folded, period - folded)
            else:
                if not te.prove(E.GE(source, E.IntImm(0))):
                    inside.append(E.GE(source, E.IntImm(0)))
                if not te.prove(E.LT(source, d)):
                    inside.append(E.LT(source, d))
            index.append(source)
        return guarded(x[tuple(index)], inside, E.const(call.attrs["pad_value"], x.dtype))

    return te.emit("pad", compute(out_shape, body, "T_pad", x.dtype))


@register_legalize("relax.nn.pixel_shuffle")
def _pixel_shuffle(ctx, call):
    te = ctx.te(call)
    x = te.placeholder(call.args[0], "x")
    r = E.IntImm(call.attrs["upscale_factor"])

    def body(*idx):
        *lead, c, h, w = idx
        channel = c * r * r + E.floormod(h, r) * r + E.floormod(w, r)
        return x[(*lead, channel, E.floordiv(h, r), E.floordiv(w, r))]

    return te.emit("pixel_shuffle", compute(te.out_shape(), body, "T_pixel_shuffle", x.dtype))


@register_legalize("relax.nn.dropout")
def _dropout(ctx, call):
    """Inference: the data copied, and a mask of ones."""
    te = ctx.te(call)
    x = te.placeholder(call.args[0], "x")
    out = compute(x.shape, lambda *i: x[i], "T_dropout", x.dtype)
    mask = compute(x.shape, lambda *i: E.const(1, x.dtype), "T_dropout_mask", x.dtype)
    return te.emit("dropout", [out, mask])
