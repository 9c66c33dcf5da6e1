"""Signatures of module functions as Callable annotations."""
from __future__ import annotations

from tensorir import expr as E
from tensorir.function import PrimFunc

from .expr import Function
from .struct_info import FuncStructInfo, ObjectStructInfo, PrimStructInfo, TupleStructInfo


def signature_of(func) -> FuncStructInfo:
    """The Callable annotation a call site sees: parameter and return annotations
    of a graph-level Function; for a PrimFunc an opaque, impure Callable returning the
    empty tuple (called directly, as TVM prints it after its memory passes, it writes
    into its output arguments and returns nothing)."""
    if isinstance(func, Function):
        ret = func.ret_struct_info
        if ret is None:
            ret = func.body.struct_info if func.body.struct_info is not None else ObjectStructInfo()
        return FuncStructInfo([p.struct_info for p in func.params], ret, func.is_pure)
    if isinstance(func, PrimFunc):
        if func.result is not None and all(isinstance(p, E.Var) for p in func.params):
            # a prim_func of scalars returning one (TVM's ComputePrimValue output): callable for
            # its value (transform.inline_scalar_prim_calls), impure as TVM's prim_funcs are
            return FuncStructInfo([PrimStructInfo(p.dtype) for p in func.params],
                                  PrimStructInfo(func.ret_dtype), purity=False)
        return FuncStructInfo(None, TupleStructInfo([]), purity=False)
    raise TypeError(f"not a function: {type(func).__name__}")


def with_own_callable_vars(sinfo):
    """``sinfo`` with the symbolic variables of each Callable in it replaced by fresh ones of the
    same names and facts (a deduced return annotation: see ``normalize.finish_function``)."""
    if isinstance(sinfo, TupleStructInfo):
        fields = [with_own_callable_vars(f) for f in sinfo.fields]
        return sinfo if all(a is b for a, b in zip(fields, sinfo.fields)) else TupleStructInfo(fields)
    if isinstance(sinfo, FuncStructInfo):
        return _with_own_vars(sinfo)
    return sinfo


def _with_own_vars(sinfo: FuncStructInfo) -> FuncStructInfo:
    """The Callable's variables are its own binders. A function returning a module function's value
    held that callee's variables in its own return annotation; printed and re-parsed, they became
    the caller's (found by the script mutation fuzzer)."""
    from tensorir import expr as E
    from .struct_info_util import substitute_sinfo, symbolic_vars_of
    own = symbolic_vars_of(sinfo)
    if not own:
        return sinfo
    fresh = {v: E.Var(v.name, v.dtype, lower=v.lower, upper=v.upper, multiple_of=v.multiple_of) for v in own}
    return substitute_sinfo(sinfo, fresh)
