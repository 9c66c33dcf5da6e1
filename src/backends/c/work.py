"""How much work a loop nest does, to decide whether a parallel loop should fork.

Waking OpenMP's sleeping threads costs microseconds, which dominates kernels
that run on a handful of rows (a decoder at sequence length 1). The emitter
adds ``if(iterations >= PARALLEL_MIN_ITERATIONS)`` to each parallel loop,
where iterations estimates the innermost-statement executions of the nest.
"""
from __future__ import annotations

from tensorir import expr as E
from tensorir import stmt as S
from tensorir.functor import collect

PARALLEL_MIN_ITERATIONS = 16384


def _inner(stmt, bound: set[int]) -> E.PrimExpr:
    """Executions of the statements under ``stmt``; extents that depend on inner loop
    variables (triangular nests) count as 1, an underestimate."""
    if isinstance(stmt, S.For):
        uses_inner = collect(stmt.extent, lambda n: isinstance(n, E.Var) and id(n) in bound)
        extent = E.IntImm(1) if uses_inner else stmt.extent
        return E.mul(extent, _inner(stmt.body, bound | {id(stmt.loop_var)}))
    if isinstance(stmt, S.SeqStmt):
        total = E.IntImm(0)
        for sub in stmt.seq:
            total = E.add(total, _inner(sub, bound))
        return total
    if isinstance(stmt, (S.LetStmt, S.Allocate)):
        return _inner(stmt.body, bound | ({id(stmt.var)} if isinstance(stmt, S.LetStmt) else set()))
    if isinstance(stmt, S.IfThenElse):
        return _inner(stmt.then_case, bound)
    return E.IntImm(1)


def nest_iterations(loop: S.For) -> E.PrimExpr:
    return E.mul(loop.extent, _inner(loop.body, {id(loop.loop_var)}))
