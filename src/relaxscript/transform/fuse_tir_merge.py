"""Merge the prim_funcs a primitive subgraph function calls into one prim_func.

The subgraph (made by FuseOps) is a dataflow chain of ``call_tir``s. In the
merged prim_func its tensor parameters become input buffers, its results
output buffers (in order), and every other intermediate tensor a root-block
``alloc_buffer``. Each callee's body is inlined with its buffers replaced
and its symbolic variables solved from the shapes it is called with
(``fuse_tir_bind``); loop variables, iter variables, internal buffers and
block names are copied fresh so that a prim_func called twice stays two
independent nests. Symbolic variables that no buffer parameter holds as a
bare dimension become scalar parameters, filled by ``tir_vars`` at the call.
"""
from __future__ import annotations

from dataclasses import dataclass

from tensorir import expr as tir
from tensorir.analysis import analyze_pattern
from tensorir.buffer import Buffer
from tensorir.dispatch import handles
from tensorir.function import PrimFunc
from tensorir.functor import Mutator
from tensorir.identity_names import first_free
from tensorir.stmt import Block, BlockRealize, seq

from ..expr import Function, ShapeExpr, Tuple, Var, VarBinding
from ..struct_info import ShapeStructInfo, TensorStructInfo
from ..struct_info_util import rebuild_binary, substitute_sinfo, symbolic_vars_of
from .annotate_op_pattern import ATTR as OP_PATTERN_ATTR
from .fuse_ops import FUSED_FROM_ATTR
from .fuse_partition import call_tir_callee
from .fuse_tir_bind import CalleeVarBinder, FuseTIRError
from .symbolic_params import bare_defined_vars, fresh_copies

NOALIAS_ATTR = "tir.noalias"


class UnsupportedSubgraph(Exception):
    """The function is not a plain chain of call_tirs; FuseTIR leaves it as it is."""


@dataclass
class MergedKernel:
    prim_func: PrimFunc
    scalar_vars: list  # the subgraph's symbolic vars, in the order of the scalar params


class _Names:
    def __init__(self):
        self.used: set[str] = set()

    def fresh(self, hint: str) -> str:
        name = first_free(hint, self.used)
        self.used.add(name)
        return name


def merge_subgraph(name: str, func: Function, mod) -> MergedKernel:
    calls = _subgraph_calls(func, mod)
    outputs = _output_vars(func, calls)
    names = _Names()
    vmap = fresh_copies(symbolic_vars_of([p.struct_info for p in func.params]))
    for var in vmap.values():
        names.fresh(var.name)
    buffer_of: dict[int, Buffer] = {}

    def new_buffer(var: Var, sinfo: TensorStructInfo) -> Buffer:
        buffer_of[id(var)] = Buffer(names.fresh(var.name_hint), substitute_sinfo(sinfo.shape, vmap),
                                    sinfo.dtype)
        return buffer_of[id(var)]

    inputs = []
    for param in func.params:
        sinfo = param.struct_info
        if _full_tensor(sinfo):
            inputs.append(new_buffer(param, sinfo))
        elif not (isinstance(sinfo, ShapeStructInfo) and sinfo.values is not None):
            raise UnsupportedSubgraph(f"parameter {param.name_hint!r} is neither a tensor nor a shape")
    out_ids = [id(v) for v in outputs]
    sinfo_of_var = {id(b.var): b.value.sinfo_args[0] for b, _, _ in calls}
    out_buffers = [new_buffer(v, sinfo_of_var[id(v)]) for v in outputs]
    allocs = [new_buffer(b.var, b.value.sinfo_args[0]) for b, _, _ in calls if id(b.var) not in out_ids]

    defined = bare_defined_vars(TensorStructInfo(b.shape, b.dtype) for b in inputs + out_buffers)
    scalar_vars = [v for v, fresh in vmap.items() if fresh not in defined]

    bodies, inner_allocs, fused_from = [], [], []
    block_names = _Names()
    for binding, callee_name, callee in calls:
        call = binding.value
        buffers = [buffer_of[id(a)] for a in call.args[1].fields] + [buffer_of[id(binding.var)]]
        tir_vars = substitute_sinfo(call.args[2].values, vmap) if len(call.args) > 2 else ()
        body, callee_allocs = _inline(callee, callee_name, buffers, tir_vars, names, block_names)
        bodies.append(body)
        inner_allocs.extend(callee_allocs)
        fused_from.extend(callee.attrs.get(FUSED_FROM_ATTR, (callee_name,)))
    root = Block("root", [], [], [], seq(*bodies), alloc_buffers=allocs + inner_allocs)
    params = inputs + out_buffers + [vmap[v] for v in scalar_vars]
    attrs = {FUSED_FROM_ATTR: tuple(fused_from)}
    if all(callee.attrs.get(NOALIAS_ATTR) for _binding, _name, callee in calls):
        attrs[NOALIAS_ATTR] = True  # as TVM's FuseTIR: the fused kernel's buffers stay distinct
    merged = PrimFunc(params, BlockRealize([], True, root), attrs, name)
    return MergedKernel(merged.with_attr(OP_PATTERN_ATTR, analyze_pattern(merged).name), scalar_vars)


def _full_tensor(sinfo) -> bool:
    return isinstance(sinfo, TensorStructInfo) and sinfo.shape is not None and sinfo.dtype is not None


def _subgraph_calls(func: Function, mod) -> list:
    """``(binding, callee name, prim_func)`` per binding; every binding must be a call_tir
    whose arguments are parameters or earlier results."""
    known = {id(p) for p in func.params if _full_tensor(p.struct_info)}
    calls = []
    for block in func.body.blocks:
        for binding in block.bindings:
            found = call_tir_callee(binding.value, mod) if isinstance(binding, VarBinding) else None
            call = binding.value
            if found is None or len(call.sinfo_args) != 1 or not _full_tensor(call.sinfo_args[0]) \
                    or not isinstance(call.args[1], Tuple) \
                    or any(id(a) not in known for a in call.args[1].fields) \
                    or (len(call.args) > 2 and not isinstance(call.args[2], ShapeExpr)):
                raise UnsupportedSubgraph(f"binding of {binding.var.name_hint!r} is not a fusible call_tir")
            known.add(id(binding.var))
            calls.append((binding, found[0], found[1]))
    if not calls:
        raise UnsupportedSubgraph("no call_tir to merge")
    return calls


def _output_vars(func: Function, calls) -> list:
    result = func.body.body
    outputs = list(result.fields) if isinstance(result, Tuple) else [result]
    bound = {id(b.var) for b, _, _ in calls}
    if any(not isinstance(v, Var) or id(v) not in bound for v in outputs) \
            or len({id(v) for v in outputs}) != len(outputs):
        raise UnsupportedSubgraph("results must be distinct values computed by the calls")
    return outputs


def _inline(callee: PrimFunc, callee_name: str, buffers: list, tir_vars, names: _Names,
            block_names: _Names):
    """The callee's body (and root allocations) over the merged function's buffers."""
    params, scalars = callee.buffer_params, callee.scalar_params
    if len(params) != len(buffers) or len(scalars) != len(tir_vars):
        raise FuseTIRError(
            f"prim_func {callee_name!r} takes {len(params)} buffer(s) and {len(scalars)} scalar(s), "
            f"called with {len(buffers)} tensor(s) and {len(tir_vars)} tir_var(s)")
    binder = CalleeVarBinder(callee_name)
    for var, value in zip(scalars, tir_vars):
        binder.bind_scalar(var, value)
    for param, buffer in zip(params, buffers):
        if param.dtype != buffer.dtype:
            raise FuseTIRError(f"prim_func {callee_name!r}: buffer {param.name!r} is {param.dtype} "
                               f"but is called with a {buffer.dtype} tensor")
        if param.strides or not tir.is_const_int(param.elem_offset, 0):
            raise FuseTIRError(f"prim_func {callee_name!r}: buffer parameter {param.name!r} has "
                               f"strides or an offset; only dense parameters can be fused")
        binder.add_shape(param.shape, buffer.shape, f"buffer {param.name!r}")
    inliner = _Inliner(dict(zip(params, buffers)), binder.solve(), names, block_names)
    root = callee.root_block
    if root is None:
        return inliner.visit(callee.body), []
    if root.match_buffers or root.init is not None:
        raise FuseTIRError(f"prim_func {callee_name!r}: its root block has match_buffers or an init")
    return inliner.visit(root.body), [inliner.visit(b) for b in root.alloc_buffers]


class _Inliner(Mutator):
    """Replaces the callee's parameters; copies every other binder fresh, uniquely named."""

    def __init__(self, buffer_map: dict, var_map: dict, names: _Names, block_names: _Names):
        super().__init__()
        self._memo.update(buffer_map)
        self._memo.update(var_map)
        self.names, self.block_names = names, block_names

    @handles(tir.BinaryOp)
    def visit_BinaryOp(self, node):
        # Fold literal arithmetic left by substitution (``n * m`` -> ``16 * 16`` -> ``256``).
        return rebuild_binary(node, self.visit(node.a), self.visit(node.b))

    @handles(tir.Var)
    def visit_Var(self, var: tir.Var) -> tir.Var:
        return var.with_name(self.names.fresh(var.name))

    @handles(Buffer)
    def visit_Buffer(self, buf: Buffer) -> Buffer:
        return Buffer(self.names.fresh(buf.name), [self.visit(d) for d in buf.shape], buf.dtype,
                      strides=[self.visit(s) for s in buf.strides], elem_offset=self.visit(buf.elem_offset),
                      scope=buf.scope)

    @handles(Block)
    def visit_Block(self, block: Block) -> Block:
        return self.generic_visit(block).replace(name=self.block_names.fresh(block.name))
