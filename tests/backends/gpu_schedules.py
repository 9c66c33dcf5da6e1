"""Simple GPU schedules for tests: bind every block's loops to blocks and threads.

``bind_everything(func, threads, reduce_threads)`` schedules each leaf block
of ``func`` on its own:
* spatial loops (fed only by spatial iter vars) are fused, split by
  ``threads`` (a constant that need not divide the extent: the split's
  predicate guards the tail) and bound to blockIdx.x / threadIdx.x;
* with ``reduce_threads``, a block's innermost reduction loops are fused,
  split by ``reduce_threads`` and the inner part bound to threadIdx.x (a
  cross-thread reduction); its spatial loops then go to blockIdx.x only
  (one output element per block);
* a block whose loops cannot be treated so stays unbound (run by one thread).
"""
from __future__ import annotations

import tensorir as tir
from tensorir.functor import collect
from tensorir.schedule.state import StmtIndex


def _leaf_blocks(func) -> list[str]:
    blocks = collect(func.body, lambda n: isinstance(n, tir.Block))
    return [b.name for b in blocks if b.name != "root" and
            not collect(b.body, lambda n: isinstance(n, tir.Block))]


def _loop_kinds(sch, name) -> list[str]:
    """'S' / 'R' / 'M' (mixed or unused) per loop of block ``name``, outermost first."""
    index = StmtIndex(sch.func)
    realize = index.realize(name)
    kinds = []
    for loop in index.loops_of(realize):
        uses = {iv.kind for iv, value in zip(realize.block.iter_vars, realize.iter_values)
                if collect(value, lambda n, v=loop.loop_var: n is v)}
        kinds.append(uses.pop() if len(uses) == 1 else "M")
    return kinds


def bind_everything(func, threads: int, reduce_threads: int | None = None):
    sch = tir.Schedule(func)
    for name in _leaf_blocks(sch.func):
        block = sch.get_block(name)
        loops = sch.get_loops(block)
        kinds = _loop_kinds(sch, name)
        n_spatial = 0
        while n_spatial < len(kinds) and kinds[n_spatial] == "S":
            n_spatial += 1
        spatial, rest = loops[:n_spatial], loops[n_spatial:]
        cross = reduce_threads is not None and rest and all(k == "R" for k in kinds[n_spatial:])
        if cross:
            fused = sch.fuse(*rest) if len(rest) > 1 else rest[0]
            _, inner = sch.split(fused, [None, reduce_threads])
            sch.bind(inner, "threadIdx.x")
            if spatial:
                outer = sch.fuse(*spatial) if len(spatial) > 1 else spatial[0]
                sch.bind(outer, "blockIdx.x")
            continue
        if not spatial:
            continue
        fused = sch.fuse(*spatial) if len(spatial) > 1 else spatial[0]
        outer, inner = sch.split(fused, [None, threads])
        sch.bind(outer, "blockIdx.x")
        sch.bind(inner, "threadIdx.x")
    return sch.func
