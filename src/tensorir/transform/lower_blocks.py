"""lower_blocks: replace every block by plain statements.

* iter vars are replaced by their bindings;
* an init runs under ``if <every reduce iter var at its domain min>:``
  (decompose_reduction, when applied, has already hoisted it);
* ``alloc_buffer``s become ``Allocate`` around the block's statements, with
  strides padded as the block's ``buffer_dim_align`` annotation asks;
* a ``match_buffer`` view is rewritten into accesses of its source buffer
  (its shape/stride/offset variables are bound with ``LetStmt``);
* a remaining ``T.where`` predicate becomes an ``if``.
"""
from __future__ import annotations

from ..buffer import Buffer
from ..dispatch import handles
from ..errors import IRError
from ..expr import EQ, And, BufferLoad, IntImm, PrimExpr, Var, is_const_int
from ..function import PrimFunc
from ..functor import Mutator, collect, substitute
from ..stmt import (Allocate, Block, BlockRealize, BufferStore, IfThenElse, LetStmt,
                    MatchBufferRegion, SeqStmt, Stmt, seq)
from .hoist_init import hoist_inits
from .lower_predicates import guard_with_predicate

ALIGN_KEY = "buffer_dim_align"


def _aligned_strides(buf: Buffer, align: dict[int, tuple[int, int]]) -> list[PrimExpr]:
    """Row-major strides where stride[axis] is rounded up to ``k * factor + offset``."""
    strides: list[PrimExpr] = [IntImm(1, "int64")] * buf.ndim
    running: PrimExpr = IntImm(1, "int64")
    for axis in range(buf.ndim - 1, -1, -1):
        stride = running
        if axis in align:
            factor, offset = align[axis]
            stride = (stride + (factor - 1 - offset)) // factor * factor + offset
        strides[axis] = stride
        running = stride * buf.shape[axis]
    return strides


def _collect_alignment(func: PrimFunc) -> dict[Buffer, Buffer]:
    """Old buffer -> the same buffer with padded strides, for every storage_align request."""
    requests: dict[int, tuple[Buffer, dict]] = {}
    for block in collect(func.body, lambda n: isinstance(n, Block)):
        entries = block.annotations.get(ALIGN_KEY, [])
        for entry in entries if isinstance(entries, (list, tuple)) else [entries]:
            if not (isinstance(entry, (list, tuple)) and len(entry) == 4
                    and all(isinstance(x, int) and not isinstance(x, bool) for x in entry)):
                raise IRError(f"block {block.name!r}: each {ALIGN_KEY} entry is [write buffer index, axis, "
                              f"factor, offset] (four integers), got {entry!r}")
            index, axis, factor, offset = entry
            if not 0 <= index < len(block.writes):
                raise IRError(f"block {block.name!r}: {ALIGN_KEY} names write buffer {index}, "
                              f"but the block writes {len(block.writes)}")
            buf = block.writes[index].buffer
            requests.setdefault(id(buf), (buf, {}))[1][axis] = (factor, offset)
    return {buf: buf.replace(strides=tuple(_aligned_strides(buf, align)))
            for buf, align in requests.values()}


class _MatchRewriter(Mutator):
    """Accesses of a matched buffer become accesses of its source region."""

    def __init__(self, match: MatchBufferRegion):
        super().__init__()
        self.target = match.buffer
        self.source = match.source.buffer
        self.mins = [r.min for r in match.source.region]
        self.dropped = len(self.mins) - self.target.ndim
        if self.dropped < 0:
            raise IRError(f"match_buffer {self.target.name!r} has more dimensions than its region")

    def indices(self, indices) -> list[PrimExpr]:
        lead = self.mins[:self.dropped]
        return lead + [m + i for m, i in zip(self.mins[self.dropped:], indices)]

    @handles(BufferLoad)
    def visit_BufferLoad(self, node: BufferLoad):
        node = self.generic_visit(node)
        if node.buffer is not self.target:
            return node
        return BufferLoad(self.source, self.indices(node.indices))

    @handles(BufferStore)
    def visit_BufferStore(self, node: BufferStore):
        node = self.generic_visit(node)
        if node.buffer is not self.target:
            return node
        return BufferStore(self.source, node.value, self.indices(node.indices))


def _match_bindings(match: MatchBufferRegion, defined: set[int]) -> list[tuple[Var, PrimExpr]]:
    """LetStmt bindings for the matched buffer's still-free shape/stride/offset variables."""
    target, source = match.buffer, match.source.buffer
    region = match.source.region
    dropped = len(region) - target.ndim
    src_strides = list(source.strides) or _aligned_strides(source, {})
    offset = source.elem_offset
    for r, st in zip(region, src_strides):
        offset = offset + r.min * st
    pairs = list(zip(target.shape, [r.extent for r in region[dropped:]]))
    pairs += list(zip(target.strides, src_strides[dropped:]))
    if not is_const_int(target.elem_offset, 0):
        pairs.append((target.elem_offset, offset))
    out = []
    for expr, value in pairs:
        if isinstance(expr, Var) and id(expr) not in defined:
            defined.add(id(expr))
            out.append((expr, value))
    return out


class _BlockLowerer(Mutator):
    def __init__(self, signature_vars: set[int]):
        super().__init__()
        self.defined = set(signature_vars)

    @handles(PrimExpr)
    def visit_PrimExpr(self, node):
        return node

    @handles(BlockRealize)
    def visit_BlockRealize(self, node: BlockRealize) -> Stmt:
        block = node.block
        body = self.visit(block.body)
        init = self.visit(block.init) if block.init is not None else None
        lets: list[tuple[Var, PrimExpr]] = []
        for match in block.match_buffers:
            rewriter = _MatchRewriter(match)
            body = rewriter.visit(body)
            init = rewriter.visit(init) if init is not None else None
            lets += _match_bindings(match, self.defined)
        if init is not None:
            at_min = [EQ(iv.var, iv.dom.min) for iv in block.iter_vars if iv.kind == "R"]
            cond = at_min[0] if at_min else None
            for c in at_min[1:]:
                cond = And(cond, c)
            body = seq(init if cond is None else IfThenElse(cond, init), body)
        for var, value in reversed(lets):
            body = LetStmt(var, value, body)
        for buf in reversed(block.alloc_buffers):
            body = Allocate(buf, body)
        binding = {iv.var: value for iv, value in zip(block.iter_vars, node.iter_values)}
        return guard_with_predicate(node, substitute(body, binding))

    @handles(Block)
    def visit_Block(self, node: Block):
        raise IRError(f"block {node.name!r} appears outside a BlockRealize")

    @handles(SeqStmt)
    def visit_SeqStmt(self, node: SeqStmt):
        # A lowered block may be a sequence itself: keep sequences flat (the canonical,
        # printable form; the parser never builds a SeqStmt inside a SeqStmt).
        stmts = [self.visit(s) for s in node.seq]
        return seq(*stmts) if stmts else node


def _signature_vars(func: PrimFunc) -> set[int]:
    ids = {id(v) for v in func.scalar_params}
    for buf in func.buffer_params:
        ids |= {id(v) for v in collect(buf, lambda n: isinstance(n, Var))}
    return ids


def lower_blocks(func: PrimFunc) -> PrimFunc:
    aligned = _collect_alignment(func)
    body = func.body
    if aligned:
        body = substitute(body, aligned)
    body = hoist_inits(body)
    return func.with_body(_BlockLowerer(_signature_vars(func)).visit(body))
