"""AnnotateTIROpPattern: record each prim_func's pattern kind (Algorithm 1) as an attribute."""
from __future__ import annotations

from tensorir.analysis import PatternKind, analyze_pattern
from tensorir.function import PrimFunc

from ..irmodule import IRModule
from .pass_infra import Pass

ATTR = "op_pattern"


def pattern_of(func: PrimFunc) -> PatternKind:
    """The recorded kind when annotated, else computed from the loops."""
    if ATTR in func.attrs:
        return PatternKind[func.attrs[ATTR]]
    return analyze_pattern(func)


class AnnotateTIROpPattern(Pass):
    name = "AnnotateTIROpPattern"

    def transform_module(self, mod: IRModule, ctx) -> IRModule:
        functions = dict(mod.functions)
        for name, func in mod.functions.items():
            if isinstance(func, PrimFunc):
                kind = analyze_pattern(func).name
                if func.attrs.get(ATTR) != kind:
                    functions[name] = func.with_attr(ATTR, kind)
        return IRModule(functions, mod.attrs)
