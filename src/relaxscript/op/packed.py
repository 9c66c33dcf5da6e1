"""Calls of functions registered by name (``relaxscript.register_func``), TVM's packed calls:

- ``R.call_dps_packed("name", (inputs...), out_sinfo)``: destination-passing, the same
  meaning as ``R.call_dps_library`` (the function fills fresh outputs; CallTIRRewrite
  allocates them); the name resolves in the same registry;
- ``R.call_pure_packed("name", *args, sinfo_args=...)``: a pure call returning its result,
  annotated by ``sinfo_args``;
- ``R.call_packed("name", *args, sinfo_args=...)`` is not an operator: it is a call whose
  callee is ``R.ExternFunc("name")`` (impure, so outside dataflow blocks), as in TVM.

Call layout: ``call_dps_packed``: ``args = (ExternFunc(name), Tuple(inputs))``;
``call_pure_packed``: ``args = (ExternFunc(name), *args)``.
"""
from __future__ import annotations

from ..expr import Expr, ExternFunc
from ..struct_info import StructInfo
from ._convert import as_call_args, make_call
from .call import _infer_cross_level, _out_sinfo
from .registry import OpAttributeError, register_op


def _callee(name, op: str) -> Expr:
    if isinstance(name, ExternFunc):
        return name
    if not isinstance(name, str) or not name:
        raise OpAttributeError(f"R.{op}: the callee must be a registered function's name "
                               f"(a string), got {name!r}")
    return ExternFunc(name)


def call_dps_packed(name, args, out_sinfo):
    """R.call_dps_packed(name, args, out_sinfo): DPS call of a registered function."""
    return make_call("relax.call_dps_packed", [_callee(name, "call_dps_packed"), as_call_args(args)],
                     sinfo_args=[_out_sinfo(out_sinfo, "call_dps_packed")])


def call_pure_packed(name, *args, sinfo_args):
    """R.call_pure_packed(name, *args, sinfo_args=annotation): pure call of a registered function."""
    sinfos = list(sinfo_args) if isinstance(sinfo_args, (list, tuple)) else [sinfo_args]
    if len(sinfos) != 1 or not isinstance(sinfos[0], StructInfo):
        raise OpAttributeError(f"R.call_pure_packed: sinfo_args must be one annotation, got {sinfo_args!r}")
    for arg in args:
        if not isinstance(arg, Expr):
            raise OpAttributeError(f"R.call_pure_packed: arguments must be graph-level values, got {arg!r}")
    return make_call("relax.call_pure_packed", [_callee(name, "call_pure_packed"), *args],
                     sinfo_args=sinfos)


def _infer_pure_packed(call, ctx) -> StructInfo:
    if len(call.sinfo_args) != 1:
        ctx.error(f"relax.call_pure_packed needs exactly one result annotation, got {len(call.sinfo_args)}")
    if not call.args or not isinstance(call.args[0], ExternFunc):
        ctx.error("relax.call_pure_packed: the first argument must name the function")
    return call.sinfo_args[0]


register_op("relax.call_dps_packed", _infer_cross_level, None, constructor=call_dps_packed)
register_op("relax.call_pure_packed", _infer_pure_packed, None, constructor=call_pure_packed)

__all__ = ["call_dps_packed", "call_pure_packed"]
