"""The OpenCL target's kernel image (OpenCL C source + launch plans) and its loaded module.

The program is built by the OpenCL driver when the image is loaded (PoCL
caches the binaries); kernels take, in order, every buffer, every workspace,
then every symbolic var as a ``long``, and last the status buffer (its int32
word zeroed before a kernel's launches, read after them: a zero integer
divisor or an index out of range raises as on C; the bad index is read back
only then). Launch sizes come from the VM's
symbol vector (``device_launch.LaunchPlan``); a launch with an empty grid is
skipped. Workspaces are device buffers of the module, grown when a call needs more.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..c.status import DEVICE_STATUS_BYTES, DEVICE_STATUS_CLEARED, device_status_readers, raise_for_status
from ..device_launch import direct_kernel_call, link_device_kernel
from ..target import KernelImage, KernelModule, Target
from .device import opencl_device
from .memory import OpenCLMemory


@dataclass
class OpenCLImage(KernelImage):
    source: str
    plans: dict                      # kernel name -> LaunchPlan
    signatures: dict | None = None   # kernel name -> PrimFunc (fresh builds only: direct calls)
    compiled: bool = False
    target: Target = Target("opencl")
    program: object = field(default=None, repr=False, compare=False)   # built in this process

    def kernel_names(self) -> list[str]:
        return list(self.plans)

    def encode(self, encoder) -> dict:
        return {"source": self.source, "plans": [plan.encode(encoder) for plan in self.plans.values()]}


def build_program(source: str):
    """The built ``cl.Program``; a build failure raises with the compiler's log."""
    device = opencl_device()
    cl = device.cl
    try:
        return cl.Program(device.context, source).build(options=["-cl-std=CL1.2"])
    except cl.RuntimeError as err:
        raise RuntimeError(f"the OpenCL compiler rejected the generated kernels: {err}") from None


class OpenCLKernelModule(KernelModule):
    def __init__(self, image: OpenCLImage):
        self.image = image
        self.device = opencl_device()
        self.memory = OpenCLMemory(self.device)
        if image.program is None:
            image.program = build_program(image.source)
        self.program = image.program
        self.kernels = {}
        for plan in image.plans.values():
            for launch in plan.launches:
                if launch.symbol not in self.kernels:
                    self.kernels[launch.symbol] = getattr(self.program, launch.symbol)
        self.workspaces: dict = {}      # (kernel, index) -> cl.Buffer, grown on demand
        self.status = np.zeros(DEVICE_STATUS_CLEARED // 4, np.int32)   # the word and the assert number
        self.status_buffer = self.memory._buffer(DEVICE_STATUS_BYTES)

    def runner(self, name: str):
        """``run(buffers, syms)``: every launch of kernel ``name`` on device buffers and a symbol tuple."""
        plan = self.image.plans[name]
        cl, queue, memory = self.device.cl, self.device.queue, self.memory
        sizes = plan.sizes_cached()
        launches = [(self.kernels[k.symbol], k.block) for k in plan.launches]
        workspaces, key = self.workspaces, name
        status, status_buffer = self.status, self.status_buffer

        def run(buffers: list, syms: tuple, where: str) -> None:
            grids, counts = sizes(syms)
            spaces = []
            for index, nbytes in enumerate(plan.workspace_nbytes(counts)):
                held = workspaces.get((key, index))
                if held is None or held.size < nbytes:
                    held = workspaces[(key, index)] = memory._buffer(nbytes)
                spaces.append(held)
            scalars = [np.int64(s) for s in syms]
            status[:] = 0
            cl.enqueue_copy(queue, status_buffer, status, is_blocking=False)
            for (kernel, block), grid in zip(launches, grids):
                if min(grid) <= 0:
                    continue
                kernel.set_args(*buffers, *spaces, *scalars, status_buffer)
                cl.enqueue_nd_range_kernel(queue, kernel, tuple(g * b for g, b in zip(grid, block)), block)
            cl.enqueue_copy(queue, status, status_buffer, is_blocking=True)
            if status[0]:
                raise_for_status(int(status[0]), where, bad_index, assert_message)

        def report() -> np.ndarray:
            words = np.zeros(DEVICE_STATUS_BYTES // 8, np.int64)
            cl.enqueue_copy(queue, words, status_buffer, is_blocking=True)
            return words

        bad_index, assert_message = device_status_readers(report, plan.assert_message)
        return run

    def link(self, ins, nxt: int, frame, prologue, where: str):
        return link_device_kernel(ins, nxt, frame, prologue, where, self.runner(ins.kernel), self.memory,
                                  lambda a: a.buffer)

    def __getitem__(self, name: str):
        if self.image.signatures is None:
            raise KeyError(f"kernel {name!r}: a loaded image keeps no signatures for direct calls")
        return direct_kernel_call(name, self.image.signatures[name], self.runner(name), self.memory,
                                  lambda a: a.buffer)
