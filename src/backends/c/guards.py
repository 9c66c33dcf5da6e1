"""Turn a loop body's bound guards into loop bounds.

Splitting a symbolic extent guards the body with ``outer * f + inner < n``.
Inside a vectorized loop such a guard forces masked loads, which gcc often
refuses to vectorize. A guard ``loop_var + c < e`` (``c``, ``e`` free of
``loop_var``) holds exactly on a prefix of the iteration space, so it
becomes the loop bound ``min(hi, e - c)``; guards that do not use the loop
variable move outside the loop.
"""
from __future__ import annotations

from dataclasses import dataclass

from tensorir import dtype as dt
from tensorir import expr as E
from tensorir import stmt as S
from tensorir.functor import collect


@dataclass
class GuardSplit:
    outer: list          # conditions that do not use the loop variable
    upper_bounds: list   # exclusive upper bounds for the loop variable
    remaining: list      # conditions kept inside the loop


def _conjuncts(cond) -> list:
    if isinstance(cond, E.And):
        return _conjuncts(cond.a) + _conjuncts(cond.b)
    return [cond]


def _uses(e, var) -> bool:
    return bool(collect(e, lambda n: n is var))


def _terms(e) -> list:
    if isinstance(e, E.Add):
        return _terms(e.a) + _terms(e.b)
    return [e]


def _offset_from(e, var):
    """``c`` when ``e == var + c`` with ``c`` free of ``var`` (None otherwise)."""
    terms = _terms(e)
    hits = [t for t in terms if t is var]
    rest = [t for t in terms if t is not var]
    if len(hits) != 1 or any(_uses(t, var) for t in rest):
        return None
    offset = E.IntImm(0, var.dtype)
    for t in rest:
        offset = E.add(offset, t)
    return offset


def split_guard(loop: S.For) -> GuardSplit | None:
    body = loop.body
    if not isinstance(body, S.IfThenElse) or body.else_case is not None:
        return None
    var = loop.loop_var
    split = GuardSplit([], [], [])
    for cond in _conjuncts(body.condition):
        if _may_trap(cond):
            # `a and b` evaluates b only where a holds (and a zero-trip loop evaluates neither):
            # only a condition that is safe anywhere leaves its place
            split.remaining.append(cond)
            continue
        if not _uses(cond, var):
            split.outer.append(cond)
            continue
        if isinstance(cond, (E.LT, E.LE)) and not _uses(cond.b, var):
            offset = _offset_from(cond.a, var)
            if offset is not None:
                bound = E.sub(cond.b, offset)
                split.upper_bounds.append(E.add(bound, 1) if isinstance(cond, E.LE) else bound)
                continue
        split.remaining.append(cond)
    if not split.outer and not split.upper_bounds:
        return None
    return split


def _may_trap(cond) -> bool:
    """A load (its index may be out of bounds), an index check, or an integer division by a
    value that may be 0."""
    def trapping(n):
        if isinstance(n, E.BufferLoad) or (isinstance(n, E.Call) and n.op == E.CHECKED_INDEX):
            return True
        return isinstance(n, (E.Div, E.FloorDiv, E.FloorMod)) and not dt.is_float(n.dtype) and \
            not (isinstance(n.b, E.IntImm) and n.b.value != 0)
    return bool(collect(cond, trapping))


def and_all(conds):
    out = conds[0]
    for c in conds[1:]:
        out = E.And(out, c)
    return out
