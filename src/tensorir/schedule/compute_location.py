"""compute_at and reverse_compute_at: move a block's loop nest under a loop.

The moved block gets fresh loops covering just the region its neighbours
need (forward) or produce (reverse) per iteration of the target loop,
clamped to the block's own iteration domain (compute_at keeps a constant-length
range whole and guards the block with a predicate instead).
"""
from __future__ import annotations

from ..errors import ScheduleError
from ..expr import GE, LT, And, IntImm, PrimExpr, Var, floordiv, is_const_int, max_, min_
from ..function import PrimFunc
from ..functor import substitute
from ..stmt import BlockRealize, For, Range, SeqStmt, Stmt, seq
from .checks import (binding_loop_vars, is_param_buffer, leaf_realizes, reads_buffer,
                     require_not_root, stmt_realizes, tiled_write_dims, writes_buffer)
from .region import RegionError, _analyzer, hull, relax_range
from .state import NameSupply, StmtIndex, replace_stmts, used_names


def _placement(index: StmtIndex, realize: BlockRealize, loop: For, forward: bool, where: str):
    """(nest root of the block, sibling list, position of the nest, position of the loop's sibling)."""
    if index.is_ancestor(loop, realize):
        raise ScheduleError(f"{where}: the block is already inside the loop")
    if index.scope_block(realize) is not index.scope_block(loop):
        raise ScheduleError(f"{where}: the block and the loop are in different block scopes")
    nest = index.exclusive_nest_root(realize)
    parent = index.parent.get(id(nest))
    if not isinstance(parent, SeqStmt) or not index.is_ancestor(parent, loop):
        raise ScheduleError(f"{where}: the loop is not a sibling subtree of the block's loop nest")
    siblings = list(parent.seq)
    nest_pos = next(i for i, s in enumerate(siblings) if s is nest)
    loop_pos = next(i for i, s in enumerate(siblings) if s is loop or index.is_ancestor(s, loop))
    if forward and loop_pos < nest_pos:
        raise ScheduleError(f"{where}: the loop comes before the block; use reverse_compute_at")
    if not forward and loop_pos > nest_pos:
        raise ScheduleError(f"{where}: the loop comes after the block; use compute_at")
    return nest, siblings, nest_pos, loop_pos


def _inner_dom(index: StmtIndex, loop: For, realize: BlockRealize) -> dict[Var, Range]:
    """Ranges of the loops strictly inside ``loop`` that enclose ``realize``."""
    chain = index.ancestors(realize)
    start = next(i for i, s in enumerate(chain) if s is loop)
    return {s.loop_var: Range(s.min, s.extent) for s in chain[start + 1:] if isinstance(s, For)}


def _region_bounds(index, loop, realize, regions, buffer, analyzer):
    binding = {iv.var: v for iv, v in zip(realize.block.iter_vars, realize.iter_values)}
    dom = _inner_dom(index, loop, realize)
    out = []
    for reg in regions:
        if reg.buffer is buffer:
            out.append([relax_range(substitute(r, binding), dom, analyzer) for r in reg.region])
    return out


def _scope_level(index: StmtIndex, loop: For, realizes, uses, buffer, role: str, where: str):
    """The blocks directly in the loop's block scope that stand for ``realizes``.

    A block nested in another one under the loop (e.g. the inner block after blockize) is
    bound by its outer block's iter vars, which mean nothing outside that block: the outer
    block's own regions are used instead, and it must declare the access itself.
    """
    out: list[BlockRealize] = []
    for r in realizes:
        chain = index.ancestors(r) + [r]
        start = next(i for i, s in enumerate(chain) if s is loop)
        top = next(s for s in chain[start + 1:] if isinstance(s, BlockRealize))
        if top is not r and not uses(top.block, buffer):
            raise ScheduleError(f"{where}: {role} block {r.block.name!r} is nested in block "
                                f"{top.block.name!r}, which does not declare its use of {buffer.name!r}")
        if all(top is not o for o in out):
            out.append(top)
    return out


def _bound_analyzer(index: StmtIndex, loop: For):
    """An analyzer that knows the ranges of ``loop`` and the loops around it."""
    analyzer = _analyzer()
    for lp in [s for s in index.ancestors(loop) if isinstance(s, For)] + [loop]:
        analyzer.bind(lp.loop_var, Range(lp.min, lp.extent))
    return analyzer


def _offset(lo: PrimExpr, var: Var) -> PrimExpr:
    """``lo + var`` in TVM's order (the region's start, then the new loop), e.g. ``i * 16 + ax0``
    where simplifying the sum would write ``ax0 + i * 16``."""
    return var if is_const_int(lo, 0) else lo + var


def _rebuild_nest(realize: BlockRealize, ranges: dict[int, tuple[PrimExpr, PrimExpr]],
                  names: NameSupply, analyzer, guard_constant: bool = False) -> Stmt:
    """Fresh loops for the block: iter vars in ``ranges`` (by id) get that inclusive range
    clamped to their domain; the others get their whole domain. With ``guard_constant``,
    a range of constant length that may leave the domain keeps its constant extent and
    the block gets a predicate instead of the clamp (a GPU tile loaded into shared memory
    needs a size known per block; the clamp ``min(i0 * 32 + 31, n - 1)`` hides it)."""
    loops, values, guards = [], [], []
    for iv in realize.block.iter_vars:
        dom_lo, dom_hi = iv.dom.min, iv.dom.min + iv.dom.extent - 1
        lo, hi = ranges.get(id(iv.var), (dom_lo, dom_hi))
        var = names.var("ax%d" % len(loops), iv.var.dtype)
        low_ok, high_ok = analyzer.can_prove(lo >= dom_lo), analyzer.can_prove(hi <= dom_hi)
        if guard_constant and not (low_ok and high_ok) and isinstance(analyzer.simplify(hi - lo + 1), IntImm):
            value = _offset(analyzer.simplify(lo), var)
            if not low_ok:
                guards.append(GE(value, dom_lo))
            if not high_ok:
                guards.append(LT(value, analyzer.simplify(iv.dom.min + iv.dom.extent)))
        else:
            lo = lo if low_ok else max_(lo, dom_lo)
            hi = hi if high_ok else min_(hi, dom_hi)
        loops.append((var, analyzer.simplify(hi - lo + 1)))
        values.append(_offset(analyzer.simplify(lo), var))
    predicate = IntImm(True, "bool")
    for guard in guards:
        predicate = guard if isinstance(predicate, IntImm) else And(predicate, guard)
    body: Stmt = BlockRealize(values, predicate, realize.block)
    for var, extent in reversed(loops):
        body = For(var, 0, extent, "serial", body)
    return body


def compute_at(func: PrimFunc, block_name: str, loop_var: Var) -> PrimFunc:
    index = StmtIndex(func)
    realize, loop = index.realize(block_name), index.loop(loop_var)
    where = f"compute_at of block {block_name!r} under loop {loop_var.name!r}"
    require_not_root(func, realize, "compute_at")
    block = realize.block
    nest, siblings, nest_pos, loop_pos = _placement(index, realize, loop, True, where)
    if len(block.writes) != 1:
        raise ScheduleError(f"{where}: the block must write exactly one buffer")
    out_buf = block.writes[0].buffer
    if is_param_buffer(func, out_buf):
        raise ScheduleError(f"{where}: the block writes function output {out_buf.name!r}; computing "
                            "only what consumers need would leave it incomplete")
    tiles = tiled_write_dims(block, out_buf)
    if tiles is None:
        raise ScheduleError(f"{where}: the block must write {out_buf.name}[v0, v1, ...] with "
                            "distinct spatial iter vars (or tiles c * v of them, as an outer "
                            "block of blockize writes)")
    in_bufs = [r.buffer for r in block.reads if r.buffer is not out_buf]
    everything = index.all_realizes()
    under = [r for r in leaf_realizes(index, loop)]
    under_ids = {id(r) for r in under}
    consumers = [r for r in everything if r is not realize and reads_buffer(r.block, out_buf)]
    for c in consumers:
        if id(c) not in under_ids:
            raise ScheduleError(f"{where}: consumer block {c.block.name!r} is not under the loop")
    if not consumers:
        raise ScheduleError(f"{where}: no consumer of {out_buf.name!r} is under the loop")
    between = [r for s in siblings[nest_pos + 1:loop_pos] for r in stmt_realizes(index, s)]
    for other in between + under:
        if writes_buffer(other.block, out_buf):
            raise ScheduleError(f"{where}: block {other.block.name!r} also writes {out_buf.name!r}")
        if any(writes_buffer(other.block, b) for b in in_bufs):
            raise ScheduleError(f"{where}: block {other.block.name!r} writes a buffer the block reads; "
                                "moving the block later would change what it reads")
    analyzer = _bound_analyzer(index, loop)
    readers = _scope_level(index, loop, consumers, reads_buffer, out_buf, "consumer", where)
    try:
        bounds = [b for c in readers
                  for b in _region_bounds(index, loop, c, c.block.reads, out_buf, analyzer)]
    except RegionError as err:
        raise ScheduleError(f"{where}: cannot bound the consumers' reads: {err}") from None
    ranges = {}
    for d, (v, coef, offset) in enumerate(tiles):
        lo, hi = hull([acc[d] for acc in bounds], analyzer)
        # the tiles covering [lo, hi]: c * v + d <= hi and c * v + d + c - 1 >= lo
        ranges[id(v)] = (lo, hi) if coef == 1 and is_const_int(offset, 0) else \
            (analyzer.simplify(floordiv(lo - offset, coef)), analyzer.simplify(floordiv(hi - offset, coef)))
    new_nest = _rebuild_nest(realize, ranges, NameSupply(used_names(func)), analyzer, guard_constant=True)
    new_loop = loop.replace(body=seq(new_nest, loop.body))
    return replace_stmts(func, {nest: None, loop: new_loop})


def reverse_compute_at(func: PrimFunc, block_name: str, loop_var: Var) -> PrimFunc:
    index = StmtIndex(func)
    realize, loop = index.realize(block_name), index.loop(loop_var)
    where = f"reverse_compute_at of block {block_name!r} under loop {loop_var.name!r}"
    require_not_root(func, realize, "reverse_compute_at")
    block = realize.block
    if any(iv.kind != "S" for iv in block.iter_vars):
        raise ScheduleError(f"{where}: the block has reduction iter vars; only spatial blocks qualify")
    nest, siblings, nest_pos, loop_pos = _placement(index, realize, loop, False, where)
    under = leaf_realizes(index, loop)
    out_bufs = [r.buffer for r in block.writes]
    produced = [r.buffer for r in block.reads
                if any(writes_buffer(p.block, r.buffer) for p in under)]
    if len({id(b) for b in produced}) != 1:
        raise ScheduleError(f"{where}: the block must read exactly one buffer produced under the loop, "
                            f"found {sorted({b.name for b in produced})}")
    buf = produced[0]
    producers = _scope_level(index, loop, [p for p in under if writes_buffer(p.block, buf)],
                             writes_buffer, buf, "producer", where)
    other_inputs = [r.buffer for r in block.reads if r.buffer is not buf]
    for other in under:
        if any(reads_buffer(other.block, b) or writes_buffer(other.block, b) for b in out_bufs):
            raise ScheduleError(f"{where}: block {other.block.name!r} under the loop uses the "
                                "block's output")
        if any(writes_buffer(other.block, b) for b in other_inputs):
            raise ScheduleError(f"{where}: block {other.block.name!r} under the loop writes another "
                                "buffer the block reads; inside the loop it would read it unfinished")
    outer_loops = [s for s in index.ancestors(loop) if isinstance(s, For)] + [loop]
    for producer in producers:
        reduce_ids = binding_loop_vars(producer)[1]
        if any(id(lp.loop_var) in reduce_ids for lp in outer_loops):
            raise ScheduleError(f"{where}: loop {loop_var.name!r} or an outer loop iterates a reduction "
                                f"of producer {producer.block.name!r}, whose values are not final there")
    between = [r for s in siblings[loop_pos + 1:nest_pos] for r in stmt_realizes(index, s)]
    for other in between:
        if writes_buffer(other.block, buf) or any(
                reads_buffer(other.block, b) or writes_buffer(other.block, b) for b in out_bufs):
            raise ScheduleError(f"{where}: block {other.block.name!r} between the loop and the block "
                                "touches the same buffers")
        if any(writes_buffer(other.block, b) for b in other_inputs):
            raise ScheduleError(f"{where}: block {other.block.name!r} between the loop and the block "
                                "writes a buffer the block reads; moving the block earlier would read "
                                "it before it is written")
    read_regions = [r for r in block.reads if r.buffer is buf]
    if len(read_regions) != 1:
        raise ScheduleError(f"{where}: the block must read {buf.name!r} once")
    spatial = {id(iv.var): iv for iv in block.iter_vars}
    dims: list[Var] = []
    for r in read_regions[0].region:
        if not (isinstance(r.min, Var) and id(r.min) in spatial and _is_one(r.extent)) \
                or any(d is r.min for d in dims):
            raise ScheduleError(f"{where}: the block must read {buf.name}[v0, v1, ...] with distinct "
                                "iter vars")
        dims.append(r.min)
    analyzer = _bound_analyzer(index, loop)
    _require_cover(producers, buf, dims, spatial, analyzer, where)
    try:
        bounds = [b for p in producers
                  for b in _region_bounds(index, loop, p, p.block.writes, buf, analyzer)]
    except RegionError as err:
        raise ScheduleError(f"{where}: cannot bound the producers' writes: {err}") from None
    ranges = {id(v): hull([acc[d] for acc in bounds], analyzer) for d, v in enumerate(dims)}
    new_nest = _rebuild_nest(realize, ranges, NameSupply(used_names(func)), analyzer)
    new_loop = loop.replace(body=seq(loop.body, new_nest))
    return replace_stmts(func, {nest: None, loop: new_loop})


def _is_one(e) -> bool:
    from ..expr import is_const_int
    return is_const_int(e, 1)


def _require_cover(producers, buf, dims, spatial, analyzer, where):
    """Over all iterations the producers must write every point the block reads."""
    for p in producers:
        pdims = tiled_write_dims(p.block, buf)
        if pdims is None:
            raise ScheduleError(f"{where}: producer {p.block.name!r} must write {buf.name}[v0, ...] "
                                "with distinct spatial iter vars (or tiles c * v of them)")
        pdom = {id(iv.var): iv.dom for iv in p.block.iter_vars}
        for (pv, coef, offset), cv in zip(pdims, dims):
            pd, cd = pdom[id(pv)], spatial[id(cv)].dom
            first = pd.min * coef + offset                       # first point written
            end = (pd.min + pd.extent) * coef + offset           # one past the last
            if not (analyzer.can_prove(first <= cd.min)
                    and analyzer.can_prove(end >= cd.min + cd.extent)):
                raise ScheduleError(f"{where}: producer {p.block.name!r} does not cover the region "
                                    "the block reads")
