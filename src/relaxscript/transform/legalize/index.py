"""Selecting and joining: concat, split (one prim_func with one output per part),
take, strided_slice (Python slice semantics on symbolic bounds)."""
from __future__ import annotations

from tensorir import expr as E
from tensorir.compute import compute

from ...expr import Tuple, TupleGetItem
from ...struct_info import PrimStructInfo
from ...op.indexing import split_points
from .common import product, unravel
from .registry import register_legalize


def slice_begin(te, begin, dim, stride: int) -> E.PrimExpr:
    """Where ``range(dim)[begin::stride]`` starts (Python: wrap negatives once, then clamp)."""
    begin = E.convert(begin)
    low, high = (E.IntImm(0), dim) if stride > 0 else (E.IntImm(-1), dim - 1)
    if te.prove(E.GE(begin, 0)):
        start = begin
    elif te.prove(E.LT(begin, 0)):
        start = begin + dim
    else:
        start = E.Select(E.LT(begin, 0), begin + dim, begin)
    if not te.prove(E.GE(start, low)):
        start = E.max_(start, low)
    if not te.prove(E.LE(start, high)):
        start = E.min_(start, high)
    return te.simplify(start)


@register_legalize("relax.strided_slice")
def _strided_slice(ctx, call):
    te = ctx.te(call)
    x = te.placeholder(call.args[0], "x")
    axes, begins, _, strides = (call.args[i].struct_info.values for i in range(1, 5))
    starts = {}
    for axis, begin, stride in zip(axes, begins, strides):
        axis = axis.value % x.ndim
        starts[axis] = (slice_begin(te, te.expr(begin), x.shape[axis], stride.value), stride.value)

    def body(*idx):
        return x[tuple(starts[i][0] + v * starts[i][1] if i in starts else v for i, v in enumerate(idx))]

    return te.emit("strided_slice", compute(te.out_shape(), body, "T_strided_slice", x.dtype))


@register_legalize("relax.concat")
def _concat(ctx, call):
    te = ctx.te(call)
    parts = _tuple_fields(ctx, call.args[0])
    tensors = [te.placeholder(p, f"x{i}") for i, p in enumerate(parts)]
    if call.attrs["axis"] is None:   # flattened: each part read through its row-major index
        return te.emit("concat", compute(te.out_shape(), lambda i: _flat_concat(te, tensors, i),
                                         "T_concat", te.out_dtype()))
    axis = call.attrs["axis"] % tensors[0].ndim

    def body(*idx):
        def load(t, offset):
            return t[tuple(v - offset if i == axis else v for i, v in enumerate(idx))]
        offsets, offset = [], E.IntImm(0)
        for t in tensors:
            offsets.append(offset)
            offset = te.simplify(offset + t.shape[axis])
        value = load(tensors[-1], offsets[-1])
        for t, start in reversed(list(zip(tensors[:-1], offsets[:-1]))):
            end = te.simplify(start + t.shape[axis])
            value = E.Select(E.LT(idx[axis], end), load(t, start), value)
        return value

    return te.emit("concat", compute(te.out_shape(), body, "T_concat", te.out_dtype()))


def _flat_concat(te, tensors, i):
    offsets, offset = [], E.IntImm(0)
    for t in tensors:
        offsets.append(offset)
        offset = te.simplify(offset + product(t.shape))
    value = tensors[-1][tuple(unravel(i - offsets[-1], tensors[-1].shape))]
    for t, start in reversed(list(zip(tensors[:-1], offsets[:-1]))):
        end = te.simplify(start + product(t.shape))
        value = E.Select(E.LT(i, end), t[tuple(unravel(i - start, t.shape))], value)
    return value


def _tuple_fields(ctx, value):
    if isinstance(value, Tuple):
        return list(value.fields)
    count = len(value.struct_info.fields)
    return [ctx.bb.emit(TupleGetItem(value, i), "field") for i in range(count)]


@register_legalize("relax.split")
def _split(ctx, call):
    te = ctx.te(call)
    x = te.placeholder(call.args[0], "x")
    axis = call.attrs["axis"] % x.ndim
    spec = call.attrs["indices_or_sections"]
    dim = x.shape[axis]
    if isinstance(spec, int):
        starts = [te.simplify(i * (dim // spec)) for i in range(spec)]
    else:
        starts = [E.IntImm(0)] + [slice_begin(te, b, dim, 1) for b in split_points(spec)]
    outputs = []
    for part, start in enumerate(starts):
        def body(*idx, start=start):
            return x[tuple(v + start if i == axis else v for i, v in enumerate(idx))]
        outputs.append(compute(te.out_shape(part), body, f"T_split{part}", x.dtype))
    return te.emit("split", outputs)


def _taken(call, index, extent):
    """The position ``index`` picks in an axis of ``extent`` under the call's ``mode``."""
    mode = call.attrs.get("mode", "fast")
    if mode == "clip":
        index = E.cast("int64", index)
        return E.max_(E.min_(index, E.cast("int64", extent) - 1), E.IntImm(0))
    if mode == "wrap":
        return E.floormod(E.cast("int64", index), E.cast("int64", extent))
    return E.checked_index(index, extent)


@register_legalize("relax.take")
def _take(ctx, call):
    index_sinfo = call.args[1].struct_info
    if isinstance(index_sinfo, PrimStructInfo):
        return _take_scalar(ctx, call, index_sinfo)
    te = ctx.te(call)
    x = te.placeholder(call.args[0], "x")
    indices = te.placeholder(call.args[1], "indices")
    axis = call.attrs.get("axis")

    def body(*idx):
        if axis is None:
            total = product(x.shape)
            return x[unravel(_taken(call, indices[idx], total), x.shape)]
        a = axis % x.ndim
        inner = idx[a:a + indices.ndim]
        picked = _taken(call, indices[tuple(inner)], x.shape[a])
        return x[(*idx[:a], picked, *idx[a + indices.ndim:])]

    return te.emit("take", compute(te.out_shape(), body, "T_take", x.dtype))


def _take_scalar(ctx, call, index_sinfo):
    """An ``R.Prim`` index: its value in the kernel's vars (an index known only at run time
    keeps the op, which the VMs run through the reference)."""
    if index_sinfo.value is None:
        return None
    te = ctx.te(call)
    x = te.placeholder(call.args[0], "x")
    index = E.cast("int64", te.expr(index_sinfo.value))
    axis = call.attrs.get("axis")

    def body(*idx):
        if axis is None:
            return x[unravel(_taken(call, index, product(x.shape)), x.shape)]
        a = axis % x.ndim
        return x[(*idx[:a], _taken(call, index, x.shape[a]), *idx[a:])]

    return te.emit("take", compute(te.out_shape(), body, "T_take", x.dtype))
