"""Loop-invariant index arithmetic for the C emitter.

Scheduled kernels compute buffer indices from fused/split loop variables
with divisions and modulos. gcc does not move a division out of a guarded
statement (it might trap), so without help the innermost loop recomputes
several 64-bit divisions per element. For each loop, the emitter asks
``invariant_subexpressions`` for the maximal integer subexpressions of the
body that use no variable bound inside the body, and binds them to
constants at the top of the loop body.
"""
from __future__ import annotations

from tensorir import dtype as dt
from tensorir import expr as E
from tensorir import stmt as S
from tensorir.functor import collect

# Expressions worth a local: they contain at least one of these operations.
_COSTLY = (E.FloorDiv, E.FloorMod, E.Div, E.Mul, E.Min, E.Max)


def expr_key(e):
    """A hashable key equal for structurally identical expressions over the same Var objects."""
    if isinstance(e, E.Var):
        return ("var", id(e))
    if isinstance(e, (E.IntImm, E.FloatImm)):
        return (type(e).__name__, e.dtype, e.value)
    if isinstance(e, E.BufferLoad):
        return ("load", id(e.buffer), tuple(expr_key(i) for i in e.indices))
    parts = [type(e).__name__, e.dtype, getattr(e, "op", None)]
    for field in e._fields:
        value = getattr(e, field)
        if isinstance(value, tuple):
            parts.append(tuple(expr_key(v) for v in value))
        elif value is not None:
            parts.append(expr_key(value))
    return tuple(parts)


def inner_scope(stmt) -> tuple[set[int], set[int]]:
    """(ids of the variables ``stmt`` binds: loop and let vars, ids of the buffer storages it
    writes or allocates)."""
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
        elif isinstance(s, S.While):
            walk(s.body)
    walk(stmt)
    return bound, written


class _Finder:
    def __init__(self, inner: set[int]):
        self.inner = inner
        self.found: dict = {}

    def visit(self, e) -> tuple[bool, bool]:
        """Returns (invariant, costly) and records maximal invariant costly subexpressions."""
        if isinstance(e, E.Var):
            return id(e) not in self.inner, False
        if isinstance(e, (E.IntImm, E.FloatImm, E.StringImm)):
            return True, False
        if isinstance(e, E.BufferLoad):
            for i in e.indices:
                self.visit_child(i)
            return False, False   # memory may change inside the loop
        if isinstance(e, E.Call) and e.op == E.CHECKED_INDEX:
            for a in e.args:   # a check stays where it runs: hoisted, it would fail where the body
                self.visit_child(a)   # would not have run
            return False, False
        children = []
        for field in e._fields:
            value = getattr(e, field)
            for child in (value if isinstance(value, tuple) else (value,)):
                if isinstance(child, E.PrimExpr):
                    children.append((child, self.visit(child)))
        invariant = all(inv for _, (inv, _) in children)
        costly = isinstance(e, _COSTLY) or any(c for _, (_, c) in children)
        if not invariant:
            for child, (inv, cost) in children:
                if inv and cost:
                    self.record(child)
        return invariant, costly

    def visit_child(self, e):
        inv, cost = self.visit(e)
        if inv and cost:
            self.record(e)

    def record(self, e):
        if dt.is_int(e.dtype):
            self.found.setdefault(expr_key(e), e)


def stmt_exprs(stmt, runs_once=lambda loop: True, certain: bool = True):
    """(expression, certain) pairs of a statement tree in emission order; ``certain``: the
    expression is evaluated whenever ``stmt`` runs (not under an ``if``, nor in a loop that
    ``runs_once(loop)`` does not promise to run at least once)."""
    if isinstance(stmt, S.BufferStore):
        for e in (*stmt.indices, stmt.value):
            yield e, certain
    elif isinstance(stmt, S.For):
        yield stmt.min, certain
        yield stmt.extent, certain
        yield from stmt_exprs(stmt.body, runs_once, certain and runs_once(stmt))
    elif isinstance(stmt, S.LetStmt):
        yield stmt.value, certain
        yield from stmt_exprs(stmt.body, runs_once, certain)
    elif isinstance(stmt, S.SeqStmt):
        for s in stmt.seq:
            yield from stmt_exprs(s, runs_once, certain)
            if certain and collect(s, lambda n: isinstance(n, (S.AssertStmt, S.Break, S.Continue))):
                certain = False   # what follows a failing assert (or a loop jump) does not run
    elif isinstance(stmt, S.While):
        yield stmt.condition, certain
        yield from stmt_exprs(stmt.body, runs_once, False)
    elif isinstance(stmt, S.AssertStmt):
        yield stmt.condition, certain
    elif isinstance(stmt, S.IfThenElse):
        yield stmt.condition, certain
        yield from stmt_exprs(stmt.then_case, runs_once, False)
        if stmt.else_case is not None:
            yield from stmt_exprs(stmt.else_case, runs_once, False)
    elif isinstance(stmt, S.Allocate):
        for e in stmt.buffer.shape:
            yield e, certain
        yield from stmt_exprs(stmt.body, runs_once, certain)
    elif isinstance(stmt, S.Evaluate):
        yield stmt.value, certain


def invariant_subexpressions(loop: S.For) -> list:
    """Maximal costly integer subexpressions of ``loop.body`` that use no variable
    bound inside the body (they may use ``loop.loop_var``), in first-use order."""
    finder = _Finder(inner_scope(loop.body)[0])
    for e, _ in stmt_exprs(loop.body):
        finder.visit_child(e)
    return list(finder.found.values())


def children_certain(e, certain: bool):
    """(child, certain) for the PrimExpr children of ``e``: a child is evaluated whenever ``e``
    is (``certain``), except a select's branches and the right operand of && / ||."""
    for field in e._fields:
        value = getattr(e, field)
        branch = (isinstance(e, E.Select) and field != "condition") or \
            (isinstance(e, (E.And, E.Or)) and field == "b")
        for child in (value if isinstance(value, tuple) else (value,)):
            if isinstance(child, E.PrimExpr):
                yield child, certain and not branch


def certain_index_checks(loop: S.For, runs_once) -> list:
    """The ``T.checked_index`` calls of ``loop``'s body that every run of the body evaluates
    (not under an ``if``, a select branch, the right of ``&&``/``||`` or in a loop that
    ``runs_once`` does not promise to run) and that use no variable the body binds and no
    buffer it writes. The emitter checks them once at the top of the body: a gather's inner
    loop then copies a row with no check (and no call) per element, and vectorizes."""
    bound, written = inner_scope(loop.body)

    def invariant(e) -> bool:
        return not collect(e, lambda n: (isinstance(n, E.Var) and id(n) in bound) or
                           (isinstance(n, E.BufferLoad) and id(n.buffer.storage) in written))

    found: dict = {}

    def visit(e, certain: bool) -> None:
        if isinstance(e, E.Call) and e.op == E.CHECKED_INDEX and certain and invariant(e):
            found.setdefault(expr_key(e), e)
            return
        for child, child_certain in children_certain(e, certain):
            visit(child, child_certain)

    for e, certain in stmt_exprs(loop.body, runs_once):
        visit(e, certain)
    return list(found.values())
