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
