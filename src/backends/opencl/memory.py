"""Device arrays and storage of the OpenCL target (``DeviceMemory``).

An ``OpenCLArray`` is a shape and dtype over a ``cl.Buffer`` (a storage's
buffer when memory planning placed it there); ``.numpy()`` copies it out.
Zero-byte arrays hold a one-byte buffer (OpenCL has no empty buffers).
"""
from __future__ import annotations

from math import prod

import numpy as np

from ..target import DeviceArray, DeviceMemory


class OpenCLArray(DeviceArray):
    """A C-contiguous tensor in OpenCL device memory: ``.shape``, ``.dtype``, ``.ndim``, ``.numpy()``."""
    device_name = "opencl"

    def __init__(self, memory: "OpenCLMemory", buffer, shape: tuple, dtype, is_view: bool = False):
        self.memory = memory
        self.buffer = buffer
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)
        self.is_view = is_view       # placed in a storage the VM reuses: results copy it out

    @property
    def address(self) -> int:
        """The handle of the device memory the array starts at (shared by views of one storage)."""
        return self.buffer.int_ptr

    def numpy(self) -> np.ndarray:
        """A NumPy copy of the array (waits for the kernels writing it)."""
        host = np.empty(self.shape, self.dtype)
        if host.nbytes:
            self.memory.cl.enqueue_copy(self.memory.queue, host, self.buffer, is_blocking=True)
        return host


class OpenCLStorage:
    """A planned storage: bytes the VM places tensors in (grow-only per frame)."""

    def __init__(self, buffer, nbytes: int):
        self.buffer = buffer
        self.nbytes = nbytes


class OpenCLMemory(DeviceMemory):
    device_array_type = OpenCLArray

    def __init__(self, device):
        self.device = device
        self.cl = device.cl
        self.context = device.context
        self.queue = device.queue

    def _buffer(self, nbytes: int):
        try:
            return self.cl.Buffer(self.context, self.cl.mem_flags.READ_WRITE, max(1, nbytes))
        except self.cl.Error as err:
            raise MemoryError(f"OpenCL could not allocate {nbytes} bytes: {err}") from None

    def empty(self, shape: tuple, dtype) -> OpenCLArray:
        dtype = np.dtype(dtype)
        return OpenCLArray(self, self._buffer(prod(shape) * dtype.itemsize), shape, dtype)

    def storage(self, nbytes: int) -> OpenCLStorage:
        return OpenCLStorage(self._buffer(nbytes), nbytes)

    def view(self, storage: OpenCLStorage, offset: int, shape: tuple, dtype) -> OpenCLArray:
        dtype = np.dtype(dtype)
        if offset == 0:
            return OpenCLArray(self, storage.buffer, shape, dtype, is_view=True)
        nbytes = prod(shape) * dtype.itemsize
        if offset % self.device.base_align:
            raise ValueError(f"a tensor at byte offset {offset} of a storage is not aligned to the "
                             f"device's {self.device.base_align}-byte sub-buffer alignment")
        region = storage.buffer.get_sub_region(offset, max(1, nbytes))
        return OpenCLArray(self, region, shape, dtype, is_view=True)

    def to_device(self, array) -> OpenCLArray:
        if isinstance(array, OpenCLArray):
            return array
        host = np.ascontiguousarray(array)
        if not host.dtype.isnative:
            host = host.astype(host.dtype.newbyteorder("="))
        result = self.empty(host.shape, host.dtype)
        if host.nbytes:
            self.cl.enqueue_copy(self.queue, result.buffer, host, is_blocking=True)
        return result

    def write(self, array: OpenCLArray, host) -> None:
        host = np.ascontiguousarray(host, dtype=array.dtype)
        if host.nbytes:
            self.cl.enqueue_copy(self.queue, array.buffer, host, is_blocking=True)

    def copy_bytes(self, dst: OpenCLArray, src: OpenCLArray) -> None:
        self.cl.enqueue_copy(self.queue, dst.buffer, src.buffer, byte_count=src.nbytes)
