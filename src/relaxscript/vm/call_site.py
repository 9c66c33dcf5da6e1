"""The run-time symbol work of a kernel call whose argument shapes were not fully known at build time.

Targets link ``CallKernel`` themselves (``backends.target.KernelModule.link``);
the VM hands them this prologue, which checks the arguments' structure, reads
their dims into the symbol table and checks the call's shape equations.
"""
from __future__ import annotations

import numpy as np

from tensorir.errors import ShapeMismatchError

from . import instructions as I


def link_call_site(ins: I.CallKernel, code, frame, device_array_type=None):
    """The run-time symbol work of a call whose argument shapes were not fully known."""
    site = ins.call_site
    if site is None:
        return None
    regs, t = frame.regs, frame.table
    structure = tuple((r, ndim, np.dtype(dtype), text) for r, ndim, dtype, text in site.structure)
    assign = tuple((slot, code.expr(tree)) for slot, tree in site.assign)
    checks = tuple((code.expr(a), code.expr(b), text) for a, b, text in site.checks)
    reads = site.reads
    arrays = np.ndarray if device_array_type is None else (np.ndarray, device_array_type)

    def prologue():
        for r, ndim, dtype, text in structure:
            value = regs[r]
            is_array = isinstance(value, arrays)
            if not is_array or value.ndim != ndim or value.dtype != dtype \
                    or (isinstance(value, np.ndarray) and not value.flags.c_contiguous):
                got = f"shape {value.shape}, dtype {value.dtype.name}" if is_array else type(value).__name__
                raise ShapeMismatchError(f"function '{code.func.name}': {text}, got {got}")
        for r, axis, slot in reads:
            t[slot] = regs[r].shape[axis]
        for slot, fn in assign:
            t[slot] = fn(t)
        for actual, expected, text in checks:
            if actual(t) != expected(t):
                raise ShapeMismatchError(f"function '{code.func.name}': {text}: expected "
                                         f"{expected(t)}, got {actual(t)}")
    return prologue
