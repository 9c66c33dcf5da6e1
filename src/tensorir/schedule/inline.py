"""compute_inline: fold a one-statement block into its consumers and drop the intermediate
buffer (reverse_compute_inline, the other direction, is in ``reverse_inline.py``)."""
from __future__ import annotations

from ..buffer import Buffer
from ..dispatch import handles
from ..errors import ScheduleError
from ..expr import BufferLoad, Var
from ..function import PrimFunc
from ..functor import Mutator, collect, iter_children, substitute
from ..stmt import Block, BlockRealize, BufferRegion, BufferStore
from .checks import is_param_buffer, reads_buffer, require_not_root, writes_buffer
from .region import _analyzer, infer_access_regions
from .state import StmtIndex, replace_stmts


def _simple_store(block: Block, where: str) -> BufferStore:
    if block.init is not None or any(iv.kind != "S" for iv in block.iter_vars):
        raise ScheduleError(f"{where}: block {block.name!r} is a reduction block")
    if block.alloc_buffers or block.match_buffers:
        raise ScheduleError(f"{where}: block {block.name!r} allocates or matches buffers")
    if not isinstance(block.body, BufferStore):
        raise ScheduleError(f"{where}: the body of block {block.name!r} is not a single buffer store")
    return block.body


def _index_vars(block: Block, indices, where: str, what: str) -> list[Var]:
    """The indices must be the block's iter vars, each exactly once."""
    ivars = [iv.var for iv in block.iter_vars]
    ok = len(indices) == len(ivars) and all(isinstance(i, Var) for i in indices) and \
        {id(i) for i in indices} == {id(v) for v in ivars}
    if not ok:
        raise ScheduleError(f"{where}: {what} of block {block.name!r} must be indexed by its iter "
                            "vars, each exactly once")
    return list(indices)


def _loads_of(node, buffer: Buffer) -> list[BufferLoad]:
    return collect(node, lambda n: isinstance(n, BufferLoad) and n.buffer is buffer)


class _LoadReplacer(Mutator):
    """Replace every load of ``buffer`` by ``value`` with the index vars bound to the load's indices."""

    def __init__(self, buffer: Buffer, index_vars: list[Var], value, analyzer):
        super().__init__()
        self.buffer, self.index_vars, self.value = buffer, index_vars, value
        self.analyzer = analyzer

    @handles(BufferLoad)
    def visit_BufferLoad(self, node: BufferLoad):
        node = self.generic_visit(node)
        if node.buffer is not self.buffer:
            return node
        inlined = substitute(self.value, dict(zip(self.index_vars, node.indices)))
        return _simplify_load_indices(inlined, self.analyzer)


class _LoadIndexSimplifier(Mutator):
    def __init__(self, analyzer):
        super().__init__()
        self.analyzer = analyzer

    @handles(BufferLoad)
    def visit_BufferLoad(self, node: BufferLoad):
        node = self.generic_visit(node)
        return node.replace(indices=tuple(self.analyzer.simplify(i) for i in node.indices))


def _simplify_load_indices(value, analyzer):
    """Simplified indices after substitution: a broadcast consumer's constant index
    turns a reshape's ``i * 16 + j`` into ``0 * 16 + j``; print and parse must see ``j``."""
    return _LoadIndexSimplifier(analyzer).visit(value)


def _direct_loads(block: Block, buffer: Buffer) -> list[BufferLoad]:
    """Loads of ``buffer`` in the block itself, not in blocks nested inside it."""
    found: list[BufferLoad] = []
    todo = [block.body] + ([block.init] if block.init is not None else [])
    while todo:
        node = todo.pop()
        if isinstance(node, BlockRealize):
            found += [ld for v in node.iter_values for ld in _loads_of(v, buffer)]
            found += _loads_of(node.predicate, buffer)
            continue
        if isinstance(node, BufferLoad) and node.buffer is buffer:
            found.append(node)
        todo.extend(iter_children(node))
    return found


def _drop_alloc(func: PrimFunc, buffer: Buffer) -> dict:
    owners = collect(func.body, lambda n: isinstance(n, Block) and any(b is buffer for b in n.alloc_buffers))
    return {b: b.replace(alloc_buffers=tuple(x for x in b.alloc_buffers if x is not buffer)) for b in owners}


def _merge_reads(old_reads, removed: Buffer, new_body, analyzer) -> list[BufferRegion]:
    """Reads after inlining: ``removed`` is replaced by what the new body reads in its place."""
    inferred, _ = infer_access_regions(new_body, analyzer=analyzer)
    kept = {id(r.buffer) for r in old_reads if r.buffer is not removed}
    out = []
    for r in old_reads:
        if r.buffer is removed:
            out.extend(x for x in inferred if id(x.buffer) not in kept)
        else:
            fresh = [x for x in inferred if x.buffer is r.buffer]
            out.append(fresh[0] if fresh else r)
    return out


def _between(index: StmtIndex, first: BlockRealize, last: BlockRealize) -> list[BlockRealize]:
    lo, hi = index.order[id(first)], index.order[id(last)]
    return [r for r in index.all_realizes() if lo < index.order[id(r)] < hi]


def compute_inline(func: PrimFunc, block_name: str) -> PrimFunc:
    index = StmtIndex(func)
    realize = index.realize(block_name)
    where = f"compute_inline of block {block_name!r}"
    require_not_root(func, realize, "compute_inline")
    block = realize.block
    store = _simple_store(block, where)
    buf = store.buffer
    if is_param_buffer(func, buf):
        raise ScheduleError(f"{where}: it writes function output {buf.name!r}")
    ivars = _index_vars(block, store.indices, where, "the store")
    if _loads_of(store.value, buf):
        raise ScheduleError(f"{where}: the block reads the buffer it writes")
    others = [r for r in index.all_realizes() if r is not realize]
    if any(writes_buffer(r.block, buf) for r in others):
        raise ScheduleError(f"{where}: another block also writes {buf.name!r}")
    consumers = [r for r in others if reads_buffer(r.block, buf) or _direct_loads(r.block, buf)]
    read_bufs = [r.buffer for r in block.reads]
    for c in consumers:
        if index.order[id(c)] < index.order[id(realize)]:
            raise ScheduleError(f"{where}: consumer {c.block.name!r} runs before the block")
        for mid in _between(index, realize, c):
            if any(writes_buffer(mid.block, b) for b in read_bufs):
                raise ScheduleError(f"{where}: block {mid.block.name!r} overwrites an input of the block "
                                    f"before consumer {c.block.name!r} reads it")
    new_func = replace_stmts(func, {index.exclusive_nest_root(realize): None})
    rewriter = _InlineConsumers(buf, ivars, store.value, {id(c.block) for c in consumers}, _analyzer())
    new_func = new_func.with_body(rewriter.visit(new_func.body))
    return replace_stmts(new_func, _drop_alloc(new_func, buf))


class _InlineConsumers(Mutator):
    """Inline ``buffer``'s value into the consumer blocks, innermost first.

    A consumer may hold other consumers (an outer block made by blockize reads what its
    inner blocks read): their loads and read regions are rewritten before the outer block's
    reads are inferred again from its new body, so no region keeps naming the removed buffer.
    """

    def __init__(self, buffer: Buffer, index_vars: list[Var], value, consumer_ids: set[int], analyzer):
        super().__init__()
        self.buffer, self.consumer_ids, self.analyzer = buffer, consumer_ids, analyzer
        self.loads = _LoadReplacer(buffer, index_vars, value, analyzer)

    @handles(Block)
    def visit_Block(self, node: Block):
        new = self.generic_visit(node)
        if id(node) not in self.consumer_ids:
            return new
        new = self.loads.visit(new)
        reads = _merge_reads(node.reads, self.buffer, new.body, self.analyzer)
        return new.replace(reads=tuple(reads))
