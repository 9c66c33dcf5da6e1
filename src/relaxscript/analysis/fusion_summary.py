"""Fusion report: each kernel a module calls, its pattern kind, and what it fused.

A kernel is a prim_func called through ``R.call_tir`` from a graph-level
function. Its pattern kind is the ``op_pattern`` attribute when present
(AnnotateTIROpPattern, FuseTIR), else Algorithm 1 run on its loops. What it
fused comes from the ``fused_from`` attribute that FuseOps puts on subgraph
functions and FuseTIR on merged prim_funcs; an unfused kernel lists itself.
"""
from __future__ import annotations

from typing import NamedTuple

from tensorir.function import PrimFunc
from tensorir.functor import collect

from ..expr import Call, GlobalVar
from ..irmodule import IRModule

FUSED_FROM_ATTR = "fused_from"  # the attribute FuseOps / FuseTIR write


class KernelSummary(NamedTuple):
    kernel_name: str
    pattern_kind: str
    fused_ops: tuple
    calls: int            # call_tir sites in graph-level functions
    group: str | None     # the primitive subgraph function it is called from, if any


def fusion_table(mod: IRModule) -> list[KernelSummary]:
    """One row per called kernel, in order of first call (module function order)."""
    from ..transform.annotate_op_pattern import pattern_of  # late: transform imports analysis

    counts: dict[str, int] = {}
    groups: dict[str, str | None] = {}
    for func_name, func in mod.relax_functions.items():
        group = func_name if func.attrs.get("primitive") else None
        for call in collect(func, lambda n: isinstance(n, Call)):
            if getattr(call.op, "name", None) != "relax.call_tir" or not call.args:
                continue
            callee = call.args[0]
            if isinstance(callee, GlobalVar) and isinstance(mod.functions.get(callee.name_hint), PrimFunc):
                counts[callee.name_hint] = counts.get(callee.name_hint, 0) + 1
                groups.setdefault(callee.name_hint, group)
    rows = []
    for name, count in counts.items():
        kernel = mod[name]
        fused = tuple(kernel.attrs.get(FUSED_FROM_ATTR, (name,)))
        rows.append(KernelSummary(name, pattern_of(kernel).name, fused, count, groups[name]))
    return rows


def fusion_summary(mod: IRModule) -> str:
    """The fusion table as aligned text, with a kernel count on the last line."""
    rows = fusion_table(mod)
    header = ("kernel", "pattern", "calls", "fused ops")
    lines = [(r.kernel_name if r.group is None else f"{r.kernel_name} (in {r.group})",
              r.pattern_kind, str(r.calls), ", ".join(r.fused_ops)) for r in rows]
    widths = [max([len(header[i])] + [len(line[i]) for line in lines]) for i in range(3)]

    def fmt(cells) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells[:3], widths)) + "  " + cells[3]

    out = [fmt(header), fmt(tuple("-" * w for w in widths) + ("-" * 9,))]
    out += [fmt(line) for line in lines]
    out.append(f"{len(rows)} kernel(s), {sum(r.calls for r in rows)} call_tir site(s)")
    return "\n".join(out)


__all__ = ["KernelSummary", "fusion_summary", "fusion_table"]
