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
        if iv.kind == "S" and _uses_any(value, loop_ids):
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
    # the loops' bounds must not depend on each other in a way the init copy would miss
    return all(not _uses_any(lp.extent, loop_ids) and not _uses_any(lp.min, loop_ids) for lp in loops)


def _split(realize: BlockRealize):
    block = realize.block
    spatial = [(iv, v) for iv, v in zip(block.iter_vars, realize.iter_values) if iv.kind == "S"]
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
