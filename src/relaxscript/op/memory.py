"""Lowered memory operators: explicit allocation and destination-passing calls.

CallTIRRewrite turns ``R.call_tir`` / ``R.call_dps_library`` into an
allocation plus a DPS call writing into it (paper Figure 5);
StaticPlanBlockMemory then places allocations into reusable storages
(Algorithm 3). All of these are impure, so they live outside dataflow blocks.

- ``R.builtin.alloc_tensor(shape, dtype)``: a fresh tensor (not planned).
- ``R.memory.alloc_storage(size, virtual_device_index, storage_scope, dtype)``:
  a byte buffer of ``size`` bytes (a one-dim ``R.shape([bytes])``).
- ``R.memory.alloc_tensor(storage, offset, shape, dtype)``: a tensor viewing
  ``storage`` at byte ``offset`` (a ``R.prim_value``).
- ``R.memory.kill_storage(storage)`` / ``R.memory.kill_tensor(tensor)``: the
  value is dead from here on; its memory may be reused.
- ``R.call_tir_dps(gvar, (inputs..., outputs...), tir_vars)``: run a prim_func
  writing into the given outputs.
- ``R.call_dps_library_dps(name, (inputs...), (outputs...))``: the same for a
  library function.

The DPS calls and kills return the empty tuple.
"""
from __future__ import annotations

from tensorir import dtype as dt
from tensorir import expr as E

from ..expr import Expr, ExternFunc, GlobalVar, PrimValue, ShapeExpr, StringImm
from ..struct_info import (ObjectStructInfo, PrimStructInfo, ShapeStructInfo, TensorStructInfo,
                           TupleStructInfo)
from ._convert import as_prim_value, as_shape, as_tuple, make_call
from ._infer_util import format_sinfo, sinfo_of
from .registry import OpAttributeError, register_op

_VOID = TupleStructInfo([])


def _dtype_attr(dtype, op: str) -> str:
    if not isinstance(dtype, str):
        raise OpAttributeError(f"R.{op}: dtype must be a string such as \"float32\", got {dtype!r}")
    try:
        return dt.normalize(dtype)
    except ValueError as err:
        raise OpAttributeError(f"R.{op}: {err}") from None


def _shape_values(call, index: int, ctx, what: str):
    sinfo = sinfo_of(call.args[index])
    if not isinstance(sinfo, ShapeStructInfo):
        ctx.error(f"{call.op.name}: {what} must be a shape (R.shape([...])), got {format_sinfo(sinfo)}")
    return sinfo


# ---------------------------------------------------------------- R.builtin.alloc_tensor
def builtin_alloc_tensor(shape, dtype, runtime_device_index=0, storage_scope="global"):
    """R.builtin.alloc_tensor(shape, dtype): a fresh, unplanned tensor. TVM's printer also
    writes the device index and storage scope, which must name the host."""
    from .tvm_spellings import check_host_device
    check_host_device(runtime_device_index, storage_scope, "builtin.alloc_tensor")
    return make_call("relax.builtin.alloc_tensor", [as_shape(shape)],
                     {"dtype": _dtype_attr(dtype, "builtin.alloc_tensor")})


def _infer_builtin_alloc_tensor(call, ctx):
    shape = _shape_values(call, 0, ctx, "shape")
    return TensorStructInfo(shape.values, call.attrs["dtype"], shape.ndim)


register_op("relax.builtin.alloc_tensor", _infer_builtin_alloc_tensor, None, pure=False,
            attr_names=("dtype",), constructor=builtin_alloc_tensor)


# ---------------------------------------------------------------- R.memory.alloc_storage
def alloc_storage(size, virtual_device_index=0, storage_scope="global", dtype="uint8"):
    """R.memory.alloc_storage(size, ...): ``size`` bytes (``R.shape([bytes])``, an int,
    a PrimExpr or a ``R.prim_value``)."""
    if isinstance(size, PrimValue):
        size = [size.value]
    elif isinstance(size, (int, E.PrimExpr)):
        size = [size]
    # TVM's printer writes R.prim_value(0) and R.str("global") here
    if isinstance(virtual_device_index, PrimValue) and isinstance(virtual_device_index.value, E.IntImm):
        virtual_device_index = virtual_device_index.value.value
    if isinstance(storage_scope, StringImm):
        storage_scope = storage_scope.value
    if not isinstance(virtual_device_index, int) or isinstance(virtual_device_index, bool):
        raise OpAttributeError(f"R.memory.alloc_storage: virtual_device_index must be an int, "
                               f"got {virtual_device_index!r}")
    if not isinstance(storage_scope, str):
        raise OpAttributeError(f"R.memory.alloc_storage: storage_scope must be a string, "
                               f"got {storage_scope!r}")
    return make_call("relax.memory.alloc_storage", [as_shape(size)],
                     {"virtual_device_index": virtual_device_index, "storage_scope": storage_scope,
                      "dtype": _dtype_attr(dtype, "memory.alloc_storage")})


def _infer_alloc_storage(call, ctx):
    size = _shape_values(call, 0, ctx, "size")
    if size.ndim != 1:
        ctx.error(f"relax.memory.alloc_storage: size must be one dimension (bytes), "
                  f"got {format_sinfo(size)}")
    return ObjectStructInfo()


register_op("relax.memory.alloc_storage", _infer_alloc_storage, None, pure=False,
            attr_names=("virtual_device_index", "storage_scope", "dtype"), constructor=alloc_storage)


# ---------------------------------------------------------------- R.memory.alloc_tensor
def memory_alloc_tensor(storage, offset, shape, dtype):
    """R.memory.alloc_tensor(storage, offset, shape, dtype): a view of ``storage`` at byte ``offset``."""
    if not isinstance(storage, Expr):
        raise TypeError(f"R.memory.alloc_tensor: storage must be a graph-level value, got {storage!r}")
    return make_call("relax.memory.alloc_tensor",
                     [storage, as_prim_value(offset, "int64"), as_shape(shape)],
                     {"dtype": _dtype_attr(dtype, "memory.alloc_tensor")})


def _infer_memory_alloc_tensor(call, ctx):
    if len(call.args) != 3:
        ctx.error(f"relax.memory.alloc_tensor takes (storage, offset, shape), got {len(call.args)} args")
    offset = sinfo_of(call.args[1])
    if not isinstance(offset, PrimStructInfo) or not dt.is_int(offset.dtype):
        ctx.error(f"relax.memory.alloc_tensor: offset must be an integer R.prim_value, "
                  f"got {format_sinfo(offset)}")
    shape = _shape_values(call, 2, ctx, "shape")
    return TensorStructInfo(shape.values, call.attrs["dtype"], shape.ndim)


register_op("relax.memory.alloc_tensor", _infer_memory_alloc_tensor, None, pure=False,
            attr_names=("dtype",), constructor=memory_alloc_tensor)


# ---------------------------------------------------------------- kills
def kill_storage(storage):
    """R.memory.kill_storage(storage): the storage is dead; its bytes may be reused."""
    return make_call("relax.memory.kill_storage", [storage])


def kill_tensor(tensor):
    """R.memory.kill_tensor(tensor): the tensor is dead; its bytes may be reused."""
    return make_call("relax.memory.kill_tensor", [tensor])


def _infer_kill_storage(call, ctx):
    if len(call.args) != 1:
        ctx.error(f"{call.op.name} takes one argument, got {len(call.args)}")
    return _VOID


def _infer_kill_tensor(call, ctx):
    if len(call.args) != 1 or not isinstance(sinfo_of(call.args[0]), TensorStructInfo):
        ctx.error(f"{call.op.name} takes one tensor")
    return _VOID


register_op("relax.memory.kill_storage", _infer_kill_storage, None, pure=False, constructor=kill_storage)
register_op("relax.memory.kill_tensor", _infer_kill_tensor, None, pure=False, constructor=kill_tensor)


# ---------------------------------------------------------------- DPS calls
def call_tir_dps(gvar, args, tir_vars=None):
    """R.call_tir_dps(gvar, (inputs..., outputs...), tir_vars=None): write into the outputs."""
    call_args = [gvar, as_tuple(args)]
    if tir_vars is not None:
        call_args.append(as_shape(tir_vars))
    return make_call("relax.call_tir_dps", call_args)


def call_dps_library_dps(name, inputs, outputs):
    """R.call_dps_library_dps(name, (inputs...), (outputs...)): library call writing into outputs."""
    func = name if isinstance(name, Expr) else ExternFunc(str(name))
    return make_call("relax.call_dps_library_dps", [func, as_tuple(inputs), as_tuple(outputs)])


def _infer_call_tir_dps(call, ctx):
    if not 2 <= len(call.args) <= 3 or not isinstance(call.args[0], (GlobalVar, Expr)):
        ctx.error("relax.call_tir_dps takes (gvar, args tuple[, tir_vars])")
    if not isinstance(sinfo_of(call.args[1]), TupleStructInfo):
        ctx.error("relax.call_tir_dps: arguments must be a tuple, "
                  f"got {format_sinfo(sinfo_of(call.args[1]))}")
    if len(call.args) == 3 and not isinstance(call.args[2], ShapeExpr) \
            and not isinstance(sinfo_of(call.args[2]), ShapeStructInfo):
        ctx.error("relax.call_tir_dps: tir_vars must be a shape value")
    return _VOID


def _infer_call_dps_library_dps(call, ctx):
    if len(call.args) != 3:
        ctx.error("relax.call_dps_library_dps takes (name, inputs tuple, outputs tuple)")
    for index in (1, 2):
        sinfo = sinfo_of(call.args[index])
        if not isinstance(sinfo, TupleStructInfo) or \
                (index == 2 and not all(isinstance(f, TensorStructInfo) for f in sinfo.fields)):
            ctx.error(f"relax.call_dps_library_dps: argument {index} must be a tuple of tensors, "
                      f"got {format_sinfo(sinfo)}")
    return _VOID


register_op("relax.call_tir_dps", _infer_call_tir_dps, None, pure=False, constructor=call_tir_dps)
register_op("relax.call_dps_library_dps", _infer_call_dps_library_dps, None, pure=False,
            constructor=call_dps_library_dps)

# Names of the ops above, for passes and the interpreter.
BUILTIN_ALLOC_TENSOR = "relax.builtin.alloc_tensor"
ALLOC_STORAGE = "relax.memory.alloc_storage"
MEMORY_ALLOC_TENSOR = "relax.memory.alloc_tensor"
KILL_STORAGE = "relax.memory.kill_storage"
KILL_TENSOR = "relax.memory.kill_tensor"
CALL_TIR_DPS = "relax.call_tir_dps"
CALL_DPS_LIBRARY_DPS = "relax.call_dps_library_dps"

__all__ = ["builtin_alloc_tensor", "alloc_storage", "memory_alloc_tensor", "kill_storage",
           "kill_tensor", "call_tir_dps", "call_dps_library_dps"]
