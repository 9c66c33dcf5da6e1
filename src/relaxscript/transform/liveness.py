"""Liveness of explicit allocations in one binding scope (a function body or an If branch).

The tracked objects are the variables bound by ``R.builtin.alloc_tensor``
and ``R.memory.alloc_storage``. A tensor made by ``R.memory.alloc_tensor``
aliases its storage, so using the tensor keeps the storage alive.

Aliasing is tracked conservatively: the value of any binding that is not a
lowered memory operation may alias every tracked object its expression
mentions (an operator's NumPy result can be a view of its input, a called
function may return its argument, a closure captures what it mentions).
Tuples and ``tuple[i]`` are tracked field by field, so an unused field of a
multi-output call dies early; an If's result aliases what its branches'
results alias (though every object a branch mentions is used by the If).
Objects reachable from the scope's result escape: they are never planned or killed.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from tensorir.functor import collect

from ..expr import Call, If, Op, Tuple, TupleGetItem, Var
from ..op import memory as mem

# Calls whose result aliases nothing tracked (void results, or fresh objects).
_NO_ALIAS_OPS = {mem.CALL_TIR_DPS, mem.CALL_DPS_LIBRARY_DPS, mem.KILL_STORAGE, mem.KILL_TENSOR}
TRACKED_ALLOC_OPS = {mem.BUILTIN_ALLOC_TENSOR, mem.ALLOC_STORAGE}
_KILL_OPS = {mem.KILL_STORAGE, mem.KILL_TENSOR}


def op_name(value) -> str | None:
    """The operator name of a call of an Op, else None."""
    if isinstance(value, Call) and isinstance(value.op, Op):
        return value.op.name
    return None


def flat(alias) -> frozenset:
    """Every tracked object an alias (a frozenset, or a tuple of aliases per field) may reach."""
    if isinstance(alias, tuple):
        out = frozenset()
        for item in alias:
            out |= flat(item)
        return out
    return alias


_EMPTY = frozenset()


@dataclass
class ScopeLiveness:
    """Per binding index: what is defined, used and dead. ``len(bindings)`` as a
    last use means "live until the scope ends" (the object escapes)."""
    bindings: list
    defined_at: dict = field(default_factory=dict)   # tracked Var -> index of its allocation
    last_use: dict = field(default_factory=dict)     # tracked Var -> last index it is used at
    escaping: set = field(default_factory=set)
    killed: set = field(default_factory=set)         # objects some kill already frees
    storage_of: dict = field(default_factory=dict)   # memory.alloc_tensor Var -> storage Var

    def dead_after(self) -> dict[int, list]:
        """index -> tracked objects whose last use is that binding (escaping ones excluded)."""
        out: dict[int, list] = {}
        for var, index in self.last_use.items():
            if var not in self.escaping:
                out.setdefault(index, []).append(var)
        return out


class _AliasTracker:
    def __init__(self, alias: dict | None = None):
        self.alias: dict[Var, object] = dict(alias or {})

    def bind(self, binding) -> None:
        """Record what ``binding.var`` may alias."""
        value, var = binding.value, binding.var
        name = op_name(value)
        if name in TRACKED_ALLOC_OPS:
            self.alias[var] = frozenset([var])
        elif name == mem.MEMORY_ALLOC_TENSOR:
            self.alias[var] = self.of(value.args[0])
        elif name in _NO_ALIAS_OPS:
            self.alias[var] = _EMPTY
        else:
            self.alias[var] = self.of(value)

    def of(self, expr):
        if isinstance(expr, Var):
            return self.alias.get(expr, _EMPTY)
        if isinstance(expr, Tuple):
            return tuple(self.of(f) for f in expr.fields)
        if isinstance(expr, TupleGetItem):
            base = self.of(expr.tuple_value)
            if isinstance(base, tuple) and -len(base) <= expr.index < len(base):
                return base[expr.index]
            return flat(base)
        if isinstance(expr, If):  # what either branch's result may alias
            return self._branch_result(expr.true_branch) | self._branch_result(expr.false_branch)
        return self.mentioned(expr)

    def _branch_result(self, branch) -> frozenset:
        inner = _AliasTracker(self.alias)
        for block in branch.blocks:
            for binding in block.bindings:
                inner.bind(binding)
        return flat(inner.of(branch.body))

    def mentioned(self, expr) -> frozenset:
        out = frozenset()
        for var in collect(expr, lambda n: isinstance(n, Var)):
            out |= flat(self.alias.get(var, _EMPTY))
        return out


def analyze_scope(bindings: list, result) -> ScopeLiveness:
    """Liveness of the tracked allocations among ``bindings`` (in order) whose scope
    ends with the expression ``result``."""
    live = ScopeLiveness(list(bindings))
    tracker = _AliasTracker()
    for index, binding in enumerate(bindings):
        value, var = binding.value, binding.var
        name = op_name(value)
        # Only objects allocated in this scope: an If's result may alias allocations local to
        # its branches, which escape their branch and are neither planned nor killed here.
        used = frozenset(obj for obj in tracker.mentioned(value) if obj in live.defined_at)
        for obj in used:
            live.last_use[obj] = index
        if name in _KILL_OPS:
            live.killed |= used
        if name in TRACKED_ALLOC_OPS:
            live.defined_at[var] = index
            live.last_use[var] = index
        elif name == mem.MEMORY_ALLOC_TENSOR and isinstance(value.args[0], Var):
            live.storage_of[var] = value.args[0]
        tracker.bind(binding)
    end = len(bindings)
    for obj in flat(tracker.of(result)):
        if obj not in live.defined_at:
            continue
        live.escaping.add(obj)
        live.last_use[obj] = end
    return live


__all__ = ["ScopeLiveness", "analyze_scope", "op_name", "flat", "TRACKED_ALLOC_OPS"]
