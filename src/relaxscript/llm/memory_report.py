"""Activation memory of the compiled functions, with the static memory plan and without.

With the plan, a function's intermediate tensors share the storages
StaticPlanBlockMemory assigned (sized at the symbolic bounds: the cache
length ``t`` at its capacity); without it, every intermediate is its own
allocation. Both are byte counts at the bounds; tensors the plan leaves
to ``alloc_tensor`` (results, escaping values) count on both sides. The KV
caches and the weights are arguments, not activations, and are not counted
there; ``kv_cache_bytes`` sizes the caches a function takes (half as many bytes
with a float16 cache).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..analysis.memory_plan import memory_plan_info
from ..irmodule import IRModule

CACHE_PARAM_PREFIX = "cache_"    # the model's cache parameters: cache_k_<layer>, cache_v_<layer>


@dataclass(frozen=True)
class ActivationMemory:
    function: str
    planned_bytes: int | None      # storages of the plan + unplanned tensors
    unplanned_bytes: int | None    # every intermediate tensor allocated on its own
    storages: int
    tensors: int

    @property
    def saving(self) -> float | None:
        if not self.planned_bytes or not self.unplanned_bytes:
            return None
        return 1.0 - self.planned_bytes / self.unplanned_bytes


def activation_memory(lowered: IRModule) -> dict[str, ActivationMemory]:
    """Per function of a module the pipeline has lowered (``Engine.lowered_mod``)."""
    report = {}
    for name, plan in memory_plan_info(lowered).items():
        planned_tensors = [t for s in plan.storages for t in s.tensors]
        sizes = [t.size_at_bounds for t in planned_tensors + plan.unplanned]
        extra = [t.size_at_bounds for t in plan.unplanned]
        with_plan = None if plan.planned_bytes_at_bounds is None or None in extra \
            else plan.planned_bytes_at_bounds + sum(extra)
        without = None if None in sizes else sum(sizes)
        report[name] = ActivationMemory(name, with_plan, without, len(plan.storages), len(sizes))
    return report


def kv_cache_bytes(mod: IRModule, function: str = "decode") -> int:
    """Bytes of the KV cache tensors ``function`` takes (its ``cache_*`` parameters, sized from
    their static shapes and dtype)."""
    total = 0
    for param in mod[function].params:
        if not param.name_hint.startswith(CACHE_PARAM_PREFIX):
            continue
        sinfo = param.struct_info
        total += int(np.prod([int(d.value) for d in sinfo.shape])) * np.dtype(sinfo.dtype).itemsize
    return total
