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

and binds them to constants just before the loop. A float division whose
divisor is invariant but whose dividend is not (a softmax's ``e / sum``, a
layer norm's ``(x - mean) / std``) gets the divisor's reciprocal bound the same
way, and the emitter multiplies by it (``reciprocal_of``): one ``vmulps``
instead of a ``vdivps`` per vector, as PyTorch's kernels do. The product may
differ from the quotient in the last bit, and a divisor below about 3e-39
(float32) has no finite reciprocal, so such a quotient becomes infinite.
"""
from __future__ import annotations

from typing import Callable

from tensorir import dtype as dt
from tensorir import expr as E
from tensorir.functor import collect
from tensorir import stmt as S

from .hoist import children_certain, expr_key, inner_scope, stmt_exprs

_COSTLY_FLOAT = (E.Div, E.FloorDiv, E.FloorMod, E.Call)


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
        children = [(child, child_certain, self.visit(child, child_certain))
                    for child, child_certain in children_certain(e, certain)]
        invariant = all(inv for _, _, (inv, _) in children)
        costly = isinstance(e, _COSTLY_FLOAT) or any(cost for _, _, (_, cost) in children)
        if not invariant:
            for child, child_certain, (inv, cost) in children:
                if inv and cost:
                    self.record(child, child_certain)
            if isinstance(e, E.Div) and dt.is_float(e.dtype):
                _, divisor_certain, (divisor_invariant, _) = children[1]
                if divisor_invariant:
                    self.record(reciprocal_of(e), divisor_certain)
        return invariant, costly

    def visit_top(self, e, certain: bool) -> None:
        inv, cost = self.visit(e, certain)
        if inv and cost:
            self.record(e, certain)

    def record(self, e, certain: bool) -> None:
        if not dt.is_float(e.dtype):
            return
        # computed before the loop even where the body would not evaluate it: nothing that reads
        # memory or divides integers (a zero divisor is reported as an error, see status.py)
        if not certain and collect(e, _unsafe_to_speculate):
            return
        self.found.setdefault(expr_key(e), e)


def _unsafe_to_speculate(e) -> bool:
    return isinstance(e, E.BufferLoad) or (isinstance(e, E.Call) and e.op == E.CHECKED_INDEX) or \
        (isinstance(e, (E.Div, E.FloorDiv, E.FloorMod)) and not dt.is_float(e.dtype))


def reciprocal_of(division: E.Div) -> E.Div:
    """``1 / divisor`` of a float division (the key the emitter looks up to multiply instead)."""
    return E.Div(E.FloatImm(1.0, division.dtype), division.b)


def invariant_values(loop: S.For, runs_once: Callable[[S.For], bool]) -> list:
    """Maximal costly float subexpressions of ``loop``'s body that may be computed once before
    it (see the module doc), in first-use order; ``runs_once(for_stmt)`` says whether a loop is
    known to run at least one iteration."""
    if not runs_once(loop):
        return []
    bound, written = inner_scope(loop.body)
    bound.add(id(loop.loop_var))
    finder = _Finder(bound, written)
    for e, certain in stmt_exprs(loop.body, runs_once):
        finder.visit_top(e, certain)
    return list(finder.found.values())
