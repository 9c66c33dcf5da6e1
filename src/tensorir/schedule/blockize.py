"""blockize: wrap the subtree of a loop in a new outer block.

For a loop holding one block whose bindings divide into an outer part (loops outside
``loop``) and an inner part (loops inside) — ``outer * E + inner`` with the inner part a
mixed-radix sum of extent ``E`` — the result is TVM's: the outer block ``<name>_o`` has one iter
var per iter var of the block (extent ``dom / E``, bound to the outer part), the inner block
keeps the iter vars whose inner extent exceeds 1 (bound to the inner part) and reads each old
iter var as ``outer * E + inner`` (an outer iter var of extent 1 reads as 0). When the outer
block reduces, the init moves to it as a loop nest over the inner spatial loops (TVM's
``<name>_init``). ``preserve_unit_iters=False`` binds unit-extent loops as 0.

Otherwise (several blocks under the loop, a binding that does not divide) the general form:
the outer block gets one iter var per enclosing loop the subtree uses
(spatial, or reduce when the loop iterates a reduction of an inner block),
bound to that loop; inside, the loop variables are replaced by the iter
vars. Its reads/writes are the inner blocks' regions relaxed over the loops
inside the subtree.
"""
from __future__ import annotations

from ..errors import ScheduleError
from ..expr import Add, IntImm, Mul, Sub, Var, is_const_int
from ..function import PrimFunc
from ..functor import substitute
from ..stmt import Block, BlockRealize, For, IterVar, Range, Stmt
from .checks import binding_loop_vars, leaf_realizes, var_ids
from .reduction import conjoin, conjuncts
from .region import RegionError, _analyzer, infer_access_regions
from .state import NameSupply, StmtIndex, replace_stmts, used_names


def _is_zero(e) -> bool:
    return isinstance(e, int) and e == 0 or is_const_int(e, 0)


def _linear(expr, loop_ids: set[int]):
    """``expr`` as ({loop var: coefficient}, rest) with ``rest`` free of those loops, or None."""
    if isinstance(expr, Var):
        return ({expr: 1}, 0) if id(expr) in loop_ids else ({}, expr)
    if isinstance(expr, IntImm):
        return {}, expr.value
    if isinstance(expr, (Add, Sub)):
        a, b = _linear(expr.a, loop_ids), _linear(expr.b, loop_ids)
        if a is None or b is None:
            return None
        sign = 1 if isinstance(expr, Add) else -1
        terms = dict(a[0])
        for v, c in b[0].items():
            terms[v] = terms.get(v, 0) + sign * c
        return {v: c for v, c in terms.items() if c}, a[1] + b[1] if sign == 1 else a[1] - b[1]
    if isinstance(expr, Mul):
        for x, k in ((expr.a, expr.b), (expr.b, expr.a)):
            if isinstance(k, IntImm):
                inner = _linear(x, loop_ids)
                if inner is None:
                    return None
                return {v: c * k.value for v, c in inner[0].items()}, inner[1] * k.value
    return None if var_ids(expr) & loop_ids else ({}, expr)


def _divide(value, inner_loops: dict[int, For], outer_ids: set[int], analyzer):
    """Split a binding into (outer expr, inner expr, inner extent E) with value = outer*E + inner."""
    lin = _linear(value, set(inner_loops) | outer_ids)
    if lin is None:
        return None
    terms, rest = lin
    inner = sorted(((c, v) for v, c in terms.items() if id(v) in inner_loops), key=lambda t: t[0])
    extent = 1
    inner_expr = None
    for c, v in inner:
        ext = inner_loops[id(v)].extent
        if not isinstance(ext, IntImm) or c != extent or not _is_zero(inner_loops[id(v)].min):
            return None
        inner_expr = v if inner_expr is None else inner_expr + (v if c == 1 else v * c)
        extent *= ext.value
    outer = [(c, v) for v, c in terms.items() if id(v) not in inner_loops]
    if any(c % extent for c, _ in outer):
        return None
    if isinstance(rest, int):
        if rest % extent:
            return None
        outer_expr = IntImm(rest // extent, value.dtype)
    elif extent == 1:
        outer_expr = rest
    else:
        return None
    for c, v in outer:
        term = v if c == extent else v * (c // extent)
        outer_expr = term if _is_zero(outer_expr) else outer_expr + term
    return analyzer.simplify(outer_expr), inner_expr, extent


def blockize(func: PrimFunc, loop_var: Var, preserve_unit_iters: bool = True) -> tuple[PrimFunc, str]:
    tvm_form = _blockize_single(func, loop_var, preserve_unit_iters)
    return tvm_form if tvm_form is not None else _blockize_general(func, loop_var)


def _blockize_single(func: PrimFunc, loop_var: Var, preserve_unit_iters: bool):
    index = StmtIndex(func)
    loop = index.loop(loop_var)
    realizes = leaf_realizes(index, loop)
    if len(realizes) != 1:
        return None
    realize = realizes[0]
    block = realize.block
    if block.match_buffers or block.alloc_buffers:
        return None                      # views and allocations over the iter vars: general form
    loops = index.loops_of(realize)
    pos = next((i for i, lp in enumerate(loops) if lp is loop), None)
    if pos is None:
        return None
    inner_loops = loops[pos:]
    for parent, child in zip(inner_loops, inner_loops[1:] + [realize]):
        if parent.body is not child:
            return None                  # statements beside the nest: the general form
    outer_ids = {id(lp.loop_var) for lp in loops[:pos]}
    inner_by_id = {id(lp.loop_var): lp for lp in inner_loops}
    analyzer = _analyzer()
    unit = {lp.loop_var: lp.min for lp in loops
            if not preserve_unit_iters and isinstance(lp.extent, IntImm) and lp.extent.value == 1}
    parts = []
    for iv, value in zip(block.iter_vars, realize.iter_values):
        if not (_is_zero(iv.dom.min) and isinstance(iv.dom.extent, IntImm)):
            return None
        value = analyzer.simplify(substitute(value, unit)) if unit else value
        div = _divide(value, inner_by_id, outer_ids, analyzer)
        if div is None or iv.dom.extent.value % div[2]:
            return None
        parts.append(div)
    pred_outer, pred_inner = [], []
    for part in conjuncts(realize.predicate):
        used = var_ids(part)
        if used & set(inner_by_id) and used & outer_ids:
            return None
        (pred_inner if used & set(inner_by_id) else pred_outer).append(part)
    names = NameSupply(used_names(func))
    outer_ivars, outer_values, inner_ivars, inner_values, vmap = [], [], [], [], {}
    init_ivars, init_map = [], {}
    for iv, (outer_expr, inner_expr, extent) in zip(block.iter_vars, parts):
        outer_ext = iv.dom.extent.value // extent
        o_var = names.var(iv.var.name + "_o", iv.var.dtype)
        outer_ivars.append(IterVar(o_var, Range(IntImm(0, iv.var.dtype), IntImm(outer_ext, iv.var.dtype)),
                                   iv.kind))
        outer_values.append(outer_expr)
        outer_part = IntImm(0, iv.var.dtype) if outer_ext == 1 else \
            (o_var if extent == 1 else o_var * IntImm(extent, iv.var.dtype))
        if extent == 1:
            vmap[iv.var] = outer_part
            init_map[iv.var] = outer_part
            continue
        i_var = names.var(iv.var.name + "_i", iv.var.dtype)
        inner_ivars.append(IterVar(i_var, Range(IntImm(0, iv.var.dtype), IntImm(extent, iv.var.dtype)),
                                   iv.kind))
        inner_values.append(inner_expr)
        vmap[iv.var] = i_var if outer_ext == 1 else outer_part + i_var
        if iv.kind == "S":
            n_var = names.var(iv.var.name + "_init", iv.var.dtype)
            init_ivars.append((IterVar(n_var, Range(IntImm(0, iv.var.dtype),
                                                    IntImm(extent, iv.var.dtype)), "S"), inner_expr))
            init_map[iv.var] = n_var if outer_ext == 1 else outer_part + n_var
    outer_reduces = any(iv.kind == "R" for iv in outer_ivars)
    moved_init = block.init is not None and outer_reduces
    inner_block = block.replace(iter_vars=inner_ivars, body=substitute(block.body, vmap),
                                init=None if moved_init or block.init is None
                                else substitute(block.init, vmap),
                                reads=[substitute(r, vmap) for r in block.reads],
                                writes=[substitute(w, vmap) for w in block.writes])
    body: Stmt = BlockRealize(inner_values, conjoin(pred_inner), inner_block)
    for lp in reversed(inner_loops):
        body = For(lp.loop_var, lp.min, lp.extent, lp.kind, body, lp.thread_tag, lp.annotations)
    outer_init = None
    if moved_init:
        used = set().union(set(), *(var_ids(v) for _, v in init_ivars))
        kept = [lp for lp in inner_loops if id(lp.loop_var) in used]
        copies = {lp.loop_var: names.var(lp.loop_var.name, lp.loop_var.dtype) for lp in kept}
        init_body = substitute(block.init, init_map)
        reads, writes = infer_access_regions(init_body, analyzer=analyzer)
        init_block = Block(names.fresh(block.name + "_init"), [iv for iv, _ in init_ivars], reads,
                           writes, init_body)
        outer_init = BlockRealize([substitute(v, copies) for _, v in init_ivars], IntImm(True, "bool"),
                                  init_block)
        for lp in reversed(kept):
            outer_init = For(copies[lp.loop_var], lp.min, lp.extent, lp.kind, outer_init,
                             lp.thread_tag, lp.annotations)
    try:
        reads, writes = infer_access_regions(body, outer_init, analyzer=analyzer)
    except RegionError:
        return None
    name = names.fresh(block.name + "_o")
    outer_block = Block(name, outer_ivars, reads, writes, body, outer_init)
    outer = BlockRealize(outer_values, conjoin(pred_outer), outer_block)
    return replace_stmts(func, {loop: outer}), name


def _blockize_general(func: PrimFunc, loop_var: Var) -> tuple[PrimFunc, str]:
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
