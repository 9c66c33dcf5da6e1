"""TVM's spellings of the lowered memory operators, as its printer writes them after the
memory passes, accepted as the same IR as ours:

- ``R.vm.alloc_storage(R.shape([bytes]), R.prim_value(0), R.dtype("uint8"), R.str("global"))``
  is ``R.memory.alloc_storage`` (TVM's VM form of it);
- ``R.vm.alloc_tensor(storage, R.prim_value(offset), R.shape([...]), R.dtype("float32")[,
  runtime_device_index])`` is ``R.memory.alloc_tensor``;
- ``R.builtin.alloc_tensor(shape, dtype, runtime_device_index, storage_scope)`` takes TVM's
  extra arguments (``op/memory.py``).

They print in our spelling, which re-parses to the same module. The device index and storage
scope must be ``0`` and ``"global"``: there is one device (the host CPU).
"""
from __future__ import annotations

from tensorir import expr as E

from ..expr import PrimValue, StringImm
from .memory import alloc_storage, memory_alloc_tensor
from .registry import OpAttributeError


def plain_int(value, what: str) -> int:
    """An int given as a Python int or a literal ``R.prim_value``."""
    if isinstance(value, PrimValue) and isinstance(value.value, E.IntImm):
        value = value.value.value
    if not isinstance(value, int) or isinstance(value, bool):
        raise OpAttributeError(f"{what} must be an integer literal or R.prim_value of one, got {value!r}")
    return value


def plain_str(value, what: str) -> str:
    """A string given as a Python str or an ``R.str``."""
    if isinstance(value, StringImm):
        value = value.value
    if not isinstance(value, str):
        raise OpAttributeError(f"{what} must be a string or R.str, got {value!r}")
    return value


def check_host_device(runtime_device_index, storage_scope, op: str) -> None:
    index = plain_int(runtime_device_index, f"R.{op}: runtime_device_index")
    scope = plain_str(storage_scope, f"R.{op}: storage_scope")
    if index != 0:
        raise OpAttributeError(f"R.{op}: runtime_device_index {index} does not exist; the only "
                               "device is 0 (the host)")
    if scope != "global":
        raise OpAttributeError(f"R.{op}: storage_scope {scope!r} is not supported; use \"global\"")


def vm_alloc_storage(size, runtime_device_index=0, dtype="uint8", storage_scope="global"):
    """TVM's ``R.vm.alloc_storage(size, runtime_device_index, dtype, storage_scope)``."""
    check_host_device(runtime_device_index, storage_scope, "vm.alloc_storage")
    return alloc_storage(size, 0, "global", dtype)


def vm_alloc_tensor(storage, offset, shape, dtype, runtime_device_index=0):
    """TVM's ``R.vm.alloc_tensor(storage, offset, shape, dtype[, runtime_device_index])``."""
    check_host_device(runtime_device_index, "global", "vm.alloc_tensor")
    return memory_alloc_tensor(storage, offset, shape, dtype)


class Device(tuple):
    """TVM's ``R.device(dev_type, index)`` / ``R.cpu(index)``: only read by
    ``R.hint_on_device``; ``(1, 0)`` (the host CPU) is the one device there is."""

    def __repr__(self):
        return f"R.device({self[0]}, {self[1]})"


def device(dev_type, index=0):
    return Device((plain_int(dev_type, "R.device: dev_type"), plain_int(index, "R.device: index")))


def cpu(index=0):
    return device(1, index)


def hint_on_device(data, dst_vdevice, memory_scope="global"):
    """TVM's ``R.hint_on_device(x, device, scope)``: a placement hint. With one device (the
    host CPU) there is nothing to place, so the value is ``data`` itself."""
    if not isinstance(dst_vdevice, Device):
        raise OpAttributeError(f"R.hint_on_device: the device must be R.device(...) or R.cpu(), "
                               f"got {dst_vdevice!r}")
    scope = plain_str(memory_scope, "R.hint_on_device: memory_scope")
    if tuple(dst_vdevice) != (1, 0) or scope != "global":
        raise OpAttributeError(f"R.hint_on_device: {dst_vdevice!r} scope {scope!r} is not supported; "
                               "the only device is the host CPU, R.device(1, 0) \"global\"")
    return data


HOST_TARGETS = ("llvm", "c", "cpu")


def to_vdevice(data, dst_vdevice):
    """TVM's ``R.to_vdevice(x, "llvm")``: a copy to another device. The host CPU is the
    only device, so moving to it is ``data`` itself; any other target is refused."""
    target = getattr(dst_vdevice, "target", dst_vdevice)
    target = plain_str(target if target is not None else "llvm", "R.to_vdevice: the device")
    if target.split()[0] not in HOST_TARGETS:
        raise OpAttributeError(f"R.to_vdevice: device {target!r} is not supported; the only device "
                               "is the host CPU (\"llvm\")")
    return data


def _relu6(data):
    """TVM's ``R.nn.relu6(x)``: ``R.clip(x, 0, 6)`` (TVM builds the same)."""
    from .unary import clip
    return clip(data, 0.0, 6.0)


def _linear(data, weight, bias=None, out_dtype=None):
    from .linear_algebra import linear
    return linear(data, weight, bias, out_dtype)


# script path (below R) -> constructor
TVM_SPELLINGS = {
    "vm.alloc_storage": vm_alloc_storage,
    "vm.alloc_tensor": vm_alloc_tensor,
    "linear": _linear,
    "device": device,
    "cpu": cpu,
    "hint_on_device": hint_on_device,
    "to_vdevice": to_vdevice,
    "nn.relu6": _relu6,
    "nn.conv1d_transpose": lambda *args, **kwargs: _conv1d_transpose()(*args, **kwargs),
    "nn.max_pool1d": lambda *args, **kwargs: _pool1d("max_pool1d")(*args, **kwargs),
    "nn.avg_pool1d": lambda *args, **kwargs: _pool1d("avg_pool1d")(*args, **kwargs),
    "nn.adaptive_avg_pool1d": lambda *args, **kwargs: _pool1d("adaptive_avg_pool1d")(*args, **kwargs),
}


def _pool1d(name: str):
    from . import nn_pool
    return getattr(nn_pool, name)


def _conv1d_transpose():
    from .nn_conv import conv1d_transpose
    return conv1d_transpose

__all__ = ["TVM_SPELLINGS", "vm_alloc_storage", "vm_alloc_tensor", "check_host_device"]
