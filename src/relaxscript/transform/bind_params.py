"""BindParams: turn parameters of a function into constants (model weights known at build time).

``BindParams("main", {"w": array, ...})`` removes the named parameters from
``main`` and uses ``Constant(array)`` wherever they were read, so passes that
need weight values (MergeParallelMatmul, FoldConstant) can see them. A bound
parameter's annotation must be a tensor with a static shape and dtype equal to
the array's; anything else is a ``ValueError`` naming the function and parameter.
Callers of the function inside the module are not rewritten: bind the entry point.
"""
from __future__ import annotations

import numpy as np

from tensorir import expr as tir

from ..expr import Constant, Function
from ..expr_functor import PassMutator
from ..irmodule import IRModule
from ..struct_info import TensorStructInfo
from .pass_infra import Pass


class BindParams(Pass):
    """Replace the named parameters of ``func_name`` by constants."""
    name = "BindParams"

    def __init__(self, func_name: str, params: dict):
        if not isinstance(func_name, str) or not isinstance(params, dict):
            raise TypeError("BindParams(func_name: str, params: dict of name -> array)")
        self.func_name = func_name
        self.params = {name: np.asarray(value) for name, value in params.items()}

    def transform_module(self, mod: IRModule, ctx) -> IRModule:
        if self.func_name not in mod.relax_functions:
            raise ValueError(f"BindParams: the module has no graph function {self.func_name!r}")
        func = mod[self.func_name]
        names = [p.name_hint for p in func.params]
        unknown = sorted(set(self.params) - set(names))
        if unknown:
            raise ValueError(f"BindParams: {self.func_name} has no parameter(s) {', '.join(unknown)} "
                             f"(parameters: {', '.join(names)})")
        binder = _Binder(mod)
        for param in func.params:
            if param.name_hint in self.params:
                binder.var_remap[param] = _constant_for(self.func_name, param, self.params[param.name_hint])
        new = binder.visit(func)
        binder.builder.update_func(self.func_name, new)
        return binder.builder.get()


def _constant_for(func_name: str, param, value: np.ndarray) -> Constant:
    sinfo = param.struct_info
    where = f"BindParams: {func_name} parameter {param.name_hint!r}"
    if not isinstance(sinfo, TensorStructInfo) or sinfo.shape is None or \
            not all(isinstance(d, tir.IntImm) for d in sinfo.shape):
        raise ValueError(f"{where} must be a tensor with a static shape to be bound")
    shape = tuple(int(d.value) for d in sinfo.shape)
    if value.shape != shape or value.dtype.name != sinfo.dtype:
        raise ValueError(f"{where} is {sinfo.dtype}{list(shape)}, got an array "
                         f"{value.dtype.name}{list(value.shape)}")
    return Constant(value)


class _Binder(PassMutator):
    """Rebuilds the function without the parameters that ``var_remap`` maps to constants."""

    def visit_Function(self, func: Function):
        kept = tuple(p for p in func.params if p not in self.var_remap)
        if len(kept) == len(func.params):
            return func
        fewer = Function(kept, func.body, func.ret_struct_info, func.is_pure, func.attrs, func.is_private)
        new = super().visit_Function(fewer)
        # an unused bound parameter leaves the body as it was: annotate the new signature
        return self.builder._normalize_detached(new) if new is fewer else new


__all__ = ["BindParams"]
