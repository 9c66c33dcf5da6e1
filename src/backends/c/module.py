"""Build a set of PrimFuncs into one shared library and call its kernels from Python."""
from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np

from tensorir import dtype as dt
from tensorir.errors import ShapeMismatchError
from tensorir.expr import Var
from tensorir.function import PrimFunc

from ..threading import bind, prepare_openmp, team
from .codegen import KernelInfo, generate_c
from .status import raise_for_status
from .compiler import compile_shared


def _lower(func: PrimFunc) -> PrimFunc:
    from tensorir.transform import lower
    return lower(func)


class CKernel:
    """One compiled kernel, callable with NumPy arrays in destination-passing style."""

    def __init__(self, name: str, func: PrimFunc, info: KernelInfo, cfunc):
        self.name = name
        self.func = func          # the unlowered signature: symbolic vars bind from its buffer shapes
        self.info = info
        self.cfunc = cfunc
        self.cfunc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int64)]
        self.cfunc.restype = ctypes.c_int32
        self._n_bufs = len(info.buffers)
        self._n_syms = len(info.sym_vars)

    def bind_symbols(self, arrays, scalars) -> dict:
        """Values of the kernel's symbolic vars, read from array shapes and checked."""
        from tensorir.arith import evaluate
        env: dict = {}
        params = self.func.buffer_params
        if len(arrays) != len(params):
            raise ShapeMismatchError(f"kernel {self.name!r} takes {len(params)} buffers, got {len(arrays)}")
        deferred = []
        for buf, arr in zip(params, arrays):
            if not isinstance(arr, np.ndarray):
                raise ShapeMismatchError(f"kernel {self.name!r}, parameter {buf.name!r}: expected a NumPy "
                                         f"array, got {type(arr).__name__}")
            if arr.ndim != buf.ndim:
                raise ShapeMismatchError(f"kernel {self.name!r}, parameter {buf.name!r}: expected rank "
                                         f"{buf.ndim}, got shape {arr.shape}")
            if arr.dtype != dt.to_numpy(buf.dtype):
                raise ShapeMismatchError(f"kernel {self.name!r}, parameter {buf.name!r}: expected dtype "
                                         f"{buf.dtype}, got {arr.dtype}")
            if not arr.flags.c_contiguous:
                raise ShapeMismatchError(f"kernel {self.name!r}, parameter {buf.name!r}: array must be "
                                         "C-contiguous")
            for axis, (dim, actual) in enumerate(zip(buf.shape, arr.shape)):
                if isinstance(dim, Var) and dim not in env:
                    env[dim] = int(actual)
                else:
                    deferred.append((buf, axis, dim, int(actual)))
        for var in self.func.scalar_params:
            if var.name not in scalars:
                raise ShapeMismatchError(f"kernel {self.name!r}: missing scalar parameter {var.name!r}")
            env[var] = int(scalars[var.name])
        for buf, axis, dim, actual in deferred:
            expected = evaluate(dim, env)
            if expected != actual:
                raise ShapeMismatchError(f"kernel {self.name!r}, parameter {buf.name!r}, axis {axis}: "
                                         f"expected {dim!r} = {expected}, got {actual}")
        for var, value in env.items():
            if var.upper is not None and value > var.upper:
                raise ShapeMismatchError(f"kernel {self.name!r}: symbolic var {var.name!r} = {value} "
                                         f"exceeds its upper bound {var.upper}")
        return env

    def __call__(self, *arrays, **scalars) -> None:
        env = self.bind_symbols(arrays, scalars)
        missing = [v.name for v in self.info.sym_vars if v not in env]
        if missing:
            raise ShapeMismatchError(f"kernel {self.name!r}: cannot determine {missing} from the arguments")
        bufs = (ctypes.c_void_p * max(1, self._n_bufs))(*[a.ctypes.data for a in arrays])
        syms = (ctypes.c_int64 * max(1, self._n_syms))(*[env[v] for v in self.info.sym_vars])
        threads = team()
        if threads is not None:
            threads.enter()
        status = self.cfunc(bufs, syms)
        if threads is not None:
            threads.leave()
        raise_for_status(status, f"kernel {self.name!r}")


class CModule:
    """A shared library built from PrimFuncs; ``module[name]`` is a CKernel."""

    def __init__(self, path: Path, source: str, kernels: dict, compiled: bool):
        self.path = path
        self.source = source
        self.compiled = compiled   # False when the library came from the cache
        prepare_openmp()   # before the library pulls in libgomp
        self.lib = ctypes.CDLL(str(path))
        bind(self.lib)
        self.kernels = {name: CKernel(name, func, info, getattr(self.lib, info.name))
                        for name, (func, info) in kernels.items()}

    def __getitem__(self, name: str) -> CKernel:
        return self.kernels[name]


def build_c(funcs: dict[str, PrimFunc] | PrimFunc, lowered: dict[str, PrimFunc] | None = None) -> CModule:
    """Lower (unless ``lowered`` is given), generate C, compile (cached) and load."""
    if isinstance(funcs, PrimFunc):
        funcs = {funcs.name: funcs}
    lowered = lowered or {name: _lower(f) for name, f in funcs.items()}
    source, infos = generate_c(lowered, signatures=funcs)
    path, compiled = compile_shared(source)
    return CModule(path, source, {n: (funcs[n], infos[n]) for n in funcs}, compiled)
