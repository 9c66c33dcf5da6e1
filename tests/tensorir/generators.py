"""Hypothesis strategies that build random, valid PrimFuncs (the test oracle's workload).

Functions are built directly with the IR constructors, in the canonical form
the parser produces: a root block named "root" (holding intermediate
``alloc_buffer``s) wrapping serial loops over ``BlockRealize``s whose blocks
have explicit iter vars bound to the loop vars, point read/write regions per
block instance (``X[vi, vj]`` is ``Range(vi, 1)`` per dimension; a reduction
block with ``init`` does not list its output among its reads, as TVMScript
does), and buffer parameters ordered inputs then outputs.

Public API::

    gen = data.draw(prim_funcs())                 # a GeneratedFunc
    sizes = data.draw(sym_sizes(gen))             # {"n0": 3, ...}
    arrays = make_inputs(gen, rng, sizes)         # inputs + zeroed outputs
    expected = gen.numpy_fn(*arrays[:gen.num_inputs])
    tir.interpret(gen.func, *arrays)              # fills arrays[gen.num_inputs:]
    for got, want in zip(arrays[gen.num_inputs:], expected):
        np.testing.assert_allclose(got, want, **tolerance(gen.dtype))

``block_nest``, ``root_realize`` and ``point_region`` build canonical
functions by hand in the same form.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
from hypothesis import strategies as st

from tensorir import (Block, BlockRealize, Buffer, BufferRegion, BufferStore, FloatImm, For,
                      IfThenElse, IntImm, IterVar, PrimFunc, Range, Var, call_intrin, seq, size_var)
from tensorir import dtype as dt
from tensorir.expr import max_, min_

from .expr_trees import (LOAD_RANGE, IRContext, NumpyContext, conditions, to_ir, to_numpy,
                         value_trees)

KINDS = ("elementwise", "transpose", "reduction", "matmul")
DTYPES = ("float32", "float64")
# Branching kernels (expr_trees.py): if/else, select, and/or/not, symbolic guards, block
# predicates, integer division of negative values; they also take integer dtypes.
CONTROL_KINDS = ("conditional",)
INT_DTYPES = ("int32", "int64")


@dataclass(frozen=True)
class GeneratedFunc:
    """A random PrimFunc with its NumPy meaning.

    ``numpy_fn(*inputs)`` returns the list of expected outputs; ``sym_vars``
    are the symbolic shape vars in order of first mention in the params.
    """
    func: PrimFunc
    numpy_fn: Callable[..., list]
    sym_vars: tuple[Var, ...]
    kind: str
    dtype: str
    num_inputs: int

    @property
    def num_outputs(self) -> int:
        return len(self.func.buffer_params) - self.num_inputs


def prim_funcs(kinds: Sequence[str] = KINDS, dtypes: Sequence[str] = DTYPES) -> st.SearchStrategy:
    """Strategy for GeneratedFunc of the given kinds (see KINDS) and dtypes."""
    builders = {"elementwise": _elementwise, "transpose": _transpose,
                "reduction": _reduction, "matmul": _matmul, "conditional": _conditional}
    return st.sampled_from(tuple(kinds)).flatmap(
        lambda kind: st.sampled_from(tuple(dtypes)).flatmap(lambda dtype: builders[kind](dtype)))


def sym_sizes(gen: GeneratedFunc, min_value: int = 1, max_value: int = 8) -> st.SearchStrategy:
    """Strategy for a value of every symbolic var of ``gen``: {name: int}."""
    return st.fixed_dictionaries({v.name: st.integers(min_value, max_value) for v in gen.sym_vars})


def shape_of(buffer: Buffer, sizes: dict[str, int]) -> tuple[int, ...]:
    """Concrete shape of a generated buffer (its dims are Vars or IntImms)."""
    return tuple(sizes[d.name] if isinstance(d, Var) else d.value for d in buffer.shape)


def make_inputs(gen: GeneratedFunc, rng: np.random.Generator, sizes: dict[str, int]) -> list[np.ndarray]:
    """Arrays for every buffer param: float inputs uniform in [-1, 1], integer ones in
    [-LOAD_RANGE, LOAD_RANGE], outputs zeroed."""
    arrays = []
    for index, buf in enumerate(gen.func.buffer_params):
        shape = shape_of(buf, sizes)
        if index < gen.num_inputs and not dt.is_float(buf.dtype):
            arrays.append(rng.integers(-LOAD_RANGE, LOAD_RANGE + 1, size=shape).astype(buf.dtype))
        elif index < gen.num_inputs:
            arrays.append(rng.uniform(-1.0, 1.0, size=shape).astype(buf.dtype))
        else:
            arrays.append(np.zeros(shape, dtype=buf.dtype))
    return arrays


def tolerance(dtype: str) -> dict:
    """assert_allclose keyword arguments suited to ``dtype``."""
    if dtype == "float64":
        return {"rtol": 1e-10, "atol": 1e-12}
    if not dt.is_float(dtype):
        return {"rtol": 0, "atol": 0}
    return {"rtol": 2e-5, "atol": 2e-6}


# ------------------------------------------------ building blocks (also for hand-written tests)
def _extents(count: int, prefix: str = "n"):
    """Strategy for ``count`` extents, each symbolic (a fresh size_var) or static."""
    def one(index):
        return st.one_of(st.just(None), st.integers(1, 6)).map(
            lambda v: size_var(f"{prefix}{index}") if v is None else IntImm(v))
    return st.tuples(*[one(i) for i in range(count)])


def point_region(buffer: Buffer, indices) -> BufferRegion:
    """The region ``buffer[indices]`` of one block instance."""
    return BufferRegion(buffer, [Range(i, 1) for i in indices])


def block_nest(name: str, extents, kinds: str, make_block, make_predicate=None):
    """Serial loops over ``extents`` around one block with iter vars of ``kinds``.

    ``make_block(iter_vars) -> (body, init, reads, writes)`` builds the block
    contents from the block's iter var Vars; ``make_predicate(loop_vars)``, if
    given, the block's ``T.where`` condition.
    """
    loop_vars = [Var(f"{name}_i{k}") for k in range(len(extents))]
    iter_vars = [Var(f"{name}_v{k}") for k in range(len(extents))]
    body, init, reads, writes = make_block(iter_vars)
    block = Block(name, [IterVar(v, Range(0, e), kind) for v, e, kind in zip(iter_vars, extents, kinds)],
                  reads, writes, body, init=init)
    stmt = BlockRealize(loop_vars, make_predicate(loop_vars) if make_predicate else None, block)
    for var, extent in reversed(list(zip(loop_vars, extents))):
        stmt = For(var, 0, extent, "serial", stmt)
    return stmt


def root_realize(body, alloc_buffers=()) -> BlockRealize:
    """The root block ("root", no iter vars) a PrimFunc with blocks has as body."""
    return BlockRealize([], None, Block("root", [], [], [], body, alloc_buffers=alloc_buffers))


def _sym_vars(params) -> tuple[Var, ...]:
    seen: list[Var] = []
    for p in params:
        for d in p.shape:
            if isinstance(d, Var) and all(d is not s for s in seen):
                seen.append(d)
    return tuple(seen)


def _finish(name, inputs, outputs, body, numpy_fn, kind, dtype, alloc_buffers=()):
    params = list(inputs) + list(outputs)
    func = PrimFunc(params, root_realize(body, alloc_buffers), name=name)
    return GeneratedFunc(func, numpy_fn, _sym_vars(params), kind, dtype, len(inputs))


# ---------------------------------------------------------------- elementwise chains
_ERF = np.frompyfunc(math.erf, 1, 1)


def _unary_ops(dtype: str):
    """name -> (IR builder, NumPy function); all are total on the reals."""
    one = np.dtype(dtype).type(1)
    zero = np.dtype(dtype).type(0)
    return {
        "exp": (lambda x: call_intrin("exp", call_intrin("tanh", x)), lambda x: np.exp(np.tanh(x))),
        "tanh": (lambda x: call_intrin("tanh", x), np.tanh),
        "sigmoid": (lambda x: call_intrin("sigmoid", x), lambda x: one / (one + np.exp(-x))),
        "sin": (lambda x: call_intrin("sin", x), np.sin),
        "abs": (lambda x: call_intrin("abs", x), np.abs),
        "neg": (lambda x: -x, np.negative),
        "relu": (lambda x: max_(x, FloatImm(0.0, dtype)), lambda x: np.maximum(x, zero)),
        "sqrt_abs": (lambda x: call_intrin("sqrt", call_intrin("abs", x)), lambda x: np.sqrt(np.abs(x))),
        "log1p_abs": (lambda x: call_intrin("log", call_intrin("abs", x) + FloatImm(1.0, dtype)),
                      lambda x: np.log(np.abs(x) + one)),
        "erf": (lambda x: call_intrin("erf", x), lambda x: np.asarray(_ERF(x), dtype=x.dtype)),
        "square": (lambda x: x * x, lambda x: x * x),
    }


_BINARY_OPS = {
    "add": (lambda a, b: a + b, np.add),
    "sub": (lambda a, b: a - b, np.subtract),
    "mul": (lambda a, b: a * b, np.multiply),
    "max": (max_, np.maximum),
    "min": (min_, np.minimum),
}


@st.composite
def _elementwise(draw, dtype: str):
    rank = draw(st.integers(1, 3))
    extents = draw(_extents(rank))
    x = Buffer("X", extents, dtype)
    # The broadcast operand Y keeps a subset of X's dims (NumPy: size-1 elsewhere).
    kept = draw(st.lists(st.booleans(), min_size=rank, max_size=rank))
    use_y = draw(st.booleans())
    y = Buffer("Y", [e for e, k in zip(extents, kept) if k], dtype) if use_y else None
    unary = _unary_ops(dtype)
    # Each block applies a few ops; later blocks read the previous block's result.
    num_blocks = draw(st.integers(1, 2))
    plans = [draw(st.lists(st.one_of(st.sampled_from(sorted(unary)).map(lambda n: ("u", n)),
                                     st.sampled_from(sorted(_BINARY_OPS)).map(lambda n: ("b", n))),
                           min_size=1, max_size=2)) for _ in range(num_blocks)]
    if y is not None and not any(op[0] == "b" for plan in plans for op in plan):
        plans[-1] = plans[-1] + [("b", "add")]
    out = Buffer("out", extents, dtype)
    temps = [Buffer(f"T{k}", extents, dtype) for k in range(num_blocks - 1)]
    stages = [x] + temps + [out]

    def y_indices(iter_vars):
        return [v for v, k in zip(iter_vars, kept) if k]

    stmts = []
    for index, plan in enumerate(plans):
        src, dst = stages[index], stages[index + 1]

        def make_block(iter_vars, plan=plan, src=src, dst=dst):
            value = src[tuple(iter_vars)]
            reads = [point_region(src, iter_vars)]
            for op_kind, name in plan:
                if op_kind == "u":
                    value = unary[name][0](value)
                else:
                    other = y[tuple(y_indices(iter_vars))] if y is not None else x[tuple(iter_vars)]
                    value = _BINARY_OPS[name][0](value, other)
                    region = point_region(other.buffer, other.indices)
                    if all(r.buffer is not region.buffer for r in reads):
                        reads.append(region)
            return BufferStore(dst, value, iter_vars), None, reads, [point_region(dst, iter_vars)]
        stmts.append(block_nest(f"B{index}", extents, "S" * rank, make_block))

    def numpy_fn(*arrays):
        xa = arrays[0]
        ya = None
        if y is not None:
            ya = arrays[1].reshape([xa.shape[d] if k else 1 for d, k in enumerate(kept)])
        value = xa
        with np.errstate(all="ignore"):
            for plan in plans:
                for op_kind, name in plan:
                    if op_kind == "u":
                        value = unary[name][1](value)
                    else:
                        value = _BINARY_OPS[name][1](value, ya if ya is not None else xa)
        return [np.asarray(value, dtype=dtype)]

    inputs = [x] + ([y] if y is not None else [])
    return _finish("elementwise", inputs, [out], seq(*stmts), numpy_fn, "elementwise", dtype, temps)


# ---------------------------------------------------------------- transpose
@st.composite
def _transpose(draw, dtype: str):
    rank = draw(st.integers(2, 3))
    extents = draw(_extents(rank))
    perm = draw(st.permutations(range(rank)).filter(lambda p: list(p) != list(range(rank))))
    x = Buffer("X", extents, dtype)
    y = Buffer("Y", [extents[p] for p in perm], dtype)
    negate = draw(st.booleans())

    def make_block(iter_vars):
        # Y[a0, a1, ...] = X[b] with b[perm[k]] = a_k, i.e. Y = X.transpose(perm).
        src_indices = [None] * rank
        for k, p in enumerate(perm):
            src_indices[p] = iter_vars[k]
        value = x[tuple(src_indices)]
        value = -value if negate else value
        reads, writes = [point_region(x, src_indices)], [point_region(y, iter_vars)]
        return BufferStore(y, value, iter_vars), None, reads, writes

    body = block_nest("T_transpose", [extents[p] for p in perm], "S" * rank, make_block)

    def numpy_fn(xa):
        out = np.transpose(xa, perm)
        return [np.ascontiguousarray(-out if negate else out)]
    return _finish("transpose", [x], [y], body, numpy_fn, "transpose", dtype)


# ---------------------------------------------------------------- reductions
def _lowest(dtype: str) -> float:
    return float(np.finfo(dtype).min)


@st.composite
def _reduction(draw, dtype: str):
    rank = draw(st.integers(2, 3))
    extents = draw(_extents(rank))
    reduce_mask = draw(st.lists(st.booleans(), min_size=rank, max_size=rank).filter(
        lambda m: any(m) and not all(m)))
    op = draw(st.sampled_from(["sum", "max"]))
    spatial_axes = [d for d in range(rank) if not reduce_mask[d]]
    reduce_axes = [d for d in range(rank) if reduce_mask[d]]
    x = Buffer("X", extents, dtype)
    y = Buffer("Y", [extents[d] for d in spatial_axes], dtype)
    order = spatial_axes + reduce_axes  # loop order: spatial first, as legalization emits

    def make_block(iter_vars):
        axis_var = {axis: iter_vars[k] for k, axis in enumerate(order)}
        out_idx = [axis_var[d] for d in spatial_axes]
        current = y[tuple(out_idx)]
        loaded = x[tuple(axis_var[d] for d in range(rank))]
        if op == "sum":
            body_value, init_value = current + loaded, FloatImm(0.0, dtype)
        else:
            body_value, init_value = max_(current, loaded), FloatImm(_lowest(dtype), dtype)
        return (BufferStore(y, body_value, out_idx), BufferStore(y, init_value, out_idx),
                [point_region(x, [axis_var[d] for d in range(rank)])], [point_region(y, out_idx)])

    kinds = "S" * len(spatial_axes) + "R" * len(reduce_axes)
    body = block_nest(f"{op}_red", [extents[d] for d in order], kinds, make_block)

    def numpy_fn(xa):
        fn = np.sum if op == "sum" else np.max
        return [np.asarray(fn(xa, axis=tuple(reduce_axes)), dtype=dtype)]
    return _finish(f"{op}_reduce", [x], [y], body, numpy_fn, "reduction", dtype)


# ---------------------------------------------------------------- matmul
@st.composite
def _matmul(draw, dtype: str):
    m, n, k = draw(_extents(3, prefix="d"))
    b_transposed = draw(st.booleans())
    a = Buffer("A", [m, k], dtype)
    b = Buffer("B", [n, k] if b_transposed else [k, n], dtype)
    c = Buffer("C", [m, n], dtype)

    def make_block(iter_vars):
        vi, vj, vk = iter_vars
        b_idx = [vj, vk] if b_transposed else [vk, vj]
        value = c[vi, vj] + a[vi, vk] * b[tuple(b_idx)]
        return (BufferStore(c, value, [vi, vj]), BufferStore(c, FloatImm(0.0, dtype), [vi, vj]),
                [point_region(a, [vi, vk]), point_region(b, b_idx)], [point_region(c, [vi, vj])])

    body = block_nest("matmul", [m, n, k], "SSR", make_block)

    def numpy_fn(aa, ba):
        return [np.asarray(aa @ (ba.T if b_transposed else ba), dtype=dtype)]
    return _finish("matmul", [a, b], [c], body, numpy_fn, "matmul", dtype)


# ---------------------------------------------------------------- branching kernels
@st.composite
def _conditional(draw, dtype: str):
    """out[v] = then_value if guard else else_value (or unchanged), flag[v] = a condition,
    optionally under a block predicate over the loop vars and symbolic sizes."""
    rank = draw(st.integers(1, 2))
    extents = draw(_extents(rank))
    syms = [e for e in extents if isinstance(e, Var)]
    trees = {"guard": draw(conditions(dtype, rank, len(syms))),
             "then": draw(value_trees(dtype, rank, len(syms))),
             "else": draw(st.none() | value_trees(dtype, rank, len(syms))),
             "flag": draw(st.none() | conditions(dtype, rank, len(syms), depth=1)),
             "where": draw(st.none() | conditions(dtype, rank, len(syms), depth=1, loads=False))}
    x = Buffer("X", extents, dtype)
    out = Buffer("out", extents, dtype)
    flag = Buffer("flag", extents, "bool") if trees["flag"] is not None else None

    def make_block(iter_vars):
        ctx = IRContext(dtype, iter_vars, syms, x[tuple(iter_vars)])
        store = BufferStore(out, to_ir(trees["then"], ctx, "value"), iter_vars)
        otherwise = None if trees["else"] is None else BufferStore(out, to_ir(trees["else"], ctx, "value"),
                                                                    iter_vars)
        body = IfThenElse(to_ir(trees["guard"], ctx, "bool"), store, otherwise)
        writes = [point_region(out, iter_vars)]
        if flag is not None:
            body = seq(body, BufferStore(flag, to_ir(trees["flag"], ctx, "bool"), iter_vars))
            writes.append(point_region(flag, iter_vars))
        return body, None, [point_region(x, iter_vars)], writes

    def make_predicate(loop_vars):
        return to_ir(trees["where"], IRContext(dtype, loop_vars, syms, None), "bool")

    body = block_nest("cond", extents, "S" * rank, make_block,
                      make_predicate if trees["where"] is not None else None)

    def numpy_fn(xa):
        sizes = [xa.shape[d] for d, e in enumerate(extents) if isinstance(e, Var)]
        ctx = NumpyContext(dtype, [g.astype("int64") for g in np.indices(xa.shape)], sizes, xa)

        def full(tree, sort):
            return np.broadcast_to(to_numpy(tree, ctx, sort), xa.shape)
        where = np.ones(xa.shape, bool) if trees["where"] is None else full(trees["where"], "bool")
        guard = full(trees["guard"], "bool")
        result = np.zeros(xa.shape, dtype)
        result[where & guard] = full(trees["then"], "value")[where & guard]
        if trees["else"] is not None:
            result[where & ~guard] = full(trees["else"], "value")[where & ~guard]
        outputs = [result]
        if flag is not None:
            outputs.append(where & full(trees["flag"], "bool"))
        return outputs

    outputs = [out] + ([flag] if flag is not None else [])
    return _finish("conditional", [x], outputs, body, numpy_fn, "conditional", dtype)
