"""DefaultCPUSchedule: apply the rule-based CPU schedules to every prim_func
that is not yet marked ``{"tir.is_scheduled": True}`` (hand-scheduled
kernels keep their schedule).

Where the best schedule depends on a symbolic size (a matmul's row count:
``n == 1`` is a GEMV, see ``tensorir/schedule_rules/variants.py``), the
function also gets specialized versions, each scheduled knowing its
condition, added to the module as ``<name>__<regime>`` and listed in the
default's ``tir.variants`` attribute; the VM picks one per call.
``DefaultCPUSchedule(variants=False)`` schedules one version only;
``variants=("one_row", "rows_x4")`` names the regimes to add (default:
``DEFAULT_REGIMES``).
"""
from __future__ import annotations

from tensorir.function import PrimFunc
from tensorir.schedule_rules import SCHEDULED_ATTR, default_cpu_schedule
from tensorir.schedule_rules.variants import DEFAULT_REGIMES, REGIMES, specialized_versions
from tensorir.variants import VARIANTS_ATTR, variant_names, with_variants

from ..irmodule import IRModule
from .pass_infra import Pass


class DefaultCPUSchedule(Pass):
    name = "DefaultCPUSchedule"

    def __init__(self, variants=True):
        if variants is True:
            variants = DEFAULT_REGIMES
        elif variants is False:
            variants = ()
        if not isinstance(variants, (tuple, list)) or any(r not in REGIMES for r in variants):
            raise ValueError(f"DefaultCPUSchedule: variants is True, False or a tuple of regimes "
                             f"({', '.join(REGIMES)}), got {variants!r}")
        self.variants = tuple(variants)

    def transform_module(self, mod: IRModule, ctx) -> IRModule:
        functions = dict(mod.functions)
        changed = False
        named_elsewhere = {v for f in mod.prim_funcs.values() for v in variant_names(f)}
        for name, func in mod.functions.items():
            if not isinstance(func, PrimFunc) or func.attrs.get(SCHEDULED_ATTR):
                continue
            functions[name] = default_cpu_schedule(func)
            changed = True
            if not self.variants or func.attrs.get(VARIANTS_ATTR) or name in named_elsewhere:
                continue   # variants are written by hand here, or this is one
            guards = []
            for cond, suffix, version in specialized_versions(func, default_cpu_schedule, self.variants):
                vname = _fresh_name(f"{name}__{suffix}", functions)
                functions[vname] = version.replace(name=vname)
                guards.append((cond, vname))
            if guards:
                functions[name] = with_variants(functions[name], guards)
        return IRModule(functions, mod.attrs) if changed else mod


def _fresh_name(base: str, taken) -> str:
    name, k = base, 1
    while name in taken:
        name, k = f"{base}_{k}", k + 1
    return name
