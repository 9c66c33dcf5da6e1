"""fuse_loops: one pass over a row where scheduled stages made two.

After the row-reduction rule, a softmax row is a sequence of loops over the
same range: ``out[j] = exp(out[j] - max)`` then ``sum += out[j]``. Each loop
streams the row through the vector unit once; fused, the sum reads the value
the exp just produced while it is still in a register.

Adjacent loops ``A`` (var ``a``) and ``B`` (var ``b``) with the same range fuse
into one loop over ``a`` running ``A``'s body, then ``B``'s with ``b := a``,
when it cannot change a value either one reads:

- both are serial or vectorized, without annotations; the fused loop is
  vectorized, so each one is either vectorized or a single accumulation into
  one element (which the C emitter turns into an ``omp simd`` reduction,
  backends/c/accumulate.py), and at most one of them accumulates;
- every buffer both touch, with at least one writing it, is accessed at one
  and the same index everywhere in both, and that index moves with the loop
  variable (``index(a + 1) - index(a)`` is a nonzero constant): iteration
  ``i`` of ``B`` then reads exactly what iteration ``i`` of ``A`` wrote, and no
  iteration sees another's element.

Statements between the two loops (a reduction's init) move in front of
``A`` when they touch nothing ``A`` writes and write nothing ``A`` reads.
Stages computed at the same row line up once ``remove_unit_loops`` (run
before index simplification) has replaced unit loops by their single
iteration. Loops run serially in the reference interpreter, so it checks a
fused function against the original directly.
"""
from __future__ import annotations

from .. import expr as E
from ..analysis.accumulation import accumulation_of, body_statements
from ..arith import Analyzer
from ..dispatch import handles
from ..function import PrimFunc
from ..functor import Mutator, collect, substitute
from ..stmt import BufferStore, For, SeqStmt, jumps_to, seq

_FUSIBLE_KINDS = ("serial", "vectorized")


def _accesses(stmt) -> dict[int, list]:
    """storage id -> [(is_write, indices)] for every buffer access in ``stmt``."""
    out: dict[int, list] = {}
    for node in collect(stmt, lambda n: isinstance(n, (BufferStore, E.BufferLoad))):
        out.setdefault(id(node.buffer.storage), []).append((isinstance(node, BufferStore), node.indices))
    return out


def _accumulation_count(loop: For) -> int:
    """Statements of the body that accumulate into one element (a fused loop may hold one)."""
    return sum(accumulation_of(stmt, loop.loop_var) is not None for stmt in body_statements(loop))


def _same(a, b) -> bool:
    from ..structural import structural_equal
    return a is b or structural_equal(a, b, map_free_vars=False)


def _movable_before(stmt, loop_accesses: dict) -> bool:
    """``stmt`` (no loops) may run before a loop with ``loop_accesses``: neither writes what the
    other touches."""
    if collect(stmt, lambda n: isinstance(n, For)):
        return False
    for storage, accesses in _accesses(stmt).items():
        other = loop_accesses.get(storage)
        if other and (any(w for w, _ in accesses) or any(w for w, _ in other)):
            return False
    return True


class _UnitLoops(Mutator):
    @handles(For)
    def visit_For(self, loop: For):
        loop = self.generic_visit(loop)
        # (a loop a break/continue jumps to stays: without it the jump would reach another loop)
        if isinstance(loop.extent, E.IntImm) and loop.extent.value == 1 and loop.kind in _FUSIBLE_KINDS \
                and not loop.annotations and not jumps_to(loop):
            return substitute(loop.body, {loop.loop_var: loop.min})
        return loop


class _Fuser(Mutator):
    def __init__(self):
        super().__init__()
        self.analyzer = Analyzer()

    @handles(SeqStmt)
    def visit_SeqStmt(self, node: SeqStmt):
        flat = seq(*[self.visit(s) for s in node.seq])   # unit-loop removal may nest sequences
        out: list = []
        for stmt in flat.seq if isinstance(flat, SeqStmt) else (flat,):
            if not (isinstance(stmt, For) and self.try_fuse(out, stmt)):
                out.append(stmt)
        return seq(*out)

    # ------------------------------------------------------------ fusion
    def try_fuse(self, out: list, loop: For) -> bool:
        """Fuse ``loop`` into the last loop of ``out``, moving the statements between in front
        of it; edits ``out`` and returns True when legal."""
        pos = next((i for i in range(len(out) - 1, -1, -1) if isinstance(out[i], For)), None)
        if pos is None:
            return False
        first, between = out[pos], out[pos + 1:]
        first_accesses = _accesses(first.body)
        if not all(_movable_before(s, first_accesses) for s in between):
            return False
        fused = self.fuse(first, loop)
        if fused is None:
            return False
        out[pos:] = between + [fused]
        return True

    def fuse(self, a: For, b: For) -> For | None:
        if a.kind not in _FUSIBLE_KINDS or b.kind not in _FUSIBLE_KINDS or a.annotations or b.annotations:
            return None
        if jumps_to(a) or jumps_to(b):   # a jump would skip or end the other loop's body too
            return None
        if not (_same(a.min, b.min) and _same(a.extent, b.extent)):
            return None
        accumulations = _accumulation_count(a) + _accumulation_count(b)
        plain = [lp for lp in (a, b) if lp.kind != "vectorized"]
        if accumulations > 1 or any(accumulation_of(lp.body, lp.loop_var) is None for lp in plain):
            return None
        b_body = substitute(b.body, {b.loop_var: a.loop_var})
        if not self.independent(a, b_body):
            return None
        return a.replace(kind="vectorized", body=seq(a.body, b_body))

    def independent(self, a: For, b_body) -> bool:
        mine, theirs = _accesses(a.body), _accesses(b_body)
        for storage, accesses in mine.items():
            other = theirs.get(storage)
            if not other or not any(w for w, _ in accesses + other):
                continue
            everything = accesses + other
            first = everything[0][1]
            if not all(len(idx) == len(first) and all(_same(x, y) for x, y in zip(idx, first))
                       for _, idx in everything):
                return False
            if not self.moves_with(first, a):
                return False
        return True

    def moves_with(self, indices, loop: For) -> bool:
        """Some index is ``c * var + (free of var)`` with a constant ``c != 0``."""
        var = loop.loop_var
        for index in indices:
            if not collect(index, lambda n: n is var):
                continue
            step = self.analyzer.simplify(E.sub(substitute(index, {var: E.add(var, 1)}), index))
            if isinstance(step, E.IntImm) and step.value != 0:
                return True
        return False


def remove_unit_loops(func: PrimFunc) -> PrimFunc:
    """``func`` with each plain loop of one iteration replaced by its body at that iteration."""
    if not isinstance(func, PrimFunc):
        raise TypeError(f"remove_unit_loops expects a PrimFunc, got {type(func).__name__}")
    body = _UnitLoops().visit(func.body)
    return func if body is func.body else func.with_body(body)


def fuse_loops(func: PrimFunc) -> PrimFunc:
    """``func`` with adjacent same-range loops fused (see module doc)."""
    if not isinstance(func, PrimFunc):
        raise TypeError(f"fuse_loops expects a PrimFunc, got {type(func).__name__}")
    body = _Fuser().visit(func.body)
    return func if body is func.body else func.with_body(body)
