"""How much work a loop nest does, to decide whether a parallel loop should fork.

Waking OpenMP's sleeping threads costs microseconds, which dominates kernels
that run on a handful of rows (a decoder at sequence length 1). The emitter
adds ``if(iterations >= PARALLEL_MIN_ITERATIONS)`` to each parallel loop,
where iterations estimates the innermost-statement executions of the nest.
A loop whose body is guarded by ``var + c < e`` (a split symbolic extent)
counts ``min(extent, e - c)`` trips, taken at the first iteration of the
enclosing loops: otherwise a tile of 64 counts 64 even when n is 1.
"""
from __future__ import annotations

from tensorir import expr as E
from tensorir import stmt as S
from tensorir.arith import simplify
from tensorir.functor import collect, substitute

from .guards import _conjuncts, _offset_from

PARALLEL_MIN_ITERATIONS = 16384


def _uses_any(e, bound: set[int]) -> bool:
    return bool(collect(e, lambda n: isinstance(n, E.Var) and id(n) in bound))


def _symbolic_division(e) -> bool:
    return bool(collect(e, lambda n: isinstance(n, (E.Div, E.FloorDiv, E.FloorMod))
                        and not isinstance(n.b, E.IntImm)))


def _grows_from_zero(e, bound: set[int]) -> bool:
    """Whether ``e`` is at its minimum when the enclosing loop variables (all starting at 0) are 0:
    sums of constants and non-negative multiples of ``i``, ``i % t``, ``i // t``."""
    if isinstance(e, E.Var):
        return True
    if isinstance(e, E.IntImm):
        return True
    if isinstance(e, E.Add):
        return _grows_from_zero(e.a, bound) and _grows_from_zero(e.b, bound)
    if isinstance(e, E.Mul):
        const, other = (e.a, e.b) if isinstance(e.a, E.IntImm) else (e.b, e.a)
        return isinstance(const, E.IntImm) and const.value >= 0 and _grows_from_zero(other, bound)
    if isinstance(e, (E.FloorMod, E.FloorDiv)):
        return _grows_from_zero(e.a, bound)
    return False


def _guarded_extent(loop: S.For, extent: E.PrimExpr, bound: set[int], firsts: dict) -> E.PrimExpr:
    """``extent`` capped by guards ``loop_var + offset < e`` of the body. The cap is the trip count at
    the enclosing loops' first iteration, used only when that is the largest one: ``e`` does not
    depend on them and ``offset`` grows from 0 (a tile index); a triangular guard keeps ``extent``."""
    body = loop.body
    if not isinstance(body, S.IfThenElse) or body.else_case is not None:
        return extent
    for cond in _conjuncts(body.condition):
        if not isinstance(cond, (E.LT, E.LE)) or _uses_any(cond.b, bound | {id(loop.loop_var)}):
            continue
        offset = _offset_from(cond.a, loop.loop_var)
        if offset is None or (_uses_any(offset, bound) and not _grows_from_zero(offset, bound)):
            continue
        upper = E.add(cond.b, 1) if isinstance(cond, E.LE) else cond.b
        trips = simplify(substitute(E.sub(E.sub(upper, offset), loop.min), firsts))
        # the count is evaluated before the loop: it must not divide by a symbolic value (n may be 0)
        if not _uses_any(trips, bound) and not _symbolic_division(trips):
            extent = E.min_(extent, E.max_(trips, E.IntImm(0, trips.dtype)))
    return extent


def _inner(stmt, bound: set[int], firsts: dict) -> E.PrimExpr:
    """Executions of the statements under ``stmt``; extents that depend on inner loop
    variables (triangular nests) count as 1, an underestimate."""
    if isinstance(stmt, S.For):
        extent = E.IntImm(1) if _uses_any(stmt.extent, bound) else stmt.extent
        extent = _guarded_extent(stmt, extent, bound, firsts)
        inner_firsts = {**firsts, stmt.loop_var: stmt.min} if E.is_const_int(stmt.min, 0) else firsts
        return E.mul(extent, _inner(stmt.body, bound | {id(stmt.loop_var)}, inner_firsts))
    if isinstance(stmt, S.SeqStmt):
        total = E.IntImm(0)
        for sub in stmt.seq:
            total = E.add(total, _inner(sub, bound, firsts))
        return total
    if isinstance(stmt, (S.LetStmt, S.Allocate)):
        return _inner(stmt.body, bound | ({id(stmt.var)} if isinstance(stmt, S.LetStmt) else set()), firsts)
    if isinstance(stmt, S.IfThenElse):
        return _inner(stmt.then_case, bound, firsts)
    return E.IntImm(1)


def nest_iterations(loop: S.For) -> E.PrimExpr:
    extent = _guarded_extent(loop, loop.extent, set(), {})
    firsts = {loop.loop_var: loop.min} if E.is_const_int(loop.min, 0) else {}
    return E.mul(extent, _inner(loop.body, {id(loop.loop_var)}, firsts))
