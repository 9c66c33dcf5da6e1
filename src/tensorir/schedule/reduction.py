"""Reduction primitives: decompose_reduction (hoist the init into its own
block) and rfactor (reduce in two stages through an intermediate buffer)."""
from __future__ import annotations

from ..buffer import Buffer
from ..errors import ScheduleError
from ..expr import (Add, And, BufferLoad, FloatImm, IntImm, Max, Min, Mul, PrimExpr, Var,
                    is_const_int)
from ..function import PrimFunc
from ..functor import collect, substitute
from ..stmt import (Block, BlockRealize, BufferStore, For, IterVar, LetStmt, Range, Stmt, is_true,
                    seq)
from ..structural import structural_equal
from .checks import binding_loop_vars, leaf_realizes, require_reduction_within, var_ids
from ..script.region_infer import infer_regions
from .region import _analyzer, infer_access_regions
from .state import NameSupply, StmtIndex, add_root_alloc, replace_stmts, used_names


def conjuncts(pred: PrimExpr) -> list[PrimExpr]:
    if isinstance(pred, And):
        return conjuncts(pred.a) + conjuncts(pred.b)
    return [] if is_true(pred) else [pred]


def conjoin(parts: list[PrimExpr]) -> PrimExpr:
    out: PrimExpr = IntImm(True, "bool")
    for p in parts:
        out = p if is_true(out) else And(out, p)
    return out


def decompose_reduction(func: PrimFunc, block_name: str, loop_var: Var) -> tuple[PrimFunc, str]:
    index = StmtIndex(func)
    realize, loop = index.realize(block_name), index.loop(loop_var)
    block = realize.block
    where = f"decompose_reduction of block {block_name!r} at loop {loop_var.name!r}"
    if block.init is None:
        raise ScheduleError(f"{where}: the block has no init (not a reduction, or already decomposed)")
    loops = index.loops_of(realize)
    if not any(lp is loop for lp in loops):
        raise ScheduleError(f"{where}: the loop does not enclose the block")
    pos = next(i for i, lp in enumerate(loops) if lp is loop)
    spatial, reduce = binding_loop_vars(realize)
    for lp in loops[:pos]:
        if id(lp.loop_var) in reduce:
            raise ScheduleError(f"{where}: outer loop {lp.loop_var.name!r} iterates the reduction, so "
                                "an init placed inside it would run more than once")
    require_reduction_within(index, realize, loops[pos:], where)
    names = NameSupply(used_names(func))
    copies: dict[Var, Var] = {}
    kept: list[For] = []
    for lp in loops[pos:]:
        lid = id(lp.loop_var)
        if lid in spatial and lid in reduce:
            raise ScheduleError(f"{where}: loop {lp.loop_var.name!r} binds both spatial and reduction "
                                "iter vars")
        if lid in spatial:
            copies[lp.loop_var] = names.var(lp.loop_var.name + "_init", lp.loop_var.dtype)
            kept.append(lp)
    skipped = {id(lp.loop_var) for lp in loops[pos:] if lp.loop_var not in copies}
    for lp in kept:
        if (var_ids(lp.min) | var_ids(lp.extent)) & skipped:
            raise ScheduleError(f"{where}: the range of loop {lp.loop_var.name!r} depends on a "
                                "reduction loop")
    pred_parts = []
    for part in conjuncts(realize.predicate):
        used = var_ids(part)
        if used & skipped and used & ({id(v) for v in copies} | spatial):
            raise ScheduleError(f"{where}: predicate {part!r} mixes spatial and reduction loops")
        if not used & skipped:
            pred_parts.append(substitute(part, copies))
    ivar_map = {}
    init_ivars, init_values = [], []
    for iv, value in zip(block.iter_vars, realize.iter_values):
        if iv.kind == "S":
            new_var = names.var(iv.var.name, iv.var.dtype)
            ivar_map[iv.var] = new_var
            init_ivars.append(IterVar(new_var, iv.dom, "S"))
            init_values.append(substitute(value, copies))
    init_body = substitute(block.init, ivar_map)
    if var_ids(init_body) & {id(iv.var) for iv in block.iter_vars if iv.kind == "R"}:
        raise ScheduleError(f"{where}: the init uses a reduction iter var")
    analyzer = _analyzer()
    reads, writes = infer_access_regions(init_body, analyzer=analyzer)
    init_name = names.fresh(block_name + "_init")
    # The init block carries the block's annotations, as TVM's does.
    init_block = Block(init_name, init_ivars, reads, writes, init_body, annotations=block.annotations)
    nest: Stmt = BlockRealize(init_values, conjoin(pred_parts), init_block)
    for lp in reversed(kept):
        nest = For(copies[lp.loop_var], lp.min, lp.extent, lp.kind, nest, lp.thread_tag, lp.annotations)
    new_func = replace_stmts(func, {block: block.replace(init=None)})
    new_loop = StmtIndex(new_func).loop(loop_var)
    return replace_stmts(new_func, {new_loop: seq(nest, new_loop)}), init_name


# ----------------------------------------------------------------- rfactor
_IDENTITY = {Add: 0, Mul: 1}


def _inline_lets(body: Stmt) -> Stmt:
    """``v = e; buf[...] = f(v)`` (TVM prints a reduction update so when it names the combined
    value) read as the single store ``buf[...] = f(e)``."""
    while isinstance(body, LetStmt):
        body = substitute(body.body, {body.var: body.value})
    return body


def _reducer(block: Block, where: str):
    """Match ``buf[idx] = buf[idx] op rhs`` with init ``buf[idx] = init``; return the pieces."""
    body, init = _inline_lets(block.body), block.init
    if not (isinstance(body, BufferStore) and isinstance(init, BufferStore)
            and init.buffer is body.buffer and structural_equal(init.indices, body.indices)):
        raise ScheduleError(f"{where}: block {block.name!r} is not a single-store reduction with init")
    op = type(body.value)
    if op not in (Add, Mul, Max, Min):
        raise ScheduleError(f"{where}: block {block.name!r} does not reduce with +, *, max or min")

    def is_self(e):
        return isinstance(e, BufferLoad) and e.buffer is body.buffer and \
            structural_equal(e.indices, body.indices)
    a, b = body.value.a, body.value.b
    rhs = b if is_self(a) else a if is_self(b) else None
    if rhs is None or collect(rhs, lambda n: isinstance(n, BufferLoad) and n.buffer is body.buffer):
        raise ScheduleError(f"{where}: block {block.name!r} does not have the form x = x op value")
    if op in _IDENTITY:
        iv = init.value
        if not (isinstance(iv, (IntImm, FloatImm)) and iv.value == _IDENTITY[op]):
            raise ScheduleError(f"{where}: the init {iv!r} is not the identity of the reduction")
    return op, body.buffer, body.indices, rhs, init.value


def _vars_in_order(expr) -> list[Var]:
    seen, out = set(), []
    for v in collect(expr, lambda n: isinstance(n, Var)):
        if id(v) not in seen:
            seen.add(id(v))
            out.append(v)
    return out


def rfactor(func: PrimFunc, loop_var: Var, factor_axis: int) -> tuple[PrimFunc, str]:
    """TVM's rfactor, block for block: the rfactor block ``<name>_rf`` gets a spatial iter var
    for ``loop`` first, then the block's iter vars, except that a reduce iter var whose binding
    uses ``loop`` becomes one reduce iter var per other loop of its binding; the write-back
    block keeps the name, with a reduce iter var over the partials first, then the spatial
    ones, under copies of the original loops its bindings use (kinds kept)."""
    index = StmtIndex(func)
    loop = index.loop(loop_var)
    where = f"rfactor of loop {loop_var.name!r}"
    realizes = leaf_realizes(index, loop)
    if len(realizes) != 1:
        raise ScheduleError(f"{where}: the loop must contain exactly one block, found {len(realizes)}")
    realize = realizes[0]
    block = realize.block
    op, buf, indices, rhs, init_value = _reducer(block, where)
    spatial, reduce = binding_loop_vars(realize)
    # A unit loop no binding uses (left by fuse/split) may be factored too, as in TVM; a longer
    # one repeats the whole block, init included, which partials could not reproduce.
    unused_unit = id(loop_var) not in spatial and id(loop_var) not in reduce and \
        is_const_int(loop.extent, 1) and any(iv.kind == "R" for iv in block.iter_vars)
    if not unused_unit and (id(loop_var) in spatial or id(loop_var) not in reduce):
        raise ScheduleError(f"{where}: the loop must iterate only reduction iter vars of "
                            f"block {block.name!r}")
    if var_ids(realize.predicate) & (reduce | {id(loop_var)}):
        raise ScheduleError(f"{where}: block {block.name!r} has a predicate on reduction loops")
    if not -len(buf.shape) - 1 <= factor_axis <= len(buf.shape):
        raise ScheduleError(f"{where}: factor_axis {factor_axis} out of range for {buf.ndim}-d "
                            f"buffer {buf.name!r}")
    factor_axis %= buf.ndim + 1
    loops = index.loops_of(realize)
    require_reduction_within(index, realize, loops, where)
    red_loops = [lp for lp in loops if id(lp.loop_var) in reduce or lp is loop]
    loop_ids = {id(lp.loop_var) for lp in loops}
    for lp in red_loops:
        if (var_ids(lp.min) | var_ids(lp.extent)) & loop_ids:
            raise ScheduleError(f"{where}: the range of reduction loop {lp.loop_var.name!r} depends on "
                                "another loop")
        if lp.kind != "serial":
            raise ScheduleError(f"{where}: reduction loop {lp.loop_var.name!r} is {lp.kind}, not serial")
    top = index.top_level_stmt(realize)
    if any(r is not realize and (r.block.reads + r.block.writes) and
           any(x.buffer is buf for x in r.block.reads + r.block.writes)
           for r in leaf_realizes(index, top)):
        raise ScheduleError(f"{where}: another block in the same loop nest uses {buf.name!r}")
    analyzer = _analyzer()
    names = NameSupply(used_names(func))
    rf_buf = Buffer(names.fresh(buf.name + "_rf"), _insert(buf.shape, factor_axis, loop.extent),
                    buf.dtype, scope=buf.scope)
    loops_by_id = {id(lp.loop_var): lp for lp in loops}

    # Stage 1: the rfactor block.
    rf_var = names.var("v" + loop_var.name, loop_var.dtype)
    ivars = [IterVar(rf_var, Range(loop.min, loop.extent), "S")]
    values: list = [loop_var]
    loop_map: dict[Var, Var] = {loop_var: rf_var}
    iv_map: dict[Var, PrimExpr] = {}
    for iv, value in zip(block.iter_vars, realize.iter_values):
        if iv.kind == "S" or id(loop_var) not in var_ids(value):
            new_var = names.var(iv.var.name, iv.var.dtype)
            iv_map[iv.var] = new_var
            ivars.append(IterVar(new_var, iv.dom, iv.kind))
            values.append(value)
            continue
        for v in _vars_in_order(value):
            lp = loops_by_id.get(id(v))
            if lp is None or v in loop_map:
                continue
            loop_map[v] = names.var("v" + v.name, v.dtype)
            ivars.append(IterVar(loop_map[v], Range(lp.min, lp.extent), "R"))
            values.append(v)
        iv_map[iv.var] = substitute(value, loop_map)
    rf_pos = analyzer.simplify(rf_var - loop.min)
    rf_indices = _insert([substitute(i, iv_map) for i in indices], factor_axis, rf_pos)
    rf_rhs = substitute(rhs, iv_map)
    rf_load = BufferLoad(rf_buf, rf_indices)
    rf_body = BufferStore(rf_buf, op(rf_load, rf_rhs), rf_indices)
    rf_init = BufferStore(rf_buf, init_value, rf_indices)
    # Regions as the parser completes them, so the result equals the same text parsed.
    reads, writes = infer_regions(rf_body, rf_init)
    block_names = {r.block.name for r in index.all_realizes()}
    rf_name = block.name + "_rf"
    if rf_name in block_names:
        rf_name = names.fresh(rf_name)
    rf_block = Block(rf_name, ivars, reads, writes, rf_body, rf_init, annotations=block.annotations)
    rf_realize = BlockRealize(values, realize.predicate, rf_block)

    # Stage 2: the write-back block keeps the original name and reduces over the rfactor axis.
    red_var = names.var("v" + loop_var.name, loop_var.dtype)
    wb_ivars = [IterVar(red_var, Range(loop.min, loop.extent), "R")]
    wb_values: list = [loop_var]
    wb_map = {}
    for iv, value in zip(block.iter_vars, realize.iter_values):
        if iv.kind == "S":
            wb_map[iv.var] = names.var(iv.var.name, iv.var.dtype)
            wb_ivars.append(IterVar(wb_map[iv.var], iv.dom, "S"))
            wb_values.append(value)
    used = set().union(*(var_ids(v) for v in wb_values), var_ids(realize.predicate))
    kept = [lp for lp in loops if id(lp.loop_var) in used]
    copies = {lp.loop_var: names.var(lp.loop_var.name, lp.loop_var.dtype) for lp in kept}
    wb_indices = [substitute(i, wb_map) for i in indices]
    wb_load = BufferLoad(buf, wb_indices)
    partial = BufferLoad(rf_buf, _insert(wb_indices, factor_axis, analyzer.simplify(red_var - loop.min)))
    wb_body = BufferStore(buf, op(wb_load, partial), wb_indices)
    wb_init = BufferStore(buf, init_value, wb_indices)
    reads, writes = infer_regions(wb_body, wb_init)
    wb_block = Block(block.name, wb_ivars, reads, writes, wb_body, wb_init,
                     annotations=block.annotations)
    wb: Stmt = BlockRealize([substitute(v, copies) for v in wb_values],
                            substitute(realize.predicate, copies), wb_block)
    for lp in reversed(kept):
        wb = For(copies[lp.loop_var], lp.min, lp.extent, lp.kind, wb, lp.thread_tag, lp.annotations)

    new_func = replace_stmts(func, {realize: rf_realize})
    new_top = StmtIndex(new_func).top_level_stmt(StmtIndex(new_func).realize(rf_name))
    new_func = replace_stmts(new_func, {new_top: seq(new_top, wb)})
    return add_root_alloc(new_func, rf_buf), rf_name


def _insert(items, pos: int, value) -> list:
    out = list(items)
    out.insert(pos, value)
    return out
