"""localize_allocations: a function-wide scratch buffer that each iteration of one loop uses on
its own becomes a small buffer declared inside that loop.

Schedules compute per-row statistics at the row loop (``compute_at``: a layer norm's sums, a
softmax's max and sum) but leave their buffers at the root with the whole ``(n,)`` shape. The
graph level then allocates them at every call (LiftWorkspace: an allocation, a view and a kill
each, about a microsecond apiece in the VM) and the kernel reads and writes them through memory.
When every access of such a buffer sits in one loop nest and each iteration touches its own
window of constant size, the buffer moves into the innermost loop of that nest with the window's
size, as TVM's buffer-allocation planning and compaction do. On C that is a local array private
to each OpenMP thread, which gcc keeps in registers.

Works on lowered code (after ``lower``: flat buffers, ``Allocate`` at the root). A buffer moves
only when all of these hold:

- every use is a scalar load or store (no vector index, no address taken, its data pointer not
  passed anywhere, no alias declared over it), none of them under a ``while`` loop;
- the loops above every use share a non-empty prefix (the nest); with the nest's variables fixed,
  each use's index spans a window at a constant offset from the first use's lowest index ``B``;
- ``B`` is affine in the nest's variables, and windows of different iterations cannot overlap:
  every nest loop that runs more than once has a coefficient, and sorted by size each coefficient
  exceeds the span of the window plus what the smaller ones can add. Each element is then touched
  in one iteration only, so giving every iteration a fresh window keeps every value read;
- the window is at most ``MAX_LOCAL_BYTES`` (the C emitter keeps smaller arrays on the stack).

``loop_local_buffers(func)`` names the root buffers that would move; LiftWorkspace keeps those in
the kernel on the C target instead of lifting them to the graph.
"""
from __future__ import annotations

from .. import dtype as dt
from ..arith import Analyzer, simplify
from ..buffer import Buffer
from ..expr import ADDRESS_OF, BufferLoad, Call, IntImm, Var, is_const_int
from ..function import PrimFunc
from ..dispatch import handles
from ..functor import Mutator, children, collect, substitute
from ..schedule.region import RegionError, relax
from ..stmt import Allocate, BufferStore, For, Range, While

MAX_LOCAL_BYTES = 4096   # a window this size or smaller lives on the stack of each thread


class _Uses:
    """What a walk of the body found about one root buffer."""
    __slots__ = ("accesses", "escapes")

    def __init__(self):
        self.accesses: list[tuple[object, tuple]] = []   # (index, loops above it)
        self.escapes = False


def _root_allocations(func: PrimFunc) -> tuple[list[Allocate], object]:
    """The chain of ``Allocate`` at the top of the body, and the statement below it."""
    chain, body = [], func.body
    while isinstance(body, Allocate):
        chain.append(body)
        body = body.body
    return chain, body


_WHILE = object()   # marks a use under a while loop in the loop stack


def _scan(body, candidates: dict) -> dict:
    """Every use of the candidate buffers (``{id(buffer): buffer}``) in ``body``, with its loops."""
    uses = {key: _Uses() for key in candidates}
    stack: list = [(body, ())]
    while stack:
        node, loops = stack.pop()
        kind = type(node)
        if kind is BufferLoad or kind is BufferStore:
            buf = node.buffer
            use = uses.get(id(buf))
            if use is not None:
                index = node.indices[0] if len(node.indices) == 1 else None
                if index is None or dt.lanes(index.dtype) != 1 or any(l is _WHILE for l in loops):
                    use.escapes = True
                else:
                    use.accesses.append((index, loops))
            elif id(buf.storage) in uses:
                uses[id(buf.storage)].escapes = True        # a view declared over it
            rest = list(node.indices) + ([node.value] if kind is BufferStore else [])
            stack.extend((child, loops) for child in rest)
            continue
        if kind is Call and node.op == ADDRESS_OF:
            for arg in node.args:
                if isinstance(arg, BufferLoad) and id(arg.buffer.storage) in uses:
                    uses[id(arg.buffer.storage)].escapes = True
        if isinstance(node, Buffer):
            if id(node.storage) in uses:
                uses[id(node.storage)].escapes = True       # passed on as a pointer, or aliased
            continue
        if kind is For:
            stack.extend((child, loops) for child in (node.min, node.extent))
            stack.append((node.body, loops + (node,)))
            continue
        if kind is While:
            stack.extend((child, loops + (_WHILE,)) for child in children(node))
            continue
        stack.extend((child, loops) for child in children(node))
    return uses


def _common_loops(stacks: list[tuple]) -> list[For]:
    common = list(stacks[0])
    for loops in stacks[1:]:
        n = 0
        while n < min(len(common), len(loops)) and common[n] is loops[n]:
            n += 1
        del common[n:]
    return [loop for loop in common if loop is not _WHILE]


def _offset(e, analyzer: Analyzer) -> tuple[int, int] | None:
    """Constant inclusive bounds of ``e``, or None."""
    e = analyzer.simplify(e)
    if isinstance(e, IntImm):
        return e.value, e.value
    try:
        lo, hi = analyzer.const_int_bound(e)
    except Exception:  # noqa: BLE001 - an expression the bound analysis does not read
        return None
    return (lo, hi) if lo is not None and hi is not None else None


def _disjoint_iterations(base, nest: list[For], size: int, analyzer: Analyzer) -> bool:
    """Whether windows ``[base, base + size)`` of different iterations of ``nest`` never overlap:
    ``base`` is affine in the nest's variables and, taking the steps from the smallest (constant
    steps by size, else the innermost loop first), each step reaches past the window plus all
    that the smaller steps can add."""
    terms = []
    rest = base
    for loop in nest:
        var = loop.loop_var
        step = analyzer.simplify(substitute(base, {var: var + 1}) - base)
        rest = rest - step * var
        if is_const_int(loop.extent, 1):
            continue
        # a step of zero fails the reach test below (the same window in every iteration)
        if analyzer.can_prove(step >= 0):
            terms.append((step, loop.extent))
        elif analyzer.can_prove(step <= 0):
            terms.append((analyzer.simplify(0 - step), loop.extent))
        else:
            return False                  # a step of unknown sign
    free = {id(loop.loop_var) for loop in nest}
    if collect(analyzer.simplify(rest), lambda node: type(node) is Var and id(node) in free):
        return False                      # products of loop variables: not affine
    if all(isinstance(step, IntImm) for step, _ in terms):
        terms.sort(key=lambda t: t[0].value)
    else:
        terms.reverse()                   # innermost first
    reach = IntImm(size, "int64")         # how far a window plus the smaller steps extend
    for step, extent in terms:
        if not analyzer.can_prove(step >= reach):
            return False
        reach = analyzer.simplify(reach + step * (extent - 1))
    return True


def _plan(buf: Buffer, use: _Uses) -> tuple[For, object, int] | None:
    """(the loop to declare the window in, the window's first index ``B``, its size), or None."""
    if use.escapes or not use.accesses or len(buf.shape) != 1:
        return None
    nest = _common_loops([loops for _, loops in use.accesses])
    if not nest:
        return None
    analyzer = Analyzer()
    seen: set[int] = set()
    for _, loops in use.accesses:
        for loop in loops:
            if id(loop) not in seen:
                seen.add(id(loop))
                analyzer.bind(loop.loop_var, Range(loop.min, loop.extent))
    fixed = {id(loop) for loop in nest}
    windows = []
    try:
        for index, loops in use.accesses:
            dom = {loop.loop_var: Range(loop.min, loop.extent) for loop in loops if id(loop) not in fixed}
            windows.append(relax(index, dom, analyzer))
    except RegionError:
        return None
    base = windows[0][0]
    first, last = 0, 0
    for lo, hi in windows:
        low, high = _offset(lo - base, analyzer), _offset(hi - base, analyzer)
        if low is None or high is None:
            return None
        first, last = min(first, low[0]), max(last, high[1])
    size = last - first + 1
    if size * dt.bits(buf.dtype) // 8 > MAX_LOCAL_BYTES:
        return None
    base = analyzer.simplify(base + first) if first else base
    if not _disjoint_iterations(base, nest, size, analyzer):
        return None
    return nest[-1], base, size


def _plans(func: PrimFunc) -> tuple[list[Allocate], object, dict]:
    chain, body = _root_allocations(func)
    candidates = {id(a.buffer): a.buffer for a in chain if a.buffer.scope == "global"}
    if not candidates:
        return chain, body, {}
    uses = _scan(body, candidates)
    plans = {}
    for key, buf in candidates.items():
        plan = _plan(buf, uses[key])
        if plan is not None:
            plans[key] = plan
    return chain, body, plans


def loop_local_buffers(lowered: PrimFunc) -> set[str]:
    """Names of the root buffers of a lowered function that ``localize_allocations`` moves."""
    chain, _, plans = _plans(lowered)
    return {a.buffer.name for a in chain if id(a.buffer) in plans}


class _Rewrite(Mutator):
    """Moves planned buffers: accesses shifted by their window's first index, the declaration
    around the body of the loop the window belongs to."""

    def __init__(self, plans: dict, chain: list[Allocate]):
        super().__init__()
        self.new = {}
        self.shift = {}
        self.at_loop: dict[int, list[Buffer]] = {}
        for alloc in chain:
            key = id(alloc.buffer)
            if key in plans:
                loop, base, size = plans[key]
                old = alloc.buffer
                new = Buffer(old.name, [IntImm(size, old.shape[0].dtype)], old.dtype, scope=old.scope)
                self.new[key], self.shift[key] = new, base
                self.at_loop.setdefault(id(loop), []).append(new)

    def _moved_index(self, node):
        return [simplify(node.indices[0] - self.shift[id(node.buffer)])]

    @handles(BufferLoad)
    def visit_BufferLoad(self, node: BufferLoad):
        node = self.generic_visit(node)
        if id(node.buffer) in self.new:
            return BufferLoad(self.new[id(node.buffer)], self._moved_index(node))
        return node

    @handles(BufferStore)
    def visit_BufferStore(self, node: BufferStore):
        node = self.generic_visit(node)
        if id(node.buffer) in self.new:
            return BufferStore(self.new[id(node.buffer)], node.value, self._moved_index(node))
        return node

    @handles(For)
    def visit_For(self, node: For):
        moved = self.at_loop.get(id(node))
        node = self.generic_visit(node)
        if not moved:
            return node
        body = node.body
        for buf in reversed(moved):
            body = Allocate(buf, body)
        return node.replace(body=body)


def localize_allocations(func: PrimFunc) -> PrimFunc:
    """``func`` (lowered) with each root scratch buffer that one loop's iterations use apart
    declared inside that loop at the size of one iteration's window."""
    if not isinstance(func, PrimFunc):
        raise TypeError(f"localize_allocations expects a PrimFunc, got {type(func).__name__}")
    chain, body, plans = _plans(func)
    if not plans:
        return func
    rewrite = _Rewrite(plans, chain)
    body = rewrite.visit(body)
    for alloc in reversed(chain):
        if id(alloc.buffer) not in plans:
            body = Allocate(alloc.buffer, body)
    return func.replace(body=body)


__all__ = ["localize_allocations", "loop_local_buffers", "MAX_LOCAL_BYTES"]
