"""Random scalar expression trees with two meanings: a TensorIR PrimExpr and a NumPy array.

A tree is a nested tuple drawn by hypothesis; ``to_ir`` builds it over a
block's iter vars and the function's symbolic vars, ``to_numpy`` evaluates it
on index grids. Three sorts of trees:

- value trees of the kernel dtype (int32, int64, float32, float64): loads of
  ``X`` at the current point, literals, casts of index trees, + - min max,
  multiplication by a leaf, select, and for integers floor division, floor
  modulo, truncating division (``Div``) and truncating modulo (built as
  ``a - Div(a, b) * b``) by a non-zero literal, usually with negative operands;
- index trees (int64): iter vars, symbolic vars, literals, + -, multiplication
  by a literal, floordiv / floormod / truncdiv / truncmod by a non-zero literal or by a
  symbolic var (never 0: sizes start at 1), min, max;
- conditions: comparisons of index trees, comparisons of value leaves, and,
  or, not, select between conditions.

Overflow is kept out by construction (|load| <= 20, a product has a leaf
factor, trees are small), and float comparisons only compare leaves: gcc may
contract ``a * b + c`` into an FMA, which would flip a comparison of sums.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
from hypothesis import strategies as st

from tensorir import dtype as dt
from tensorir import expr as E

LOAD_RANGE = 20   # integer inputs are drawn from [-LOAD_RANGE, LOAD_RANGE]

_CMP = ("<", "<=", ">", ">=", "==", "!=")
_CMP_IR = {"<": E.LT, "<=": E.LE, ">": E.GT, ">=": E.GE, "==": E.EQ, "!=": E.NE}
_CMP_NP = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
           "==": np.equal, "!=": np.not_equal}
_DIVISORS = (-5, -3, -2, -1, 1, 2, 3, 7)


def _trunc_div(a, b):
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) == (b < 0), q, -q)


# ---------------------------------------------------------------- strategies
# Depth-bounded and cached: st.recursive with a small max_leaves spent most of the test
# time redrawing trees that came out too large.
def _leaf_or(leaves, deeper):
    return st.one_of(leaves, deeper)


@lru_cache(maxsize=None)
def index_trees(rank: int, num_syms: int, depth: int = 2):
    leaves = [st.tuples(st.just("iv"), st.integers(0, rank - 1)),
              st.tuples(st.just("const"), st.integers(-6, 6))]
    if num_syms:
        leaves.append(st.tuples(st.just("sym"), st.integers(0, num_syms - 1)))
    leaf = st.one_of(*leaves)
    if depth == 0:
        return leaf
    children = index_trees(rank, num_syms, depth - 1)
    divisor = st.one_of(st.tuples(st.just("const"), st.sampled_from(_DIVISORS)),
                        *([st.tuples(st.just("sym"), st.integers(0, num_syms - 1))] if num_syms else []))
    return _leaf_or(leaf, st.one_of(
        st.tuples(st.just("bin"), st.sampled_from(("+", "-", "min", "max")), children, children),
        st.tuples(st.just("bin"), st.just("*"), children, st.tuples(st.just("const"), st.integers(-3, 3))),
        st.tuples(st.just("div"), st.sampled_from(("//", "%", "tdiv", "tmod")), children, divisor),
    ))


@lru_cache(maxsize=None)
def value_trees(dtype: str, rank: int, num_syms: int, depth: int = 3):
    leaf = st.one_of(st.just(("load",)), st.just(("load",)),
                     st.tuples(st.just("const"), st.integers(-7, 7)),
                     st.tuples(st.just("cast"), index_trees(rank, num_syms, 1)))
    if depth == 0:
        return leaf
    children = value_trees(dtype, rank, num_syms, depth - 1)
    ops = [
        st.tuples(st.just("bin"), st.sampled_from(("+", "-", "min", "max")), children, children),
        st.tuples(st.just("bin"), st.just("*"), children, leaf),
        st.tuples(st.just("select"), conditions(dtype, rank, num_syms, depth=1), children, children),
        st.tuples(st.just("unary"), st.sampled_from(("abs", "neg")), children),
    ]
    if not dt.is_float(dtype):
        ops.append(st.tuples(st.just("div"), st.sampled_from(("//", "%", "tdiv", "tmod")), children,
                             st.tuples(st.just("const"), st.sampled_from(_DIVISORS))))
    return _leaf_or(leaf, st.one_of(*ops))


@lru_cache(maxsize=None)
def conditions(dtype: str, rank: int, num_syms: int, depth: int = 2, loads: bool = True):
    """Conditions; ``loads=False`` compares index trees only (a block predicate)."""
    # `iv + c < e`, the shape of a split's guard, which the C emitter turns into a loop bound
    iv = st.tuples(st.just("iv"), st.integers(0, rank - 1))
    shifted = st.one_of(iv, st.tuples(st.just("bin"), st.just("+"), iv,
                                      st.tuples(st.just("const"), st.integers(-3, 3))))
    comparison = st.one_of(
        st.tuples(st.just("cmp"), st.sampled_from(_CMP), index_trees(rank, num_syms, 2),
                  index_trees(rank, num_syms, 1)),
        st.tuples(st.just("cmp"), st.sampled_from(("<", "<=")), shifted, index_trees(rank, num_syms, 1)))
    if loads:
        value_leaf = st.one_of(st.just(("load",)), st.tuples(st.just("const"), st.integers(-7, 7)))
        comparison = st.one_of(
            comparison, st.tuples(st.just("vcmp"), st.sampled_from(_CMP), value_leaf, value_leaf))
    if depth == 0:
        return comparison
    children = conditions(dtype, rank, num_syms, depth - 1, loads)
    return _leaf_or(comparison, st.one_of(
        st.tuples(st.just("logic"), st.sampled_from(("and", "or")), children, children),
        st.tuples(st.just("not"), children),
        st.tuples(st.just("bselect"), children, children, children),
    ))


# ---------------------------------------------------------------- meanings
class IRContext:
    """What a tree's leaves mean in the IR: the kernel dtype, iter vars, symbolic vars, load."""

    def __init__(self, dtype, iter_vars, syms, load):
        self.dtype, self.iter_vars, self.syms, self.load = dtype, iter_vars, syms, load

    def sym(self, k):
        return self.syms[k] if k < len(self.syms) else E.IntImm(k + 1)


def to_ir(tree, ctx: IRContext, sort: str):
    """``sort`` is "value" (kernel dtype), "index" (int64) or "bool"."""
    kind = tree[0]
    dtype = ctx.dtype if sort == "value" else "int64"
    if kind == "load":
        return ctx.load
    if kind == "const":
        return E.const(tree[1], dtype)
    if kind == "iv":
        return ctx.iter_vars[tree[1]]
    if kind == "sym":
        return ctx.sym(tree[1])
    if kind == "cast":
        return E.cast(ctx.dtype, to_ir(tree[1], ctx, "index"))
    if kind == "bin":
        op, a, b = tree[1], to_ir(tree[2], ctx, sort), to_ir(tree[3], ctx, sort)
        return {"+": E.add, "-": E.sub, "*": E.mul, "min": E.min_, "max": E.max_}[op](a, b)
    if kind == "div":
        op, a, b = tree[1], to_ir(tree[2], ctx, sort), to_ir(tree[3], ctx, sort)
        if op == "tmod":  # no node of its own: a - trunc(a / b) * b, C's %
            return E.sub(a, E.mul(E.Div(a, b), b))
        return {"//": E.FloorDiv, "%": E.FloorMod, "tdiv": E.Div}[op](a, b)
    if kind == "unary":
        a = to_ir(tree[2], ctx, sort)
        return E.call_intrin("abs", a) if tree[1] == "abs" else -a
    if kind == "select":
        return E.Select(to_ir(tree[1], ctx, "bool"), to_ir(tree[2], ctx, sort), to_ir(tree[3], ctx, sort))
    if kind == "cmp":
        return _CMP_IR[tree[1]](to_ir(tree[2], ctx, "index"), to_ir(tree[3], ctx, "index"))
    if kind == "vcmp":
        return _CMP_IR[tree[1]](to_ir(tree[2], ctx, "value"), to_ir(tree[3], ctx, "value"))
    if kind == "logic":
        return (E.And if tree[1] == "and" else E.Or)(to_ir(tree[2], ctx, "bool"), to_ir(tree[3], ctx, "bool"))
    if kind == "not":
        return E.Not(to_ir(tree[1], ctx, "bool"))
    if kind == "bselect":
        return E.Select(*(to_ir(t, ctx, "bool") for t in tree[1:]))
    raise AssertionError(f"unknown tree node {kind!r}")


class NumpyContext:
    """The leaves' values on the iteration grid: index arrays per iter var, sizes, ``X``."""

    def __init__(self, dtype, grids, syms, load):
        self.dtype, self.grids, self.syms, self.load = dtype, grids, syms, load

    def sym(self, k):
        return np.int64(self.syms[k] if k < len(self.syms) else k + 1)


def to_numpy(tree, ctx: NumpyContext, sort: str):
    kind = tree[0]
    dtype = np.dtype(ctx.dtype if sort == "value" else "int64")
    if kind == "load":
        return ctx.load
    if kind == "const":
        return dtype.type(tree[1])
    if kind == "iv":
        return ctx.grids[tree[1]]
    if kind == "sym":
        return ctx.sym(tree[1])
    if kind == "cast":
        return np.asarray(to_numpy(tree[1], ctx, "index")).astype(ctx.dtype)
    if kind in ("bin", "div"):
        op, a, b = tree[1], to_numpy(tree[2], ctx, sort), to_numpy(tree[3], ctx, sort)
        fn = {"+": np.add, "-": np.subtract, "*": np.multiply, "min": np.minimum, "max": np.maximum,
              "//": np.floor_divide, "%": np.mod, "tdiv": _trunc_div, "tmod": np.fmod}[op]
        return np.asarray(fn(a, b)).astype(dtype)
    if kind == "unary":
        a = to_numpy(tree[2], ctx, sort)
        return np.asarray(np.abs(a) if tree[1] == "abs" else np.negative(a)).astype(dtype)
    if kind == "select":
        return np.where(to_numpy(tree[1], ctx, "bool"), to_numpy(tree[2], ctx, sort),
                        to_numpy(tree[3], ctx, sort)).astype(dtype)
    if kind == "cmp":
        return _CMP_NP[tree[1]](to_numpy(tree[2], ctx, "index"), to_numpy(tree[3], ctx, "index"))
    if kind == "vcmp":
        return _CMP_NP[tree[1]](to_numpy(tree[2], ctx, "value"), to_numpy(tree[3], ctx, "value"))
    if kind == "logic":
        fn = np.logical_and if tree[1] == "and" else np.logical_or
        return fn(to_numpy(tree[2], ctx, "bool"), to_numpy(tree[3], ctx, "bool"))
    if kind == "not":
        return np.logical_not(to_numpy(tree[1], ctx, "bool"))
    if kind == "bselect":
        return np.where(*(to_numpy(t, ctx, "bool") for t in tree[1:]))
    raise AssertionError(f"unknown tree node {kind!r}")
