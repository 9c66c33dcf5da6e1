"""blockize: wrap the subtree of a loop in a new outer block.

The outer block gets one iter var per enclosing loop the subtree uses
(spatial, or reduce when the loop iterates a reduction of an inner block),
bound to that loop; inside, the loop variables are replaced by the iter
vars. Its reads/writes are the inner blocks' regions relaxed over the loops
inside the subtree.
"""
from __future__ import annotations

from ..errors import ScheduleError
from ..expr import IntImm, Var
from ..function import PrimFunc
from ..functor import substitute
from ..stmt import Block, BlockRealize, IterVar, Range
from .checks import binding_loop_vars, leaf_realizes, var_ids
from .region import RegionError, _analyzer, infer_access_regions
from .state import NameSupply, StmtIndex, replace_stmts, used_names


def blockize(func: PrimFunc, loop_var: Var) -> tuple[PrimFunc, str]:
    index = StmtIndex(func)
    loop = index.loop(loop_var)
    where = f"blockize of loop {loop_var.name!r}"
    inner = index.child_realizes(loop)
    if not inner:
        raise ScheduleError(f"{where}: the loop contains no block")
    used = var_ids(loop)
    all_inner = leaf_realizes(index, loop)
    names = NameSupply(used_names(func))
    ivars, values, vmap = [], [], {}
    outer_ids = {id(lp.loop_var) for lp in index.loops_of(loop)}
    for outer in index.loops_of(loop):
        vid = id(outer.loop_var)
        if vid not in used:
            continue
        kinds = set()
        for r in all_inner:
            spatial, reduce = binding_loop_vars(r)
            if vid in spatial:
                kinds.add("S")
            if vid in reduce:
                kinds.add("R")
        if len(kinds) > 1:
            raise ScheduleError(f"{where}: outer loop {outer.loop_var.name!r} binds both spatial and "
                                "reduction iter vars of the inner blocks")
        if (var_ids(outer.min) | var_ids(outer.extent)) & outer_ids:
            raise ScheduleError(f"{where}: the range of outer loop {outer.loop_var.name!r} depends on "
                                "another loop")
        new_var = names.var("v" + outer.loop_var.name, outer.loop_var.dtype)
        vmap[outer.loop_var] = new_var
        ivars.append(IterVar(new_var, Range(outer.min, outer.extent), kinds.pop() if kinds else "S"))
        values.append(outer.loop_var)
    body = substitute(loop, vmap)
    try:
        reads, writes = infer_access_regions(body, analyzer=_analyzer())
    except RegionError as err:
        raise ScheduleError(f"{where}: cannot bound the inner blocks' regions: {err}") from None
    base = inner[0].block.name if len(inner) == 1 else "blockized"
    name = names.fresh(base + "_o")
    outer_block = Block(name, ivars, reads, writes, body)
    realize = BlockRealize(values, IntImm(True, "bool"), outer_block)
    return replace_stmts(func, {loop: realize}), name
