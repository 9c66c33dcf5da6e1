"""Deduction of calls to functions from the callee's signature alone (paper Figure 7).

The callee's symbolic variables are local to its signature: they are bound
by matching the parameter annotations against the argument annotations and
substituted into the return annotation. A variable that the arguments cannot
determine (an argument coarser than the parameter, e.g. ``Shape(ndim=2)``
passed for ``Shape([n, m])``) makes the parts of the result that mention it
coarse (``Tensor(ndim=1)``); the runtime checks at the call boundary cover it.
"""
from __future__ import annotations

from typing import Sequence

from .struct_info import FuncStructInfo, StructInfo
from .struct_info_util import (NO, StructInfoMatcher, erase_to_well_defined, format_sinfo,
                               symbolic_vars_of)


def deduce_call(callee: FuncStructInfo, arg_sinfos: Sequence[StructInfo], analyzer,
                callee_name: str = "callee") -> StructInfo:
    """The annotation of ``callee(*args)``; raises DeductionError on a provable mismatch."""
    from .normalize import DeductionError  # late: normalize imports this module

    if callee.params is None:  # opaque callable: only its return annotation is known
        return callee.ret
    if len(callee.params) != len(arg_sinfos):
        raise DeductionError(f"{callee_name} takes {len(callee.params)} argument(s) "
                             f"{_listing(callee.params)}, got {len(arg_sinfos)} {_listing(arg_sinfos)}")
    signature_vars = set(symbolic_vars_of(list(callee.params) + [callee.ret]))
    matcher = StructInfoMatcher(analyzer, signature_vars.__contains__)
    for index, (param, arg) in enumerate(zip(callee.params, arg_sinfos)):
        if arg is None:
            raise DeductionError(f"argument {index} of the call to {callee_name} has no annotation")
        if matcher.match(param, arg, tag=index) == NO:
            break
    if matcher.finish() == NO:
        index = matcher.failed_tag
        raise DeductionError(
            f"argument {index} of the call to {callee_name} is annotated {format_sinfo(arg_sinfos[index])}, "
            f"which can never match the parameter annotation {format_sinfo(callee.params[index])}"
            + _bound_note(matcher.bindings))
    bindings = matcher.bindings

    def well_defined(var) -> bool:
        return var not in signature_vars or var in bindings

    # Substitution is simultaneous, so a binding n -> n + 1 does not chain.
    return erase_to_well_defined(callee.ret, well_defined, var_map=bindings)


def _listing(sinfos) -> str:
    return "(" + ", ".join(format_sinfo(s) for s in sinfos) + ")"


def _bound_note(bindings) -> str:
    if not bindings:
        return ""
    from .struct_info_util import format_prim
    pairs = ", ".join(f"{v.name} = {format_prim(e)}" for v, e in bindings.items())
    return f" (with {pairs} from the arguments)"
