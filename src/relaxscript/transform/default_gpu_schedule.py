"""DefaultGPUSchedule: apply the rule-based GPU schedules to every prim_func
that is not yet marked ``{"tir.is_scheduled": True}`` (hand-scheduled
kernels keep their schedule), and count which rule scheduled each."""
from __future__ import annotations

from collections import Counter

from tensorir.function import PrimFunc
from tensorir.schedule_rules import SCHEDULED_ATTR
from tensorir.schedule_rules.gpu import GPU_RULE_ATTR, default_gpu_schedule

from ..irmodule import IRModule
from .pass_infra import Pass


def gpu_schedule_report(mod: IRModule) -> dict[str, int]:
    """``{rule name: number of prim_funcs it scheduled}`` over ``mod``; a scheduled
    function no rule touched (written by hand) counts as ``"hand"``."""
    counts = Counter()
    for func in mod.functions.values():
        if isinstance(func, PrimFunc) and func.attrs.get(SCHEDULED_ATTR):
            counts[func.attrs.get(GPU_RULE_ATTR, "hand")] += 1
    return dict(counts)


class DefaultGPUSchedule(Pass):
    """After a run, ``last_report`` maps each rule to the prim_funcs it scheduled
    in that run, by name."""
    name = "DefaultGPUSchedule"

    def __init__(self):
        self.last_report: dict[str, list[str]] = {}

    def transform_module(self, mod: IRModule, ctx) -> IRModule:
        functions = dict(mod.functions)
        report: dict[str, list[str]] = {}
        for name, func in mod.functions.items():
            if isinstance(func, PrimFunc) and not func.attrs.get(SCHEDULED_ATTR):
                scheduled = default_gpu_schedule(func)
                functions[name] = scheduled
                report.setdefault(scheduled.attrs.get(GPU_RULE_ATTR, "unscheduled"), []).append(name)
        self.last_report = report
        return IRModule(functions, mod.attrs) if report else mod
