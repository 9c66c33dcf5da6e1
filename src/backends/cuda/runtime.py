"""The CUDA target's kernel image (CUDA C, PTX for one architecture, launch plans) and its loaded module.

The PTX is compiled by NVRTC at build time and saved with the executable;
loading it (``cuModuleLoadData``) needs a device, and without one raises
``NoCudaDeviceError``. Kernel parameters follow the shared GPU convention:
every buffer, every workspace, every symbolic var as an int64, then the
int32 status word (read after a kernel's launches, as on OpenCL).
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np

from ..c.status import DEVICE_STATUS_BYTES, DEVICE_STATUS_CLEARED, device_status_readers, raise_for_status
from ..device_launch import direct_kernel_call, link_device_kernel
from ..target import KernelImage, KernelModule, Target
from .driver import check, cuda_context
from .memory import CudaMemory


@dataclass
class CudaImage(KernelImage):
    source: str
    ptx: bytes
    plans: dict                      # kernel name -> LaunchPlan
    target: Target
    signatures: dict | None = None
    compiled: bool = False
    compile_seconds: float = 0.0     # NVRTC's time for this build (0 after load)

    def kernel_names(self) -> list[str]:
        return list(self.plans)

    def encode(self, encoder) -> dict:
        return {"source": self.source, "arch": self.target.arch,
                "plans": [plan.encode(encoder) for plan in self.plans.values()], **encoder.payload(self.ptx)}


class CudaKernelModule(KernelModule):
    def __init__(self, image: CudaImage):
        self.image = image
        self.context = cuda_context()     # NoCudaDeviceError here on a machine without a GPU
        driver = self.context.driver
        self.driver = driver
        self.memory = CudaMemory(self.context)
        self.module = check(driver.cuModuleLoadData(image.ptx), "cuModuleLoadData")
        self.functions = {}
        for plan in image.plans.values():
            for launch in plan.launches:
                if launch.symbol not in self.functions:
                    self.functions[launch.symbol] = check(
                        driver.cuModuleGetFunction(self.module, launch.symbol.encode()), "cuModuleGetFunction")
        self.workspaces: dict = {}
        self.status_storage = self.memory.storage(DEVICE_STATUS_BYTES)

    def runner(self, name: str):
        plan = self.image.plans[name]
        driver, stream, memory = self.driver, self.context.stream, self.memory
        sizes = plan.sizes_cached()
        # every shared array is a static __shared__ declaration of the kernel: the launch asks for no
        # dynamic shared memory (passing shared_bytes here reserved the amount a second time, and a
        # kernel over 24 KiB then failed to launch)
        launches = [(self.functions[k.symbol], k.block, 0) for k in plan.launches]
        count = plan.num_buffers + len(plan.workspaces) + len(plan.sym_vars) + 1
        values = (ctypes.c_uint64 * max(1, count))()    # device pointers, then int64 symbols
        params = (ctypes.c_void_p * max(1, count))(*[ctypes.addressof(values) + 8 * i for i in range(count)])
        params_address = ctypes.addressof(params)
        workspaces = self.workspaces
        status_address = self.status_storage.allocation.address
        status = np.zeros(1, np.int32)

        def run(addresses: list, syms: tuple, where: str, keep=(values, params)) -> None:
            # `keep` holds the argument arrays as long as the runner lives: cuLaunchKernel reads them
            # through params_address (without it `params` was freed when runner() returned, and
            # every launch passed the driver a dangling pointer array)
            grids, counts = sizes(syms)
            spaces = []
            for index, nbytes in enumerate(plan.workspace_nbytes(counts)):
                held = workspaces.get((name, index))
                if held is None or held.nbytes < nbytes:
                    held = workspaces[(name, index)] = memory.storage(nbytes)
                spaces.append(held.allocation.address)
            for i, value in enumerate([*addresses, *spaces]):
                values[i] = value
            for i, value in enumerate(syms, start=len(addresses) + len(spaces)):
                values[i] = value & 0xFFFFFFFFFFFFFFFF   # int64 bits
            values[count - 1] = status_address
            check(driver.cuMemsetD32(driver.CUdeviceptr(status_address), 0, DEVICE_STATUS_CLEARED // 4), "cuMemsetD32")
            for (function, block, shared), grid in zip(launches, grids):
                if min(grid) <= 0:
                    continue
                check(driver.cuLaunchKernel(function, *grid, *block, shared, stream, params_address, 0),
                      f"cuLaunchKernel of {name!r}")
            check(driver.cuMemcpyDtoH(status.ctypes.data, driver.CUdeviceptr(status_address), 4), "cuMemcpyDtoH")
            if status[0]:
                raise_for_status(int(status[0]), where, bad_index, assert_message)

        def report() -> np.ndarray:
            words = np.zeros(DEVICE_STATUS_BYTES // 8, np.int64)
            check(driver.cuMemcpyDtoH(words.ctypes.data, driver.CUdeviceptr(status_address), DEVICE_STATUS_BYTES),
                  "cuMemcpyDtoH")
            return words

        bad_index, assert_message = device_status_readers(report, plan.assert_message)
        return run

    def link(self, ins, nxt: int, frame, prologue, where: str):
        return link_device_kernel(ins, nxt, frame, prologue, where, self.runner(ins.kernel), self.memory,
                                  lambda a: a.address)

    def __getitem__(self, name: str):
        if self.image.signatures is None:
            raise KeyError(f"kernel {name!r}: a loaded image keeps no signatures for direct calls")
        return direct_kernel_call(name, self.image.signatures[name], self.runner(name), self.memory,
                                  lambda a: a.address)
