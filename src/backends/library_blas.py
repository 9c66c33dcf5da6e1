"""Library entries for BLAS matmuls, the targets of DispatchLibrary's default
CPU patterns:

- ``openblas.sgemm(a, b) -> c``: ``c = a @ b`` with ``a`` (..., k) float32 and
  ``b`` (k, n); the leading dims of ``a`` are flattened into rows;
- ``openblas.sgemm_nt(a, b) -> c``: ``c = a @ b.T`` with ``b`` (n, k), a linear
  layer's ``(out_features, in_features)`` weight read as stored (no transposed copy);
- ``openblas.sgemm_bias(a, b, bias) -> c``: ``c = a @ b + bias`` with ``bias`` (n,);
- ``openblas.sgemm_batched(a, b) -> c``: ``c[i] = a[i] @ b[i]`` with equal leading
  (batch) dims, e.g. an attention's heads.

Both are in destination-passing form. The NumPy implementation (reference
interpreter) and the ``c`` target implementation (a Python callable in the
same DPS form that calls OpenBLAS through ctypes, for the C build's runtime)
share ``backends.blas.sgemm``, which falls back to NumPy when scipy-openblas32
is not installed. The VM of a C build calls the shim's native entries instead
(``rs_sgemm_native``, ``rs_sgemm_bias_native``: the same C dispatch without
Python in between).
"""
from __future__ import annotations

from math import prod

import numpy as np

from tensorir.errors import ShapeMismatchError

from .blas import (batched_params, native_address, native_params, num_threads, product_dims, sgemm,
                   sgemm_batched)
from .library import NativeCall, register_library

SGEMM = "openblas.sgemm"
SGEMM_BIAS = "openblas.sgemm_bias"
SGEMM_BATCHED = "openblas.sgemm_batched"
SGEMM_NT = "openblas.sgemm_nt"


def sgemm_dps(a, b, c) -> None:
    sgemm(np.ascontiguousarray(a), np.ascontiguousarray(b), c)


def sgemm_nt_dps(a, b, c) -> None:
    sgemm(np.ascontiguousarray(a), np.ascontiguousarray(b), c, trans_b=True)


def _nt_params(a_shape, b_shape, c_shape) -> tuple:
    return (*product_dims(a_shape, b_shape, c_shape, trans_b=True), num_threads())


def _check_bias(bias_shape: tuple, c_shape: tuple) -> None:
    if bias_shape[-1:] != c_shape[-1:] or prod(bias_shape) != c_shape[-1]:   # (n,) or (1, ..., 1, n)
        raise ShapeMismatchError(f"{SGEMM_BIAS}: bias of shape {bias_shape} does not match the "
                                 f"{c_shape[-1]} output columns")


def sgemm_bias_dps(a, b, bias, c) -> None:
    _check_bias(bias.shape, c.shape)
    c2 = c.reshape(-1, c.shape[-1])
    c2[...] = bias.reshape(1, -1)  # beta=1 accumulates the product onto the broadcast bias
    sgemm(np.ascontiguousarray(a), np.ascontiguousarray(b), c, beta=1.0)


def _bias_params(a_shape, b_shape, bias_shape, c_shape) -> tuple:
    params = native_params(a_shape, b_shape, c_shape)
    _check_bias(bias_shape, c_shape)
    return params


def sgemm_batched_dps(a, b, c) -> None:
    sgemm_batched(np.ascontiguousarray(a), np.ascontiguousarray(b), c)


register_library(SGEMM, sgemm_dps, dps=True, c=sgemm_dps,
                 native=NativeCall(lambda: native_address("rs_sgemm_native"), native_params, "float32"))
register_library(SGEMM_BIAS, sgemm_bias_dps, dps=True, c=sgemm_bias_dps,
                 native=NativeCall(lambda: native_address("rs_sgemm_bias_native"), _bias_params, "float32"))
register_library(SGEMM_BATCHED, sgemm_batched_dps, dps=True, c=sgemm_batched_dps,
                 native=NativeCall(lambda: native_address("rs_sgemm_batched_native"), batched_params, "float32"))
register_library(SGEMM_NT, sgemm_nt_dps, dps=True, c=sgemm_nt_dps,
                 native=NativeCall(lambda: native_address("rs_sgemm_nt_native"), _nt_params, "float32"))
