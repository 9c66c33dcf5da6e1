"""Block-quantized constant weights written into script text (Before/Expected tests of passes that
see quantized weights)."""
from __future__ import annotations

import numpy as np

from relaxscript.quantization import quantize_numpy


def quantized_weights(seed: int, rows: int, cols: int, fmt: str) -> tuple:
    """A random ``(rows, cols)`` float32 matrix quantized to ``fmt`` (``quantize_numpy``'s arrays)."""
    return quantize_numpy(np.random.default_rng(seed).standard_normal((rows, cols)).astype("float32"), fmt)


def constant_script(array: np.ndarray) -> str:
    """``array`` written as an ``R.const``."""
    return f"R.const({array.tolist()!r}, \"{array.dtype}\")"


def dequantize_script(arrays, fmt: str) -> str:
    """``R.dequantize`` of ``arrays`` (codes, scale[, min]) written as constants."""
    return f"R.dequantize({', '.join(constant_script(a) for a in arrays)}, format=\"{fmt}\")"
