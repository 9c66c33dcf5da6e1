"""Scope-aware visitor and mutators over graph-level IR.

Built on ``tensorir.functor`` (class-keyed dispatch, ``@handles(Class)``), with hooks
that know where variables are defined: ``visit_var_def`` for parameters and
binding vars, ``visit_binding`` per binding, ``visit_block`` per block.

- ``ExprVisitor``: read-only walk in program order.
- ``ExprMutator``: rebuilds what changed, keeping (and substituting into)
  annotations; for rewrites that cannot change any annotation.
- ``PassMutator``: rebuilds every function through a ``BlockBuilder`` so
  changed expressions are re-deduced and passes never write annotations.
"""
from __future__ import annotations

from tensorir import expr as tir
from tensorir.dispatch import handles
from tensorir.functor import Mutator, Visitor
from tensorir.structural import structural_equal

from .block_builder import BlockBuilder
from .expr import (BindingBlock, DataflowBlock, DataflowVar, Expr, Function, MatchCast, SeqExpr, Var,
                   VarBinding)
from .irmodule import IRModule
from .struct_info_util import rebuild_binary


class ExprVisitor(Visitor):
    """Walks functions in program order; definitions go through ``visit_var_def``."""

    @handles(Function)
    def visit_Function(self, func: Function) -> None:
        for param in func.params:
            self.visit_var_def(param)
        self.visit(func.body)
        if func.ret_struct_info is not None:
            self.visit_struct_info(func.ret_struct_info)

    @handles(SeqExpr)
    def visit_SeqExpr(self, seq: SeqExpr) -> None:
        for block in seq.blocks:
            self.visit_block(block)
        self.visit(seq.body)

    def visit_block(self, block: BindingBlock) -> None:
        for binding in block.bindings:
            self.visit_binding(binding)

    def visit_binding(self, binding) -> None:
        self.visit(binding.value)
        if isinstance(binding, MatchCast):
            self.visit_struct_info(binding.struct_info)
        self.visit_var_def(binding.var)

    def visit_var_def(self, var: Var) -> None:
        """A parameter or a binding's var is defined here."""

    @handles(Var)
    def visit_var_use(self, var: Var) -> None:
        """A use of a graph-level variable."""

    @handles(tir.Var)
    def visit_symbolic_var(self, var: tir.Var) -> None:
        """A symbolic (tensorir) variable inside an annotation or a shape value."""

    def visit_struct_info(self, sinfo) -> None:
        """An annotation written in the program (declared return, match_cast target)."""


class ExprMutator(Mutator):
    """Rebuilds changed expressions; annotations are carried over and rewritten too.

    Add ``@handles(Class)`` methods for expressions, ``visit_var_def`` to replace
    binders. ``var_remap`` maps graph-level vars and symbolic vars to their
    replacements at every use, annotations included.
    """

    def __init__(self):
        super().__init__()
        self.var_remap: dict[Var, Var] = {}

    @handles(Var)
    def visit_Var(self, var: Var):
        return self.var_remap.get(var, var)

    @handles(tir.Var)
    def visit_symbolic_var(self, var: tir.Var):
        return self.var_remap.get(var, var)

    @handles(tir.BinaryOp)
    def visit_BinaryOp(self, node):
        return rebuild_binary(node, self.visit(node.a), self.visit(node.b))

    def visit_var_def(self, var: Var) -> Var:
        sinfo = self.visit_value(var.struct_info)
        if sinfo is var.struct_info:
            return var
        new = type(var)(var.name_hint, sinfo)
        self.var_remap[var] = new
        return new

    def generic_visit(self, node):
        new = super().generic_visit(node)
        if isinstance(node, Expr) and node.struct_info is not None:
            sinfo = self.visit_value(node.struct_info)
            if sinfo is not node.struct_info:
                new = node.replace() if new is node else new
                new.struct_info = sinfo
        return new

    @handles(Function)
    def visit_Function(self, func: Function):
        params = tuple(self.visit_var_def(p) for p in func.params)
        body = self.visit(func.body)
        ret = self.visit_value(func.ret_struct_info)
        if _same(params, func.params) and body is func.body and ret is func.ret_struct_info:
            return func
        new = func.replace(params=params, body=body, ret_struct_info=ret)
        new.struct_info = self.visit_value(func.struct_info)
        return new

    @handles(SeqExpr)
    def visit_SeqExpr(self, seq: SeqExpr):
        blocks = tuple(self.visit_block(b) for b in seq.blocks)
        body = self.visit(seq.body)
        if _same(blocks, seq.blocks) and body is seq.body:
            return seq
        new = seq.replace(blocks=blocks, body=body)
        new.struct_info = self.visit_value(seq.struct_info)
        return new

    def visit_block(self, block: BindingBlock) -> BindingBlock:
        bindings = tuple(self.visit_binding(b) for b in block.bindings)
        return block if _same(bindings, block.bindings) else block.replace(bindings=bindings)

    def visit_binding(self, binding):
        value = self.visit(binding.value)
        changes = {}
        if isinstance(binding, MatchCast):
            sinfo = self.visit_value(binding.struct_info)
            if sinfo is not binding.struct_info:
                changes["struct_info"] = sinfo
        var = self.visit_var_def(binding.var)
        if value is not binding.value:
            changes["value"] = value
        if var is not binding.var:
            changes["var"] = var
        return binding.replace(**changes) if changes else binding


class PassMutator(ExprMutator):
    """Rebuilds functions through a BlockBuilder: every changed expression is
    normalized again, and a binding whose annotation changes gets a new var."""

    def __init__(self, mod: IRModule | None = None):
        super().__init__()
        self.builder = BlockBuilder(mod)

    def transform_module(self, mod: IRModule) -> IRModule:
        """Apply ``visit`` to every graph-level function of ``mod``."""
        self.builder = BlockBuilder(mod)
        for name, func in mod.relax_functions.items():
            new = self.visit(func)
            if new is not func:
                self.builder.update_func(name, new)
        return self.builder.get()

    def generic_visit(self, node):
        new = Mutator.generic_visit(self, node)
        if new is not node and isinstance(new, Expr):
            new.struct_info = None  # a fresh copy: deduce again
        return new

    def visit_expr(self, expr: Expr) -> Expr:
        return self.builder.normalize(self.visit(expr))

    def visit_var_def(self, var: Var) -> Var:
        return var

    def visit_Function(self, func: Function):
        params = tuple(self.visit_var_def(p) for p in func.params)
        bb = self.builder
        saved = bb._swap_frames([])
        bb.begin_scope(params)
        try:
            body = self.visit(func.body)
        finally:
            bb.end_scope()
            bb._swap_frames(saved)
        if _same(params, func.params) and body is func.body:
            return func
        new = Function(params, body, func.ret_struct_info, func.is_pure, func.attrs, func.is_private)
        return bb._normalize_detached(new)

    def visit_SeqExpr(self, seq: SeqExpr):
        bb = self.builder
        bb.begin_scope()
        try:
            blocks = []
            for block in seq.blocks:
                bb.begin_block(isinstance(block, DataflowBlock))
                self.visit_block_bindings(block)
                new_block = bb.end_block(original=block)
                if new_block.bindings:
                    blocks.append(new_block)
            bb.begin_block(False)
            body = bb.normalize_argument(self.visit_expr(seq.body))
            tail = bb.end_block()
            if tail.bindings:
                blocks.append(tail)
        finally:
            bb.end_scope()
        if _same(blocks, seq.blocks) and body is seq.body:
            return seq
        return bb.normalize(SeqExpr(blocks, body))

    def visit_block_bindings(self, block) -> None:
        """Emit a block's bindings into the open block (a hook for passes that regroup them)."""
        for binding in block.bindings:
            self.visit_binding(binding)

    def visit_binding(self, binding):
        bb = self.builder
        value = self.visit_expr(binding.value)
        if value is binding.value:
            bb.emit_normalized(binding)
            return binding
        if isinstance(binding, MatchCast):
            new_var = bb.match_cast(value, binding.struct_info, binding.var.name_hint)
        else:
            new_var = self._rebind(binding.var, value)
        self.var_remap[binding.var] = new_var
        return None  # the new binding now lives in the builder's block

    def _rebind(self, var: Var, value: Expr) -> Var:
        """Keep ``var`` when its annotation still describes ``value``; else a fresh var."""
        bb = self.builder
        if structural_equal(var.struct_info, value.struct_info, map_free_vars=False):
            bb.emit_normalized(VarBinding(var, value))
            return var
        if isinstance(var, DataflowVar) or not bb.in_dataflow_block():
            return bb.emit(value, var.name_hint)
        return bb.emit_output(value, var.name_hint)


def _same(new, old) -> bool:
    return len(new) == len(old) and all(a is b for a, b in zip(new, old))


__all__ = ["ExprVisitor", "ExprMutator", "PassMutator"]
