"""Loop-invariant floating-point values for the C emitter.

Row kernels recompute per-row constants inside their inner loops: a layer
norm's normalize loop reads ``(x - sum / 4096) / sqrt(sq_sum / 4096 + eps)``
for every element. gcc hoists neither the square root nor the division out
of a vectorized loop, so each element pays a ``vsqrtps`` and a ``vdivps``.
For each loop the emitter asks ``invariant_values`` for the maximal
floating-point subexpressions of the body that

- use no variable bound by the loop or inside it,
- contain a division or a math call (cheaper ones are left to gcc),
- read only buffers that nothing inside the loop writes, and
- are evaluated on every iteration: the loop runs at least once and the
  use is not under an ``if``, a select branch or the right of ``&&``/``||``, so hoisting a load can not
  read memory the original program would not have read,

and binds them to constants just before the loop.
"""
from __future__ import annotations

from typing import Callable

from tensorir import dtype as dt
from tensorir import expr as E
from tensorir import stmt as S

from .hoist import expr_key

_COSTLY_FLOAT = (E.Div, E.FloorDiv, E.FloorMod, E.Call)


def _inner_scope(stmt) -> tuple[set[int], set[int]]:
    """(ids of variables bound inside ``stmt``, ids of buffer storages written or allocated there)."""
    bound: set[int] = set()
    written: set[int] = set()

    def walk(s):
        if isinstance(s, S.BufferStore):
            written.add(id(s.buffer.storage))
        elif isinstance(s, S.For):
            bound.add(id(s.loop_var))
            walk(s.body)
        elif isinstance(s, S.LetStmt):
            bound.add(id(s.var))
            walk(s.body)
        elif isinstance(s, S.SeqStmt):
            for x in s.seq:
                walk(x)
        elif isinstance(s, S.IfThenElse):
            walk(s.then_case)
            if s.else_case is not None:
                walk(s.else_case)
        elif isinstance(s, S.Allocate):
            written.add(id(s.buffer.storage))
            walk(s.body)
    walk(stmt)
    return bound, written


class _Finder:
    def __init__(self, bound: set[int], written: set[int]):
        self.bound, self.written = bound, written
        self.found: dict = {}

    def visit(self, e, certain: bool) -> tuple[bool, bool]:
        """(invariant, costly) of ``e``; records maximal invariant costly float subexpressions
        (one that reads memory only where it is ``certain`` to be evaluated)."""
        if isinstance(e, E.Var):
            return id(e) not in self.bound, False
        if isinstance(e, (E.IntImm, E.FloatImm, E.StringImm)):
            return True, False
        if isinstance(e, E.BufferLoad):
            indices = [(i, self.visit(i, certain)) for i in e.indices]
            invariant = id(e.buffer.storage) not in self.written and all(inv for _, (inv, _) in indices)
            return invariant, any(cost for _, (_, cost) in indices)
        children = []
        for field in e._fields:
            value = getattr(e, field)
            # a select's branches and the right operand of && / || run only sometimes
            branch = (isinstance(e, E.Select) and field != "condition") or \
                (isinstance(e, (E.And, E.Or)) and field == "b")
            for child in (value if isinstance(value, tuple) else (value,)):
                if isinstance(child, E.PrimExpr):
                    children.append((child, certain and not branch, self.visit(child, certain and not branch)))
        invariant = all(inv for _, _, (inv, _) in children)
        costly = isinstance(e, _COSTLY_FLOAT) or any(cost for _, _, (_, cost) in children)
        if not invariant:
            for child, child_certain, (inv, cost) in children:
                if inv and cost:
                    self.record(child, child_certain)
        return invariant, costly

    def visit_top(self, e, certain: bool) -> None:
        inv, cost = self.visit(e, certain)
        if inv and cost:
            self.record(e, certain)

    def record(self, e, certain: bool) -> None:
        if not dt.is_float(e.dtype):
            return
        if not certain and _reads_memory(e):
            return
        self.found.setdefault(expr_key(e), e)


def _reads_memory(e) -> bool:
    if isinstance(e, E.BufferLoad):
        return True
    for field in e._fields:
        value = getattr(e, field)
        for child in (value if isinstance(value, tuple) else (value,)):
            if isinstance(child, E.PrimExpr) and _reads_memory(child):
                return True
    return False


def _walk(finder: _Finder, stmt, certain: bool, runs_once: Callable) -> None:
    if isinstance(stmt, S.BufferStore):
        for i in stmt.indices:
            finder.visit_top(i, certain)
        finder.visit_top(stmt.value, certain)
    elif isinstance(stmt, S.For):
        finder.visit_top(stmt.min, certain)
        finder.visit_top(stmt.extent, certain)
        _walk(finder, stmt.body, certain and runs_once(stmt), runs_once)
    elif isinstance(stmt, S.LetStmt):
        finder.visit_top(stmt.value, certain)
        _walk(finder, stmt.body, certain, runs_once)
    elif isinstance(stmt, S.SeqStmt):
        for s in stmt.seq:
            _walk(finder, s, certain, runs_once)
    elif isinstance(stmt, S.IfThenElse):
        finder.visit_top(stmt.condition, certain)
        _walk(finder, stmt.then_case, False, runs_once)
        if stmt.else_case is not None:
            _walk(finder, stmt.else_case, False, runs_once)
    elif isinstance(stmt, S.Allocate):
        _walk(finder, stmt.body, certain, runs_once)
    elif isinstance(stmt, S.Evaluate):
        finder.visit_top(stmt.value, certain)


def invariant_values(loop: S.For, runs_once: Callable[[S.For], bool]) -> list:
    """Maximal costly float subexpressions of ``loop``'s body that may be computed once before
    it (see the module doc), in first-use order; ``runs_once(for_stmt)`` says whether a loop is
    known to run at least one iteration."""
    if not runs_once(loop):
        return []
    bound, written = _inner_scope(loop.body)
    bound.add(id(loop.loop_var))
    finder = _Finder(bound, written)
    _walk(finder, loop.body, True, runs_once)
    return list(finder.found.values())
