"""CallTIRRewrite: cross-level calls become explicit allocation plus a DPS call.

Paper Figure 5: ``lv = R.call_tir(f, (x,), R.Tensor((n, 4), "float32"))``
means "allocate the output, call ``f`` writing into it". This pass makes that
explicit so memory planning can see every allocation::

    lv = R.builtin.alloc_tensor(R.shape([n, 4]), dtype="float32")
    _ = R.call_tir_dps(cls.f, (x, lv))

``R.call_dps_library`` becomes ``R.call_dps_library_dps(name, (inputs), (outputs))``.
A call with several outputs allocates each one and binds the original var
to the tuple of them. Allocations are impure, so every dataflow block that
gets one becomes an ordinary block (its DataflowVars become Vars). Calls
whose output annotation lacks a shape or dtype are left as they are.
"""
from __future__ import annotations

from tensorir.dispatch import handles

from ..block_builder import BlockBuilder
from ..expr import (BindingBlock, Call, DataflowBlock, DataflowVar, Function, Op, SeqExpr, Tuple,
                    Var, VarBinding)
from ..expr_functor import ExprMutator
from ..irmodule import IRModule
from ..op import memory as mem
from ..struct_info import TensorStructInfo, TupleStructInfo
from .dead_code_elimination import drop_empty_blocks
from .pass_infra import Pass, PassContext

_CROSS_LEVEL = ("relax.call_tir", "relax.call_dps_library", "relax.call_dps_packed")


def _output_sinfos(call: Call) -> list[TensorStructInfo] | None:
    sinfo = call.sinfo_args[0] if len(call.sinfo_args) == 1 else None
    outs = list(sinfo.fields) if isinstance(sinfo, TupleStructInfo) else [sinfo]
    if all(isinstance(s, TensorStructInfo) and s.shape is not None and s.dtype is not None
           for s in outs):
        return outs
    return None


def is_rewritable(value) -> bool:
    """A call_tir / call_dps_library whose outputs can be allocated explicitly."""
    return (isinstance(value, Call) and isinstance(value.op, Op) and value.op.name in _CROSS_LEVEL
            and _output_sinfos(value) is not None)


class _Rewriter(ExprMutator):
    def __init__(self, mod: IRModule):
        super().__init__()
        self.builder = BlockBuilder(mod)

    @handles(SeqExpr)
    def visit_SeqExpr(self, seq: SeqExpr):
        blocks = [self._rewrite_block(block) for block in seq.blocks]
        body = self.visit(seq.body)
        if all(a is b for a, b in zip(blocks, seq.blocks)) and body is seq.body:
            return seq
        # a dataflow block turned plain next to a plain block is one block once printed
        new = SeqExpr(drop_empty_blocks(blocks), body)
        new.struct_info = seq.struct_info
        return new

    def _rewrite_block(self, block):
        needs_plain = isinstance(block, DataflowBlock) and any(
            is_rewritable(b.value) for b in block.bindings if isinstance(b, VarBinding))
        bindings: list = []
        changed = needs_plain
        for binding in block.bindings:
            value = self.visit(binding.value)
            var = binding.var
            if needs_plain and isinstance(var, DataflowVar):
                var = Var(var.name_hint, self.visit_value(var.struct_info))
                self.var_remap[binding.var] = var
            else:
                var = self.visit_var_def(var)
            if isinstance(binding, VarBinding) and is_rewritable(value):
                bindings.extend(self._lower_call(var, value))
                changed = True
                continue
            new = binding
            if value is not binding.value or var is not binding.var:
                new = binding.replace(value=value, var=var)
                changed = True
            bindings.append(new)
        if not changed:
            return block
        stays_dataflow = isinstance(block, DataflowBlock) and not needs_plain
        return (DataflowBlock if stays_dataflow else BindingBlock)(bindings)

    def _lower_call(self, var: Var, call: Call) -> list:
        outs = _output_sinfos(call)
        norm = self.builder.normalize
        out_vars, bindings = [], []
        for index, sinfo in enumerate(outs):
            alloc = norm(mem.builtin_alloc_tensor(sinfo.shape, sinfo.dtype))
            out_var = var if len(outs) == 1 and _single(call) else Var(f"{var.name_hint}_out{index}",
                                                                         alloc.struct_info)
            bindings.append(VarBinding(out_var, alloc))
            out_vars.append(out_var)
        callee, inputs = call.args[0], call.args[1]
        in_fields = list(inputs.fields) if isinstance(inputs, Tuple) else [inputs]
        if call.op.name == "relax.call_tir":
            tir_vars = call.args[2] if len(call.args) > 2 else None
            dps = mem.call_tir_dps(callee, Tuple(in_fields + out_vars), tir_vars)
        else:
            dps = mem.call_dps_library_dps(callee, Tuple(in_fields), Tuple(out_vars))
        dps = norm(dps)
        bindings.append(VarBinding(Var("_", dps.struct_info), dps))
        if not (len(outs) == 1 and _single(call)):
            packed = norm(Tuple(out_vars))
            bindings.append(VarBinding(var, packed))
        return bindings


def _single(call: Call) -> bool:
    return isinstance(call.sinfo_args[0], TensorStructInfo)


def rewrite_function(func: Function, mod: IRModule) -> Function:
    return _Rewriter(mod).visit(func)


class CallTIRRewrite(Pass):
    """Lower ``call_tir`` / ``call_dps_library`` to explicit allocation + DPS calls."""
    name = "CallTIRRewrite"

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        functions = dict(mod.functions)
        for name, func in mod.relax_functions.items():
            functions[name] = rewrite_function(func, mod)
        return IRModule(functions, mod.attrs)


__all__ = ["CallTIRRewrite", "is_rewritable", "rewrite_function"]
