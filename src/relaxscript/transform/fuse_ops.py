"""FuseOps (paper Algorithm 2): group ``call_tir`` bindings into subgraph functions.

Inside each dataflow block, the calls that ``fuse_partition`` groups by
pattern kind are lifted into a new graph-level function marked
``R.func_attr({"primitive": True, "fused_from": (...)})`` — ``primitive``
tells later passes (FuseTIR) it is one kernel-to-be, ``fused_from`` records
the prim_funcs it combines, in call order, for the fusion report. The group
is replaced by one call ``cls.fused_<names>(inputs..., R.shape([n]))``.

The lifted function keeps symbolic shapes: each parameter has the producer's
annotation (over fresh symbolic vars, since a function boundary isolates
symbolic relations), and a variable that no tensor parameter holds as a bare
dimension is passed in an extra ``R.Shape`` parameter (Figure 8). Constants
used by the group become parameters, so FuseTIR sees only tensors and shapes.
Values used outside the group are its outputs (a tuple when several). The
caller's block is rebuilt in a dependency order where the group takes the
place of its last call, and every rebuilt binding is re-deduced by the
BlockBuilder.
"""
from __future__ import annotations

import heapq

from ..block_builder import BlockBuilder
from ..expr import Call, DataflowBlock, DataflowVar, ShapeExpr, Tuple, TupleGetItem, Var
from ..expr_functor import PassMutator
from ..irmodule import IRModule
from ..op.call import call_tir
from ..struct_info import ShapeStructInfo
from ..struct_info_util import substitute_sinfo, symbolic_vars_of
from .fuse_partition import BlockGraph, Partitioner, build_block_graph
from .pass_infra import Pass
from .symbolic_params import extra_shape_vars, fresh_copies

PRIMITIVE_ATTR = "primitive"
FUSED_FROM_ATTR = "fused_from"
_MAX_NAME_PARTS = 6


def is_primitive(func) -> bool:
    return bool(getattr(func, "attrs", {}).get(PRIMITIVE_ATTR, False))


class FuseOps(Pass):
    """Group fusible ``call_tir``s of each dataflow block into primitive functions.

    ``max_depth`` bounds the number of calls fused into one function.
    """
    name = "FuseOps"

    def __init__(self, max_depth: int = 256):
        if not isinstance(max_depth, int) or max_depth < 1:
            raise ValueError(f"FuseOps: max_depth must be a positive int, got {max_depth!r}")
        self.max_depth = max_depth

    def transform_module(self, mod: IRModule, ctx) -> IRModule:
        return _FuseOpsMutator(mod, self.max_depth).run()


class _Group:
    def __init__(self, members: list[int], graph: BlockGraph):
        self.members = members
        member_set = set(members)
        self.bindings = [graph.bindings[m] for m in members]
        # Results used after the group, or never used (dead code stays for DCE to judge).
        self.outputs = [graph.bindings[m].var for m in members
                        if not isinstance(graph.bindings[m].var, DataflowVar) or not graph.users[m]
                        or any(u not in member_set for u in graph.users[m])]
        defined = {id(b.var) for b in self.bindings}
        self.inputs: list = []  # external Vars and Constants, in first-use order
        seen: set[int] = set()
        for binding in self.bindings:
            for arg in binding.value.args[1].fields:
                if id(arg) not in defined and id(arg) not in seen:
                    seen.add(id(arg))
                    self.inputs.append(arg)

    def callee_names(self) -> list[str]:
        return [b.value.args[0].name_hint for b in self.bindings]


class _FuseOpsMutator(PassMutator):
    def __init__(self, mod: IRModule, max_depth: int):
        super().__init__(mod)
        self.mod = mod
        self.max_depth = max_depth

    def run(self) -> IRModule:
        self.builder = BlockBuilder(self.mod)
        for name, func in self.mod.relax_functions.items():
            if is_primitive(func):
                continue
            new = self.visit(func)
            if new is not func:
                self.builder.update_func(name, new)
        return self.builder.get()

    def visit_block_bindings(self, block) -> None:
        if isinstance(block, DataflowBlock):
            self._emit_dataflow_block(block)   # dataflow blocks are rebuilt with fused groups
        else:
            super().visit_block_bindings(block)

    def _emit_dataflow_block(self, block) -> None:
        bindings = list(block.bindings)
        graph = build_block_graph(bindings, self.mod)
        groups = [_Group(g, graph) for g in Partitioner(graph, self.max_depth).run()]
        for item in _schedule(graph, groups):
            if isinstance(item, _Group):
                self._emit_group(item)
            else:
                self.visit_binding(bindings[item])

    # ---------------------------------------------------------------- one group
    def _current(self, expr):
        return self.var_remap.get(expr, expr) if isinstance(expr, Var) else expr

    def _emit_group(self, group: _Group) -> None:
        bb = self.builder
        inputs = [self._current(x) for x in group.inputs]
        used = []
        for binding in group.bindings:
            used.extend(binding.value.sinfo_args)
            used.extend(binding.value.args[2:])
        param_sinfos = [x.struct_info for x in inputs]
        extra = extra_shape_vars(param_sinfos, used)
        gvar = bb.add_func(_build_subgraph(group, inputs, used, extra), _function_name(group))
        args = inputs + ([ShapeExpr(extra)] if extra else [])
        call = Call(gvar, args)
        if len(group.outputs) == 1:
            self._rebind_output(group.outputs[0], call)
            return
        packed = bb.emit(call, "lv")
        for index, var in enumerate(group.outputs):
            self._rebind_output(var, TupleGetItem(packed, index))

    def _rebind_output(self, var: Var, value) -> None:
        new_var = self._rebind(var, self.builder.normalize(value))
        if new_var is not var:
            self.var_remap[var] = new_var


def _function_name(group: _Group) -> str:
    names = group.callee_names()
    head = names[:_MAX_NAME_PARTS]
    more = f"_{len(names) - len(head)}more" if len(names) > len(head) else ""
    return "fused_" + "_".join(head) + more


def _build_subgraph(group: _Group, inputs: list, used: list, extra: list):
    """The primitive function computing ``group`` from ``inputs`` (+ a Shape param)."""
    vmap = fresh_copies(symbolic_vars_of([[x.struct_info for x in inputs], used]))
    params = [Var(x.name_hint if isinstance(x, Var) else "const", substitute_sinfo(x.struct_info, vmap))
              for x in inputs]
    if extra:
        taken = {p.name_hint for p in params}
        shape_name = next(f"s{i or ''}" for i in range(len(taken) + 1) if f"s{i or ''}" not in taken)
        params.append(Var(shape_name, ShapeStructInfo([vmap[v] for v in extra])))
    env = {id(orig): param for orig, param in zip(group.inputs, params)}
    outputs = {id(v) for v in group.outputs}
    attrs = {PRIMITIVE_ATTR: True, FUSED_FROM_ATTR: tuple(group.callee_names())}
    fbb = BlockBuilder()
    name = _function_name(group)
    with fbb.function(name, params, attrs=attrs):
        with fbb.dataflow():
            results = []
            for binding in group.bindings:
                call = binding.value
                args = [env[id(a)] for a in call.args[1].fields]
                tir_vars = None
                if len(call.args) > 2:
                    tir_vars = substitute_sinfo(call.args[2].values, vmap)
                new_call = call_tir(call.args[0], args, substitute_sinfo(call.sinfo_args[0], vmap), tir_vars)
                if id(binding.var) in outputs:
                    var = fbb.emit_output(new_call, binding.var.name_hint)
                    results.append(var)
                else:
                    var = fbb.emit(new_call, binding.var.name_hint)
                env[id(binding.var)] = var
        fbb.emit_func_output(results[0] if len(results) == 1 else Tuple(results))
    return fbb.get()[name]


def _schedule(graph: BlockGraph, groups: list[_Group]) -> list:
    """Bindings and groups in a dependency order; each unit keeps the place of its
    last binding as far as dependencies allow (a group moves after the
    ``match_cast``s and producers any of its calls needs)."""
    owner = {m: group for group in groups for m in group.members}
    units: dict[int, object] = {}
    for index in range(len(graph.bindings)):
        group = owner.get(index)
        if group is None:
            units[index] = index
        elif index == group.members[-1]:
            units[index] = group

    def key_of(index: int) -> int:
        group = owner.get(index)
        return group.members[-1] if group is not None else index

    waiting = {key: set() for key in units}
    followers: dict[int, set] = {key: set() for key in units}
    for index in range(len(graph.bindings)):
        for producer in graph.producers[index]:
            a, b = key_of(producer), key_of(index)
            if a != b:
                waiting[b].add(a)
                followers[a].add(b)
    ready = [key for key, deps in waiting.items() if not deps]
    heapq.heapify(ready)
    order = []
    while ready:
        key = heapq.heappop(ready)
        order.append(units[key])
        for follower in followers[key]:
            waiting[follower].discard(key)
            if not waiting[follower]:
                heapq.heappush(ready, follower)
    assert len(order) == len(units), "fusion groups must be convex"
    return order


__all__ = ["FuseOps", "PRIMITIVE_ATTR", "FUSED_FROM_ATTR", "is_primitive"]
