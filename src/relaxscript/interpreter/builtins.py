"""Operators the interpreter evaluates itself instead of through the op registry.

A builtin takes ``(frame, call)`` and returns the call's value; it evaluates
the arguments it needs with ``frame.eval``. Builtins take precedence over the
op registry's NumPy references, so ops whose meaning depends on the
interpreter (cross-level calls, shape values, later the lowered memory ops
``alloc_storage``/``alloc_tensor``/``kill_*``) are registered here with
``@register_builtin("relax.<name>")``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from tensorir import dtype as dt
from tensorir.errors import ShapeMismatchError
from tensorir.function import PrimFunc
from tensorir.variants import VARIANTS_ATTR

from ..expr import Call, ExternFunc, GlobalVar, StringImm
from ..struct_info import StructInfo, TensorStructInfo, TupleStructInfo
from .allocation import allocation_error, env_symbols, new_array, shape_text
from .shape_env import UnboundSymbolError, format_prim_expr
from .values import ShapeTuple

if TYPE_CHECKING:
    from .evaluator import Frame

BUILTINS: dict[str, Callable[["Frame", Call], Any]] = {}


def register_builtin(op_name: str):
    """Decorator: evaluate calls of ``op_name`` with ``fn(frame, call)``."""
    def decorator(fn):
        BUILTINS[op_name] = fn
        return fn
    return decorator


# ---------------------------------------------------------------- helpers
def output_struct_infos(call: Call) -> list[TensorStructInfo]:
    """The outputs a DPS call declares: one TensorStructInfo, several, or one Tuple of them."""
    sinfos: list[StructInfo] = list(call.sinfo_args)
    if len(sinfos) == 1 and isinstance(sinfos[0], TupleStructInfo):
        sinfos = list(sinfos[0].fields)
    for sinfo in sinfos:
        if not isinstance(sinfo, TensorStructInfo) or sinfo.shape is None or sinfo.dtype is None:
            raise ShapeMismatchError(f"{call.op.name}: each output annotation needs a shape and a dtype")
    return sinfos


def allocate(frame: "Frame", sinfo: TensorStructInfo, what: str) -> np.ndarray:
    """A fresh array for an output annotation, its symbolic dims evaluated in ``frame``.

    Float outputs start as NaN so an element the callee never writes shows up
    in results instead of passing silently as zero.
    """
    try:
        shape = tuple(int(frame.shape_env.evaluate(d)) for d in sinfo.shape)
    except UnboundSymbolError as err:
        dims = ", ".join(format_prim_expr(d) for d in sinfo.shape)
        raise ShapeMismatchError(
            f"function '{frame.func_name}', {what}: output shape ({dims}) uses symbolic var "
            f"{err.var.name}, which has no value in this function") from None
    dtype = dt.to_numpy(sinfo.dtype)

    def failure(reason):
        return allocation_error(frame.func_name, f"tensor '{frame.binding_name}' ({what})",
                                shape_text(sinfo.shape), shape, dtype,
                                env_symbols(sinfo.shape, frame.shape_env), reason)
    return new_array(shape, dtype, np.nan if dt.is_float(sinfo.dtype) else 0, failure)


def as_value_list(value) -> list:
    """Arguments packed in a Tuple (or a single tensor) as a list."""
    return list(value) if isinstance(value, tuple) and not isinstance(value, ShapeTuple) else [value]


def run_prim_func(func: PrimFunc, args: list, mod=None) -> None:
    """Run a PrimFunc in destination-passing style: arrays fill the buffer
    parameters in order, scalars (and the ints of shape values) the scalar
    parameters in order. A function with variants (``tensorir.variants``) runs
    the one its conditions select among ``mod``'s functions."""
    arrays = [a for a in args if isinstance(a, np.ndarray)]
    scalars: list = []
    for a in args:
        if isinstance(a, ShapeTuple):
            scalars.extend(a)
        elif not isinstance(a, np.ndarray):
            scalars.append(a)
    scalar_params = func.scalar_params
    if len(scalars) != len(scalar_params) or len(arrays) != len(func.buffer_params):
        raise ShapeMismatchError(
            f"prim_func '{func.name}' takes {len(func.buffer_params)} buffer(s) and "
            f"{len(scalar_params)} scalar(s), got {len(arrays)} array(s) and {len(scalars)} scalar(s)")
    import tensorir

    from .kernel_variants import run_with_variants
    named = {p.name: v for p, v in zip(scalar_params, scalars)}
    if mod is not None:
        func = _with_subroutines_inlined(func, mod)
    if mod is not None and func.attrs.get(VARIANTS_ATTR):
        run_with_variants(func, mod, arrays, named)
    else:
        tensorir.interpret(func, *arrays, **named)


def _with_subroutines_inlined(func, mod):
    """A prim_func calling others of the module runs with the calls inlined (as every build)."""
    from tensorir.transform.inline_subroutines import has_calls, inline_subroutines
    if not has_calls(func):
        return func
    names = [n for n, f in mod.functions.items() if f is func]
    if not names:
        return func
    return inline_subroutines(dict(mod.functions))[names[0]]


def _outputs_result(outputs: list[np.ndarray], call: Call):
    single = len(call.sinfo_args) == 1 and isinstance(call.sinfo_args[0], TensorStructInfo)
    return outputs[0] if single else tuple(outputs)


# ---------------------------------------------------------------- cross-level calls
@register_builtin("relax.call_tir")
def _call_tir(frame: "Frame", call: Call):
    callee = call.args[0]
    func = frame.interp.mod[callee] if isinstance(callee, GlobalVar) else frame.eval(callee)
    if not isinstance(func, PrimFunc):
        raise ShapeMismatchError(f"function '{frame.func_name}': call_tir needs a prim_func, "
                                 f"got {type(func).__name__}")
    # a graph value has no layout, but the op references may give views (permute_dims);
    # the loop interpreter takes C-contiguous buffers, as compiled kernels do
    inputs = [x.copy(order="C") if isinstance(x, np.ndarray) and not x.flags.c_contiguous else x
              for x in as_value_list(frame.eval(call.args[1]))]
    tir_vars = list(frame.eval(call.args[2])) if len(call.args) > 2 else []
    outputs = [allocate(frame, s, f"call_tir of '{func.name}'") for s in output_struct_infos(call)]
    run_prim_func(func, inputs + outputs + tir_vars, frame.interp.mod)
    return _outputs_result(outputs, call)


@register_builtin("relax.call_tir_inplace")
def _call_tir_inplace(frame: "Frame", call: Call):
    callee = call.args[0]
    func = frame.interp.mod[callee] if isinstance(callee, GlobalVar) else frame.eval(callee)
    if not isinstance(func, PrimFunc):
        raise ShapeMismatchError(f"function '{frame.func_name}': call_tir_inplace needs a prim_func, "
                                 f"got {type(func).__name__}")
    inputs = as_value_list(frame.eval(call.args[1]))
    tir_vars = list(frame.eval(call.args[2])) if len(call.args) > 2 else []
    updated = [inputs[i] for i in call.attrs["inplace_indices"]]
    for array in updated:
        if not isinstance(array, np.ndarray) or not array.flags.writeable or not array.flags.c_contiguous:
            raise ShapeMismatchError(f"function '{frame.func_name}': call_tir_inplace of '{func.name}' "
                                     f"updates an argument that is not a writeable C-contiguous array")
    run_prim_func(func, inputs + tir_vars, frame.interp.mod)
    return _outputs_result(updated, call)


def _library_name(frame: "Frame", call: Call) -> str:
    if "name" in call.attrs:
        return call.attrs["name"]
    first = call.args[0]
    if isinstance(first, StringImm):
        return first.value
    if isinstance(first, ExternFunc):
        return first.global_symbol
    raise ShapeMismatchError(f"function '{frame.func_name}': call_dps_library without a library name")


@register_builtin("relax.call_dps_packed")
@register_builtin("relax.call_dps_library")
def _call_dps_library(frame: "Frame", call: Call):
    from backends.library import get_library
    name = _library_name(frame, call)
    entry = get_library(name)
    packed = [a for a in call.args if not isinstance(a, (StringImm, ExternFunc))]
    inputs = as_value_list(frame.eval(packed[0])) if packed else []
    outputs = [allocate(frame, s, f"call_dps_library of {name!r}") for s in output_struct_infos(call)]
    try:
        entry.run_dps(inputs, outputs, f"function '{frame.func_name}'")
    except ShapeMismatchError as err:
        raise ShapeMismatchError(f"function '{frame.func_name}': {err}") from None
    return _outputs_result(outputs, call)


def _call_packed(frame: "Frame", call: Call):
    """``R.call_pure_packed``: a pure call, its arguments read-only (``read_only``)."""
    from backends.library import get_library, guarded_call, read_only
    first = call.args[0]
    name = first.value if isinstance(first, StringImm) else first.global_symbol
    args = [read_only(frame.eval(a)) for a in call.args[1:]]
    result = guarded_call(name, f"function '{frame.func_name}'", get_library(name), args)
    return () if result is None else result


register_builtin("relax.call_packed")(_call_packed)
register_builtin("relax.call_pure_packed")(_call_packed)


@register_builtin("relax.shape_of")
def _shape_of(frame: "Frame", call: Call):
    value = frame.eval(call.args[0])
    if not isinstance(value, np.ndarray):
        raise ShapeMismatchError(f"function '{frame.func_name}': R.shape_of needs a tensor, "
                                 f"got {type(value).__name__}")
    return ShapeTuple(value.shape)
