"""The GPU fallback rule: applies to every function and never fails.

Each stage (root-level block nest) gets its spatial loops moved outermost
where its nest allows (a reduction keeps its order per output), then its
leading spatial loops fused,
split by a constant thread count and bound to blockIdx.x / threadIdx.x;
the rest of its nest (reductions included) runs serially in each thread.
A stage with no leading spatial loop (a full reduction, a scalar), or one
whose primitives do not apply, stays unbound: the GPU lowering runs it as
its own single-thread launch, slow but correct.
"""
from __future__ import annotations

from ...errors import ScheduleError
from ...schedule import Schedule
from ..common import attempt, inline_spatial_intermediates, leaf_block_names, loop_kinds
from .common import bind_spatial_nest, leading_spatial


def schedule_fallback(sch: Schedule) -> None:
    inline_spatial_intermediates(sch)
    for name in leaf_block_names(sch):
        loops = sch.get_loops(sch.get_block(name))
        kinds = loop_kinds(sch, name, loops)
        spatial = [lp for lp, k in zip(loops, kinds) if k == "S"]
        if leading_spatial(sch, name, loops) < len(spatial):
            attempt(sch.reorder, *spatial, *[lp for lp, k in zip(loops, kinds) if k != "S"])
            loops = sch.get_loops(sch.get_block(name))
        lead = leading_spatial(sch, name, loops)
        if lead == 0:
            continue
        try:
            bind_spatial_nest(sch, loops[:lead])
        except ScheduleError:
            # a failed primitive leaves the function as it was before it, and a partly
            # split or bound nest computes the same: the stage keeps what applied
            continue
