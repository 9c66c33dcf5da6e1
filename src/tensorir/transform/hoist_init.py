"""Place a reduction's init before its reduction loops when that is legal.

A block with an ``init`` lowers to ``if <reduce vars at min>: init`` inside
the whole loop nest, which never runs when a reduction extent is 0 (e.g. a
sum over a symbolic dimension that is empty at run time): the output would
stay unwritten. When the loops around the block end with loops that each
feed reduce iter vars and nothing else (not spatial vars, not the predicate),
and no reduce var depends on a loop or iter var outside them, the init is split into its own
block before the outermost of those loops, as ``decompose_reduction`` does:
it runs exactly once per output element whatever the reduction extent.
"""
from __future__ import annotations

from ..dispatch import handles
from ..functor import Mutator, collect
from ..stmt import Block, BlockRealize, For, seq


def _uses_any(expr, var_ids: set[int]) -> bool:
    return bool(collect(expr, lambda n: id(n) in var_ids))


def _chain(loop: For):
    """The perfectly nested loops from ``loop`` down and the block realize at the bottom."""
    loops = [loop]
    body = loop.body
    while isinstance(body, For):
        loops.append(body)
        body = body.body
    return loops, body if isinstance(body, BlockRealize) else None


def _hoistable(loops, realize: BlockRealize, bound_ids: set[int]) -> bool:
    block = realize.block
    if block.init is None or not block.iter_vars:
        return False
    loop_ids = {id(lp.loop_var) for lp in loops}
    for iv, value in zip(block.iter_vars, realize.iter_values):
        # spatial, scan and opaque vars name the element the init writes: fixed over the loops
        if iv.kind != "R" and _uses_any(value, loop_ids):
            return False
        # A reduce var driven by a loop or iter var outside these loops (e.g. an outer block's
        # reduce var after blockize) is not at its min on every pass: the init must stay guarded.
        if iv.kind == "R" and _uses_any(value, bound_ids - loop_ids):
            return False
    if _uses_any(realize.predicate, loop_ids):
        return False
    # A loop feeding no reduce var repeats the whole reduction (init included) per iteration.
    reduce_values = [v for iv, v in zip(block.iter_vars, realize.iter_values) if iv.kind == "R"]
    if any(not any(_uses_any(v, {id(lp.loop_var)}) for v in reduce_values) for lp in loops):
        return False
    reduce_ids = {id(iv.var) for iv in block.iter_vars if iv.kind == "R"}
    if _uses_any(block.init, reduce_ids):
        return False
    if not _at_min_only_first(block, realize, loops):
        return False
    # the loops' bounds must not depend on each other in a way the init copy would miss
    return all(not _uses_any(lp.extent, loop_ids) and not _uses_any(lp.min, loop_ids) for lp in loops)


def _affine(expr, loops: dict):
    """``expr`` as ``{loop id: coefficient}`` plus a constant when it is a sum of loop vars
    times positive constants (None otherwise)."""
    from .. import expr as E
    if E.is_const_int(expr):
        return {}, expr.value
    if isinstance(expr, E.Var) and id(expr) in loops:
        return {id(expr): 1}, 0
    if isinstance(expr, E.Cast) and dt_is_int(expr.dtype):
        return _affine(expr.value, loops)
    if isinstance(expr, E.Add):
        a, b = _affine(expr.a, loops), _affine(expr.b, loops)
        if a is None or b is None:
            return None
        terms = dict(a[0])
        for k, c in b[0].items():
            terms[k] = terms.get(k, 0) + c
        return terms, a[1] + b[1]
    if isinstance(expr, E.Mul):
        for x, c in ((expr.a, expr.b), (expr.b, expr.a)):
            if E.is_const_int(c) and c.value > 0:
                inner = _affine(x, loops)
                if inner is None:
                    return None
                return {k: v * c.value for k, v in inner[0].items()}, inner[1] * c.value
    return None


def dt_is_int(dtype) -> bool:
    from .. import dtype as dt
    return dt.is_int(dtype)


def _at_min_only_first(block, realize: BlockRealize, loops) -> bool:
    """Whether the reduce iter vars are all at their domain minimum only on the first pass
    of ``loops`` (then a guarded init and one placed before the loops agree). A block's init
    runs where every reduce var is at its minimum (TVM's meaning, which the interpreter
    keeps); a binding that comes back to its minimum later (``vk = k * k // 2`` is 0 at
    k = 0 and k = 1) re-initialises there, so the init stays guarded in place. Recognised:
    each reduce binding is an affine sum of the loops with positive constant coefficients
    (at the loops' minimum it is the domain's), or ``A // c`` and ``A % c`` of one such sum
    ``A`` both present (the pair of a fused loop), which are both minimal only where ``A`` is."""
    from .. import expr as E
    from ..structural import structural_equal
    loop_of = {id(lp.loop_var): lp for lp in loops}
    forced: set[int] = set()
    pending: list = []
    for iv, value in zip(block.iter_vars, realize.iter_values):
        if iv.kind != "R":
            continue
        if isinstance(value, (E.FloorDiv, E.FloorMod)):   # the divisor: a positive extent
            core = _affine(value.a, loop_of)
            if core is None or not E.is_const_int(iv.dom.min, 0):
                return False
            pending.append((type(value), value.a, value.b, core))
            continue
        found = _affine(value, loop_of)
        if found is None:
            return False
        terms, const = found
        at_min = const + sum(c * loop_of[k].min.value if E.is_const_int(loop_of[k].min) else 0
                             for k, c in terms.items())
        if not all(E.is_const_int(loop_of[k].min) for k in terms) or not E.is_const_int(iv.dom.min) \
                or at_min != iv.dom.min.value:
            return False
        forced |= set(terms)
    for kind, core_expr, c, (terms, const) in pending:
        partner = E.FloorMod if kind is E.FloorDiv else E.FloorDiv
        if not any(k is partner and structural_equal(cc, c, map_free_vars=False)
                   and structural_equal(x, core_expr, map_free_vars=False) for k, x, cc, _ in pending):
            return False
        if const != 0 or not all(E.is_const_int(loop_of[k].min, 0) for k in terms):
            return False
        forced |= set(terms)
    return all(id(lp.loop_var) in forced for lp in loops)


def _split(realize: BlockRealize):
    block = realize.block
    # every iter var but the reduce ones: the init may read opaque (rolling-buffer) vars too
    spatial = [(iv, v) for iv, v in zip(block.iter_vars, realize.iter_values) if iv.kind != "R"]
    init_block = Block(block.name + "_init", [iv for iv, _ in spatial], [], block.writes, block.init,
                       annotations=block.annotations)
    update = realize.replace(block=block.replace(init=None))
    return BlockRealize([v for _, v in spatial], realize.predicate, init_block), update


class _HoistInit(Mutator):
    def __init__(self, bound_ids: set[int]):
        super().__init__()
        self.bound_ids = bound_ids

    @handles(For)
    def visit_For(self, node: For):
        loops, realize = _chain(node)
        if realize is not None and _hoistable(loops, realize, self.bound_ids):
            init, update = _split(realize)
            inner = update
            for lp in reversed(loops):
                inner = lp.replace(body=inner)
            return seq(init, inner)
        return self.generic_visit(node)


def _bound_var_ids(stmt) -> set[int]:
    """Variables that vary inside ``stmt``: loop vars and block iter vars."""
    loops = collect(stmt, lambda n: isinstance(n, For))
    blocks = collect(stmt, lambda n: isinstance(n, Block))
    return {id(lp.loop_var) for lp in loops} | {id(iv.var) for b in blocks for iv in b.iter_vars}


def hoist_inits(stmt, bound_ids: set[int] | None = None):
    """``stmt`` with hoistable inits split out; ``bound_ids``: ids of every loop and iter var
    of the enclosing function when ``stmt`` is only a part of it (default: ``stmt``'s own)."""
    return _HoistInit(_bound_var_ids(stmt) if bound_ids is None else bound_ids).visit(stmt)


def bound_var_ids(stmt) -> set[int]:
    return _bound_var_ids(stmt)
