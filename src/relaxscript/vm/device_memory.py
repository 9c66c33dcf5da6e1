"""Allocation and library-call steps of the VM on a target with its own device memory.

Tensors and storages (memory planning's included) are device allocations
made through the target's ``DeviceMemory``; a storage grows only, and a tensor
planned into one is a view of it. Library calls (``call_dps_library``) run
on the host: their operands are copied out and the outputs written back, so
a module built with a library dispatch still runs, only slower.
"""
from __future__ import annotations

from math import prod

import numpy as np

from tensorir.errors import ShapeMismatchError

from ..interpreter.allocation import impossible_shape
from . import instructions as I


def link_device_alloc_tensor(ins: I.AllocTensor, nxt: int, code, frame, memory, fail):
    regs, t = frame.regs, frame.table
    dst, dtype = ins.dst, np.dtype(ins.dtype)
    shape_of = code.expr(ins.shape_code)
    if ins.storage is None:
        empty = memory.empty

        def step():
            shape = shape_of(t)
            if impossible_shape(shape, dtype.itemsize) is not None:
                raise fail(shape)
            try:
                regs[dst] = empty(shape, dtype)
            except MemoryError:
                raise fail(shape) from None
            return nxt
        return step
    storage, offset_of, itemsize = ins.storage, code.expr(ins.offset_code), dtype.itemsize
    last = [None, None, None, None]   # storage, shape, offset, view

    def step():
        shape, offset, buf = shape_of(t), offset_of(t), regs[storage]
        if last[0] is not buf or last[1] != shape or last[2] != offset:
            if impossible_shape(shape, itemsize) is not None:
                raise fail(shape)
            nbytes = itemsize * prod(shape)
            if offset + nbytes > buf.nbytes:
                raise ShapeMismatchError(f"function '{code.func.name}': tensor '{ins.name}' "
                                         f"({nbytes} bytes at offset {offset}) exceeds its storage "
                                         f"of {buf.nbytes} bytes")
            last[:] = [buf, shape, offset, memory.view(buf, offset, shape, dtype)]
        regs[dst] = last[3]
        return nxt
    return step


def link_device_alloc_storage(ins: I.AllocStorage, nxt: int, code, frame, memory, fail):
    regs, t, held, dst = frame.regs, frame.table, frame.storages, ins.dst
    size_of = (lambda _t: ins.static_size) if ins.static_size is not None else code.expr(ins.size_code)

    def step():
        size = max(1, size_of(t))
        buf = held.get(dst)
        if buf is None or buf.nbytes < size:   # grow-only: reused by later calls
            try:
                buf = held[dst] = memory.storage(size)
            except MemoryError:
                raise fail((size,)) from None
        regs[dst] = buf
        return nxt
    return step


def link_host_library(ins: I.CallLibrary, nxt: int, code, frame, memory, entry):
    regs, inputs, outputs = frame.regs, ins.inputs, ins.outputs
    host = memory.to_host

    def step():
        args = [host(regs[i]) for i in inputs]
        results = [host(regs[o]) for o in outputs]
        try:
            entry.run_dps(args, results, f"function '{code.func.name}'")
        except ShapeMismatchError as err:
            raise ShapeMismatchError(f"function '{code.func.name}': {err}") from None
        for o, result in zip(outputs, results):
            target = regs[o]
            if isinstance(target, memory.device_array_type):
                memory.write(target, result)
        return nxt
    return step
