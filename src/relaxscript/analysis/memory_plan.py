"""Report of a module's memory plan: storages, their sizes, and the tensors sharing them.

``memory_plan(mod)`` returns a readable table; ``memory_plan_info(mod)`` the
structured form. Sizes are in bytes, symbolic (``n * 8``) and evaluated at the
upper bounds of the symbolic variables (``T.int64(upper=...)`` facts or the
function attribute ``relax.memory_upper_bound``) where those exist. Tensors
still allocated by ``R.builtin.alloc_tensor`` (escaping or unplanned) are
listed separately; they are not part of the planned total.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from tensorir import expr as E
from tensorir.functor import collect

from ..expr import Call, Function, Op, VarBinding
from ..irmodule import IRModule


@dataclass
class TensorInfo:
    name: str
    shape: tuple
    dtype: str
    size: E.PrimExpr            # bytes
    size_at_bounds: int | None


@dataclass
class StorageInfo:
    name: str
    size: E.PrimExpr
    size_at_bounds: int | None
    tensors: list = field(default_factory=list)


@dataclass
class FunctionMemoryPlan:
    name: str
    storages: list = field(default_factory=list)
    unplanned: list = field(default_factory=list)
    planned_bytes: E.PrimExpr = field(default_factory=lambda: E.IntImm(0))
    planned_bytes_at_bounds: int | None = 0


def _op(value) -> str | None:
    return value.op.name if isinstance(value, Call) and isinstance(value.op, Op) else None


def _plan_of(name: str, func: Function) -> FunctionMemoryPlan:
    from ..transform.static_plan_block_memory import bounds_analyzer, size_in_bytes
    analyzer = bounds_analyzer(func, f"function '{name}'")

    def at_bounds(size):
        return analyzer.const_int_bound(size)[1]

    plan = FunctionMemoryPlan(name)
    storages = {}
    for binding in collect(func.body, lambda n: isinstance(n, VarBinding)):
        value, op = binding.value, _op(binding.value)
        if op == "relax.memory.alloc_storage":
            size = analyzer.simplify(value.args[0].values[0])
            storages[binding.var] = StorageInfo(binding.var.name_hint, size, at_bounds(size))
            plan.storages.append(storages[binding.var])
        elif op in ("relax.memory.alloc_tensor", "relax.builtin.alloc_tensor"):
            shape = value.args[-1].values
            size = analyzer.simplify(size_in_bytes(shape, value.attrs["dtype"]))
            info = TensorInfo(binding.var.name_hint, shape, value.attrs["dtype"], size, at_bounds(size))
            owner = storages.get(value.args[0]) if op == "relax.memory.alloc_tensor" else None
            (owner.tensors if owner is not None else plan.unplanned).append(info)
    total = E.IntImm(0)
    for storage in plan.storages:
        total = total + storage.size
    plan.planned_bytes = analyzer.simplify(total)
    bounded = [s.size_at_bounds for s in plan.storages]
    plan.planned_bytes_at_bounds = None if None in bounded else sum(bounded)
    return plan


def memory_plan_info(mod: IRModule) -> dict[str, FunctionMemoryPlan]:
    """Per graph-level function, its storages and unplanned allocations."""
    return {name: _plan_of(name, func) for name, func in mod.relax_functions.items()}


def _fmt(expr) -> str:
    from tensorir.script.printer import format_expr
    return format_expr(expr)


def _fmt_bound(value) -> str:
    return "unbounded" if value is None else str(value)


def _fmt_tensor(t: TensorInfo) -> str:
    return f"{t.name}({', '.join(_fmt(d) for d in t.shape)}) {t.dtype}"


def memory_plan(mod: IRModule) -> str:
    """A table per function: storage, size (symbolic), size at bounds, tensors sharing it."""
    lines = []
    for plan in memory_plan_info(mod).values():
        lines.append(f"function '{plan.name}': {len(plan.storages)} storage(s), "
                     f"{sum(len(s.tensors) for s in plan.storages)} planned tensor(s)")
        rows = [("storage", "bytes", "at bounds", "tensors")]
        rows += [(s.name, _fmt(s.size), _fmt_bound(s.size_at_bounds),
                  "; ".join(_fmt_tensor(t) for t in s.tensors)) for s in plan.storages]
        widths = [max(len(r[i]) for r in rows) for i in range(3)]
        for row in rows:
            lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(row[:3], widths)) + "  " + row[3])
        lines.append(f"  planned total: {_fmt(plan.planned_bytes)} bytes "
                     f"({_fmt_bound(plan.planned_bytes_at_bounds)} at bounds)")
        for t in plan.unplanned:
            lines.append(f"  unplanned: {_fmt_tensor(t)}, {_fmt(t.size)} bytes "
                         f"({_fmt_bound(t.size_at_bounds)} at bounds)")
    return "\n".join(lines) + "\n"


__all__ = ["memory_plan", "memory_plan_info", "FunctionMemoryPlan", "StorageInfo", "TensorInfo"]
