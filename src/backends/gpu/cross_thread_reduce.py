"""Cross-thread reductions: a reduction block whose reduction loop is bound to ``threadIdx.*``.

Lowered as is, every thread of the block would update the one output element
at once (a data race). The loops from the outermost reduction-only loop down
to the block (a perfect nest) are rewritten, at block level, into::

    partial = identity                        # per thread ("local")
    <the same loops>: partial = partial op value   (block predicate kept)
    ThreadReduce(op, partial over threadIdx.*): out[idx] = init op result

``ThreadReduce`` (a statement of this lowering only) combines one value per
thread of the block along its thread axis; the dialect emits it as a tree in
shared memory or with warp shuffles. Threads past the bound loop's extent
keep the identity, so any extent is correct.
"""
from __future__ import annotations

from tensorir import expr as E
from tensorir.analysis.accumulation import accumulation_of
from tensorir.buffer import Buffer
from tensorir.compute import max_value, min_value
from tensorir.dispatch import handles
from tensorir.function import PrimFunc
from tensorir.functor import Mutator, Visitor, collect, substitute
from tensorir.stmt import (Allocate, BlockRealize, BufferRegion, BufferStore, For, IfThenElse, Range, SeqStmt,
                            Stmt, seq)

from .errors import GPULoweringError
from .function import THREAD_AXES

REDUCE_OPS = {E.Add: "sum", E.Mul: "prod", E.Max: "max", E.Min: "min"}


class ThreadReduce(Stmt):
    """Every thread along ``thread_tag`` contributes ``value``; ``result`` holds their
    combination with ``op`` (sum/prod/max/min) in every thread while ``body`` runs.
    ``in_thread_loop``: it sits inside the loop bound to ``thread_tag`` (TVM's
    ``tvm_thread_allreduce``), not after it (the rewrite of a reduction block here)."""
    __slots__ = ("result", "value", "body", "op", "thread_tag", "in_thread_loop")
    _fields = ("result", "value", "body")
    _attrs = ("op", "thread_tag", "in_thread_loop")

    def __init__(self, result: E.Var, value, body: Stmt, op: str, thread_tag: str,
                 in_thread_loop: bool = False):
        self.result, self.value, self.body = result, E.convert(value), body
        self.op, self.thread_tag, self.in_thread_loop = op, thread_tag, in_thread_loop


def identity(op: str, dtype: str) -> E.PrimExpr:
    value = {"sum": 0, "prod": 1, "max": min_value(dtype), "min": max_value(dtype)}[op]
    return E.const(value, dtype)


def combine(op: str, a, b) -> E.PrimExpr:
    cls = {"sum": E.Add, "prod": E.Mul, "max": E.Max, "min": E.Min}[op]
    return cls(a, b)


def _vars_in(expr) -> set[int]:
    return {id(v) for v in collect(expr, lambda n: isinstance(n, E.Var))}


def _is_thread_loop(loop: For) -> bool:
    return loop.kind == "thread_binding" and loop.thread_tag in THREAD_AXES


def _cross_thread(chain: list[For], realize: BlockRealize) -> bool:
    """Some reduce iter var of ``realize`` is bound to a threadIdx loop of ``chain``."""
    thread_vars = {id(f.loop_var) for f in chain if _is_thread_loop(f)}
    return any(_vars_in(value) & thread_vars
               for iv, value in zip(realize.block.iter_vars, realize.iter_values) if iv.kind == "R")


def _reduction_only(loop: For, realize: BlockRealize) -> bool:
    """``loop``'s var feeds only reduce iter vars (and the predicate)."""
    uses = [iv.kind for iv, value in zip(realize.block.iter_vars, realize.iter_values)
            if id(loop.loop_var) in _vars_in(value)]
    return bool(uses) and all(kind == "R" for kind in uses)


def _perfect_cross_thread(chain: list[For], node) -> bool:
    """``chain`` (loops from the outermost down) then ``node``'s own loop nest end at a
    cross-thread reduction block, every loop feeding only its reduce iter vars."""
    chain = list(chain)
    while isinstance(node, For):
        chain.append(node)
        node = node.body
    return isinstance(node, BlockRealize) and _cross_thread(chain, node) and \
        all(_reduction_only(f, node) for f in chain)


def _rewrite(chain: list[For], realize: BlockRealize, partials: set) -> Stmt:
    block = realize.block
    where = f"block {block.name!r}"
    thread_loops = [f for f in chain if _is_thread_loop(f)]
    tags = [f.thread_tag for f in thread_loops]
    if len(set(tags)) != len(tags):
        raise GPULoweringError(f"{where}: two reduction loops are bound to the same thread axis")
    if block.alloc_buffers or block.match_buffers:
        raise GPULoweringError(f"{where}: a cross-thread reduction block cannot allocate or match buffers")
    update = block.body
    reduce_vars = [iv.var for iv in block.iter_vars if iv.kind == "R"]
    acc = accumulation_of(update, reduce_vars[0]) if isinstance(update, BufferStore) else None
    if acc is None or any(_vars_in(i) & {id(v) for v in reduce_vars} for i in update.indices):
        raise GPULoweringError(f"{where}: a cross-thread reduction must be one store "
                               "out[idx] = out[idx] (+ * max min) value, with idx free of reduce vars")
    op = REDUCE_OPS[acc.op]
    out = update.buffer
    dtype = out.dtype
    partial = Buffer(f"{out.name}_partial", [1], dtype, scope="local")
    partials.add(id(partial))
    zero = [E.IntImm(0, "int64")]
    point = BufferRegion(partial, [Range(0, 1)])
    partial_block = block.replace(
        name=f"{block.name}_partial", init=None,
        reads=tuple(r for r in block.reads if r.buffer is not out) + (point,), writes=(point,),
        body=BufferStore(partial, combine(op, E.BufferLoad(partial, zero), acc.operand), zero))
    nest: Stmt = realize.replace(block=partial_block)
    for loop in reversed(chain):
        nest = loop.replace(body=nest)
    binding = {iv.var: value for iv, value in zip(block.iter_vars, realize.iter_values) if iv.kind == "S"}
    indices = [substitute(i, binding) for i in update.indices]
    if block.init is not None:
        init = block.init
        if not isinstance(init, BufferStore) or init.buffer is not out:
            raise GPULoweringError(f"{where}: the init of a cross-thread reduction must be one store "
                                   f"to {out.name!r}")
        start = substitute(init.value, binding)
    else:
        start = E.BufferLoad(out, indices)
    value: E.PrimExpr = E.BufferLoad(partial, zero)
    results = []
    for tag in tags:  # one reduction per bound axis, each over the previous one's result
        var = E.Var(f"{out.name}_red", dtype)
        results.append((var, value, tag))
        value = var
    result: Stmt = BufferStore(out, combine(op, start, value) if block.init is None or
                         not _is_identity(start, op) else value, indices)
    guard = _spatial_predicate(chain, realize)
    if guard is not None:   # an output the predicate leaves out is not written (it may lie past the end)
        result = IfThenElse(guard, result)
    for var, val, tag in reversed(results):
        result = ThreadReduce(var, val, result, op, tag)
    return Allocate(partial, seq(BufferStore(partial, identity(op, dtype), zero), nest, result))


def _conjuncts(e) -> list:
    return _conjuncts(e.a) + _conjuncts(e.b) if isinstance(e, E.And) else [e]


def _spatial_predicate(chain: list[For], realize: BlockRealize):
    """The part of the block's predicate over the spatial loops (dlight's ``T.where(b * 4 + r <
    batch)`` on a batch's padded rows), which must guard the output's store too: the partials
    keep the whole predicate, but the store after the combination is made once per output. None
    when the predicate does not restrict the outputs."""
    pred = realize.predicate
    if isinstance(pred, E.IntImm) and pred.value:
        return None
    chain_vars = {id(f.loop_var) for f in chain}
    kept = []
    for c in _conjuncts(pred):
        # a conjunct over the reduction loops (a ragged k, a causal `k <= i`) stays on the partials
        # alone; an output none of whose terms pass it gets the init, as every split reduction here
        if not _vars_in(c) & chain_vars:
            kept.append(c)
    if not kept:
        return None
    guard = kept[0]
    for c in kept[1:]:
        guard = E.And(guard, c)
    return guard


def _is_identity(expr, op: str) -> bool:
    ident = identity(op, expr.dtype)
    return isinstance(expr, (E.IntImm, E.FloatImm)) and type(expr) is type(ident) and \
        expr.value == ident.value and expr.dtype == ident.dtype


class _Rewriter(Mutator):
    def __init__(self):
        super().__init__()
        self.partials: set[int] = set()   # ids of the per-thread partial buffers made here

    @handles(E.PrimExpr)
    def visit_PrimExpr(self, node):
        return node

    @handles(For)
    def visit_For(self, loop: For):
        chain, node = [loop], loop.body
        while isinstance(node, For):
            chain.append(node)
            node = node.body
        if isinstance(node, BlockRealize) and _perfect_cross_thread([], loop):
            return _rewrite(chain, node, self.partials)
        if _is_thread_loop(loop) and isinstance(loop.body, SeqStmt):
            split = self._split(loop)
            if split is not None:
                return split
        if isinstance(node, BlockRealize) and _is_thread_loop(loop):
            hoisted = _hoist_spatial(chain, node)
            if hoisted is not None:
                return self.visit(hoisted)
        return self.generic_visit(loop)

    def _split(self, loop: For):
        """dlight's norms: a thread loop whose body holds, among other statements, a reduction
        nest over the same thread axis. The loop is split around that nest (each thread runs
        its statements in the same order; the emitter puts barriers between the loops where
        one's memory is another's), and the nest alone under its copy is a perfect one."""
        parts = list(loop.body.seq)
        hits = [_perfect_cross_thread([loop], p) for p in parts]
        if not any(hits) or len(parts) < 2:
            return None
        groups: list[tuple[bool, list]] = []
        for part, hit in zip(parts, hits):
            if hit or not groups or groups[-1][0]:
                groups.append((hit, []))
            groups[-1][1].append(part)
        return seq(*[self.visit(loop.replace(body=seq(*group))) for _, group in groups])


def _hoist_spatial(chain: list[For], realize: BlockRealize):
    """dlight's GEMVs: serial (or thread-bound) spatial loops inside the thread loop of a reduction (one output per
    iteration, ``for ax0 in threadIdx.x: for ax1 in range(8): C[.., ax1] += ...``) moved above
    it, so the thread loop and the reduction loops are a perfect nest per output. Each output's
    terms are combined in the same order; None when the nest is not of that form."""
    loop, inner = chain[0], chain[1:]
    if not (_reduction_only(loop, realize) and _cross_thread([loop], realize)):
        return None
    spatial = [f for f in inner if not _reduction_only(f, realize)]
    # a spatial loop bound to another thread axis moves up as well (thread loops run at once, in
    # any order: a column sum whose threadIdx.y reduces outside the threadIdx.x of the columns)
    if not spatial or any(f.kind not in ("serial", "unrolled") and not (f in spatial and _is_thread_loop(f))
                          for f in inner):
        return None
    loop_vars = {id(f.loop_var) for f in chain}
    if any(_vars_in(f.min) & loop_vars or _vars_in(f.extent) & loop_vars for f in inner):
        return None
    body: Stmt = realize
    for f in reversed([f for f in inner if f not in spatial]):
        body = f.replace(body=body)
    body = loop.replace(body=body)
    for f in reversed(spatial):
        body = f.replace(body=body)
    return body


class _Leftovers(Visitor):
    """A cross-thread reduction the rewrite could not take (an imperfect nest) is an error."""

    def __init__(self, partials: set):
        self.loops: list[For] = []
        self.partials = partials

    @handles(E.PrimExpr)
    def visit_PrimExpr(self, node):
        return None

    @handles(For)
    def visit_For(self, loop: For):
        self.loops.append(loop)
        self.generic_visit(loop)
        self.loops.pop()

    @handles(BlockRealize)
    def visit_BlockRealize(self, node: BlockRealize):
        # a rewritten partial is the thread's own; any other output (a "local" one too: the
        # row's total in every thread) would be left per thread, silently wrong
        partial = all(id(w.buffer) in self.partials for w in node.block.writes)
        if _cross_thread(self.loops, node) and not partial:
            raise GPULoweringError(
                f"block {node.block.name!r}: its reduction is bound to a thread axis, but the loops "
                "from the outermost reduction loop down to the block are not a perfect nest of "
                "reduction-only loops")
        self.generic_visit(node)


def lower_cross_thread_reductions(func: PrimFunc) -> PrimFunc:
    if collect(func.body, lambda n: isinstance(n, ThreadReduce) and n.in_thread_loop):
        # TVM's LowerCrossThreadReduction has run (its T.tvm_thread_allreduce calls are here): the
        # reduction blocks it left over thread-bound loops are each thread's own partials
        return func
    rewriter = _Rewriter()
    body = rewriter.visit(func.body)
    _Leftovers(rewriter.partials).visit(body)
    return func if body is func.body else func.with_body(body)
