"""Loop primitives: split, fuse, reorder, loop kinds (parallel / vectorize /
unroll / bind) and annotations."""
from __future__ import annotations

from ..dispatch import handles
from ..errors import ScheduleError
from ..expr import And, IntImm, LT, PrimExpr, Var, convert, floordiv, floormod
from ..function import PrimFunc
from ..functor import Mutator, substitute
from ..stmt import Block, BlockRealize, For, IfThenElse, LetStmt, SeqStmt, Stmt, is_true
from .checks import binding_loop_vars, leaf_realizes, var_ids
from .loop_checks import (require_affine_predicates, require_not_opaque, require_quasi_affine,
                          require_unbound_unannotated)
from .region import _analyzer
from .state import NameSupply, StmtIndex, replace_stmts, used_names

THREAD_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y", "threadIdx.z",
               "vthread.x", "vthread.y", "vthread.z")


# ----------------------------------------------------------------- split
def split(func: PrimFunc, loop_var: Var, factors) -> tuple[PrimFunc, list[Var]]:
    index = StmtIndex(func)
    loop = index.loop(loop_var)
    where = f"split of loop {loop_var.name!r}"
    require_unbound_unannotated(loop, where)
    factors = list(factors)
    if len(factors) < 2:
        raise ScheduleError(f"{where}: need at least two factors, got {factors!r}")
    if sum(f is None for f in factors) > 1:
        raise ScheduleError(f"{where}: at most one factor may be None, got {factors!r}")
    analyzer = _analyzer()
    dtype = loop_var.dtype
    known: list[PrimExpr | None] = []
    for f in factors:
        if f is None:
            known.append(None)
            continue
        if isinstance(f, bool) or not isinstance(f, (int, PrimExpr)):
            raise ScheduleError(f"{where}: factor {f!r} is not an integer or PrimExpr")
        if isinstance(f, int) and f < 1:
            raise ScheduleError(f"{where}: factors must be positive, got {f}")
        known.append(IntImm(f, dtype) if isinstance(f, int) else convert(f))
    product = IntImm(1, dtype)
    for f in known:
        if f is not None:
            product = product * f
    if None in known:
        missing = analyzer.simplify(floordiv(loop.extent + product - 1, product))
        known = [missing if f is None else f for f in known]
        product = product * missing
    elif not analyzer.can_prove(product >= loop.extent):
        raise ScheduleError(f"{where}: the product of factors {factors!r} does not cover extent "
                            f"{loop.extent!r}")
    exact = analyzer.can_prove_equal(product, loop.extent)

    names = NameSupply(used_names(func))
    new_vars = [names.var(f"{loop_var.name}_{k}", dtype) for k in range(len(known))]
    fused = IntImm(0, dtype)
    for v, f in zip(new_vars, known):
        fused = fused * f + v
    fused = analyzer.simplify(fused)
    body = substitute(loop.body, {loop_var: analyzer.simplify(loop.min + fused)})
    body = _BindingSimplifier(analyzer).visit(body)
    if not exact:
        body = add_predicate(body, LT(fused, loop.extent), where)
    for v, f in reversed(list(zip(new_vars, known))):
        body = For(v, 0, f, "serial", body)
    return replace_stmts(func, {loop: body}), new_vars


class _BindingSimplifier(Mutator):
    """Simplify block bindings and predicates after loop variables were substituted
    (a substituted constant would otherwise leave literal arithmetic like ``0 + 0``)."""

    def __init__(self, analyzer):
        super().__init__()
        self.analyzer = analyzer

    @handles(BlockRealize)
    def visit_BlockRealize(self, node: BlockRealize):
        return node.replace(iter_values=tuple(self.analyzer.simplify(v) for v in node.iter_values),
                            predicate=self.analyzer.simplify(node.predicate),
                            block=self.visit(node.block))

    @handles(PrimExpr)
    def visit_PrimExpr(self, node):
        return node


def add_predicate(stmt: Stmt, cond: PrimExpr, where: str) -> Stmt:
    """AND ``cond`` into the predicate of every outermost block realize under ``stmt``."""
    if isinstance(stmt, BlockRealize):
        pred = cond if is_true(stmt.predicate) else And(stmt.predicate, cond)
        return stmt.replace(predicate=pred)
    if isinstance(stmt, SeqStmt):
        return SeqStmt([add_predicate(s, cond, where) for s in stmt.seq])
    if isinstance(stmt, (For, LetStmt)):
        return stmt.replace(body=add_predicate(stmt.body, cond, where))
    if isinstance(stmt, IfThenElse):
        else_case = None if stmt.else_case is None else add_predicate(stmt.else_case, cond, where)
        return stmt.replace(then_case=add_predicate(stmt.then_case, cond, where), else_case=else_case)
    raise ScheduleError(f"{where}: the factors do not divide the extent and the loop holds "
                        f"a {type(stmt).__name__} outside any block, which a predicate cannot guard")


# ----------------------------------------------------------------- fuse
def fuse(func: PrimFunc, loop_vars: list[Var]) -> tuple[PrimFunc, Var]:
    index = StmtIndex(func)
    loops = [index.loop(v) for v in loop_vars]
    names_str = ", ".join(repr(v.name) for v in loop_vars)
    if not loops:
        raise ScheduleError("fuse: need at least one loop")
    for loop in loops:
        require_unbound_unannotated(loop, f"fuse of loops {names_str}")
    for outer, inner in zip(loops, loops[1:]):
        if outer.body is not inner:
            raise ScheduleError(f"fuse of loops {names_str}: loop {inner.loop_var.name!r} is not the "
                                f"only statement in the body of loop {outer.loop_var.name!r}")
    outer_ids = set()
    for loop in loops:
        if var_ids(loop.min) & outer_ids or var_ids(loop.extent) & outer_ids:
            raise ScheduleError(f"fuse of loops {names_str}: the range of loop {loop.loop_var.name!r} "
                                "depends on an outer loop being fused")
        outer_ids.add(id(loop.loop_var))
    analyzer = _analyzer()
    dtype = loop_vars[0].dtype
    names = NameSupply(used_names(func))
    fused_var = names.var("_".join(v.name for v in loop_vars) + "_fused", dtype)
    vmap = {}
    stride = IntImm(1, dtype)
    for k in range(len(loops) - 1, -1, -1):
        loop = loops[k]
        part = floordiv(fused_var, stride) if k < len(loops) - 1 else fused_var
        if k > 0:
            part = floormod(part, loop.extent)
        vmap[loop.loop_var] = analyzer.simplify(loop.min + part)
        stride = stride * loop.extent
    body = _BindingSimplifier(analyzer).visit(substitute(loops[-1].body, vmap))
    new_loop = For(fused_var, 0, analyzer.simplify(stride), "serial", body)
    return replace_stmts(func, {loops[0]: new_loop}), fused_var


# ----------------------------------------------------------------- reorder
def reorder(func: PrimFunc, loop_vars: list[Var]) -> PrimFunc:
    index = StmtIndex(func)
    loops = [index.loop(v) for v in loop_vars]
    if len({id(v) for v in loop_vars}) != len(loop_vars):
        raise ScheduleError("reorder: the same loop is given twice")
    names_str = ", ".join(repr(v.name) for v in loop_vars)
    by_depth = sorted(loops, key=lambda lp: index.order[id(lp)])
    chain = [by_depth[0]]
    wanted = {id(lp) for lp in loops}
    found = 1
    while found < len(loops):
        nxt = chain[-1].body
        if not isinstance(nxt, For):
            raise ScheduleError(f"reorder of loops {names_str}: they are not in one perfectly nested "
                                f"chain (loop {chain[-1].loop_var.name!r} has a non-loop body)")
        chain.append(nxt)
        found += id(nxt) in wanted
    slots = [i for i, lp in enumerate(chain) if id(lp) in wanted]
    new_chain = list(chain)
    for slot, loop in zip(slots, loops):
        new_chain[slot] = loop
    _require_reductions_keep_order(index, chain, new_chain, names_str)
    moved = {id(lp.loop_var) for old, lp in zip(chain, new_chain) if old is not lp}
    under = leaf_realizes(index, chain[0])
    require_quasi_affine(under, {id(lp.loop_var) for lp in chain}, f"reorder of loops {names_str}")
    require_affine_predicates(under, moved, f"reorder of loops {names_str}")
    for pos, loop in enumerate(new_chain):
        inner_ids = {id(lp.loop_var) for lp in new_chain[pos + 1:]}
        if var_ids(loop.min) & inner_ids or var_ids(loop.extent) & inner_ids:
            raise ScheduleError(f"reorder of loops {names_str}: the range of loop "
                                f"{loop.loop_var.name!r} depends on a loop that would be inside it")
    body = chain[-1].body
    for loop in reversed(new_chain):
        body = loop.replace(body=body)
    return replace_stmts(func, {chain[0]: body})


def _require_reductions_keep_order(index: StmtIndex, chain: list[For], new_chain: list[For],
                                   names_str: str) -> None:
    """Every output element's init must still run before its other reduction steps.

    Loops that each bind only spatial or only reduction iter vars of a block may be permuted:
    an element's first step is then still its first instance. Two cases are refused:
    moving a loop that binds both kinds (a fused spatial x reduce loop, or a piece of one)
    interleaves elements' steps; and moving a loop the block does not bind across one of its
    reduction loops changes how often the init re-runs within the reduction.
    """
    old_pos = {id(lp): k for k, lp in enumerate(chain)}
    new_pos = {id(lp): k for k, lp in enumerate(new_chain)}
    for realize in leaf_realizes(index, chain[0]):
        spatial, reduce = binding_loop_vars(realize)
        if not reduce:
            continue
        for slot, loop in enumerate(new_chain):
            lid = id(loop.loop_var)
            if loop is not chain[slot] and lid in spatial and lid in reduce:
                raise ScheduleError(f"reorder of loops {names_str}: loop {loop.loop_var.name!r} binds both "
                                    f"spatial and reduction iter vars of block {realize.block.name!r}; "
                                    "moving it would run reduction updates before their init")
        unbound = [lp for lp in chain if id(lp.loop_var) not in spatial | reduce]
        reducing = [lp for lp in chain if id(lp.loop_var) in reduce]
        for u in unbound:
            for r in reducing:
                if (old_pos[id(u)] < old_pos[id(r)]) != (new_pos[id(u)] < new_pos[id(r)]):
                    raise ScheduleError(f"reorder of loops {names_str}: loop {u.loop_var.name!r} is not "
                                        f"used by block {realize.block.name!r} and would cross its "
                                        f"reduction loop {r.loop_var.name!r}, changing how often the "
                                        "reduction restarts from its init")


# ----------------------------------------------------------------- loop kinds
def set_kind(func: PrimFunc, loop_var: Var, kind: str, thread_tag: str | None = None) -> PrimFunc:
    index = StmtIndex(func)
    loop = index.loop(loop_var)
    label = {"parallel": "parallel", "vectorized": "vectorize", "unrolled": "unroll",
             "thread_binding": "bind", "serial": "serial"}[kind]
    where = f"{label} of loop {loop_var.name!r}"
    if kind == "thread_binding" and thread_tag not in THREAD_TAGS:
        raise ScheduleError(f"{where}: unknown thread axis {thread_tag!r}; expected one of "
                            f"{', '.join(THREAD_TAGS)}")
    if kind in ("parallel", "vectorized", "thread_binding"):
        realizes = leaf_realizes(index, loop)
        if not realizes:
            raise ScheduleError(f"{where}: the loop contains no block")
        if kind == "vectorized":
            require_not_opaque(realizes, loop, where)
        loop_ids = set(index.loop_by_var)
        require_quasi_affine(realizes, loop_ids, where)
        # A loop feeding only reduce iter vars may go to threadIdx.*: the GPU lowering makes it a
        # cross-thread reduction (backends/gpu/cross_thread_reduce.py); elsewhere it would race.
        cross_thread = kind == "thread_binding" and thread_tag.startswith("threadIdx.")
        for realize in realizes:
            spatial, reduce = binding_loop_vars(realize)
            if cross_thread and id(loop_var) in reduce and id(loop_var) not in spatial:
                continue
            if id(loop_var) in reduce:
                raise ScheduleError(f"{where}: the loop binds reduction iter var(s) of block "
                                    f"{realize.block.name!r}; iterations would race"
                                    + ("" if kind != "thread_binding" else
                                       " (only a loop feeding reduce iter vars alone may be bound, "
                                       "to threadIdx.*)"))
            if id(loop_var) not in spatial and not _writes_vary(realize) \
                    and not (kind == "thread_binding" and _private_to(realize, thread_tag)):
                raise ScheduleError(f"{where}: block {realize.block.name!r} does not depend on the "
                                    "loop, so its iterations would write the same elements")
    new_loop = loop.replace(kind=kind, thread_tag=thread_tag if kind == "thread_binding" else None)
    return replace_stmts(func, {loop: new_loop})


def _private_to(realize: BlockRealize, thread_tag: str) -> bool:
    """Every buffer the block writes has a copy per value of the bound axis: "local"
    memory per thread, "shared" memory per block (a tile each block loads for itself)."""
    scopes = ("local",) if thread_tag.startswith("threadIdx") else ("local", "shared")
    return bool(realize.block.writes) and all(w.buffer.scope in scopes for w in realize.block.writes)


def _writes_vary(realize: BlockRealize) -> bool:
    """A block with no iter vars at all (opaque) is trusted to index by outer loops itself."""
    return not realize.block.iter_vars


# ----------------------------------------------------------------- annotations
def _check_annotation_value(value, where: str):
    if isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_check_annotation_value(v, where) for v in value]
    raise ScheduleError(f"{where}: annotation value {value!r} must be a bool, int, float, str or "
                        "a list of those")


def annotate(func: PrimFunc, target: str | Var, key: str, value) -> PrimFunc:
    index = StmtIndex(func)
    node: Block | For = index.realize(target).block if isinstance(target, str) else index.loop(target)
    what = f"block {target!r}" if isinstance(target, str) else f"loop {target.name!r}"
    if not isinstance(key, str) or not key:
        raise ScheduleError(f"annotate of {what}: key must be a non-empty string, got {key!r}")
    value = _check_annotation_value(value, f"annotate of {what}")
    annotations = dict(node.annotations)
    annotations[key] = value
    return replace_stmts(func, {node: node.replace(annotations=annotations)})


def unannotate(func: PrimFunc, target: str | Var, key: str) -> PrimFunc:
    index = StmtIndex(func)
    node = index.realize(target).block if isinstance(target, str) else index.loop(target)
    what = f"block {target!r}" if isinstance(target, str) else f"loop {target.name!r}"
    if key not in node.annotations:
        raise ScheduleError(f"unannotate of {what}: no annotation {key!r}")
    annotations = {k: v for k, v in node.annotations.items() if k != key}
    return replace_stmts(func, {node: node.replace(annotations=annotations)})


