"""FoldConstant: evaluate calls whose arguments are all known at compile time.

A call folds when its callee is a pure operator with a NumPy reference, or
``R.call_tir`` of a prim_func of the module, and every argument is a
``Constant``, a variable bound to one, a shape or scalar with literal values,
or a tuple of those. The call is evaluated by the reference interpreter's
own machinery (so the folded value is exactly what running the program
gives) and replaced by a ``Constant`` (a tuple of Constants for tuple
results). Bindings left unused are removed by DeadCodeElimination.

Not folded: impure operators, library calls, calls whose deduced annotation
is not a tensor (or tuple of tensors) with a fully static shape and dtype
(symbolic outputs), calls whose evaluation fails (the failure stays a run-time
one), and results larger than ``max_elements`` elements in total (default
2**20, about one million) — embedding huge tensors in the IR costs more in
module size than it saves at run time.
"""
from __future__ import annotations

import numpy as np

from tensorir import expr as tir
from tensorir.dispatch import handles

from ..expr import Call, Constant, GlobalVar, Op, PrimValue, ShapeExpr, StringImm, Tuple, Var
from ..expr_functor import PassMutator
from ..irmodule import IRModule
from ..struct_info import TensorStructInfo, TupleStructInfo
from .pass_infra import Pass

DEFAULT_MAX_ELEMENTS = 1 << 20


class FoldConstant(Pass):
    """Replace calls of pure ops (and call_tir) on constant arguments by their values."""
    name = "FoldConstant"

    def __init__(self, max_elements: int = DEFAULT_MAX_ELEMENTS):
        if not isinstance(max_elements, int) or max_elements < 0:
            raise ValueError(f"FoldConstant: max_elements must be a non-negative int, got {max_elements!r}")
        self.max_elements = max_elements

    def transform_module(self, mod: IRModule, ctx) -> IRModule:
        return _Folder(mod, self.max_elements).transform_module(mod)


class _Folder(PassMutator):
    def __init__(self, mod: IRModule, max_elements: int):
        super().__init__(mod)
        self.mod = mod
        self.max_elements = max_elements
        self.constant_of: dict[Var, Constant] = {}

    def visit_binding(self, binding):
        result = super().visit_binding(binding)
        var = binding.var if result is not None else self.var_remap[binding.var]
        value = self.builder.lookup_binding(var)
        if isinstance(value, Constant):
            self.constant_of[var] = value
        return result

    @handles(Call)
    def visit_Call(self, call: Call):
        new = self.generic_visit(call)
        if not isinstance(new.op, Op) or not _foldable_op(new.op.name):
            return new
        args = [self._as_constant(a) for a in new.args]
        if any(a is None for a in args):
            return new
        candidate = self.builder.normalize(Call(new.op, args, new.attrs, new.sinfo_args))
        if not _static_result(candidate.struct_info, self.max_elements):
            return new
        value = self._evaluate(candidate)
        folded = _as_constant_expr(value, candidate.struct_info)
        return new if folded is None else folded

    def _as_constant(self, arg):
        """``arg`` with variables bound to constants substituted, or None when not constant."""
        if isinstance(arg, Constant):
            return arg
        if isinstance(arg, Var):
            return self.constant_of.get(arg)
        if isinstance(arg, (ShapeExpr, PrimValue)):
            values = arg.values if isinstance(arg, ShapeExpr) else (arg.value,)
            return arg if all(isinstance(v, (tir.IntImm, tir.FloatImm)) for v in values) else None
        if isinstance(arg, StringImm):
            return arg
        if isinstance(arg, Tuple):
            fields = [self._as_constant(f) for f in arg.fields]
            if any(f is None for f in fields):
                return None
            return arg if all(a is b for a, b in zip(fields, arg.fields)) else Tuple(fields)
        if isinstance(arg, GlobalVar):  # call_tir's callee
            return arg
        return None

    def _evaluate(self, call: Call):
        from ..interpreter import Frame, Interpreter
        from ..interpreter.shape_env import ShapeEnv
        frame = Frame(Interpreter(self.mod), "<FoldConstant>", None, ShapeEnv())
        try:
            with np.errstate(all="ignore"):
                return frame.eval(call)
        except Exception:  # noqa: BLE001 - a failing evaluation stays a run-time failure
            return None


def _foldable_op(name: str) -> bool:
    if name == "relax.call_tir":
        return True
    from ..interpreter import BUILTINS
    from ..op.registry import get_op_spec
    if name in BUILTINS:
        return False
    spec = get_op_spec(name)
    return spec.pure and spec.reference is not None


def _static_result(sinfo, max_elements: int) -> bool:
    tensors = sinfo.fields if isinstance(sinfo, TupleStructInfo) else (sinfo,)
    total = 0
    for t in tensors:
        if not isinstance(t, TensorStructInfo) or t.shape is None or t.dtype is None:
            return False
        if not all(isinstance(d, tir.IntImm) for d in t.shape):
            return False
        total += int(np.prod([d.value for d in t.shape], dtype=np.int64))
    return bool(tensors) and total <= max_elements


def _as_constant_expr(value, sinfo):
    """The folded expression, or None when the value does not fit the deduced annotation."""
    if isinstance(sinfo, TupleStructInfo):
        if not isinstance(value, tuple) or len(value) != len(sinfo.fields):
            return None
        fields = [_as_constant_expr(v, s) for v, s in zip(value, sinfo.fields)]
        return None if any(f is None for f in fields) else Tuple(fields)
    if not isinstance(value, np.ndarray):
        return None
    shape = tuple(d.value for d in sinfo.shape)
    if value.shape != shape or value.dtype.name != sinfo.dtype:
        return None
    return Constant(value.copy())


__all__ = ["FoldConstant", "DEFAULT_MAX_ELEMENTS"]
