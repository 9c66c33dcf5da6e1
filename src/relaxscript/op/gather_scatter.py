"""Data-indexed operators, following TVM's relax signatures: ``R.flip``,
``R.one_hot``, ``R.gather_nd``, ``R.scatter_elements``, ``R.scatter_nd``.

Index tensors are integers; a negative index counts from the end of its
axis (NumPy). ``gather_nd``/``scatter_nd`` take ONNX's layout: the last dim
of ``indices`` (a constant ``M``) indexes the leading ``M`` dims of ``data``
after ``batch_dims``. Scatters with ``reduction="update"`` keep the last
update written to a position, as NumPy's assignment does; ``"add"``,
``"mul"``, ``"max"``, ``"min"`` combine the data with every update. An index
out of range is an ``IndexOutOfRangeError`` on every target: the interpreter
(the reference's ``IndexError``) and the compiled kernels (``T.checked_index``)
alike, naming the kernel and the value.
"""
from __future__ import annotations

import numpy as np

from tensorir import dtype as dt
from tensorir import expr as E

from ..struct_info import PrimStructInfo, TensorStructInfo
from ._convert import as_prim_value, as_tensor, make_call
from ._infer_util import (attr_int, const_value, format_sinfo, normalize_axis, prove_not_equal,
                          sinfo_of, tensor_arg)
from .registry import OpAttributeError, register_op


def _index_tensor(call, index: int, ctx, what: str) -> TensorStructInfo:
    sinfo = tensor_arg(call, index, ctx, what)
    if sinfo.dtype is not None and not dt.is_int(sinfo.dtype):
        ctx.error(f"{call.op.name}: {what} must be an integer tensor, got {format_sinfo(sinfo)}")
    return sinfo


# ---------------------------------------------------------------- flip
def flip(data, axis):
    """R.flip(data, axis): reverse ``data`` along ``axis``."""
    return make_call("relax.flip", [as_tensor(data)], {"axis": attr_int(axis, "flip", "axis")})


def _infer_flip(call, ctx) -> TensorStructInfo:
    x = tensor_arg(call, 0, ctx, "data")
    if x.ndim >= 0:
        normalize_axis(ctx, call, call.attrs["axis"], x.ndim, x)
    return TensorStructInfo(x.shape, x.dtype, x.ndim)


register_op("relax.flip", _infer_flip, lambda data, axis: np.flip(data, axis).copy(),
            attr_names=("axis",), constructor=flip)


# ---------------------------------------------------------------- one_hot
def one_hot(indices, on_value, off_value, depth: int, axis: int = -1, dtype=None):
    """R.one_hot(indices, on_value, off_value, depth, axis=-1): ``on_value`` where the new
    axis equals the index, ``off_value`` elsewhere (also for an index outside ``0..depth-1``).

    ``dtype`` (printed, not needed when writing) records the values' dtype: the
    interpreter holds scalars as Python numbers."""
    depth = attr_int(depth, "one_hot", "depth")
    if depth < 0:
        raise OpAttributeError(f"R.one_hot: depth must be non-negative, got {depth}")
    on, off = as_prim_value(on_value), as_prim_value(off_value)
    on_sinfo = sinfo_of(on)
    value_dtype = on_sinfo.dtype if isinstance(on_sinfo, PrimStructInfo) else None
    if dtype is not None and value_dtype is not None and dt.normalize(dtype) != value_dtype:
        raise OpAttributeError(f"R.one_hot: dtype {dtype!r} differs from on_value's {value_dtype}")
    return make_call("relax.one_hot", [as_tensor(indices, "int64"), on, off],
                     {"depth": depth, "axis": attr_int(axis, "one_hot", "axis"),
                      "dtype": value_dtype or dtype})


def _infer_one_hot(call, ctx) -> TensorStructInfo:
    indices = _index_tensor(call, 0, ctx, "indices")
    on, off = sinfo_of(call.args[1]), sinfo_of(call.args[2])
    for what, sinfo in (("on_value", on), ("off_value", off)):
        if not isinstance(sinfo, PrimStructInfo):
            ctx.error(f"relax.one_hot: {what} must be a scalar (R.prim_value), got {format_sinfo(sinfo)}")
    if on.dtype != off.dtype:
        ctx.error(f"relax.one_hot: on_value {format_sinfo(on)} and off_value {format_sinfo(off)} "
                  f"have different dtypes")
    if indices.ndim < 0:
        return TensorStructInfo(None, on.dtype)
    axis = normalize_axis(ctx, call, call.attrs["axis"], indices.ndim + 1, indices)
    if indices.shape is None:
        return TensorStructInfo(None, on.dtype, indices.ndim + 1)
    shape = list(indices.shape)
    shape.insert(axis, E.IntImm(call.attrs["depth"]))
    return TensorStructInfo(shape, on.dtype)


def _one_hot_reference(indices, on_value, off_value, depth, axis=-1, dtype=None):
    axis = axis % (indices.ndim + 1)
    classes = np.arange(depth).reshape([-1] + [1] * (indices.ndim - axis))
    hit = np.expand_dims(indices, axis) == classes
    return np.where(hit, on_value, off_value).astype(dtype)


register_op("relax.one_hot", _infer_one_hot, _one_hot_reference, attr_names=("depth", "axis", "dtype"),
            constructor=one_hot)


# ---------------------------------------------------------------- gather_nd / scatter_nd
def _index_depth(call, ctx, indices: TensorStructInfo, data: TensorStructInfo, batch_dims: int):
    """M, the constant last dim of ``indices``; None when not known."""
    if indices.ndim == 0:
        ctx.error(f"{call.op.name}: indices must have at least one dim, got {format_sinfo(indices)}")
    if indices.shape is None:
        return None
    depth = const_value(indices.shape[-1])
    if depth is None:
        ctx.error(f"{call.op.name}: the last dim of indices {format_sinfo(indices)} (the index "
                  f"depth) must be a constant")
    if data.ndim >= 0 and batch_dims + depth > data.ndim:
        ctx.error(f"{call.op.name}: indices {format_sinfo(indices)} index {depth} dims after "
                  f"{batch_dims} batch dims of data {format_sinfo(data)}, which has {data.ndim}")
    return depth


def gather_nd(data, indices, batch_dims: int = 0):
    """R.gather_nd(data, indices, batch_dims=0): ``out[b..., i...] = data[b..., *indices[b..., i..., :]]``."""
    batch_dims = attr_int(batch_dims, "gather_nd", "batch_dims")
    if batch_dims < 0:
        raise OpAttributeError(f"R.gather_nd: batch_dims must be non-negative, got {batch_dims}")
    return make_call("relax.gather_nd", [as_tensor(data), as_tensor(indices, "int64")],
                     {"batch_dims": batch_dims})


def _infer_gather_nd(call, ctx) -> TensorStructInfo:
    data = tensor_arg(call, 0, ctx, "data")
    indices = _index_tensor(call, 1, ctx, "indices")
    batch = call.attrs["batch_dims"]
    if indices.ndim >= 0 and indices.ndim - 1 < batch:
        ctx.error(f"relax.gather_nd: indices {format_sinfo(indices)} has fewer than batch_dims="
                  f"{batch} leading dims")
    depth = _index_depth(call, ctx, indices, data, batch)
    if depth is None or data.shape is None:
        return TensorStructInfo(None, data.dtype)
    for i in range(batch):
        if prove_not_equal(ctx, data.shape[i], indices.shape[i]):
            ctx.error(f"relax.gather_nd: batch dim {i} of data {format_sinfo(data)} and indices "
                      f"{format_sinfo(indices)} differ")
    return TensorStructInfo([*indices.shape[:-1], *data.shape[batch + depth:]], data.dtype)


def _gather_nd_reference(data, indices, batch_dims=0):
    depth = indices.shape[-1]
    batch_shape = data.shape[:batch_dims]
    out = np.empty(indices.shape[:-1] + data.shape[batch_dims + depth:], dtype=data.dtype)
    for position in np.ndindex(*indices.shape[:-1]):
        index = tuple(int(i) for i in indices[position])
        out[position] = data[position[:len(batch_shape)] + index]
    return out


register_op("relax.gather_nd", _infer_gather_nd, _gather_nd_reference, attr_names=("batch_dims",),
            constructor=gather_nd)

REDUCTIONS = ("update", "add", "mul", "max", "min")


def _attr_reduction(value, op: str) -> str:
    if value not in REDUCTIONS:
        raise OpAttributeError(f"R.{op}: reduction must be one of {', '.join(REDUCTIONS)}, "
                               f"got {value!r}")
    return value


def _combine_numpy(reduction, current, update):
    return {"update": lambda: update, "add": lambda: current + update,
            "mul": lambda: current * update, "max": lambda: np.maximum(current, update),
            "min": lambda: np.minimum(current, update)}[reduction]()


def scatter_nd(data, indices, updates, reduction: str = "update"):
    """R.scatter_nd(data, indices, updates, reduction="update")."""
    return make_call("relax.scatter_nd", [as_tensor(data), as_tensor(indices, "int64"),
                                          as_tensor(updates)],
                     {"reduction": _attr_reduction(reduction, "scatter_nd")})


def _check_updates(call, ctx, data, updates, expected):
    if data.dtype is not None and updates.dtype is not None and data.dtype != updates.dtype:
        ctx.error(f"{call.op.name}: updates {format_sinfo(updates)} and data {format_sinfo(data)} "
                  f"have different dtypes")
    if expected is None or updates.ndim < 0:
        return
    if updates.ndim != len(expected):
        ctx.error(f"{call.op.name}: updates {format_sinfo(updates)} must have {len(expected)} dims")
    if updates.shape is not None:
        for i, (u, e) in enumerate(zip(updates.shape, expected)):
            if prove_not_equal(ctx, u, e):
                ctx.error(f"{call.op.name}: dim {i} of updates {format_sinfo(updates)} must be "
                          f"{e}")


def _infer_scatter_nd(call, ctx) -> TensorStructInfo:
    data = tensor_arg(call, 0, ctx, "data")
    indices = _index_tensor(call, 1, ctx, "indices")
    updates = tensor_arg(call, 2, ctx, "updates")
    depth = _index_depth(call, ctx, indices, data, 0)
    expected = None
    if depth is not None and data.shape is not None:
        expected = [*indices.shape[:-1], *data.shape[depth:]]
    _check_updates(call, ctx, data, updates, expected)
    return TensorStructInfo(data.shape, data.dtype, data.ndim)


def _scatter_nd_reference(data, indices, updates, reduction="update"):
    out = data.copy()
    for position in np.ndindex(*indices.shape[:-1]):
        index = tuple(int(i) for i in indices[position])
        out[index] = _combine_numpy(reduction, out[index], updates[position])
    return out


register_op("relax.scatter_nd", _infer_scatter_nd, _scatter_nd_reference,
            attr_names=("reduction",), constructor=scatter_nd)


# ---------------------------------------------------------------- scatter_elements
def scatter_elements(data, indices, updates, axis: int = 0, reduction: str = "update"):
    """R.scatter_elements(data, indices, updates, axis=0, reduction="update"):
    ``out[..., indices[i, ...], ...] = updates[i, ...]`` along ``axis``."""
    return make_call("relax.scatter_elements",
                     [as_tensor(data), as_tensor(indices, "int64"), as_tensor(updates)],
                     {"axis": attr_int(axis, "scatter_elements", "axis"),
                      "reduction": _attr_reduction(reduction, "scatter_elements")})


def _infer_scatter_elements(call, ctx) -> TensorStructInfo:
    data = tensor_arg(call, 0, ctx, "data")
    indices = _index_tensor(call, 1, ctx, "indices")
    updates = tensor_arg(call, 2, ctx, "updates")
    if data.ndim >= 0:
        normalize_axis(ctx, call, call.attrs["axis"], data.ndim, data)
        for what, sinfo in (("indices", indices), ("updates", updates)):
            if sinfo.ndim >= 0 and sinfo.ndim != data.ndim:
                ctx.error(f"relax.scatter_elements: {what} {format_sinfo(sinfo)} must have the "
                          f"{data.ndim} dims of data {format_sinfo(data)}")
    _check_updates(call, ctx, data, updates, indices.shape)
    return TensorStructInfo(data.shape, data.dtype, data.ndim)


def _scatter_elements_reference(data, indices, updates, axis=0, reduction="update"):
    out = data.copy()
    axis = axis % data.ndim
    for position in np.ndindex(*indices.shape):
        target = list(position)
        target[axis] = int(indices[position])
        target = tuple(target)
        out[target] = _combine_numpy(reduction, out[target], updates[position])
    return out


register_op("relax.scatter_elements", _infer_scatter_elements, _scatter_elements_reference,
            attr_names=("axis", "reduction"), constructor=scatter_elements)

__all__ = ["flip", "one_hot", "gather_nd", "scatter_nd", "scatter_elements"]


# ---------------------------------------------------------------- slice_scatter
def _slice_bound(value, name: str) -> int:
    """A slice bound: an int, or a constant ``R.prim_value(n)`` (TVM's frontends)."""
    from ..expr import PrimValue
    if isinstance(value, PrimValue):
        if not isinstance(value.value, E.IntImm):
            raise OpAttributeError(f"R.slice_scatter: {name} must be a constant integer, got "
                                   f"R.prim_value({value.value})")
        value = value.value.value
    return attr_int(value, "slice_scatter", name)


def slice_scatter(input_tensor, src, start=0, end=None, step=1, axis: int = 0):
    """R.slice_scatter(input_tensor, src, start, end, step, axis=0): ``input_tensor`` with
    its slice ``start:end:step`` along ``axis`` replaced by ``src`` (``torch.slice_scatter``).
    ``start >= 0``, ``step >= 1``; ``end`` past the axis (or None) stops at its end."""
    start = _slice_bound(start, "start")
    end = None if end is None else _slice_bound(end, "end")
    step = _slice_bound(step, "step")
    if start < 0 or (end is not None and end < 0):
        raise OpAttributeError(f"R.slice_scatter: start and end must be non-negative, got "
                               f"{start} and {end}")
    if step < 1:
        raise OpAttributeError(f"R.slice_scatter: step must be at least 1, got {step}")
    return make_call("relax.slice_scatter", [as_tensor(input_tensor), as_tensor(src)], {
        "start": start, "end": end, "step": step,
        "axis": attr_int(axis, "slice_scatter", "axis")})


def slice_length(size, start: int, end, step: int):
    """Elements of ``start:end:step`` in an axis of ``size`` (symbolic ``size`` allowed)."""
    stop = size if end is None else E.min_(E.convert(size), end)
    return E.floordiv(E.max_(stop - start, E.IntImm(0)) + (step - 1), step)


def _infer_slice_scatter(call, ctx) -> TensorStructInfo:
    data = tensor_arg(call, 0, ctx, "input_tensor")
    src = tensor_arg(call, 1, ctx, "src")
    a = call.attrs
    if data.dtype and src.dtype and data.dtype != src.dtype:
        ctx.error(f"relax.slice_scatter: src {format_sinfo(src)} must have the dtype of "
                  f"{format_sinfo(data)}")
    if data.ndim >= 0:
        axis = normalize_axis(ctx, call, a["axis"], data.ndim, data)
        if src.ndim >= 0 and src.ndim != data.ndim:
            ctx.error(f"relax.slice_scatter: src {format_sinfo(src)} must have the rank of "
                      f"{format_sinfo(data)}")
        if data.shape is not None and src.shape is not None:
            for i, (d, s) in enumerate(zip(data.shape, src.shape)):
                want = slice_length(d, a["start"], a["end"], a["step"]) if i == axis else d
                if prove_not_equal(ctx, ctx.analyzer.simplify(want), s):
                    ctx.error(f"relax.slice_scatter: src {format_sinfo(src)} does not fit the "
                              f"slice {a['start']}:{a['end']}:{a['step']} of axis {a['axis']} "
                              f"of {format_sinfo(data)}")
    return TensorStructInfo(data.shape, data.dtype, data.ndim)


def _slice_scatter_reference(input_tensor, src, start=0, end=None, step=1, axis=0):
    out = input_tensor.copy()
    index = [slice(None)] * out.ndim
    index[axis % out.ndim] = slice(start, end, step)
    target = out[tuple(index)]
    if target.shape != src.shape:
        raise ValueError(f"slice_scatter: src of shape {src.shape} does not fit a slice of "
                         f"shape {target.shape}")
    out[tuple(index)] = src
    return out


register_op("relax.slice_scatter", _infer_slice_scatter, _slice_scatter_reference,
            attr_names=("start", "end", "step", "axis"), constructor=slice_scatter)

__all__ += ["slice_scatter"]


# ---------------------------------------------------------------- gather_elements
def gather_elements(data, indices, axis: int = 0):
    """R.gather_elements(data, indices, axis=0): ``out[i] = data[i with its axis position
    replaced by indices[i]]`` (ONNX GatherElements, ``torch.gather``); the result has the
    indices' shape, which may be smaller than the data's on the other axes."""
    return make_call("relax.gather_elements", [as_tensor(data), as_tensor(indices, "int64")],
                     {"axis": attr_int(axis, "gather_elements", "axis")})


def _infer_gather_elements(call, ctx) -> TensorStructInfo:
    data = tensor_arg(call, 0, ctx, "data")
    indices = _index_tensor(call, 1, ctx, "indices")
    axis = call.attrs["axis"]
    if data.ndim >= 0:
        axis = normalize_axis(ctx, call, axis, data.ndim, data)
        if indices.ndim >= 0 and indices.ndim != data.ndim:
            ctx.error(f"relax.gather_elements: indices {format_sinfo(indices)} must have the "
                      f"{data.ndim} dims of data {format_sinfo(data)}")
        if data.shape is not None and indices.shape is not None:
            for d, (n, k) in enumerate(zip(data.shape, indices.shape)):
                if d != axis and ctx.analyzer.can_prove(E.GT(k, n)):
                    ctx.error(f"relax.gather_elements: indices {format_sinfo(indices)} is larger "
                              f"than data {format_sinfo(data)} on axis {d}")
    return TensorStructInfo(indices.shape, data.dtype, indices.ndim)


def _gather_elements_reference(data, indices, axis=0):
    axis %= data.ndim
    grid = list(np.indices(indices.shape, sparse=True))
    grid[axis] = indices.astype(np.int64)
    return np.ascontiguousarray(data[tuple(grid)])


register_op("relax.gather_elements", _infer_gather_elements, _gather_elements_reference,
            attr_names=("axis",), constructor=gather_elements)

__all__ += ["gather_elements"]


# ---------------------------------------------------------------- index_put
def index_put(data, indices, values, accumulate: bool = False):
    """R.index_put(data, indices, values, accumulate=False): ``torch.index_put_``. ``indices``
    is a tuple of one integer tensor per axis of ``data``; they broadcast together to a shape
    ``B`` and ``values`` broadcasts to ``B``; element ``b`` of ``B`` writes ``values[b]`` at
    ``(indices[0][b], ...)`` (negatives from the end; a repeated position keeps the last
    write in row-major order) or, with ``accumulate``, adds it."""
    from ._convert import as_tuple
    if not isinstance(accumulate, (bool, np.bool_)):
        raise OpAttributeError(f"R.index_put: accumulate must be a bool, got {accumulate!r}")
    return make_call("relax.index_put", [as_tensor(data), as_tuple(indices), as_tensor(values)],
                     {"accumulate": bool(accumulate)})


def _infer_index_put(call, ctx) -> TensorStructInfo:
    from ..struct_info import TupleStructInfo
    from ._infer_util import broadcast_shapes
    data = tensor_arg(call, 0, ctx, "data")
    fields = sinfo_of(call.args[1])
    if not isinstance(fields, TupleStructInfo) or not all(
            isinstance(f, TensorStructInfo) for f in fields.fields):
        ctx.error(f"relax.index_put: indices must be a tuple of tensors, got {format_sinfo(fields)}")
    index_list = list(fields.fields)
    for f in index_list:
        if f.dtype is not None and not dt.is_int(f.dtype):
            ctx.error(f"relax.index_put: indices must be integer tensors, got {format_sinfo(f)}")
    if data.ndim >= 0 and len(index_list) != data.ndim:
        ctx.error(f"relax.index_put: give one index tensor per axis of {format_sinfo(data)} "
                  f"({data.ndim}), got {len(index_list)}")
    values = tensor_arg(call, 2, ctx, "values")
    if data.dtype is not None and values.dtype is not None and data.dtype != values.dtype:
        ctx.error(f"relax.index_put: values {format_sinfo(values)} and data {format_sinfo(data)} "
                  f"have different dtypes")
    target = broadcast_shapes(ctx, call, index_list)
    if not isinstance(target, int):
        full = broadcast_shapes(ctx, call, [TensorStructInfo(target, None), values])
        if not isinstance(full, int) and (len(full) != len(target) or any(
                prove_not_equal(ctx, a, b) for a, b in zip(full, target))):
            ctx.error(f"relax.index_put: values {format_sinfo(values)} do not broadcast to the "
                      f"indices' shape {tuple(target)}")
    return TensorStructInfo(data.shape, data.dtype, data.ndim)


def _index_put_reference(data, indices, values, accumulate=False):
    index_arrays = np.broadcast_arrays(*[np.asarray(i, dtype=np.int64) for i in indices])
    shape = index_arrays[0].shape if index_arrays else ()
    vals = np.broadcast_to(values, shape)
    out = data.copy()
    for b in np.ndindex(*shape):
        position = []
        for axis, arr in enumerate(index_arrays):
            i, n = int(arr[b]), data.shape[axis]
            if not -n <= i < n:
                raise IndexError(f"index {i} is out of bounds for axis {axis} with size {n}")
            position.append(i % n)
        position = tuple(position)
        out[position] = out[position] + vals[b] if accumulate else vals[b]
    return out


register_op("relax.index_put", _infer_index_put, _index_put_reference,
            attr_names=("accumulate",), constructor=index_put)

__all__ += ["index_put"]
