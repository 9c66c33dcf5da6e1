"""Reductions: sum, mean, max, min, prod, variance, std over ``axis`` (int, tuple or
None = all) with ``keepdims``; argmax / argmin over one axis (or the
flattened tensor) giving int64.

An empty reduction gives the identity (sum 0, prod 1, max -inf, min inf; mean and variance NaN),
as compiled code does; argmax/argmin of an empty axis are errors (as in NumPy; compiled code
checks the axis before its kernel). Reductions keep the input dtype (as TVMScript does; NumPy
would widen integer sums and give float64 means): the reference computes in NumPy and casts back
to that dtype.
"""
from __future__ import annotations

import warnings

import numpy as np

from tensorir import expr as E
from tensorir.compute import max_value, min_value

from ..struct_info import TensorStructInfo
from ._convert import as_tensor, make_call
from ._infer_util import attr_axes, attr_int, normalize_axes, tensor_arg
from .registry import OpAttributeError, register_op


def reduced_sinfo(ctx, call, x: TensorStructInfo, axes, keepdims: bool, dtype) -> TensorStructInfo:
    """Annotation of ``x`` reduced over ``axes`` (None = all axes)."""
    if x.ndim < 0:
        return TensorStructInfo(None, dtype, x.ndim if keepdims else -1)
    reduced = set(range(x.ndim)) if axes is None else set(normalize_axes(ctx, call, axes, x.ndim, x))
    ndim = x.ndim if keepdims else x.ndim - len(reduced)
    if x.shape is None:
        return TensorStructInfo(None, dtype, ndim)
    dims = [E.IntImm(1) if i in reduced else d for i, d in enumerate(x.shape)
            if keepdims or i not in reduced]
    return TensorStructInfo(dims, dtype)


def _check_keepdims(keepdims, op: str) -> bool:
    if not isinstance(keepdims, (bool, np.bool_)):
        raise OpAttributeError(f"R.{op}: keepdims must be a bool, got {keepdims!r}")
    return bool(keepdims)


def _empty_mean(fn):
    # an empty mean or variance is NaN (0 / 0), as in NumPy, without NumPy's RuntimeWarning
    def reduce(x, axis, keepdims):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            with np.errstate(invalid="ignore", divide="ignore"):
                return fn(x, axis=axis, keepdims=keepdims)
    return reduce


# An empty reduction gives the reduction's identity, as compiled code does (its init runs
# before the empty loop): sum 0, prod 1, max -inf, min inf (NumPy would raise for max/min).
_REDUCE = {
    "sum": lambda x, axis, keepdims: np.sum(x, axis=axis, keepdims=keepdims, dtype=x.dtype),
    "prod": lambda x, axis, keepdims: np.prod(x, axis=axis, keepdims=keepdims, dtype=x.dtype),
    "mean": _empty_mean(np.mean),
    "max": lambda x, axis, keepdims: np.max(x, axis=axis, keepdims=keepdims, initial=min_value(x.dtype.name)),
    "min": lambda x, axis, keepdims: np.min(x, axis=axis, keepdims=keepdims, initial=max_value(x.dtype.name)),
    "variance": _empty_mean(np.var),
    "std": _empty_mean(np.std),   # the square root of variance (biased, as TVM's)
}


def _infer_reduce(call, ctx) -> TensorStructInfo:
    x = tensor_arg(call, 0, ctx)
    return reduced_sinfo(ctx, call, x, call.attrs.get("axis"), call.attrs["keepdims"], x.dtype)


def _make_reduce(name: str, fn):
    op_name = "relax." + name

    def constructor(x, axis=None, keepdims=False):
        attrs = {"axis": attr_axes(axis, name), "keepdims": _check_keepdims(keepdims, name)}
        return make_call(op_name, [as_tensor(x)], attrs)

    def reference(x, axis=None, keepdims=False):
        return np.asarray(fn(x, axis, keepdims), dtype=x.dtype)

    constructor.__name__ = name
    constructor.__doc__ = f"R.{name}(x, axis=None, keepdims=False): {name} over axis."
    register_op(op_name, _infer_reduce, reference, attr_names=("axis", "keepdims"),
                constructor=constructor)
    return constructor


for _name, _fn in _REDUCE.items():
    globals()[_name] = _make_reduce(_name, _fn)


# ---------------------------------------------------------------- argmax / argmin
def _infer_arg_reduce(call, ctx) -> TensorStructInfo:
    x = tensor_arg(call, 0, ctx)
    axis = call.attrs.get("axis")
    return reduced_sinfo(ctx, call, x, None if axis is None else (axis,), call.attrs["keepdims"],
                         "int64")


def _make_arg_reduce(name: str, fn):
    op_name = "relax." + name

    def constructor(x, axis=None, keepdims=False):
        attrs = {"axis": None if axis is None else attr_int(axis, name, "axis"),
                 "keepdims": _check_keepdims(keepdims, name)}
        return make_call(op_name, [as_tensor(x)], attrs)

    def reference(x, axis=None, keepdims=False):
        if x.size == 0 and (axis is None or x.shape[axis % x.ndim] == 0):
            # no element to point at (compiled code checks the same before its kernel:
            # legalize/guards.py)
            where = "the whole tensor" if axis is None else f"axis {axis}"
            raise ValueError(f"R.{name}: {where} of a {tuple(x.shape)} tensor is empty: "
                             f"no {name[3:]}imum to point at")
        out = fn(x, axis=axis)
        if keepdims:
            out = np.reshape(out, [1 if axis is None or i == axis % x.ndim else d
                                   for i, d in enumerate(x.shape)])
        return np.asarray(out, dtype=np.int64)

    constructor.__name__ = name
    constructor.__doc__ = f"R.{name}(x, axis=None, keepdims=False): index of the {name[3:]}imum."
    register_op(op_name, _infer_arg_reduce, reference, attr_names=("axis", "keepdims"),
                constructor=constructor)
    return constructor


argmax = _make_arg_reduce("argmax", np.argmax)
argmin = _make_arg_reduce("argmin", np.argmin)

__all__ = [*_REDUCE, "argmax", "argmin"]
