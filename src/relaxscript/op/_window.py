"""Attribute normalisation and output-size arithmetic shared by the sliding-window
operators (convolutions and pools), following TVM's argument conventions.

Padding is stored as ``(lo_0, ..., lo_{d-1}, hi_0, ..., hi_{d-1})`` (TVM's
``(top, left, bottom, right)`` for 2-D); an int pads every side, ``d`` values
pad both sides of each axis.
"""
from __future__ import annotations

import numpy as np

from tensorir import expr as E

from ._infer_util import attr_int, simplify
from .registry import OpAttributeError


def attr_per_axis(value, ndim: int, op: str, name: str, minimum: int) -> tuple[int, ...]:
    """An int or ``ndim`` ints, each at least ``minimum``, as a tuple of ``ndim`` ints."""
    items = _int_items(value, op, name)
    if len(items) == 1:
        items = items * ndim
    if len(items) != ndim:
        raise OpAttributeError(f"R.{op}: {name} must be an int or {ndim} ints, got {value!r}")
    for v in items:
        if v < minimum:
            raise OpAttributeError(f"R.{op}: {name} must be at least {minimum}, got {value!r}")
    return items


def attr_padding(value, ndim: int, op: str) -> tuple[int, ...]:
    """Padding as ``2 * ndim`` ints: all lows, then all highs."""
    items = _int_items(value, op, "padding")
    if len(items) == 1:
        items = items * (2 * ndim)
    elif len(items) == ndim:
        items = items * 2
    if len(items) != 2 * ndim:
        raise OpAttributeError(f"R.{op}: padding must be an int, {ndim} or {2 * ndim} ints, "
                               f"got {value!r}")
    if any(v < 0 for v in items):
        raise OpAttributeError(f"R.{op}: padding must be non-negative, got {value!r}")
    return items


def attr_layout(value, expected: str, op: str, name: str) -> str:
    """Only the layout the kernels are written for (TVM's default) is accepted."""
    if value is None:
        return expected
    if value != expected:
        raise OpAttributeError(f"R.{op}: {name} {value!r} is not supported (only {expected!r}); "
                               f"use R.permute_dims to change the layout")
    return value


def layout_axes(value, default: str, op: str, name: str):
    """None when ``value`` is the default layout, else the axes that turn a tensor in layout
    ``value`` into the default one (``"NHWC"`` -> ``(0, 3, 1, 2)`` for ``"NCHW"``). A split
    layout (``"NCHW4c"``) is refused here; ``relayout`` handles those."""
    if value is None or value == default:
        return None
    if not isinstance(value, str) or sorted(value) != sorted(default):
        raise OpAttributeError(f"R.{op}: {name} {value!r} is not supported: a layout is a "
                               f"permutation of {default!r}")
    return tuple(value.index(c) for c in default)


def split_layout(value, default: str, op: str, name: str):
    """TVM's split layouts: ``"NCHW4c"`` is NCHW with C cut in two axes, C // 4 where ``C``
    stands and C % 4 (``4c``) where it stands. Returns [(primal letter, factor or None)] per
    tensor axis, or None when ``value`` is a plain permutation (or the default)."""
    if value is None or not isinstance(value, str) or value.isalpha() and value.isupper():
        return None
    tokens, i = [], 0
    while i < len(value):
        j = i
        while j < len(value) and value[j].isdigit():
            j += 1
        if j == len(value):
            break
        letter = value[j]
        if j > i:
            if not letter.islower() or int(value[i:j]) < 1:
                break
            tokens.append((letter.upper(), int(value[i:j])))
        elif letter.isupper():
            tokens.append((letter, None))
        else:
            break
        i = j + 1
    else:
        primal = [t for t, f in tokens if f is None]
        subs = [t for t, f in tokens if f is not None]
        if sorted(primal) == sorted(default) and len(set(subs)) == len(subs) and \
                all(t in primal for t in subs):
            return tokens
    raise OpAttributeError(f"R.{op}: {name} {value!r} is not supported: a layout is a permutation "
                           f"of {default!r}, optionally with axes split as in TVM's "
                           f"{default[:2]}{''.join(default[2:])}4{default[1].lower()}")


def _split_maps(tokens, default: str):
    """(index map from the split layout to ``default``, index map back)."""
    from tensorir import expr as TE

    from .layout_transform import IndexMap
    factor = {t: f for t, f in tokens if f is not None}
    outer = {t: k for k, (t, f) in enumerate(tokens) if f is None}
    inner = {t: k for k, (t, f) in enumerate(tokens) if f is not None}
    split_params = [TE.Var(f"i{k}", "int64") for k in range(len(tokens))]
    to_default = []
    for letter in default:
        value = split_params[outer[letter]]
        if letter in factor:
            value = value * factor[letter] + split_params[inner[letter]]
        to_default.append(value)
    plain_params = [TE.Var(f"i{k}", "int64") for k in range(len(default))]
    back = []
    for letter, f in tokens:
        value = plain_params[default.index(letter)]
        if letter in factor:
            value = E.floormod(value, factor[letter]) if f is not None else \
                E.floordiv(value, factor[letter])
        back.append(value)
    return IndexMap(split_params, to_default), IndexMap(plain_params, back)


def relayout(op: str, build, operands, out_layout, out_default: str):
    """An operator written in other layouts than its kernels' (TVM's ``data_layout="NHWC"``,
    ``kernel_layout="HWIO"``...): ``build`` makes it in the default layouts, between
    ``R.permute_dims`` of each operand (``(tensor, layout, default, name)``) and of the
    result, so deduction, legalization and the references stay single-layout. Split layouts
    (``"NCHW4c"``, ``"OIHW4o"``) use ``R.layout_transform`` instead of the transposes."""
    from .layout_transform import layout_transform
    from .manipulate import permute_dims
    args = []
    for tensor, layout, default, name in operands:
        tokens = split_layout(layout, default, op, name)
        if tokens is not None:
            ndim = getattr(getattr(tensor, "struct_info", None), "ndim", -1)
            if ndim is not None and ndim >= 0 and ndim != len(tokens):
                raise OpAttributeError(f"R.{op}: {name} {layout!r} has {len(tokens)} axes but the "
                                       f"operand has {ndim} dims")
            args.append(layout_transform(tensor, _split_maps(tokens, default)[0]))
            continue
        axes = layout_axes(layout, default, op, name)
        args.append(tensor if axes is None else permute_dims(tensor, list(axes)))
    result = build(*args)
    tokens = split_layout(out_layout, out_default, op, "out_layout")
    if tokens is not None:
        return layout_transform(result, _split_maps(tokens, out_default)[1])
    if layout_axes(out_layout, out_default, op, "out_layout") is not None:
        result = permute_dims(result, [out_default.index(c) for c in out_layout])
    return result


def _int_items(value, op: str, name: str) -> tuple[int, ...]:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return (attr_int(value, op, name),)
    try:
        items = tuple(value)
    except TypeError:
        raise OpAttributeError(f"R.{op}: {name} must be an int or a tuple of ints, "
                               f"got {value!r}") from None
    return tuple(attr_int(v, op, name) for v in items)


def window_output_dim(size, kernel, stride: int, dilation: int, pad_lo: int, pad_hi: int,
                      ceil_mode: bool = False):
    """Number of window positions along one axis (TVM's formula, also for ceil_mode)."""
    span = E.convert(size) + (pad_lo + pad_hi) - dilation * (E.convert(kernel) - 1) - 1
    if ceil_mode:
        span = span + (stride - 1)
    return E.floordiv(span, stride) + 1


def window_output_shape(ctx, spatial, kernel, strides, dilation, padding, ceil_mode=False):
    d = len(spatial)
    return [simplify(ctx, window_output_dim(spatial[i], kernel[i], strides[i], dilation[i],
                                            padding[i], padding[d + i], ceil_mode))
            for i in range(d)]


def numpy_output_dims(spatial, kernel, strides, dilation, padding, ceil_mode=False) -> list[int]:
    d = len(spatial)
    out = []
    for i in range(d):
        span = spatial[i] + padding[i] + padding[d + i] - dilation[i] * (kernel[i] - 1) - 1
        if ceil_mode:
            span += strides[i] - 1
        out.append(max(span // strides[i] + 1, 0))
    return out


def numpy_window(padded: np.ndarray, offsets, strides, dilation, out_dims) -> np.ndarray:
    """The elements each output position reads at kernel offset ``offsets`` (trailing axes)."""
    lead = (slice(None),) * (padded.ndim - len(offsets))
    index = tuple(slice(o * dl, o * dl + s * (n - 1) + 1, s) if n > 0 else slice(0, 0)
                  for o, dl, s, n in zip(offsets, dilation, strides, out_dims))
    return padded[lead + index]
