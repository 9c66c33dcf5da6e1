"""Build prim_funcs from index expressions, for generated kernels (legalization).

    n = size_var("n")
    x = placeholder((n, 4), "float32", "x")
    k = reduce_axis(4, "k")
    s = compute((n,), lambda i: reduce_sum(x[i, k], [k]), "s")
    y = compute((n, 4), lambda i, j: x[i, j] / s[i], "y")
    func = create_prim_func([x, y], name="normalize")

Each ``compute`` is one stage: a loop nest over the output shape with one
block (spatial iter vars, plus reduce iter vars and an init for reductions).
Stages that are not parameters become ``alloc_buffer``s of the root block.
"""
from __future__ import annotations

import inspect
import weakref
from dataclasses import dataclass, field
from typing import Callable, Sequence

from . import dtype as dt
from . import expr as E
from .buffer import Buffer
from .function import PrimFunc
from .functor import collect, substitute
from .stmt import (Block, BlockRealize, BufferRegion, BufferStore, For, IterVar, Range, seq)


@dataclass(eq=False)
class Tensor:
    """A buffer plus the stage that produces it (None for placeholders)."""
    buffer: Buffer
    stage: "Stage | None" = None

    @property
    def shape(self):
        return self.buffer.shape

    @property
    def dtype(self):
        return self.buffer.dtype

    @property
    def ndim(self):
        return self.buffer.ndim

    def __getitem__(self, indices) -> E.BufferLoad:
        if not isinstance(indices, tuple):
            indices = (indices,)
        return E.BufferLoad(self.buffer, [i.var if isinstance(i, ReduceAxis) else i for i in indices])


@dataclass(eq=False)
class ReduceAxis:
    var: E.Var
    extent: E.PrimExpr

    # let a reduce axis appear directly in index arithmetic
    def __add__(self, o): return self.var + o
    def __radd__(self, o): return o + self.var
    def __mul__(self, o): return self.var * o
    def __rmul__(self, o): return o * self.var
    def __sub__(self, o): return self.var - o


@dataclass(eq=False)
class Reduction:
    """A reduction ``combiner`` over ``axes`` of ``source`` starting from ``identity``."""
    combiner: str                 # "sum" | "max" | "min" | "prod"
    source: E.PrimExpr
    axes: list
    identity: E.PrimExpr


@dataclass(eq=False)
class Stage:
    tensor: Tensor
    iter_vars: list
    value: "E.PrimExpr | Reduction"
    inputs: list = field(default_factory=list)


# buffer id -> the computed Tensor that writes it (weak: stages die with their tensors)
_PRODUCERS: dict[int, "weakref.ref[Tensor]"] = {}


def placeholder(shape: Sequence, dtype: str = "float32", name: str = "x") -> Tensor:
    return Tensor(Buffer(name, shape, dtype))


def reduce_axis(extent, name: str = "k") -> ReduceAxis:
    return ReduceAxis(E.Var(name, "int64"), E.convert(extent))


def _reduction(combiner: str, source, axes, identity) -> Reduction:
    source = E.convert(source)
    axes = list(axes) if isinstance(axes, (list, tuple)) else [axes]
    return Reduction(combiner, source, axes, E.const(identity, source.dtype))


def min_value(dtype: str):
    import numpy as np
    if dt.is_float(dtype):
        return float("-inf")
    if dtype == "bool":
        return False
    return int(np.iinfo(dtype).min)


def max_value(dtype: str):
    import numpy as np
    if dt.is_float(dtype):
        return float("inf")
    if dtype == "bool":
        return True
    return int(np.iinfo(dtype).max)


def reduce_sum(source, axes) -> Reduction:
    return _reduction("sum", source, axes, 0)


def reduce_prod(source, axes) -> Reduction:
    return _reduction("prod", source, axes, 1)


def reduce_max(source, axes) -> Reduction:
    src = E.convert(source)
    return _reduction("max", src, axes, min_value(src.dtype))


def reduce_min(source, axes) -> Reduction:
    src = E.convert(source)
    return _reduction("min", src, axes, max_value(src.dtype))


_COMBINE = {"sum": E.add, "prod": E.mul, "max": E.max_, "min": E.min_}


def compute(shape: Sequence, fcompute: Callable, name: str = "T", dtype: str | None = None,
            axis_names: Sequence[str] | None = None) -> Tensor:
    """A new stage computing ``fcompute(*indices)`` for every index of ``shape``."""
    shape = [E.convert(s) for s in shape]
    params = inspect.signature(fcompute).parameters.values()
    variadic = any(p.kind is p.VAR_POSITIONAL for p in params)  # ``lambda *idx: ...`` fits any rank
    nparams = len(params)
    if not variadic and nparams != len(shape):
        raise ValueError(f"compute {name!r}: fcompute takes {nparams} indices, shape has {len(shape)} dims")
    names = list(axis_names or ["i", "j", "k", "l", "m", "p", "q", "r"][: len(shape)])
    while len(names) < len(shape):
        names.append(f"i{len(names)}")
    axes = [E.Var(nm, "int64") for nm in names]
    value = fcompute(*axes)
    if isinstance(value, Reduction):
        out_dtype = dtype or value.source.dtype
    else:
        value = E.convert(value)
        out_dtype = dtype or value.dtype
    tensor = Tensor(Buffer(name, shape, out_dtype))
    source = value.source if isinstance(value, Reduction) else value
    inputs = []
    for load in collect(source, lambda n: isinstance(n, E.BufferLoad)):
        ref = _PRODUCERS.get(id(load.buffer))
        producer = ref() if ref is not None else None
        if producer is not None and producer.buffer is load.buffer and producer not in inputs:
            inputs.append(producer)
    tensor.stage = Stage(tensor, axes, value, inputs)
    _PRODUCERS[id(tensor.buffer)] = weakref.ref(tensor)
    return tensor


def _region_of(buffer: Buffer, loads: list[E.BufferLoad]) -> BufferRegion:
    """Point region when all loads of ``buffer`` use one index tuple; the full buffer otherwise."""
    same = [ld for ld in loads if ld.buffer is buffer]
    first = same[0].indices
    if all(len(ld.indices) == len(first) and all(a is b or _const_eq(a, b) for a, b in zip(ld.indices, first))
           for ld in same):
        return BufferRegion(buffer, [Range(i, 1) for i in first])
    return BufferRegion.full(buffer)


def _const_eq(a, b) -> bool:
    return isinstance(a, E.IntImm) and isinstance(b, E.IntImm) and a.value == b.value


def _stage_stmt(stage: Stage, block_name: str):
    out = stage.tensor.buffer
    spatial = [E.Var("v_" + v.name, "int64") for v in stage.iter_vars]
    vmap = dict(zip(stage.iter_vars, spatial))
    iter_vars = [IterVar(sv, Range(0, ext), "S") for sv, ext in zip(spatial, out.shape)]
    loop_vars = list(stage.iter_vars)
    extents = list(out.shape)
    init = None
    value = stage.value
    if isinstance(value, Reduction):
        for ax in value.axes:
            rv = E.Var("v_" + ax.var.name, "int64")
            vmap[ax.var] = rv
            iter_vars.append(IterVar(rv, Range(0, ax.extent), "R"))
            loop_vars.append(ax.var)
            extents.append(ax.extent)
        source = substitute(value.source, vmap)
        if source.dtype != out.dtype:
            source = E.cast(out.dtype, source)
        current = E.BufferLoad(out, spatial)
        body = BufferStore(out, _COMBINE[value.combiner](current, source), spatial)
        init = BufferStore(out, E.cast(out.dtype, value.identity), spatial)
    else:
        rhs = substitute(value, vmap)
        if rhs.dtype != out.dtype:
            rhs = E.cast(out.dtype, rhs)
        body = BufferStore(out, rhs, spatial)
    loads = collect(body, lambda n: isinstance(n, E.BufferLoad) and n.buffer is not out) if init is None else \
        collect(body.value, lambda n: isinstance(n, E.BufferLoad) and n.buffer is not out)
    read_buffers = []
    for ld in loads:
        if ld.buffer not in read_buffers:
            read_buffers.append(ld.buffer)
    reads = [_region_of(b, loads) for b in read_buffers]
    if init is not None:
        reads.append(BufferRegion(out, [Range(v, 1) for v in spatial]))
    writes = [BufferRegion(out, [Range(v, 1) for v in spatial])]
    block = Block(block_name, iter_vars, reads, writes, body, init=init)
    stmt = BlockRealize(loop_vars, None, block)
    for var, ext in reversed(list(zip(loop_vars, extents))):
        stmt = For(var, 0, ext, "serial", stmt)
    return stmt


def _topological_stages(outputs: list[Tensor]) -> list[Stage]:
    order: list[Stage] = []
    seen: set[int] = set()

    def visit(t: Tensor):
        if t.stage is None or id(t.stage) in seen:
            return
        seen.add(id(t.stage))
        for dep in t.stage.inputs:
            visit(dep)
        order.append(t.stage)

    for t in outputs:
        visit(t)
    return order


def create_prim_func(params: Sequence[Tensor], name: str = "main", intermediates: Sequence[Tensor] = (),
                     scalar_params: Sequence[E.Var] = (), attrs: dict | None = None) -> PrimFunc:
    """A PrimFunc computing every non-placeholder tensor in ``params`` (and the
    ``intermediates`` they read, which become root-block alloc_buffers)."""
    params = list(params)
    stages = _topological_stages(list(intermediates) + [t for t in params if t.stage is not None])
    param_buffers = {id(t.buffer) for t in params}
    allocs = [s.tensor.buffer for s in stages if id(s.tensor.buffer) not in param_buffers]
    used: dict[str, int] = {}
    stmts = []
    for stage in stages:
        base = stage.tensor.buffer.name
        used[base] = used.get(base, 0) + 1
        block_name = base if used[base] == 1 else f"{base}_{used[base] - 1}"
        stmts.append(_stage_stmt(stage, block_name))
    root = Block("root", [], [], [], seq(*stmts), alloc_buffers=allocs)
    body = BlockRealize([], None, root)
    return PrimFunc([t.buffer for t in params] + list(scalar_params), body, attrs or {}, name=name)
