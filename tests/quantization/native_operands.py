"""The operand table a standalone quantized kernel (``rs_gemv`` / ``rs_gemm``) takes."""
from __future__ import annotations

import ctypes

import numpy as np

EPILOGUE_SLOT = 5   # the extra operand of a fused epilogue (the residual or gate), after the roles


def kernel_pointers(tensors: tuple, roles: dict, x: np.ndarray, y: np.ndarray,
                    extra: np.ndarray | None = None) -> ctypes.Array:
    """Pointers to ``tensors`` (codes, scale[, min] as ``quantize_numpy`` returns them), ``x`` and ``y`` at
    the positions ``roles`` names, and ``extra`` at ``EPILOGUE_SLOT``. The arrays must outlive the call."""
    operands = {"codes": tensors[0], "scale": tensors[1], "x": x, "y": y} | (
        {"min": tensors[2]} if len(tensors) > 2 else {})
    pointers = (ctypes.c_void_p * 6)()
    for role, position in roles.items():
        pointers[position] = operands[role].ctypes.data
    if extra is not None:
        pointers[EPILOGUE_SLOT] = extra.ctypes.data
    return pointers


def run_kernel(library, tensors: tuple, roles: dict, x: np.ndarray, y: np.ndarray,
               extra: np.ndarray | None = None, team: int = 1, tokens: int | None = None) -> None:
    """One call of a standalone kernel built by ``team_library`` on a team of ``team`` threads:
    ``rs_gemm`` with ``tokens`` as its symbolic row count, else ``rs_gemv``; it must return 0."""
    pointers = kernel_pointers(tensors, roles, x, y, extra)
    library.rs_set_team(team)
    if tokens is None:
        assert library.rs_gemv(pointers, None) == 0
    else:
        assert library.rs_gemm(pointers, (ctypes.c_int64 * 1)(tokens)) == 0


def team_library(tmp_dir, source: str, flags: list) -> ctypes.CDLL:
    """``source`` (a generated kernel) built alone as a shared library (``-O3 -fopenmp`` and
    ``flags``) after the runtime's status codes, its half-float loads and a team size the test
    sets (``rs_set_team``, read by the kernel's ``rs_threads``), and loaded."""
    import subprocess

    from backends.c.codegen import HALF_TO_FLOAT_C
    from backends.c.compiler import find_compiler
    from backends.c.status import C_DEFINES
    prelude = (C_DEFINES + "\n#include <stdint.h>\n#include <string.h>\n#include <stdlib.h>\n#include <math.h>\n"
               "static int rs_team_size = 1;\nvoid rs_set_team(int n) { rs_team_size = n; }\n"
               "static inline int rs_threads(void) { return rs_team_size; }\n" + HALF_TO_FLOAT_C)
    path = tmp_dir / "kernel.c"
    path.write_text(prelude + source)
    result = subprocess.run([find_compiler(), "-O3", *flags, "-fopenmp", "-shared", "-fPIC", "-fno-math-errno",
                             str(path), "-o", str(path.with_suffix(".so")), "-lm"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return ctypes.CDLL(str(path.with_suffix(".so")))
