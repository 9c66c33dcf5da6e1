"""The generated GEMM library as an AVX2-only machine builds it, compiled here with AVX-512 off."""
from __future__ import annotations

import ctypes
import functools
import subprocess

from backends import blas
from backends.c.compiler import compile_shared, find_compiler
from backends.c.gemm.driver import emit_gemm_library
from backends.c.gemm.machine import AVX2, isa_from_macros, machine_from
from backends.c.gemm.params import derive_params


@functools.lru_cache(maxsize=None)
def forced_avx2_library():
    """``(library, params)`` of the whole library compiled with ``-mno-avx512f`` (what an AVX2-only CPU
    such as Zen 3 builds; OpenBLAS bound where the target has it), or ``(None, None)`` where the
    compiler cannot target AVX2 + FMA."""
    flags = ("-mno-avx512f",)
    macros = subprocess.run([find_compiler(), "-march=native", *flags, "-dM", "-E", "-x", "c", "-"], input="",
                            capture_output=True, text=True).stdout
    if isa_from_macros(macros) != AVX2:
        return None, None
    params = derive_params(machine_from(macros))
    path, _ = compile_shared(emit_gemm_library(params), extra_flags=flags)
    lib = ctypes.CDLL(str(path))
    lib.rs_gen_gemm.argtypes = [ctypes.c_long] * 3 + [ctypes.c_void_p] * 2 + [ctypes.c_int] + \
        [ctypes.c_void_p] * 3 + [ctypes.c_int] * 3
    lib.rs_gen_gemm_prepacked.argtypes = [ctypes.c_long] * 3 + [ctypes.c_void_p] * 6 + [ctypes.c_int] * 3
    lib.rs_gen_gemm_prepacked_variant.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_int]
    lib.rs_gen_bind_blas.argtypes = [ctypes.c_void_p]
    if blas.backend() == "openblas":
        lib.rs_gen_bind_blas(blas.native_address("rs_sgemm"))
    return lib, params
