"""Index arithmetic shared by the legalizations (row-major layouts, broadcasting, reductions).

Index helpers return tuples: ``Tensor.__getitem__`` treats a tuple as an index list.
"""
from __future__ import annotations

from typing import Sequence

from tensorir import dtype as dt
from tensorir import expr as E
from tensorir.compute import ReduceAxis, reduce_axis


def op_short_name(call) -> str:
    """``relax.nn.softmax`` -> ``softmax``: the prim_func's name hint."""
    return call.op.name.rsplit(".", 1)[-1]


def product(dims: Sequence) -> E.PrimExpr:
    total = E.IntImm(1)
    for d in dims:
        total = total * d
    return total


def flat_index(indices: Sequence, shape: Sequence) -> E.PrimExpr:
    """Row-major position of ``indices`` in ``shape``."""
    flat = E.IntImm(0)
    for index, dim in zip(indices, shape):
        flat = flat * dim + index
    return flat


def unravel(flat, shape: Sequence) -> tuple:
    """Indices of row-major position ``flat`` (assumed in range) in ``shape``."""
    indices = []
    stride = E.IntImm(1)
    for i in range(len(shape) - 1, -1, -1):
        index = flat // stride
        if i > 0:  # the outermost index needs no wrap-around: flat < total
            index = index % shape[i]
        indices.append(index)
        stride = stride * shape[i]
    return tuple(indices[::-1])


def broadcast_index(te, shape: Sequence, out_index: Sequence) -> tuple:
    """NumPy broadcasting: ``shape`` right-aligned to the output; unit dims read index 0."""
    offset = len(out_index) - len(shape)
    return tuple(E.IntImm(0) if te.is_one(d) else out_index[offset + i] for i, d in enumerate(shape))


def normalize_axes(axes, ndim: int) -> list[int]:
    """Attribute axes (None = all) as sorted non-negative ints."""
    if axes is None:
        return list(range(ndim))
    return sorted(a % ndim for a in axes)


def reduce_axes_for(shape: Sequence, axes: Sequence[int], prefix: str = "k") -> list[ReduceAxis]:
    return [reduce_axis(shape[a], f"{prefix}{i}") for i, a in enumerate(axes)]


def reduction_input_index(ndim: int, axes: Sequence[int], keepdims: bool, out_index: Sequence,
                          raxes: Sequence[ReduceAxis]) -> tuple:
    """Input index of a reduction over ``axes``: reduce vars there, output indices elsewhere."""
    out_iter, red_iter = iter(out_index), iter(raxes)
    index = []
    for i in range(ndim):
        if i in axes:
            index.append(next(red_iter).var)
            if keepdims:
                next(out_iter)  # the kept unit dim's index is always 0
        else:
            index.append(next(out_iter))
    return tuple(index)


def without(indices: Sequence, positions: Sequence[int]) -> tuple:
    return tuple(v for i, v in enumerate(indices) if i not in positions)


def accumulation_dtype(dtype: str) -> str:
    """Dtype that means and variances accumulate in, as NumPy does: float64 for
    integers and bool, float32 for float16, the input dtype otherwise."""
    if not dt.is_float(dtype):
        return "float64"
    if dtype == "float16":
        return "float32"
    return dtype


def truthy(value: E.PrimExpr) -> E.PrimExpr:
    """A value as bool (non-zero is true)."""
    return value if value.dtype == "bool" else E.NE(value, E.const(0, value.dtype))


def guarded(load: E.PrimExpr, conditions: Sequence, fill: E.PrimExpr) -> E.PrimExpr:
    """``load`` where every one of ``conditions`` holds, else ``fill`` (``load`` itself when there is
    none: a padding read the simplifier proved in bounds)."""
    if not conditions:
        return load
    inside = conditions[0]
    for c in conditions[1:]:
        inside = E.And(inside, c)
    return E.select(inside, load, fill)
