"""Static shape of a loop nest that the vectorised executor can take whole.

A candidate nest is a chain of ``For``s (each one's body is the next)
ending in optional ``LetStmt`` / else-less ``IfThenElse`` wrappers around a
single store: a bare ``BufferStore`` (lowered code) or a ``BlockRealize``
whose block holds one ``BufferStore`` body and at most one ``BufferStore``
init, with no ``alloc_buffer`` or ``match_buffer``. Loop bounds may not
depend on the nest's own loop vars (the domain must be a box).

Whether running it vectorised is *valid* depends on the data it touches;
``nest.py`` checks that at run time and falls back to serial loops.
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import dtype as dt
from .. import expr as E
from .. import stmt as S
from ..functor import collect

REDUCE_OPS = {E.Add: "add", E.Mul: "multiply", E.Max: "maximum", E.Min: "minimum"}


@dataclass
class NestPlan:
    loops: list           # For nodes, outermost first
    wrappers: list        # LetStmt / IfThenElse between the loops and the store
    realize: object       # BlockRealize or None (lowered code)
    store: S.BufferStore
    init: S.BufferStore | None
    reduction: tuple | None  # (ufunc name, g) when store is Y[i] = Y[i] op g
    conflicted: bool = False  # a run found a loop-carried dependence: go serial


def plan_nest(loop: S.For) -> NestPlan | None:
    loops = [loop]
    while isinstance(loops[-1].body, S.For):
        loops.append(loops[-1].body)
    for k, inner in enumerate(loops[1:], start=1):
        outer_vars = {id(l.loop_var) for l in loops[:k]}
        used = collect(inner.min, _is_var) + collect(inner.extent, _is_var)
        if any(id(v) in outer_vars for v in used):
            return None
    wrappers = []
    leaf = loops[-1].body
    while isinstance(leaf, (S.LetStmt, S.IfThenElse)):
        if isinstance(leaf, S.IfThenElse):
            if leaf.else_case is not None:
                return None
            wrappers.append(leaf)
            leaf = leaf.then_case
        else:
            wrappers.append(leaf)
            leaf = leaf.body
    realize, init = None, None
    if isinstance(leaf, S.BlockRealize):
        block = leaf.block
        if block.alloc_buffers or block.match_buffers or not isinstance(block.body, S.BufferStore):
            return None
        realize, init, store = leaf, block.init, block.body
        if init is not None and not (isinstance(init, S.BufferStore) and init.buffer is store.buffer
                                     and _same_indices(init.indices, store.indices)):
            return None
    elif isinstance(leaf, S.BufferStore):
        store = leaf
    else:
        return None
    reduction = _reduction_of(store)
    if init is not None and reduction is None:
        return None
    if collect(loop, _is_vector):
        return None   # lanes would need their own axis in the nest's arrays: run serially
    return NestPlan(loops, wrappers, realize, store, init, reduction)


def _is_vector(node) -> bool:
    return isinstance(node, E.PrimExpr) and node.dtype not in dt.SCALAR_NAMES


def _is_var(node) -> bool:
    return isinstance(node, E.Var)


def _reduction_of(store: S.BufferStore):
    """(op, g) if the store is ``Y[idx] = Y[idx] op g`` (either operand order)."""
    value = store.value
    op = REDUCE_OPS.get(type(value))
    if op is None or value.dtype != store.buffer.dtype or value.dtype == "bool":
        return None
    for mine, other in ((value.a, value.b), (value.b, value.a)):
        if isinstance(mine, E.BufferLoad) and mine.buffer is store.buffer \
                and _same_indices(mine.indices, store.indices):
            return op, other
    return None


def _same_indices(a, b) -> bool:
    return len(a) == len(b) and all(same_expr(x, y) for x, y in zip(a, b))


def same_expr(a, b) -> bool:
    """Syntactic identity of two expressions (Vars and Buffers compared by identity)."""
    if a is b:
        return True
    if type(a) is not type(b) or isinstance(a, E.Var):
        return False
    for attr in a._attrs:
        if getattr(a, attr) != getattr(b, attr):
            return False
    if isinstance(a, E.BufferLoad):
        return a.buffer is b.buffer and _same_indices(a.indices, b.indices)
    for field in a._fields:
        x, y = getattr(a, field), getattr(b, field)
        if isinstance(x, tuple):
            if len(x) != len(y) or not all(same_expr(p, q) for p, q in zip(x, y)):
                return False
        elif not same_expr(x, y):
            return False
    return True
