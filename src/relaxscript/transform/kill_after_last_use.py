"""KillAfterLastUse: free explicit allocations right after their last use.

Inserts ``R.memory.kill_tensor(t)`` after the last use of every tensor made by
``R.builtin.alloc_tensor`` and ``R.memory.kill_storage(s)`` after the last use
of every storage (a tensor placed in a storage uses it), in every function
and If branch. Escaping objects (reachable from the scope's result) and
objects some kill already frees are left alone. A kill that falls inside a
dataflow block (kills are impure) moves to just after that block.

Run on an unplanned module, this is the runtime pool allocator's view of
the program: each tensor returns to the pool as soon as it is dead.
"""
from __future__ import annotations

from ..block_builder import BlockBuilder
from ..expr import BindingBlock, DataflowBlock, If, SeqExpr, Var, VarBinding
from ..irmodule import IRModule
from ..op import memory as mem
from .dead_code_elimination import drop_empty_blocks
from .liveness import analyze_scope, op_name
from .pass_infra import Pass, PassContext


def insert_kills(blocks: list, result, builder: BlockBuilder) -> list:
    """``blocks`` of one scope with kills inserted (not looking inside If branches)."""
    bindings = [b for block in blocks for b in block.bindings]
    live = analyze_scope(bindings, result)
    dead = live.dead_after()
    out: list = []
    index = 0
    for block in blocks:
        current, deferred = [], []
        for binding in block.bindings:
            current.append(binding)
            kills = [_kill(obj, live, builder) for obj in dead.get(index, ())
                     if obj not in live.killed]
            kills = [k for k in kills if k is not None]
            (deferred if isinstance(block, DataflowBlock) else current).extend(kills)
            index += 1
        out.append(type(block)(current))
        if deferred:
            out.append(BindingBlock(deferred))
    # a deferred kill block beside a plain block prints as one block: merge them, as the parser reads it back
    return list(drop_empty_blocks(out))


def _kill(obj: Var, live, builder: BlockBuilder):
    defining = live.bindings[live.defined_at[obj]].value
    if op_name(defining) == mem.ALLOC_STORAGE:
        call = builder.normalize(mem.kill_storage(obj))
    elif op_name(defining) == mem.BUILTIN_ALLOC_TENSOR:
        call = builder.normalize(mem.kill_tensor(obj))
    else:
        return None
    return VarBinding(Var("_", call.struct_info), call)


def map_if_branches(blocks, fn) -> list:
    """Blocks whose If-valued bindings have ``fn`` applied to both branches."""
    out = []
    for block in blocks:
        bindings = []
        for binding in block.bindings:
            value = binding.value
            if isinstance(value, If):
                binding = binding.replace(value=value.replace(
                    true_branch=fn(value.true_branch), false_branch=fn(value.false_branch)))
            bindings.append(binding)
        out.append(type(block)(bindings))
    return out


def kill_in_seq(seq: SeqExpr, builder: BlockBuilder) -> SeqExpr:
    blocks = map_if_branches(seq.blocks, lambda branch: kill_in_seq(branch, builder))
    return seq.replace(blocks=tuple(insert_kills(blocks, seq.body, builder)))


class KillAfterLastUse(Pass):
    """Insert ``kill_tensor`` / ``kill_storage`` after each allocation's last use."""
    name = "KillAfterLastUse"

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        builder = BlockBuilder(mod)
        functions = dict(mod.functions)
        for name, func in mod.relax_functions.items():
            functions[name] = func.replace(body=kill_in_seq(func.body, builder))
        return IRModule(functions, mod.attrs)


__all__ = ["KillAfterLastUse", "insert_kills", "kill_in_seq", "map_if_branches"]
