"""LambdaLift: local functions become module functions.

A binding ``f = <Function>`` inside a function body is removed and the
function is added to the module as ``<outer>_<f>``. Its free variables (graph
variables of enclosing scopes) become extra parameters after its own, and the
symbolic variables of enclosing scopes it uses get fresh copies: those that
no parameter annotation holds as a bare dimension are passed in one extra
``R.Shape([...])`` parameter (as FuseOps does, paper Figure 8). Every call
``f(args)`` becomes ``cls.<outer>_<f>(args, free vars..., R.shape([...]))``,
recursive calls inside the lifted function included. Nested local functions
are lifted innermost first.

Without closures at run time, a local function that captures variables and
is also used as a value (passed, returned, stored in a tuple) cannot be
replaced by a module function; it stays local (its own nested functions are
still lifted). A capture-free one used as a value becomes the GlobalVar.
"""
from __future__ import annotations

from tensorir import expr as tir
from tensorir.dispatch import handles
from tensorir.functor import collect

from ..block_builder import BlockBuilder
from ..expr import Call, Function, GlobalVar, MatchCast, SeqExpr, ShapeExpr, Var, VarBinding
from ..expr_functor import ExprMutator, ExprVisitor
from ..irmodule import IRModule
from ..struct_info import FuncStructInfo, ShapeStructInfo
from ..struct_info_util import symbolic_vars_of
from .dead_code_elimination import drop_empty_blocks
from .pass_infra import Pass
from .symbolic_params import bare_defined_vars, fresh_copies


class LambdaLift(Pass):
    """Turn local functions into module-level functions with their captures as parameters."""
    name = "LambdaLift"

    def transform_module(self, mod: IRModule, ctx) -> IRModule:
        functions = dict(mod.functions)
        for name, func in mod.relax_functions.items():
            lifter = _Lifter(name, set(functions), _value_uses(func))
            new = lifter.visit(func)
            if new is not func or lifter.lifted_functions:
                functions[name] = new
                functions.update(lifter.lifted_functions)
        if all(functions.get(n) is f for n, f in mod.functions.items()) and len(functions) == len(mod.functions):
            return mod
        return IRModule(functions, mod.attrs)


class _UseCollector(ExprVisitor):
    """Variables used other than as the callee of a call."""

    def __init__(self):
        self.value_uses: set[Var] = set()

    @handles(Call)
    def visit_Call(self, call: Call) -> None:
        if not isinstance(call.op, Var):
            self.visit(call.op)
        for arg in call.args:
            self.visit(arg)

    def visit_var_use(self, var: Var) -> None:
        self.value_uses.add(var)


def _value_uses(func: Function) -> set[Var]:
    collector = _UseCollector()
    collector.visit(func)
    return collector.value_uses


class _Lifted:
    def __init__(self, gvar: GlobalVar, captured: list[Var], shape_vars: list[tir.Var]):
        self.gvar, self.captured, self.shape_vars = gvar, captured, shape_vars

    def call(self, args, captured_exprs, shape_values) -> Call:
        extra = list(captured_exprs)
        if self.shape_vars:
            extra.append(ShapeExpr(shape_values))
        return BlockBuilder().normalize(Call(self.gvar, list(args) + extra))


class _Lifter(ExprMutator):
    def __init__(self, outer_name: str, taken_names: set[str], value_uses: set[Var]):
        super().__init__()
        self.outer_name = outer_name
        self.taken_names = taken_names
        self.value_uses = value_uses
        self.lifted: dict[Var, _Lifted] = {}
        self.lifted_functions: dict[str, Function] = {}
        self.symbolic_scopes: list[set] = []

    # ---------------------------------------------------------------- scopes of symbolic vars
    @handles(Function)
    def visit_Function(self, func: Function):
        self.symbolic_scopes.append(set(symbolic_vars_of([p.struct_info for p in func.params])))
        try:
            return super().visit_Function(func)
        finally:
            self.symbolic_scopes.pop()

    def _outer_symbolic(self) -> set:
        return set().union(*self.symbolic_scopes) if self.symbolic_scopes else set()

    # ---------------------------------------------------------------- bindings and calls
    def visit_block(self, block):
        bindings = [self.visit_binding(b) for b in block.bindings]
        kept = tuple(b for b in bindings if b is not None)
        same = len(kept) == len(block.bindings) and all(a is b for a, b in zip(kept, block.bindings))
        return block if same else block.replace(bindings=kept)

    @handles(SeqExpr)
    def visit_SeqExpr(self, seq):
        new = super().visit_SeqExpr(seq)
        if new is not seq:
            blocks = drop_empty_blocks(new.blocks)
            if len(blocks) != len(new.blocks):
                new = new.replace(blocks=blocks)
        return new

    def visit_binding(self, binding):
        if isinstance(binding, MatchCast) and self.symbolic_scopes:
            self.symbolic_scopes[-1].update(symbolic_vars_of(binding.struct_info))
        if not (isinstance(binding, VarBinding) and isinstance(binding.value, Function)):
            return super().visit_binding(binding)
        outer_symbolic = self._outer_symbolic()
        inner = self.visit(binding.value)  # lifts the functions nested inside first
        captured = _captured_vars(inner, binding.var)
        all_symbolic = symbolic_vars_of(collect(inner, lambda n: isinstance(n, tir.Var)))
        symbolic = [v for v in all_symbolic if v in outer_symbolic]
        if (captured or _needs_shape_param(inner, captured, symbolic)) and binding.var in self.value_uses:
            return binding if inner is binding.value else VarBinding(binding.var, inner)
        self.lifted[binding.var] = self._lift(binding.var, inner, captured, symbolic, all_symbolic)
        return None

    @handles(Call)
    def visit_Call(self, call: Call):
        lifted = self.lifted.get(call.op) if isinstance(call.op, Var) else None
        if lifted is None:
            return self.generic_visit(call)
        args = [self.visit(a) for a in call.args]
        captured = [self.visit(v) for v in lifted.captured]
        return lifted.call(args, captured, [self.visit(v) for v in lifted.shape_vars])

    @handles(Var)
    def visit_Var(self, var):
        lifted = self.lifted.get(var)
        return lifted.gvar if lifted is not None else super().visit_Var(var)

    # ---------------------------------------------------------------- lifting one function
    def _lift(self, local: Var, func: Function, captured: list[Var], symbolic: list[tir.Var],
              all_symbolic: list[tir.Var]) -> _Lifted:
        # Every symbolic var gets a fresh copy: a module function has its own symbolic scope.
        fresh = fresh_copies(all_symbolic)
        remap = _Remapper(fresh)
        params = [remap.visit_var_def(p) for p in func.params]
        captured_params = [remap.new_param(v) for v in captured]
        bare = bare_defined_vars([p.struct_info for p in params + captured_params])
        shape_vars = [v for v in symbolic if fresh[v] not in bare]
        shape_params = [Var("shape_args", ShapeStructInfo([fresh[v] for v in shape_vars]))] if shape_vars else []
        name = self._fresh_name(f"{self.outer_name}_{local.name_hint}")
        ret = remap.visit_value(func.ret_struct_info)
        signature = FuncStructInfo([p.struct_info for p in params + captured_params + shape_params], ret,
                                   func.is_pure)
        gvar = GlobalVar(name, signature)
        # Inside the lifted function, recursive calls pass its own extra parameters along.
        remap.self_call = (local, _Lifted(gvar, captured_params, [fresh[v] for v in shape_vars]))
        body = remap.visit(func.body)
        attrs = {k: v for k, v in func.attrs.items() if k != "global_symbol"}
        # private, as TVM's lifted closures: an unused local function must not become a build's entry
        lifted = Function(params + captured_params + shape_params, body, ret, func.is_pure, attrs, is_private=True)
        self.lifted_functions[name] = BlockBuilder()._normalize_detached(lifted)
        return _Lifted(gvar, captured, shape_vars)

    def _fresh_name(self, base: str) -> str:
        name, suffix = base, 0
        while name in self.taken_names:
            suffix += 1
            name = f"{base}_{suffix}"
        self.taken_names.add(name)
        return name


class _Remapper(ExprMutator):
    """Rewrites a lifted body: captured vars -> parameters, outer symbolic vars -> fresh copies,
    recursive calls -> calls of the module function."""

    def __init__(self, symbolic_map: dict):
        super().__init__()
        self.var_remap.update(symbolic_map)
        self.self_call: tuple[Var, _Lifted] | None = None

    def new_param(self, var: Var) -> Var:
        param = Var(var.name_hint, self.visit_value(var.struct_info))
        self.var_remap[var] = param
        return param

    @handles(Call)
    def visit_Call(self, call: Call):
        if self.self_call is None or call.op is not self.self_call[0]:
            return super().generic_visit(call)
        lifted = self.self_call[1]
        return lifted.call([self.visit(a) for a in call.args], lifted.captured, lifted.shape_vars)

    @handles(Var)
    def visit_Var(self, var):
        if self.self_call is not None and var is self.self_call[0]:
            return self.self_call[1].gvar
        return super().visit_Var(var)


def _captured_vars(func: Function, local: Var) -> list[Var]:
    """Graph vars used in ``func`` but bound outside it, in first-use order (``local`` itself excluded)."""
    defined = set(func.params)
    defined.update(b.var for b in collect(func.body, lambda n: isinstance(n, (VarBinding, MatchCast))))
    defined.update(p for f in collect(func.body, lambda n: isinstance(n, Function)) for p in f.params)
    used = collect(func, lambda n: isinstance(n, Var))
    return [v for v in used if v not in defined and v is not local]


def _needs_shape_param(func: Function, captured: list[Var], symbolic: list[tir.Var]) -> bool:
    bare = bare_defined_vars([p.struct_info for p in list(func.params) + captured])
    return any(v not in bare for v in symbolic)


__all__ = ["LambdaLift"]
