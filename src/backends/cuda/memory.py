"""Device arrays and storage of the CUDA target (``DeviceMemory``), over ``cuMemAlloc``."""
from __future__ import annotations

import weakref
from math import prod

import numpy as np

from ..target import DeviceArray, DeviceMemory
from .driver import check


class _Allocation:
    """One ``cuMemAlloc`` block, freed when the last array using it goes."""

    def __init__(self, context, nbytes: int):
        self.context = context
        self.nbytes = nbytes
        try:
            self.pointer = check(context.driver.cuMemAlloc(max(1, nbytes)), "cuMemAlloc")
        except RuntimeError as err:
            raise MemoryError(f"CUDA could not allocate {nbytes} bytes: {err}") from None
        self._finalizer = weakref.finalize(self, context.driver.cuMemFree, self.pointer)

    @property
    def address(self) -> int:
        return int(self.pointer)


class CudaArray(DeviceArray):
    """A C-contiguous tensor in CUDA device memory: ``.shape``, ``.dtype``, ``.ndim``, ``.numpy()``."""
    device_name = "cuda"

    def __init__(self, memory: "CudaMemory", allocation: _Allocation, offset: int, shape, dtype,
                 is_view: bool = False):
        self.memory = memory
        self.allocation = allocation
        self.address = allocation.address + offset
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)
        self.is_view = is_view

    def numpy(self) -> np.ndarray:
        host = np.empty(self.shape, self.dtype)
        if host.nbytes:
            driver = self.memory.context.driver
            check(driver.cuMemcpyDtoH(host.ctypes.data, driver.CUdeviceptr(self.address), host.nbytes),
                  "cuMemcpyDtoH")
        return host


class CudaStorage:
    def __init__(self, allocation: _Allocation):
        self.allocation = allocation
        self.nbytes = allocation.nbytes


class CudaMemory(DeviceMemory):
    device_array_type = CudaArray

    def __init__(self, context):
        self.context = context

    def empty(self, shape, dtype) -> CudaArray:
        dtype = np.dtype(dtype)
        return CudaArray(self, _Allocation(self.context, prod(shape) * dtype.itemsize), 0, shape, dtype)

    def storage(self, nbytes: int) -> CudaStorage:
        return CudaStorage(_Allocation(self.context, nbytes))

    def view(self, storage: CudaStorage, offset: int, shape, dtype) -> CudaArray:
        return CudaArray(self, storage.allocation, offset, shape, dtype, is_view=True)

    def to_device(self, array) -> CudaArray:
        if isinstance(array, CudaArray):
            return array
        host = np.ascontiguousarray(array)
        if not host.dtype.isnative:
            host = host.astype(host.dtype.newbyteorder("="))
        result = self.empty(host.shape, host.dtype)
        self.write(result, host)
        return result

    def write(self, array: CudaArray, host) -> None:
        host = np.ascontiguousarray(host, dtype=array.dtype)
        if host.nbytes:
            driver = self.context.driver
            check(driver.cuMemcpyHtoD(driver.CUdeviceptr(array.address), host.ctypes.data, host.nbytes),
                  "cuMemcpyHtoD")

    def copy_bytes(self, dst: CudaArray, src: CudaArray) -> None:
        driver = self.context.driver
        check(driver.cuMemcpyDtoD(driver.CUdeviceptr(dst.address), driver.CUdeviceptr(src.address),
                                  src.nbytes), "cuMemcpyDtoD")
