"""Signatures of module functions as Callable annotations."""
from __future__ import annotations

from tensorir.function import PrimFunc

from .expr import Function
from .struct_info import FuncStructInfo, ObjectStructInfo


def signature_of(func) -> FuncStructInfo:
    """The Callable annotation a call site sees: parameter and return annotations
    of a graph-level Function; an opaque Callable for a PrimFunc (it is only
    called through ``call_tir``)."""
    if isinstance(func, Function):
        ret = func.ret_struct_info
        if ret is None:
            ret = func.body.struct_info if func.body.struct_info is not None else ObjectStructInfo()
        return FuncStructInfo([p.struct_info for p in func.params], ret, func.is_pure)
    if isinstance(func, PrimFunc):
        return FuncStructInfo(None, ObjectStructInfo(), purity=False)
    raise TypeError(f"not a function: {type(func).__name__}")
