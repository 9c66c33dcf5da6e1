"""``R.layout_transform(x, index_map, pad_value=None, axis_separators=None,
input_axis_separators=None)`` (TVM's signature).

``index_map`` is an ``IndexMap``: a function of the input's indices giving the
output's (written ``lambda n, c, h, w: (n, c // 4, h, w, c % 4)`` or
``T.index_map(lambda ...)``). Every input element moves to the position the map
gives it; output positions no input element reaches (the padding of a split
whose factor does not divide the extent) hold ``pad_value`` (0 when None).

Each output extent is the largest value its expression takes over the input's
index space, plus one, bounded per operation (``v // k`` by ``max(v) // k``,
``v % k`` by ``k - 1``, sums and products of non-negative terms termwise):
TVM's shapes for the maps its passes write (permutations, splits, fuses).
Axis separators (TVM's multi-dimensional physical buffers) are refused.
"""
from __future__ import annotations

import numpy as np

from tensorir import expr as E
from tensorir.structural import structural_equal

from ..struct_info import TensorStructInfo
from ._convert import as_tensor, check_attr_number, make_call
from ._infer_util import format_sinfo, simplify, tensor_arg
from .registry import OpAttributeError, register_op


class IndexMap:
    """``lambda *params: results`` over int64 index variables; compared up to renaming."""

    __slots__ = ("params", "results", "index_dtype")

    def __init__(self, params, results, index_dtype: str = "int64"):
        self.params = tuple(params)
        self.results = tuple(E.convert(r) for r in results)
        self.index_dtype = index_dtype

    def __eq__(self, other):
        return (isinstance(other, IndexMap) and len(self.params) == len(other.params)
                and self.index_dtype == other.index_dtype
                and structural_equal((self.params, self.results), (other.params, other.results)))

    def __hash__(self):
        return hash((len(self.params), len(self.results), self.index_dtype))

    def __repr__(self):
        from ..script.sym_expr import format_sym_expr
        body = ", ".join(format_sym_expr(r, lambda v: v.name) for r in self.results)
        params = ", ".join(p.name for p in self.params)
        extra = "" if self.index_dtype == "int64" else f', index_dtype="{self.index_dtype}"'
        tail = "," if len(self.results) == 1 else ""
        return f"T.index_map(lambda {params}: ({body}{tail}){extra})"

    def apply(self, indices):
        """The results with the params replaced by ``indices`` (PrimExprs)."""
        from tensorir.functor import substitute
        mapping = dict(zip(self.params, [E.convert(i) for i in indices]))
        return [substitute(r, mapping) for r in self.results]

    def evaluate(self, arrays):
        """The results at NumPy integer arrays of indices (elementwise)."""
        env = dict(zip(self.params, arrays))
        return [_eval_numpy(r, env) for r in self.results]


def _eval_numpy(e, env):
    if isinstance(e, E.Var):
        return env[e]
    if isinstance(e, E.IntImm):
        return np.int64(e.value)
    ops = {E.Add: np.add, E.Sub: np.subtract, E.Mul: np.multiply, E.FloorDiv: np.floor_divide,
           E.FloorMod: np.mod, E.Min: np.minimum, E.Max: np.maximum}
    for cls, fn in ops.items():
        if isinstance(e, cls):
            return fn(_eval_numpy(e.a, env), _eval_numpy(e.b, env))
    raise OpAttributeError(f"R.layout_transform: index_map expression {e!r} is not supported "
                           "(use +, -, *, //, %, min, max of the indices and integers)")


def max_value(e, extents: dict) -> E.PrimExpr | None:
    """An upper bound of ``e`` when every param ``v`` ranges over ``[0, extents[v])``;
    None for forms this does not bound (a subtraction, a negative factor)."""
    if isinstance(e, E.Var):
        return extents[e] - 1 if e in extents else None
    if isinstance(e, E.IntImm):
        return e if e.value >= 0 else None
    if isinstance(e, E.Add):
        a, b = max_value(e.a, extents), max_value(e.b, extents)
        return None if a is None or b is None else a + b
    if isinstance(e, E.Mul):
        a, b = max_value(e.a, extents), max_value(e.b, extents)
        return None if a is None or b is None else a * b
    if isinstance(e, E.FloorDiv) and isinstance(e.b, E.IntImm) and e.b.value > 0:
        a = max_value(e.a, extents)
        return None if a is None else E.floordiv(a, e.b)
    if isinstance(e, E.FloorMod) and isinstance(e.b, E.IntImm) and e.b.value > 0:
        return E.IntImm(e.b.value - 1)   # TVM's extent k for v % k, even when v < k
    return None


def layout_transform(x, index_map, pad_value=None, axis_separators=None,
                     input_axis_separators=None):
    """R.layout_transform(x, index_map, pad_value=None, axis_separators=None,
    input_axis_separators=None)."""
    if not isinstance(index_map, IndexMap):
        raise OpAttributeError("R.layout_transform: index_map must be a lambda or T.index_map(...), "
                               f"got {index_map!r}")
    for name, seps in (("axis_separators", axis_separators),
                       ("input_axis_separators", input_axis_separators)):
        if seps not in (None, [], ()):
            raise OpAttributeError(f"R.layout_transform: {name} {seps!r} (multi-dimensional physical "
                                   "buffers) are not supported")
    if pad_value is not None:
        from ..expr import PrimValue
        if isinstance(pad_value, PrimValue) and isinstance(pad_value.value, (E.IntImm, E.FloatImm)):
            pad_value = pad_value.value.value
        pad_value = check_attr_number(pad_value, "layout_transform", "pad_value")
    return make_call("relax.layout_transform", [as_tensor(x)],
                     {"index_map": index_map, "pad_value": pad_value})


def _infer_layout_transform(call, ctx) -> TensorStructInfo:
    x = tensor_arg(call, 0, ctx, "x")
    index_map = call.attrs["index_map"]
    if x.ndim >= 0 and x.ndim != len(index_map.params):
        ctx.error(f"relax.layout_transform: index_map takes {len(index_map.params)} indices, "
                  f"{format_sinfo(x)} has {x.ndim}")
    ndim = len(index_map.results)
    if x.shape is None:
        return TensorStructInfo(None, x.dtype, ndim)
    extents = dict(zip(index_map.params, x.shape))
    dims = []
    for r in index_map.results:
        top = max_value(r, extents)
        if top is None:
            return TensorStructInfo(None, x.dtype, ndim)
        dims.append(simplify(ctx, top + 1))
    return TensorStructInfo(dims, x.dtype)


def _layout_transform_reference(x, index_map, pad_value=None):
    # the output shape as deduced, at these extents
    extents = dict(zip(index_map.params, [E.IntImm(d) for d in x.shape]))
    shape = []
    for r in index_map.results:
        top = max_value(r, extents)
        shape.append(int(_eval_numpy(top, {})) + 1)
    out = np.full(shape, 0 if pad_value is None else pad_value, dtype=x.dtype)
    if x.size:
        grid = np.indices(x.shape).reshape(x.ndim, -1)
        targets = [np.broadcast_to(np.asarray(t, np.int64), grid.shape[1:])
                   for t in index_map.evaluate(list(grid))]
        out[tuple(targets)] = x.reshape(-1)
    return out


register_op("relax.layout_transform", _infer_layout_transform, _layout_transform_reference,
            attr_names=("index_map", "pad_value"), constructor=layout_transform)

__all__ = ["layout_transform", "IndexMap"]
