"""``rx.device("opencl")`` and ``rx.tensor(array, device=...)``: arrays that live on a target's device.

A VM of that target accepts them as arguments (no copy in) and then returns
device arrays too, so calls chain without copies; ``.numpy()`` copies one out.
"""
from __future__ import annotations

import numpy as np

from backends.target import Target, get_backend


class Device:
    """A target's device memory: ``device.array(np_array)``, ``device.empty(shape, dtype)``."""

    def __init__(self, target):
        self.target = Target.parse(target)
        self.memory = get_backend(self.target).memory()
        if self.memory is None:
            raise ValueError(f"target {str(self.target)!r} has no device memory: its kernels use NumPy arrays")

    def array(self, value, dtype=None):
        host = np.asarray(value, dtype=dtype)
        return self.memory.to_device(np.ascontiguousarray(host))

    def empty(self, shape, dtype="float32"):
        return self.memory.empty(tuple(int(d) for d in shape), np.dtype(dtype))

    def __repr__(self) -> str:
        return f"rx.device({str(self.target)!r})"


def device(target="opencl") -> Device:
    return Device(target)


def tensor(value, dtype=None, device: Device | None = None):
    """``value`` as a NumPy array, or on ``device`` (an ``rx.device``) when given."""
    if device is None:
        return np.ascontiguousarray(np.asarray(value, dtype=dtype))
    if not isinstance(device, Device):
        raise TypeError(f"device must be an rx.device(...), got {type(device).__name__}")
    return device.array(value, dtype)
