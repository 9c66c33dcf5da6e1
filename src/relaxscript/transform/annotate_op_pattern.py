"""AnnotateTIROpPattern: record each prim_func's pattern kind (Algorithm 1) as an attribute."""
from __future__ import annotations

from tensorir.analysis import PatternKind, analyze_pattern
from tensorir.function import PrimFunc
from tensorir.variants import variant_names

from ..irmodule import IRModule
from .pass_infra import Pass

ATTR = "op_pattern"


class OpPattern:
    """TVM's integer pattern kinds, under TVM's names (``OpPattern.ELEMWISE == 0``). A
    prim_func written for TVM carries ``T.func_attr({"op_pattern": 8})``; this pass writes the
    readable name (``"Opaque"``); ``pattern_of`` reads both."""
    ELEMWISE = int(PatternKind.ElementWise)
    BROADCAST = int(PatternKind.Broadcast)
    INJECTIVE = int(PatternKind.Injective)
    COMM_REDUCE = int(PatternKind.Reduction)
    OUT_ELEMWISE_FUSABLE = int(PatternKind.OutputWiseFusible)
    TUPLE = 7  # TVM's kind for tuple-making ops; a prim_func marked so is treated as opaque
    OPAQUE = int(PatternKind.Opaque)


def pattern_of(func: PrimFunc) -> PatternKind:
    """The recorded kind when annotated (a name or TVM's integer), else computed from the loops."""
    if ATTR not in func.attrs:
        return analyze_pattern(func)
    value = func.attrs[ATTR]
    if isinstance(value, int) and not isinstance(value, bool):
        if value == OpPattern.TUPLE:
            return PatternKind.Opaque
        if value in PatternKind._value2member_map_:
            return PatternKind(value)
    elif isinstance(value, str) and value in PatternKind.__members__:
        return PatternKind[value]
    raise ValueError(f"prim_func {func.name!r}: op_pattern {value!r} is not a pattern kind "
                     f"(one of {', '.join(PatternKind.__members__)} or TVM's 0-4, 7, 8)")


class AnnotateTIROpPattern(Pass):
    name = "AnnotateTIROpPattern"

    def transform_module(self, mod: IRModule, ctx) -> IRModule:
        functions = dict(mod.functions)
        for name, func in mod.functions.items():
            if isinstance(func, PrimFunc):
                # fusion would build one new function from the default's body alone and lose the
                # variants: a kernel with variants stays a call of its own
                kind = PatternKind.Opaque.name if variant_names(func) else analyze_pattern(func).name
                if func.attrs.get(ATTR) != kind:
                    functions[name] = func.with_attr(ATTR, kind)
        return IRModule(functions, mod.attrs)
