"""Kernels of an executable: one C shared library (target "c") or the
reference interpreter over the prim_funcs (target "interp").

Building: every prim_func the VM code calls goes through
``tensorir.transform.lower`` and the C backend into ONE library, cached by
content hash by the backend. The executable keeps the C source and the
library bytes, so loading a saved executable never calls gcc.
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np

from tensorir.errors import ShapeMismatchError

from backends.c.status import raise_for_status

from . import instructions as I
from .values import data_pointer


@dataclass
class CLibraryImage:
    """The executable's compiled kernels: C source, the library's bytes, kernel -> symbol.

    ``path`` only says where the library was built; ``load`` always opens the
    cache file holding exactly ``library`` (written from these bytes when the
    cached copy is missing or does not match their hash)."""
    source: str
    library: bytes
    symbols: dict            # kernel name -> C symbol
    path: str = ""

    def load(self) -> ctypes.CDLL:
        from backends.c.library_cache import store_library
        from backends.threading import prepare_openmp
        prepare_openmp()   # before the library pulls in libgomp
        return ctypes.CDLL(str(store_library(self.library)))


_KERNEL_PREFIX = "kernel_"


def build_c_library(kernels: dict) -> tuple[CLibraryImage, bool]:
    """Lower and compile ``{name: KernelUse}``; returns the image and whether gcc ran."""
    from backends.c.codegen import generate_c
    from backends.c.compiler import compile_shared
    from tensorir.transform import lower
    # The "kernel_" prefix keeps kernel symbols (e.g. a fused kernel named "sigmoid")
    # clear of the helper functions the backend's C prelude defines (rs_sigmoid, ...).
    signatures = {_KERNEL_PREFIX + name: use.func for name, use in kernels.items()}
    lowered = {name: lower(func) for name, func in signatures.items()}
    source, prefixed = generate_c(lowered, signatures=signatures)
    infos = {name: prefixed[_KERNEL_PREFIX + name] for name in kernels}
    for name, use in kernels.items():
        if [id(v) for v in infos[name].sym_vars] != [id(v) for v in use.sym_vars]:
            raise I.VMBuildError(f"kernel '{name}': the C backend's symbol order differs from the VM's")
    path, compiled = compile_shared(source)
    image = CLibraryImage(source, path.read_bytes(), {n: infos[n].name for n in kernels}, str(path))
    return image, compiled


class CKernels:
    """Links ``CallKernel`` to ctypes calls of one loaded library."""

    def __init__(self, image: CLibraryImage):
        from backends.threading import bind
        self.lib = image.load()
        bind(self.lib)
        self.functions = {}
        for name, symbol in image.symbols.items():
            cfunc = getattr(self.lib, symbol)
            cfunc.argtypes = None   # arguments are prebuilt ctypes objects: no conversion per call
            cfunc.restype = ctypes.c_int32
            self.functions[name] = cfunc

    def link(self, ins: I.CallKernel, nxt: int, code, frame):
        regs, ptrs, t = frame.regs, frame.ptrs, frame.table
        cfunc = self.functions[ins.kernel]
        bufs = (ctypes.c_void_p * max(1, len(ins.buffers)))()
        syms = ctypes.c_void_p(ctypes.addressof(t) + 8 * ins.sym_base) if ins.sym_base >= 0 else None
        cached = tuple((i, r) for i, r in enumerate(ins.buffers) if r in code.ptr_regs)
        computed = tuple((i, r) for i, r in enumerate(ins.buffers) if r not in code.ptr_regs)
        prologue = link_call_site(ins, code, frame)
        kernel, func_name = ins.kernel, code.func.name

        # The array last seen at each computed slot: a model's weights and caches are the same
        # objects on every call, so their address is looked up once (an ndarray's data never
        # moves; resize() refuses while this reference exists).
        seen: list = [None] * len(computed)
        computed = tuple((k, i, r) for k, (i, r) in enumerate(computed))

        def step():
            if prologue is not None:
                prologue()
            for i, r in cached:
                bufs[i] = ptrs[r]
            for k, i, r in computed:
                value = regs[r]
                if value is not seen[k]:
                    bufs[i] = data_pointer(value)
                    seen[k] = value
            status = cfunc(bufs, syms)
            if status:
                raise_for_status(status, f"function '{func_name}': kernel '{kernel}'")
            return nxt
        return step


class InterpKernels:
    """Runs kernels with ``tensorir.interpret`` (scalar params from the symbol table)."""

    def __init__(self, funcs: dict):
        self.funcs = funcs

    def link(self, ins: I.CallKernel, nxt: int, code, frame):
        import tensorir
        regs, t = frame.regs, frame.table
        func = self.funcs[ins.kernel]
        buffers, names, slots = ins.buffers, ins.scalar_names, ins.scalar_slots
        prologue = link_call_site(ins, code, frame)

        def step():
            if prologue is not None:
                prologue()
            tensorir.interpret(func, *[regs[r] for r in buffers],
                               **{n: t[s] for n, s in zip(names, slots)})
            return nxt
        return step


def link_call_site(ins: I.CallKernel, code, frame):
    """The run-time symbol work of a call whose argument shapes were not fully known."""
    site = ins.call_site
    if site is None:
        return None
    regs, t = frame.regs, frame.table
    structure = tuple((r, ndim, np.dtype(dtype), text) for r, ndim, dtype, text in site.structure)
    assign = tuple((slot, code.expr(tree)) for slot, tree in site.assign)
    checks = tuple((code.expr(a), code.expr(b), text) for a, b, text in site.checks)
    reads = site.reads

    def prologue():
        for r, ndim, dtype, text in structure:
            value = regs[r]
            if not isinstance(value, np.ndarray) or value.ndim != ndim or value.dtype != dtype \
                    or not value.flags.c_contiguous:
                got = (f"shape {value.shape}, dtype {value.dtype.name}"
                       if isinstance(value, np.ndarray) else type(value).__name__)
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
