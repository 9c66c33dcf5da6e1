"""Build the prim_func of one legalized call and the ``call_tir`` that runs it.

``TECall`` maps the caller's symbolic variables to FRESH loop-level vars
(same name and facts), so a generated prim_func never shares Var objects
with the graph function and two calls that differ only in variable names
generate structurally equal prim_funcs. A fresh var that no buffer
parameter has as a bare dim (it only appears inside ``n * 4``, or only in
a slice bound) becomes a scalar parameter, and the call passes the
caller's var for it through ``tir_vars``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from tensorir import expr as E
from tensorir.arith import Analyzer
from tensorir.compute import Tensor, create_prim_func, placeholder
from tensorir.functor import collect, substitute
from tensorir.stmt import Range

from ... import op as rx_op
from ...expr import Call, Expr, GlobalVar
from ...struct_info import TensorStructInfo, TupleStructInfo


class SymbolicMap:
    """Caller symbolic var -> fresh var, created on first use in argument order."""

    def __init__(self):
        self._fresh: dict[E.Var, E.Var] = {}
        self._caller: dict[E.Var, E.Var] = {}
        self._names: set[str] = set()

    def var(self, caller_var: E.Var) -> E.Var:
        fresh = self._fresh.get(caller_var)
        if fresh is None:
            name, suffix = caller_var.name, 0
            while name in self._names:
                suffix += 1
                name = f"{caller_var.name}_{suffix}"
            self._names.add(name)
            fresh = caller_var.with_name(name)
            self._fresh[caller_var] = fresh
            self._caller[fresh] = caller_var
        return fresh

    def expr(self, value) -> E.PrimExpr:
        value = E.convert(value)
        free = collect(value, lambda n: isinstance(n, E.Var))
        return substitute(value, {v: self.var(v) for v in free}) if free else value

    def shape(self, dims: Sequence) -> list[E.PrimExpr]:
        return [self.expr(d) for d in dims]

    def fresh_vars(self) -> list[E.Var]:
        return list(self._caller)

    def caller_of(self, fresh: E.Var) -> E.Var:
        return self._caller[fresh]


@dataclass
class EmitRecord:
    """One ``TECall.emit``: what the legalization cache needs to call the prim_func again."""
    gvar: GlobalVar
    args: list
    tir_vars: list | None
    result: Call
    make_call: object


class TECall:
    """One call being legalized: placeholders for its tensor arguments, then ``emit``."""

    def __init__(self, ctx, call: Call):
        self.ctx = ctx
        self.call = call
        self.sym = SymbolicMap()
        self.analyzer = Analyzer()
        self._inputs: list[tuple[Expr, Tensor]] = []

    # ---------------------------------------------------------------- inputs and shapes
    def placeholder(self, arg: Expr, name: str = "x") -> Tensor:
        """A loop-level tensor for graph-level tensor ``arg`` (passed to the call in order)."""
        sinfo = arg.struct_info
        tensor = placeholder(self.sym.shape(sinfo.shape), sinfo.dtype, name)
        self._inputs.append((arg, tensor))
        return tensor

    def expr(self, value) -> E.PrimExpr:
        """A caller-side PrimExpr (attribute, shape value) in the prim_func's variables."""
        return self.sym.expr(value)

    def out_sinfo(self, field: int | None = None) -> TensorStructInfo:
        sinfo = self.call.struct_info
        return sinfo.fields[field] if field is not None else sinfo

    def out_shape(self, field: int | None = None) -> list[E.PrimExpr]:
        return self.sym.shape(self.out_sinfo(field).shape)

    def out_dtype(self, field: int | None = None) -> str:
        return self.out_sinfo(field).dtype

    def bind_loops(self, indices: Sequence[E.Var], extents: Sequence) -> None:
        """Tell the analyzer the ranges of loop indices (for simplifying index arithmetic)."""
        for var, extent in zip(indices, extents):
            if isinstance(var, E.Var):
                self.analyzer.bind(var, Range(E.IntImm(0), E.convert(extent)))

    def simplify(self, value) -> E.PrimExpr:
        return self.analyzer.simplify(E.convert(value))

    def is_one(self, dim) -> bool:
        return E.is_const_int(dim, 1) or self.analyzer.can_prove_equal(dim, E.IntImm(1))

    def prove(self, condition) -> bool:
        return self.analyzer.can_prove(condition)

    # ---------------------------------------------------------------- result
    def emit(self, name: str, outputs: Tensor | Sequence[Tensor]) -> Call:
        """Make the prim_func computing ``outputs`` and return the ``call_tir`` replacing the call."""
        outputs = [outputs] if isinstance(outputs, Tensor) else list(outputs)
        expected = self.call.struct_info
        count = len(expected.fields) if isinstance(expected, TupleStructInfo) else 1
        if len(outputs) != count:
            raise ValueError(f"legalization of {self.call.op.name} made {len(outputs)} outputs, "
                             f"the call has {count}")
        params = [t for _, t in self._inputs] + outputs
        func = create_prim_func(params, name=name, attrs={"tir.noalias": True})
        scalars = self._scalar_params(func)
        if scalars:
            func = func.replace(params=func.params + tuple(scalars))
        gvar = self.ctx.add_prim_func(func, name)
        tir_vars = [self.sym.caller_of(v) for v in scalars] or None
        args = [arg for arg, _ in self._inputs]
        result = rx_op.call_tir(gvar, args, expected, tir_vars=tir_vars)
        self.ctx.emitted.append(EmitRecord(gvar, args, tir_vars, result, rx_op.call_tir))
        return result

    def _scalar_params(self, func) -> list[E.Var]:
        fresh = self.sym.fresh_vars()
        ids = {id(v) for v in fresh}
        used = {id(n) for n in collect(func, lambda n: id(n) in ids)}
        bare = {id(d) for buf in func.buffer_params for d in buf.shape if isinstance(d, E.Var)}
        return [v for v in fresh if id(v) in used and id(v) not in bare]
