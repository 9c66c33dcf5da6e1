"""Signatures of module functions as Callable annotations."""
from __future__ import annotations

from tensorir.function import PrimFunc

from .expr import Function
from .struct_info import FuncStructInfo, ObjectStructInfo, TupleStructInfo


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
        return FuncStructInfo(None, TupleStructInfo([]), purity=False)
    raise TypeError(f"not a function: {type(func).__name__}")
