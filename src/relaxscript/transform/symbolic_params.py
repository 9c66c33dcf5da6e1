"""Which symbolic variables a lifted function must receive explicitly (paper Figure 8).

A graph-level function learns the value of a symbolic variable only where a
parameter's annotation holds it as a bare dimension (``R.Tensor((n, 4))``,
``R.Shape([n])``). When a region is lifted out into a new function whose
tensor parameters mention a variable only inside expressions (``n * 2``),
or whose body needs a variable no parameter mentions at all, the variable
is passed in an extra ``R.Shape([n])`` parameter.
"""
from __future__ import annotations

from typing import Iterable

from tensorir import expr as tir

from ..struct_info import PrimStructInfo, ShapeStructInfo, StructInfo, TensorStructInfo, TupleStructInfo
from ..struct_info_util import symbolic_vars_of


def bare_defined_vars(param_sinfos: Iterable[StructInfo]) -> set[tir.Var]:
    """Symbolic vars that some parameter annotation holds as a bare dimension or value."""
    defined: set[tir.Var] = set()
    stack = list(param_sinfos)
    while stack:
        sinfo = stack.pop()
        dims = ()
        if isinstance(sinfo, TensorStructInfo):
            dims = sinfo.shape or ()
        elif isinstance(sinfo, ShapeStructInfo):
            dims = sinfo.values or ()
        elif isinstance(sinfo, PrimStructInfo) and sinfo.value is not None:
            dims = (sinfo.value,)
        elif isinstance(sinfo, TupleStructInfo):
            stack.extend(sinfo.fields)
        defined.update(d for d in dims if isinstance(d, tir.Var))
    return defined


def extra_shape_vars(param_sinfos: Iterable[StructInfo], used) -> list[tir.Var]:
    """Vars mentioned in ``used`` (annotations or PrimExprs) or in the parameter
    annotations that no parameter defines as a bare dimension, in first-use order."""
    param_sinfos = list(param_sinfos)
    defined = bare_defined_vars(param_sinfos)
    needed = symbolic_vars_of([param_sinfos, list(used)])
    return [v for v in needed if v not in defined]


def fresh_copies(variables: Iterable[tir.Var]) -> dict[tir.Var, tir.Var]:
    """A new var (same name and facts) for each var: a function boundary isolates
    symbolic relations, so a lifted function gets its own variables."""
    return {v: v.with_name(v.name) for v in variables}
