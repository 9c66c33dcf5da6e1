"""Graph-level calls of prim_funcs that compute one scalar, replaced by the scalar.

TVM's ComputePrimValue moves a symbolic expression the graph needs at run time into a
prim_func of scalar parameters that returns it, called directly from the graph::

    condition: R.Prim("bool") = cls.compute_symbolic_expr(R.prim_value(N))

    @T.prim_func(private=True)
    def compute_symbolic_expr(N: T.int64) -> T.bool:
        T.ret(N % 16 == 0)

Such a callee takes only scalars and only binds lets before its ``return``, so its call is
the returned expression with the parameters replaced by the arguments' values:
``R.prim_value(N % 16 == 0)``, which the interpreter and the VM already compute from the
symbolic variables they know. Both run this rewrite before anything else (the module as
written keeps the call: it prints and round-trips as TVM's). Each argument must be a
``R.prim_value`` or a variable whose annotation knows its value (``R.Prim(value=n)``);
anything else, or a callee that runs statements before returning, is an ``IRError`` naming
the caller and the callee.
"""
from __future__ import annotations

from tensorir import expr as E
from tensorir.dispatch import handles
from tensorir.errors import IRError
from tensorir.function import PrimFunc, trailing_ret
from tensorir.functor import substitute
from tensorir.stmt import BlockRealize, Evaluate, LetStmt

from ..block_builder import BlockBuilder
from ..expr import Call, GlobalVar, PrimValue, Var
from ..expr_functor import PassMutator
from ..irmodule import IRModule
from ..struct_info import PrimStructInfo


def is_scalar_function(func) -> bool:
    """A prim_func of scalar parameters that returns a value (callable from the graph)."""
    return isinstance(func, PrimFunc) and func.result is not None \
        and all(isinstance(p, E.Var) for p in func.params)


def inline_scalar_prim_calls(mod: IRModule) -> IRModule:
    if not any(is_scalar_function(f) for f in mod.functions.values()):
        return mod
    return _Inliner(mod).transform_module(mod)


def _result_expression(callee: PrimFunc, name: str, caller: str) -> E.PrimExpr:
    """The returned expression of a callee of lets and a return, lets substituted."""
    body = callee.body
    if isinstance(body, BlockRealize) and body.block.name == "root" and not body.block.iter_vars \
            and not body.block.alloc_buffers:
        body = body.block.body
    lets: dict = {}
    while isinstance(body, LetStmt):
        lets[body.var] = substitute(body.value, lets) if lets else body.value
        body = body.body
    ret = trailing_ret(body)
    if not (isinstance(body, Evaluate) and ret is body.value):
        raise IRError(f"function {caller!r} calls prim_func {name!r} for its value, but {name!r} runs "
                      "statements (loops, stores, allocations) before its return: only a prim_func "
                      "of lets and a return can be called from the graph level")
    return substitute(ret.args[0], lets) if lets else ret.args[0]


class _Inliner(PassMutator):
    def __init__(self, mod: IRModule):
        super().__init__(mod)
        self.mod = mod
        self.caller = "?"

    def transform_module(self, mod: IRModule) -> IRModule:
        self.builder = BlockBuilder(mod)
        for name, func in mod.relax_functions.items():
            self.caller = name
            new = self.visit(func)
            if new is not func:
                self.builder.update_func(name, new)
        return self.builder.get()

    @handles(Call)
    def visit_Call(self, call: Call):
        call = self.generic_visit(call)
        if not isinstance(call.op, GlobalVar) or call.op.name_hint not in self.mod.functions:
            return call
        callee = self.mod[call.op.name_hint]
        if not is_scalar_function(callee):
            return call
        name = call.op.name_hint
        if len(call.args) != len(callee.params):
            raise IRError(f"function {self.caller!r} calls prim_func {name!r} with {len(call.args)} "
                          f"argument(s); it takes {len(callee.params)}")
        values = {}
        for param, arg in zip(callee.params, call.args):
            value = _known_value(arg)
            if value is None:
                raise IRError(f"function {self.caller!r} calls prim_func {name!r}: the argument for "
                              f"{param.name!r} must be a R.prim_value or a variable annotated "
                              f"R.Prim(value=...) (its value known from the symbolic variables)")
            values[param] = value if value.dtype == param.dtype else E.cast(param.dtype, value)
        return PrimValue(substitute(_result_expression(callee, name, self.caller), values))


def _known_value(arg):
    if isinstance(arg, PrimValue):
        return arg.value
    sinfo = arg.struct_info if isinstance(arg, Var) else None
    if isinstance(sinfo, PrimStructInfo) and sinfo.value is not None:
        return sinfo.value
    return None


__all__ = ["inline_scalar_prim_calls", "is_scalar_function"]
