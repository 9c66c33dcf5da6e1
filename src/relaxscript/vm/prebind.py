"""Static allocations bound once per frame instead of once per call.

A storage of constant size and the constant-shape views into it
(``AllocStorage.static_size``, ``AllocTensor.static``) are the same arrays
on every call of a frame: the memory plan made them so. A decode step of
the LLM executes about 900 of these instructions, each a Python closure
that only rebinds a register, about 0.1 ms of every step. Here they are
created when the frame is built and put in the frame's register template
(which every call starts from) and pointer table, and the linker links the
instructions around them, so a call never runs them, and a kernel call
writes their data pointers into its argument array once, at link time.

Only on host memory (a device target's storages are device buffers), and
only where binding early cannot be told apart from running the
instruction: its register is written by no other instruction and no jump
goes backwards (each instruction runs at most once per call).
"""
from __future__ import annotations

from collections import Counter

import numpy as np

from . import instructions as I
from backends.aligned_memory import aligned_bytes
from .values import data_pointer


def _written_registers(code: list) -> Counter:
    written = Counter()
    for ins in code:
        dst = ins.dst if isinstance(ins, (I.AllocStorage, I.AllocTensor)) else ins.produces()
        if dst is not None:
            written[dst] += 1
    return written


def _jumps_forward_only(code: list) -> bool:
    for pc, ins in enumerate(code):
        if isinstance(ins, I.If) and ins.else_pc <= pc:
            return False
        if isinstance(ins, I.Goto) and ins.target <= pc:
            return False
    return True


def prebind_static_allocations(func: I.VMFunction, template: list, ptrs: list) -> frozenset:
    """Allocate ``func``'s static storages and views into ``template``/``ptrs``; the pcs to skip."""
    code = func.code
    if not _jumps_forward_only(code):
        return frozenset()
    written = _written_registers(code)
    params = set(range(len(func.params)))
    storages: dict[int, np.ndarray] = {}
    skipped = set()
    for pc, ins in enumerate(code):
        if written[getattr(ins, "dst", None)] != 1 or ins.dst in params or ins.dst in func.constants:
            continue
        if isinstance(ins, I.AllocStorage) and ins.static_size is not None:
            storage = aligned_bytes(max(1, ins.static_size))
            storages[ins.dst] = storage
            template[ins.dst], ptrs[ins.dst] = storage, data_pointer(storage)
            skipped.add(pc)
        elif isinstance(ins, I.AllocTensor) and ins.static and ins.storage in storages:
            view = _static_view(ins, storages[ins.storage])
            if view is not None:
                template[ins.dst], ptrs[ins.dst] = view, ptrs[ins.storage] + _constant(ins.offset_code)
                skipped.add(pc)
    return frozenset(skipped)


def _constant(tree) -> int | None:
    """The value of a constant shape-code tree (``("int", 3)``), else None."""
    if isinstance(tree, tuple) and len(tree) == 2 and tree[0] == "int" and isinstance(tree[1], int):
        return tree[1]
    return None


def _static_view(ins: I.AllocTensor, storage: np.ndarray) -> np.ndarray | None:
    """The view ``ins`` makes of ``storage`` when its shape and offset are plain constants that fit,
    else None (the instruction then runs as before and reports its own errors)."""
    offset = _constant(ins.offset_code)
    shape_code = ins.shape_code
    if offset is None or not (isinstance(shape_code, tuple) and shape_code and shape_code[0] == "tuple"):
        return None
    shape = tuple(_constant(dim) for dim in shape_code[1:])
    if any(dim is None or dim < 0 for dim in shape):
        return None
    dtype = np.dtype(ins.dtype)
    nbytes = dtype.itemsize * int(np.prod(shape, dtype=np.int64))
    if offset < 0 or offset + nbytes > storage.shape[0]:
        return None
    return storage[offset:offset + nbytes].view(dtype).reshape(shape)


def next_pcs(count: int, skipped: frozenset) -> list[int]:
    """For every pc, the first pc at or after it that runs (``count`` past the end)."""
    out = [count] * (count + 1)
    for pc in range(count - 1, -1, -1):
        out[pc] = out[pc + 1] if pc in skipped else pc
    return out
