"""Library entries for BLAS matmuls, the targets of DispatchLibrary's default
CPU patterns:

- ``openblas.sgemm(a, b) -> c``: ``c = a @ b`` with ``a`` (..., k) float32 and
  ``b`` (k, n); the leading dims of ``a`` are flattened into rows;
- ``openblas.sgemm_bias(a, b, bias) -> c``: ``c = a @ b + bias`` with ``bias`` (n,).

Both are in destination-passing form. The NumPy implementation (reference
interpreter) and the ``c`` target implementation (a Python callable in the
same DPS form that calls OpenBLAS through ctypes, for the C build's runtime)
share ``backends.blas.sgemm``, which falls back to NumPy when scipy-openblas32
is not installed.
"""
from __future__ import annotations

import numpy as np

from tensorir.errors import ShapeMismatchError

from .blas import sgemm
from .library import register_library

SGEMM = "openblas.sgemm"
SGEMM_BIAS = "openblas.sgemm_bias"


def sgemm_dps(a, b, c) -> None:
    sgemm(np.ascontiguousarray(a), np.ascontiguousarray(b), c)


def sgemm_bias_dps(a, b, bias, c) -> None:
    if bias.shape[-1:] != c.shape[-1:] or bias.size != c.shape[-1]:
        raise ShapeMismatchError(f"{SGEMM_BIAS}: bias of shape {bias.shape} does not match the "
                                 f"{c.shape[-1]} output columns")
    c2 = c.reshape(-1, c.shape[-1])
    c2[...] = bias.reshape(1, -1)  # beta=1 accumulates the product onto the broadcast bias
    sgemm(np.ascontiguousarray(a), np.ascontiguousarray(b), c, beta=1.0)


register_library(SGEMM, sgemm_dps, dps=True, c=sgemm_dps)
register_library(SGEMM_BIAS, sgemm_bias_dps, dps=True, c=sgemm_bias_dps)
