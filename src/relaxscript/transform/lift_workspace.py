"""LiftWorkspace: move a prim_func's global scratch buffer to the graph level (paper Figure 11).

A prim_func whose root block allocates a ``"global"`` buffer (e.g. the
partial sums of a split-K matmul) gets that buffer as a new trailing buffer
parameter. Each ``R.call_tir`` of it then declares the workspace as one more
output, so CallTIRRewrite allocates it at the graph level and memory planning
can reuse its bytes (it dies right after the call)::

    lv = R.call_tir(cls.mm, (x, w), out_sinfo=R.Tensor((n, 64), "float32"))
  becomes
    lv_ws = R.call_tir(cls.mm, (x, w), out_sinfo=[R.Tensor((n, 64), "float32"),
                                                  R.Tensor((n, 4, 64), "float32")])
    lv = lv_ws[0]

The workspace shape is written in the callee's symbolic vars; each call site
maps them to its own values by matching the buffer parameters against the
call's argument and output annotations (and ``tir_vars`` for scalar
parameters). A prim_func is lifted only if every reference to it is a
``call_tir`` whose workspace shape can be expressed this way. Note that the
lifted buffer is no longer zero-initialised by the loop-level interpreter;
kernels must write their scratch before reading it (as real targets need).
"""
from __future__ import annotations

from tensorir import expr as E
from tensorir.buffer import Buffer
from tensorir.function import PrimFunc
from tensorir.functor import collect, iter_children, substitute
from tensorir.schedule_rules.attention import ATTENTION_LAYOUT_ATTR
from tensorir.schedule_rules.generated_kernels import generated_from_attributes
from tensorir.transform import lower
from tensorir.transform.localize_allocations import loop_local_buffers
from tensorir.variants import variant_names

from ..block_builder import BlockBuilder
from ..expr import (BindingBlock, Call, DataflowBlock, DataflowVar, Function, GlobalVar, Op,
                    SeqExpr, ShapeExpr, Tuple, TupleGetItem, Var, VarBinding)
from ..irmodule import IRModule
from ..op import call_tir
from ..struct_info import TensorStructInfo, TupleStructInfo
from .kill_after_last_use import map_if_branches
from .pass_infra import Pass, PassContext


def global_workspaces(func: PrimFunc) -> list[Buffer]:
    """The root block's ``alloc_buffer``s with global scope."""
    root = func.root_block
    if root is None:
        return []
    return [b for b in root.alloc_buffers if b.scope == "global"]


def lift_prim_func(func: PrimFunc, keep_loop_local: bool = False) -> tuple[PrimFunc, list[Buffer]]:
    """``func`` with its global workspaces as trailing buffer parameters. ``keep_loop_local``:
    leave in the kernel those the C lowering declares inside a loop (``loop_local_buffers``)."""
    workspaces = global_workspaces(func)
    if workspaces and keep_loop_local and func.attrs.get(ATTENTION_LAYOUT_ATTR) is not None:
        # the C attention generator keeps its row statistics in registers and reads only q, keys,
        # values and the output: the nest's scratch (4 x (heads, n) and a (heads, n, 64) tile in the
        # Llama workload) would be graph-level allocations no kernel touches
        return func, []
    if workspaces and keep_loop_local and not generated_from_attributes(func):
        local = loop_local_buffers(lower(func))
        workspaces = [b for b in workspaces if b.name not in local]
    if not workspaces:
        return func, []
    root = func.root_block
    kept = tuple(b for b in root.alloc_buffers if b not in workspaces)
    body = func.body.replace(block=root.replace(alloc_buffers=kept))
    params = list(func.params)
    last_buffer = max((i for i, p in enumerate(params) if isinstance(p, Buffer)), default=-1)
    params[last_buffer + 1:last_buffer + 1] = workspaces
    return func.replace(params=tuple(params), body=body), workspaces


def _flat_outputs(sinfo) -> list:
    return list(sinfo.fields) if isinstance(sinfo, TupleStructInfo) else [sinfo]


def _callee_var_map(func: PrimFunc, call: Call) -> dict | None:
    """Callee symbolic var -> caller expression, from buffer shapes and tir_vars."""
    inputs = call.args[1]
    in_sinfos = [f.struct_info for f in inputs.fields] if isinstance(inputs, Tuple) else \
        _flat_outputs(inputs.struct_info)
    actual = in_sinfos + _flat_outputs(call.sinfo_args[0])
    buffers = func.buffer_params
    if len(actual) != len(buffers):
        return None
    mapping: dict = {}
    for buffer, sinfo in zip(buffers, actual):
        if not isinstance(sinfo, TensorStructInfo) or sinfo.shape is None or len(sinfo.shape) != buffer.ndim:
            continue
        for dim, value in zip(buffer.shape, sinfo.shape):
            if isinstance(dim, E.Var) and dim not in mapping:
                mapping[dim] = value
    if len(call.args) > 2:
        tir_vars = call.args[2]
        if not isinstance(tir_vars, ShapeExpr) or len(tir_vars.values) != len(func.scalar_params):
            return None
        mapping.update(zip(func.scalar_params, tir_vars.values))
    return mapping


def _workspace_sinfos(func: PrimFunc, workspaces: list[Buffer], call: Call) -> list | None:
    mapping = _callee_var_map(func, call)
    if mapping is None:
        return None
    out = []
    for buffer in workspaces:
        shape = [substitute(d, mapping) for d in buffer.shape]
        callee_vars = _callee_vars(func)
        free = [v for d in shape for v in collect(d, lambda n: isinstance(n, E.Var)) if v in callee_vars]
        if free:
            return None
        out.append(TensorStructInfo(shape, buffer.dtype))
    return out


def _callee_vars(func: PrimFunc) -> set:
    out = set(func.scalar_params)
    for buffer in func.buffer_params:
        for dim in buffer.shape:
            out.update(collect(dim, lambda n: isinstance(n, E.Var)))
    return out


def _is_call_tir_of(node, name: str) -> bool:
    return (isinstance(node, Call) and isinstance(node.op, Op) and node.op.name == "relax.call_tir"
            and isinstance(node.args[0], GlobalVar) and node.args[0].name_hint == name)


def _call_tir_sites(mod: IRModule) -> dict:
    """Per global name: (whether every reference is a rewritable call_tir callee, those calls).

    One walk of the graph functions serves every prim_func (one walk per lifted kernel was
    most of the pass on a 30-layer model). A name referenced other than as a call_tir callee
    (used as a value, or anywhere inside a local function) is not rewritable."""
    calls: dict[str, list] = {}
    refused: set[str] = set()
    for func in mod.relax_functions.values():
        stack, seen = [func.body], set()
        while stack:
            node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            if isinstance(node, GlobalVar):
                refused.add(node.name_hint)
                continue
            if isinstance(node, Function):
                refused.update(n.name_hint for n in collect(node, lambda n: isinstance(n, GlobalVar)))
                continue
            if _is_call_tir_callee(node):
                calls.setdefault(node.args[0].name_hint, []).append(node)
                stack.extend(node.args[1:])
                continue
            stack.extend(iter_children(node))
    names = set(calls) | refused
    return {name: (False, []) if name in refused else (True, calls[name]) for name in names}


def _is_call_tir_callee(node) -> bool:
    return (isinstance(node, Call) and isinstance(node.op, Op) and node.op.name == "relax.call_tir"
            and isinstance(node.args[0], GlobalVar))


class _CallSiteRewriter:
    def __init__(self, mod: IRModule, lifted: dict):
        self.builder = BlockBuilder(mod)
        self.lifted = lifted  # name -> (new prim_func, original prim_func, workspaces)

    def seq(self, seq: SeqExpr) -> SeqExpr:
        blocks = map_if_branches(seq.blocks, self.seq)
        new_blocks = []
        for block in blocks:
            bindings = []
            for binding in block.bindings:
                bindings.extend(self.binding(binding, isinstance(block, DataflowBlock)))
            new_blocks.append((DataflowBlock if isinstance(block, DataflowBlock) else BindingBlock)(bindings))
        return seq.replace(blocks=tuple(new_blocks))

    def binding(self, binding, in_dataflow: bool) -> list:
        call = binding.value
        if not (isinstance(binding, VarBinding) and isinstance(call, Call)
                and any(_is_call_tir_of(call, name) for name in self.lifted)):
            return [binding]
        name = call.args[0].name_hint
        new_func, old_func, workspaces = self.lifted[name]
        outs = _flat_outputs(call.sinfo_args[0])
        ws = _workspace_sinfos(old_func, workspaces, call)
        tir_vars = call.args[2] if len(call.args) > 2 else None
        gvar = self.builder.normalize(GlobalVar(name))
        new_call = self.builder.normalize(call_tir(gvar, call.args[1], outs + ws, tir_vars))
        var = binding.var
        packed = (DataflowVar if in_dataflow else Var)(f"{var.name_hint}_ws", new_call.struct_info)
        if isinstance(call.sinfo_args[0], TupleStructInfo):
            pre = []
            items = []
            for i in range(len(outs)):
                item = self.builder.normalize(TupleGetItem(packed, i))
                field_var = (DataflowVar if in_dataflow else Var)(f"{var.name_hint}_{i}", item.struct_info)
                pre.append(VarBinding(field_var, item))
                items.append(field_var)
            result = self.builder.normalize(Tuple(items))
            return [VarBinding(packed, new_call), *pre, VarBinding(var, result)]
        item = self.builder.normalize(TupleGetItem(packed, 0))
        return [VarBinding(packed, new_call), VarBinding(var, item)]


class LiftWorkspace(Pass):
    """Lift global ``alloc_buffer`` workspaces of prim_funcs to graph-level allocations.

    ``keep_loop_local`` (the C pipeline): a workspace each iteration of one loop uses apart (a
    row's statistics) stays in the kernel, where the C lowering makes it a local array of the
    loop (tensorir.transform.localize_allocations); lifting it would cost an allocation, a view
    and a kill per call for memory the kernel keeps in registers."""
    name = "LiftWorkspace"

    def __init__(self, keep_loop_local: bool = False):
        self.keep_loop_local = keep_loop_local

    def __repr__(self) -> str:
        return f"LiftWorkspace(keep_loop_local={self.keep_loop_local})" if self.keep_loop_local else "LiftWorkspace()"

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        lifted = {}
        sites = None
        # a kernel with variants and the variants share one signature: their scratch stays inside
        with_variants = {n for name, f in mod.prim_funcs.items() for n in [name, *variant_names(f)]
                         if variant_names(f)}
        for name, func in mod.prim_funcs.items():
            if name in with_variants:
                continue
            new, workspaces = lift_prim_func(func, self.keep_loop_local)
            if not workspaces:
                continue
            if sites is None:
                sites = _call_tir_sites(mod)
            only_call_tir, calls = sites.get(name, (True, []))
            if only_call_tir and all(_workspace_sinfos(func, workspaces, c) is not None for c in calls):
                lifted[name] = (new, func, workspaces)
        if not lifted:
            return mod
        functions = dict(mod.functions)
        for name, (new, _, _) in lifted.items():
            functions[name] = new
        updated = IRModule(functions, mod.attrs)
        rewriter = _CallSiteRewriter(updated, lifted)
        for name, func in mod.relax_functions.items():
            functions[name] = func.replace(body=rewriter.seq(func.body))
        return IRModule(functions, mod.attrs)


__all__ = ["LiftWorkspace", "lift_prim_func", "global_workspaces"]
