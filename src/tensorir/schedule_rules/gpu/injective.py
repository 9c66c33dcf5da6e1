"""The GPU injective rule (elementwise, broadcast, transpose, reshape, concat...).

Applies when no block reduces and every loop of every remaining stage binds
a spatial iter var. Spatial intermediates are inlined into their consumers,
then each output's whole loop nest is fused into one loop, split by a
constant thread count (the split's predicate covers extents it does not
divide, n = 1 included) and bound to blockIdx.x / threadIdx.x.
"""
from __future__ import annotations

from ...errors import ScheduleError
from ...schedule import Schedule
from ..common import inline_spatial_intermediates, is_reduction_block, leaf_block_names, loop_kinds
from .common import bind_spatial_nest


def schedule_injective(sch: Schedule) -> None:
    names = leaf_block_names(sch)
    if any(is_reduction_block(sch, n) for n in names):
        raise ScheduleError("injective rule: the function has a reduction block")
    inline_spatial_intermediates(sch)
    for name in leaf_block_names(sch):
        loops = sch.get_loops(sch.get_block(name))
        kinds = loop_kinds(sch, name, loops)
        if any(k != "S" for k in kinds):
            raise ScheduleError(f"injective rule: block {name!r} has loops {kinds!r}, not all spatial")
        if loops:
            bind_spatial_nest(sch, loops)
