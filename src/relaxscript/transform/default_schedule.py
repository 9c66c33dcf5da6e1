"""DefaultCPUSchedule: apply the rule-based CPU schedules to every prim_func
that is not yet marked ``{"tir.is_scheduled": True}`` (hand-scheduled
kernels keep their schedule)."""
from __future__ import annotations

from tensorir.function import PrimFunc
from tensorir.schedule_rules import SCHEDULED_ATTR, default_cpu_schedule

from ..irmodule import IRModule
from .pass_infra import Pass


class DefaultCPUSchedule(Pass):
    name = "DefaultCPUSchedule"

    def transform_module(self, mod: IRModule, ctx) -> IRModule:
        functions = dict(mod.functions)
        changed = False
        for name, func in mod.functions.items():
            if isinstance(func, PrimFunc) and not func.attrs.get(SCHEDULED_ATTR):
                functions[name] = default_cpu_schedule(func)
                changed = True
        return IRModule(functions, mod.attrs) if changed else mod
