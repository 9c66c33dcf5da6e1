"""DeadCodeElimination: drop unused pure bindings, empty blocks and unreachable functions.

A binding is removed when its variable is never used afterwards and its
value cannot have an effect: it contains no call of an impure operator,
impure function or extern function. ``match_cast`` bindings are always kept:
they are runtime checks (CanonicalizeBindings turns the provably satisfied
ones into plain bindings, which this pass may then remove). Bodies are swept
backwards once, nested SeqExprs (If branches, local functions) first, so a
chain of dead bindings disappears in one run.

Module functions survive when reachable, through GlobalVar references
(calls, ``call_tir`` callees, functions passed as values, a prim_func's variants), from the entry
functions: ``entry_functions`` when given; else the functions with a
``global_symbol`` attribute; else ``main``; else every graph function that
no other function references. A module with no graph function is kept whole.
"""
from __future__ import annotations

from typing import Iterable, Sequence

from tensorir.function import PrimFunc
from tensorir.functor import collect
from tensorir.variants import variant_names

from ..expr import (BindingBlock, Call, DataflowBlock, ExternFunc, Function, GlobalVar, If, MatchCast, Op, SeqExpr,
                    Var)
from ..irmodule import IRModule
from ..struct_info import FuncStructInfo
from .pass_infra import Pass


class DeadCodeElimination(Pass):
    """Remove unused pure bindings, empty blocks and functions unreachable from the entries."""
    name = "DeadCodeElimination"

    def __init__(self, entry_functions: Sequence[str] | None = None):
        if isinstance(entry_functions, str):
            entry_functions = [entry_functions]
        self.entry_functions = None if entry_functions is None else list(entry_functions)

    def transform_module(self, mod: IRModule, ctx) -> IRModule:
        functions = dict(mod.functions)
        for name, func in mod.relax_functions.items():
            functions[name] = _BodySweeper(mod).sweep_function(func)
        swept = IRModule(functions, mod.attrs)
        entries = self._entries(swept)
        reachable = reachable_functions(swept, entries)
        kept = {name: f for name, f in swept.functions.items() if name in reachable}
        unchanged = len(kept) == len(mod.functions) and all(kept[n] is mod.functions[n] for n in kept)
        return mod if unchanged else IRModule(kept, mod.attrs)

    def _entries(self, mod: IRModule) -> list[str]:
        if self.entry_functions is not None:
            missing = [n for n in self.entry_functions if n not in mod]
            if missing:
                raise ValueError(f"DeadCodeElimination: entry function(s) {missing} are not in the module "
                                 f"(it has {sorted(mod.functions)})")
            return self.entry_functions
        return default_entries(mod)


def default_entries(mod: IRModule) -> list[str]:
    graph = mod.relax_functions
    if not graph:
        return list(mod.functions)
    public = [n for n, f in graph.items() if "global_symbol" in f.attrs]
    if public:
        return public
    if "main" in graph:
        return ["main"]
    return unreferenced_functions(mod)


def unreferenced_functions(mod: IRModule) -> list[str]:
    """The graph functions no other graph function of ``mod`` refers to."""
    graph = mod.relax_functions
    referenced = set()
    for name, func in graph.items():
        referenced |= {g for g in referenced_globals(func) if g != name}
    return [n for n in graph if n not in referenced]


def referenced_globals(func) -> set[str]:
    """Names of module functions that ``func`` refers to (a prim_func only to its variants)."""
    if isinstance(func, PrimFunc):  # its variants, and the prim_funcs it calls (cls.sub(...))
        from tensorir.transform.inline_subroutines import calls_of
        return set(variant_names(func)) | {c.callee for c in calls_of(func)}
    return {g.name_hint for g in collect(func, lambda n: isinstance(n, GlobalVar))}


def reachable_functions(mod: IRModule, entries: Iterable[str]) -> set[str]:
    seen: set[str] = set()
    stack = list(entries)
    while stack:
        name = stack.pop()
        if name in seen or name not in mod:
            continue
        seen.add(name)
        stack.extend(referenced_globals(mod[name]))
    return seen


def is_pure_value(value, mod: IRModule | None = None) -> bool:
    """True when evaluating ``value`` cannot have an effect besides producing it.

    Defining a local function is pure whatever its body does; calls are pure
    when the operator or callee is marked pure."""
    if isinstance(value, Function):
        return True
    calls = collect(value, lambda n: isinstance(n, (Call, Function)))
    nested = {id(n) for f in calls if isinstance(f, Function) for n in collect(f.body, lambda n: True)}
    return all(_is_pure_call(c, mod) for c in calls if isinstance(c, Call) and id(c) not in nested)


def _is_pure_call(call: Call, mod: IRModule | None) -> bool:
    callee = call.op
    if isinstance(callee, Op):
        from ..op.registry import OpDeductionError, get_op_spec
        try:
            return get_op_spec(callee.name).pure
        except OpDeductionError:
            return False
    if isinstance(callee, ExternFunc):
        return False
    sinfo = callee.struct_info
    if isinstance(callee, GlobalVar) and mod is not None and callee.name_hint in mod:
        target = mod[callee.name_hint]
        if isinstance(target, Function):
            return target.is_pure
    return isinstance(sinfo, FuncStructInfo) and sinfo.purity


class _BodySweeper:
    """Backward sweep of each SeqExpr; annotations never change, so nodes are copied as is."""

    def __init__(self, mod: IRModule):
        self.mod = mod

    def sweep_function(self, func: Function) -> Function:
        body = self.sweep_seq(func.body)
        return func if body is func.body else func.replace(body=body)

    def sweep_seq(self, seq: SeqExpr) -> SeqExpr:
        used = _var_uses(seq.body)
        new_blocks: list[BindingBlock] = []
        changed = False
        for block in reversed(seq.blocks):
            kept = []
            for binding in reversed(block.bindings):
                value = self.sweep_value(binding.value)
                removable = not isinstance(binding, MatchCast) and binding.var not in used \
                    and is_pure_value(value, self.mod)
                if removable:
                    changed = True
                    continue
                if value is not binding.value:
                    binding = binding.replace(value=value)
                    changed = True
                kept.append(binding)
                used |= _var_uses(value) - {binding.var}  # a local function may call itself
            kept.reverse()
            if not kept:
                changed = True
                continue
            same = len(kept) == len(block.bindings) and all(a is b for a, b in zip(kept, block.bindings))
            new_blocks.append(block if same else block.replace(bindings=tuple(kept)))
        if not changed:
            return seq
        new_blocks.reverse()
        return seq.replace(blocks=drop_empty_blocks(new_blocks))

    def sweep_value(self, value):
        if isinstance(value, Function):
            return self.sweep_function(value)
        if isinstance(value, If):
            true_branch = self.sweep_seq(value.true_branch)
            false_branch = self.sweep_seq(value.false_branch)
            if true_branch is value.true_branch and false_branch is value.false_branch:
                return value
            return value.replace(true_branch=true_branch, false_branch=false_branch)
        if isinstance(value, SeqExpr):
            return self.sweep_seq(value)
        return value


def drop_empty_blocks(blocks) -> tuple:
    """Blocks without the empty ones, adjacent plain blocks merged (as the parser reads them back)."""
    out: list[BindingBlock] = []
    for block in blocks:
        if not block.bindings:
            continue
        if out and not isinstance(block, DataflowBlock) and not isinstance(out[-1], DataflowBlock):
            out[-1] = BindingBlock(out[-1].bindings + block.bindings)
        else:
            out.append(block)
    return tuple(out)


def _var_uses(node) -> set[Var]:
    """Every graph-level Var under ``node`` (binders included: a harmless over-approximation)."""
    return set(collect(node, lambda n: isinstance(n, Var)))


__all__ = ["DeadCodeElimination", "default_entries", "reachable_functions", "unreferenced_functions", "is_pure_value",
           "drop_empty_blocks"]
