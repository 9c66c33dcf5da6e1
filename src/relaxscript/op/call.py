"""Cross-level calls: ``R.call_tir`` (into a loop-level prim_func) and
``R.call_dps_library`` (into a registered library function).

Both are pure at the graph level: the callee writes into fresh outputs
(destination-passing style) that CallTIRRewrite later allocates explicitly.
Their output annotation is an argument (``sinfo_args[0]``) and is the
deduced annotation (paper section 4.1).

``R.call_tir_inplace`` is the exception: the callee writes into some of its
inputs (``inplace_indices``), which are then its outputs; nothing is
allocated. It stays pure at the graph level under one rule, as in TVM: an
argument written in place is never read again except through the call's
result (a KV cache threaded from call to call).

Call layout: ``call_tir``: ``args = (gvar, Tuple(inputs)[, tir_vars ShapeExpr])``;
``call_tir_inplace``: the same, attrs ``{"inplace_indices": (i, ...)}``;
``call_dps_library``: ``args = (ExternFunc(name), Tuple(inputs))``.
Their meaning needs the module or the library registry, so they have no
stand-alone NumPy reference: the interpreter runs them.
"""
from __future__ import annotations

from ..expr import Expr, ExternFunc
from ..struct_info import ShapeStructInfo, StructInfo, TensorStructInfo, TupleStructInfo
from ._convert import as_call_args, as_shape, make_call
from ._infer_util import format_sinfo, sinfo_of
from .registry import OpAttributeError, register_op


def _out_sinfo(out_sinfo, op: str) -> StructInfo:
    if isinstance(out_sinfo, (list, tuple)):
        fields = [_out_sinfo(s, op) for s in out_sinfo]
        if not fields:
            raise OpAttributeError(f"R.{op}: out_sinfo must name at least one output")
        return fields[0] if len(fields) == 1 else TupleStructInfo(fields)
    if isinstance(out_sinfo, TupleStructInfo):
        for f in out_sinfo.fields:
            _out_sinfo(f, op)
        return out_sinfo
    if not isinstance(out_sinfo, TensorStructInfo):
        raise OpAttributeError(f"R.{op}: out_sinfo must be tensor annotation(s), got {out_sinfo!r}")
    return out_sinfo


def call_tir(gvar, args, out_sinfo, tir_vars=None):
    """R.call_tir(gvar, args, out_sinfo, tir_vars=None): DPS call of a prim_func."""
    if not isinstance(gvar, Expr):  # a name string is call_dps_library's callee, not call_tir's
        raise OpAttributeError(f"R.call_tir: the callee must be a prim_func of the module "
                               f"(cls.name or a GlobalVar), got {gvar!r}")
    call_args = [gvar, as_call_args(args)]
    if tir_vars is not None:
        call_args.append(as_shape(tir_vars))
    return make_call("relax.call_tir", call_args, sinfo_args=[_out_sinfo(out_sinfo, "call_tir")])


def call_tir_inplace(gvar, args, inplace_indices, out_sinfo, tir_vars=None):
    """R.call_tir_inplace(gvar, args, inplace_indices, out_sinfo, tir_vars=None): call a prim_func
    that updates the arguments at ``inplace_indices`` in place; those arguments are the results."""
    if not isinstance(gvar, Expr):
        raise OpAttributeError(f"R.call_tir_inplace: the callee must be a prim_func of the module "
                               f"(cls.name or a GlobalVar), got {gvar!r}")
    indices = (inplace_indices,) if isinstance(inplace_indices, int) else tuple(inplace_indices)
    if not indices or not all(isinstance(i, int) and not isinstance(i, bool) for i in indices):
        raise OpAttributeError(f"R.call_tir_inplace: inplace_indices must be argument positions, "
                               f"got {inplace_indices!r}")
    if len(set(indices)) != len(indices):
        raise OpAttributeError(f"R.call_tir_inplace: inplace_indices repeat a position: {indices}")
    call_args = [gvar, as_call_args(args)]
    if tir_vars is not None:
        call_args.append(as_shape(tir_vars))
    return make_call("relax.call_tir_inplace", call_args, {"inplace_indices": indices},
                     sinfo_args=[_out_sinfo(out_sinfo, "call_tir_inplace")])


def call_dps_library(name, args, out_sinfo):
    """R.call_dps_library(name, args, out_sinfo): DPS call of a library function by name."""
    func = name if isinstance(name, Expr) else ExternFunc(str(name))
    return make_call("relax.call_dps_library", [func, as_call_args(args)],
                     sinfo_args=[_out_sinfo(out_sinfo, "call_dps_library")])


def _infer_cross_level(call, ctx) -> StructInfo:
    if len(call.sinfo_args) != 1:
        ctx.error(f"{call.op.name} needs exactly one output annotation, got {len(call.sinfo_args)}")
    if len(call.args) < 2:
        ctx.error(f"{call.op.name} needs a callee and a tuple of arguments")
    inputs = sinfo_of(call.args[1])
    if not isinstance(inputs, TupleStructInfo):
        ctx.error(f"{call.op.name}: arguments must be a tuple, got {format_sinfo(inputs)}")
    if len(call.args) > 2:
        tir_vars = sinfo_of(call.args[2])
        if call.op.name not in ("relax.call_tir", "relax.call_tir_inplace") or len(call.args) > 3 \
                or not isinstance(tir_vars, ShapeStructInfo):
            ctx.error(f"{call.op.name}: unexpected extra argument {format_sinfo(tir_vars)}")
    return call.sinfo_args[0]


def _infer_call_tir_inplace(call, ctx) -> StructInfo:
    out = _infer_cross_level(call, ctx)
    inputs = sinfo_of(call.args[1]).fields
    indices = call.attrs.get("inplace_indices", ())
    outs = list(out.fields) if isinstance(out, TupleStructInfo) else [out]
    if len(outs) != len(indices):
        ctx.error(f"R.call_tir_inplace: {len(indices)} inplace_indices for {len(outs)} output(s)")
    for index, expected in zip(indices, outs):
        if index == -1:
            ctx.error("R.call_tir_inplace: inplace index -1 (TVM's newly allocated output) is not "
                      "supported; every result is an updated argument here (use R.call_tir for "
                      "new outputs)")
        if not 0 <= index < len(inputs):
            ctx.error(f"R.call_tir_inplace: inplace index {index} is not an argument position "
                      f"(there are {len(inputs)} arguments)")
        actual = inputs[index]
        if not isinstance(actual, TensorStructInfo) or actual.dtype != expected.dtype \
                or actual.ndim != expected.ndim or not _same_shape(actual, expected, ctx):
            ctx.error(f"R.call_tir_inplace: output {format_sinfo(expected)} must be the annotation "
                      f"of argument {index}, which is {format_sinfo(actual)}")
    return out


def _same_shape(a: TensorStructInfo, b: TensorStructInfo, ctx) -> bool:
    if a.shape is None or b.shape is None:
        return a.shape is None and b.shape is None
    return all(ctx.analyzer.can_prove_equal(x, y) for x, y in zip(a.shape, b.shape))


register_op("relax.call_tir", _infer_cross_level, None, constructor=call_tir)
register_op("relax.call_tir_inplace", _infer_call_tir_inplace, None, constructor=call_tir_inplace,
            attr_names=("inplace_indices",))
register_op("relax.call_dps_library", _infer_cross_level, None, constructor=call_dps_library)

__all__ = ["call_tir", "call_tir_inplace", "call_dps_library"]
