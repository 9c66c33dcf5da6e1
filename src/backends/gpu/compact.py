"""Shrink a "shared" or "local" buffer to the part one GPU block (or thread) touches.

Schedules leave cache buffers at their full, often symbolic, shape (cache_read
allocates in the root block, compute_at moves only the copy). A GPU holds
a shared buffer per block and a local one per thread, so each becomes the
hull of its accesses with the loops above every access fixed (for a shared
buffer, threadIdx loops still vary: the block's threads share it), and the
accesses are shifted by the hull's minimum. The extent must come out a
constant; the minimum may name the fixed loops (a tile's ``k0 * 8``).
"""
from __future__ import annotations

from tensorir import expr as E
from tensorir.arith import Analyzer
from tensorir.buffer import Buffer
from tensorir.dispatch import handles
from tensorir.arith.widen import widen_index
from tensorir.functor import Mutator, Visitor, substitute
from tensorir.schedule.region import RegionError, relax
from tensorir.stmt import BufferStore, For, Range, Stmt

from .errors import GPULoweringError
from .function import THREAD_AXES
from .bounds import constant_lower_bound, constant_upper_bound


class _Accesses(Visitor):
    def __init__(self, buf: Buffer):
        self.buf = buf
        self.loops: list[For] = []
        self.found: list[tuple[tuple, list[For]]] = []

    @handles(For)
    def visit_For(self, loop: For):
        self.loops.append(loop)
        self.generic_visit(loop)
        self.loops.pop()

    @handles(E.BufferLoad)
    def visit_BufferLoad(self, node: E.BufferLoad):
        if node.buffer is self.buf:
            self.found.append((node.indices, list(self.loops)))
        self.generic_visit(node)

    @handles(BufferStore)
    def visit_BufferStore(self, node: BufferStore):
        if node.buffer is self.buf:
            self.found.append((node.indices, list(self.loops)))
        self.generic_visit(node)


class _Shift(Mutator):
    def __init__(self, old: Buffer, new: Buffer, mins: list):
        super().__init__()
        self.old, self.new, self.mins = old, new, mins

    def shifted(self, indices):
        return [E.sub(i, m) if not E.is_const_int(m, 0) else i for i, m in zip(indices, self.mins)]

    @handles(E.BufferLoad)
    def visit_BufferLoad(self, node: E.BufferLoad):
        node = self.generic_visit(node)
        return E.BufferLoad(self.new, self.shifted(node.indices)) if node.buffer is self.old else node

    @handles(BufferStore)
    def visit_BufferStore(self, node: BufferStore):
        node = self.generic_visit(node)
        if node.buffer is not self.old:
            return node
        return BufferStore(self.new, node.value, self.shifted(node.indices))


def _common_prefix(stacks: list[list[For]]) -> list[For]:
    common = stacks[0]
    for stack in stacks[1:]:
        n = 0
        while n < min(len(common), len(stack)) and common[n] is stack[n]:
            n += 1
        common = common[:n]
    return common


def _window(pairs, analyzer) -> tuple | None:
    """(first index, constant size) covering every (lo, hi) pair: the smallest found when each
    pair's lo serves as the base in turn, or None."""
    best = None
    for base in [lo for lo, _ in pairs]:
        starts = [constant_lower_bound(analyzer.simplify(lo - base)) for lo, _ in pairs]
        ends = [constant_upper_bound(analyzer.simplify(hi - base)) for _, hi in pairs]
        if None in starts or None in ends:
            continue
        start, size = min(starts), max(ends) - min(starts) + 1
        if size >= 1 and (best is None or size < best[1]):
            best = (analyzer.simplify(base + start) if start else base, size)
    return best


def compact(buf: Buffer, body: Stmt, where: str) -> tuple[Buffer, Stmt]:
    """``buf`` shrunk to the hull of its accesses in ``body``, and ``body`` accessing the new buffer."""
    finder = _Accesses(buf)
    finder.visit(body)
    if not finder.found:
        return buf, body
    common = _common_prefix([stack for _, stack in finder.found])
    shared = buf.scope == "shared"
    fixed = {id(f.loop_var) for f in common
             if not (shared and f.kind == "thread_binding" and f.thread_tag in THREAD_AXES)}
    # sibling loops bound to one axis share its Var (thread_vars.py): the same index above every
    # access is fixed too, though no one loop encloses them all (a cache filled in one threadIdx.x
    # loop and read in the next)
    per_stack = [{id(f.loop_var) for f in stack if f.kind == "thread_binding"
                  and not (shared and f.thread_tag in THREAD_AXES)} for _, stack in finder.found]
    fixed |= set.intersection(*per_stack)
    analyzer = Analyzer()
    bound: set[int] = set()
    for _, stack in finder.found:
        for loop in stack:
            if id(loop.loop_var) not in bound:
                bound.add(id(loop.loop_var))
                analyzer.bind(loop.loop_var, Range(loop.min, loop.extent))
    # one form per index for the analysis: a loop of one iteration is its start, and every index
    # is int64 with casts at its leaves (a schedule mixing int32 and int64 writes one access
    # `(Cast(int64, bx) + ty) % Cast(int64, n)` and another `bx % n`)
    points = {f.loop_var: f.min for _, stack in finder.found for f in stack if E.is_const_int(f.extent, 1)}
    found = [([analyzer.simplify(widen_index(substitute(i, points))) for i in indices], stack)
             for indices, stack in finder.found]
    mins, extents = [], []
    for dim in range(buf.ndim):
        try:
            pairs = []
            for indices, stack in found:
                dom = {f.loop_var: Range(f.min, f.extent) for f in stack
                       if id(f.loop_var) not in fixed and f.loop_var not in points}
                pairs.append(relax(indices[dim], dom, analyzer))
            window = _window(pairs, analyzer)
        except RegionError:
            window = None
        if window is not None:
            mins.append(window[0])
            extents.append(E.IntImm(window[1], "int64"))
        elif isinstance(buf.shape[dim], E.IntImm):  # cannot bound the accesses: keep the whole axis
            mins.append(E.IntImm(0, "int64"))
            extents.append(buf.shape[dim])
        else:
            raise GPULoweringError(
                f"{where}: {buf.scope} buffer {buf.name!r} needs a constant size per "
                f"{'block' if shared else 'thread'}, but the accesses of axis {dim} have no constant "
                f"span (shape {list(buf.shape)!r})")
    if all(E.is_const_int(m, 0) for m in mins) and \
            all(isinstance(a, E.IntImm) and a.value == b.value for a, b in zip(buf.shape, extents)):
        return buf, body
    new = Buffer(buf.name, extents, buf.dtype, scope=buf.scope)
    return new, _Shift(buf, new, mins).visit(body)
