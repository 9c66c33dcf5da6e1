"""Single-precision GEMM through OpenBLAS when the ``scipy-openblas32``
package is installed (loaded with ctypes), NumPy's matmul otherwise.

``sgemm(a, b, c, trans_a=False, trans_b=False, alpha=1.0, beta=0.0)`` is in
destination-passing style: ``c = alpha * op(a) @ op(b) + beta * c`` written
into ``c``. Operands are C-contiguous float32; ``a`` and ``c`` may have
leading batch dims, which are flattened into rows (a weight ``b`` is 2-D).
"""
from __future__ import annotations

import ctypes
import functools
import glob
import os

import numpy as np

from tensorir.errors import ShapeMismatchError

from .blas_parallel import function_address, shim
from .threading import num_threads

_CBLAS_ROW_MAJOR = 101
_CBLAS_NO_TRANS, _CBLAS_TRANS = 111, 112
_SYMBOLS = ("scipy_cblas_sgemm", "cblas_sgemm")


@functools.lru_cache(maxsize=None)
def _openblas_symbol(symbols: tuple, argtypes: tuple):
    """The first of ``symbols`` in scipy-openblas32's library (ctypes), or None when not installed."""
    try:
        import scipy_openblas32
    except ImportError:
        return None
    candidates = sorted(glob.glob(os.path.join(scipy_openblas32.get_lib_dir(), "*openblas*.so*")) +
                        glob.glob(os.path.join(scipy_openblas32.get_lib_dir(), "*openblas*.dylib")))
    for path in candidates:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for symbol in symbols:
            fn = getattr(lib, symbol, None)
            if fn is not None:
                fn.argtypes = list(argtypes)
                fn.restype = None
                return fn
    return None


_I32, _F32, _PTR = ctypes.c_int, ctypes.c_float, ctypes.c_void_p


@functools.lru_cache(maxsize=None)
def _openblas_sgemm():
    """The ctypes cblas_sgemm of scipy-openblas32, or None when it is not installed."""
    fn = _openblas_symbol(_SYMBOLS, (_I32, _I32, _I32, _I32, _I32, _I32, _F32, _PTR, _I32, _PTR, _I32,
                                     _F32, _PTR, _I32))
    if fn is not None:
        _single_threaded_openblas()
    return fn


@functools.lru_cache(maxsize=None)
def _single_threaded_openblas() -> None:
    """OpenBLAS's own spinning pool would fight the kernels' OpenMP threads (see
    backends/threading.py); rows are split over our pool instead."""
    if os.environ.get("OPENBLAS_NUM_THREADS"):
        return
    setter = _openblas_symbol(("scipy_openblas_set_num_threads", "openblas_set_num_threads"), (_I32,))
    if setter is not None:
        setter(1)


# Splits over threads, measured on 2 cores with the models' weights (512..4096 square-ish):
# below _MIN_ROWS_TO_SPLIT_ROWS rows of a, splitting b's columns beat splitting a's rows by
# 5-15% (each thread packs only its part of b); from there on the two are level.
_MIN_ROWS_TO_SPLIT_ROWS = 128
_MIN_ROWS_PER_BLOCK = 16
_MIN_FLOPS_TO_SPLIT = 1 << 21
# a single row of a is split by columns of b once b has this many elements: below it,
# handing work to another thread (~10 us) costs more than it saves
_MIN_WEIGHT_TO_SPLIT_COLUMNS = 1 << 19
# rs_sgemv_rows gives each thread a contiguous block of b, which pays off from 512x512 weights on
# (2 threads, 8 weights in turn so they come from L3: 13.6 us against 17.5 us for one thread)
_MIN_WEIGHT_TO_SPLIT_ROWS = 1 << 18
_MIN_COLUMNS_PER_BLOCK = 64


@functools.lru_cache(maxsize=None)
def _openblas_sgemv():
    """cblas_sgemv: used for a single row of ``a``, where OpenBLAS's sgemm would pack all of ``b``."""
    return _openblas_symbol(("scipy_cblas_sgemv", "cblas_sgemv"),
                            (_I32, _I32, _I32, _I32, _F32, _PTR, _I32, _PTR, _I32, _F32, _PTR, _I32))


def backend() -> str:
    """"openblas" when sgemm calls OpenBLAS, "numpy" for the fallback."""
    return "openblas" if _openblas_sgemm() is not None else "numpy"


def _check(name: str, array, ndim_min: int) -> None:
    if not isinstance(array, np.ndarray) or array.dtype != np.float32 or array.ndim < ndim_min:
        raise ShapeMismatchError(f"sgemm: {name} must be a float32 array with at least {ndim_min} dims, "
                                 f"got {getattr(array, 'dtype', type(array).__name__)} "
                                 f"{getattr(array, 'shape', '')}")
    if not array.flags.c_contiguous:
        raise ShapeMismatchError(f"sgemm: {name} must be C-contiguous")


def sgemm(a: np.ndarray, b: np.ndarray, c: np.ndarray, trans_a: bool = False, trans_b: bool = False,
          alpha: float = 1.0, beta: float = 0.0) -> None:
    _check("a", a, 2)
    _check("c", c, 2)
    _check("b", b, 2)
    if b.ndim != 2:
        raise ShapeMismatchError(f"sgemm: b must be 2-D, got shape {b.shape}")
    if trans_a and a.ndim != 2:
        raise ShapeMismatchError(f"sgemm: a transposed a must be 2-D, got shape {a.shape}")
    a2 = a.reshape(-1, a.shape[-1])
    m, k = (a2.shape[1], a2.shape[0]) if trans_a else a2.shape
    kb, n = (b.shape[1], b.shape[0]) if trans_b else b.shape
    if k != kb or c.shape[-1] != n or c.size != m * n:
        raise ShapeMismatchError(f"sgemm: shapes {a.shape}{'^T' if trans_a else ''} @ "
                                 f"{b.shape}{'^T' if trans_b else ''} do not give {c.shape}")
    fn = _openblas_sgemm()
    if fn is None or m == 0 or n == 0:
        _numpy_sgemm(a2, b, c, trans_a, trans_b, alpha, beta)
        return
    tb = _CBLAS_TRANS if trans_b else _CBLAS_NO_TRANS
    a_ptr, b_ptr, c_ptr = _address(a2), _address(b), _address(c)
    lda, ldb = a2.shape[1], b.shape[1]
    if trans_a:
        fn(_CBLAS_ROW_MAJOR, _CBLAS_TRANS, tb, m, n, k, alpha, a_ptr, lda, b_ptr, ldb, beta, c_ptr, n)
        return
    blocks = num_threads()
    lib = shim() if blocks > 1 else None
    if m == 1:
        gemv = _openblas_sgemv()
        if lib is not None and not trans_b and k * n >= _MIN_WEIGHT_TO_SPLIT_ROWS and k >= 2 * blocks \
                and lib.rs_sgemv_rows(k, n, alpha, a_ptr, b_ptr, beta, c_ptr, blocks) == 0:
            return  # reading b dominates: each thread streams a block of its rows
        if lib is not None and k * n >= _MIN_WEIGHT_TO_SPLIT_COLUMNS and n >= 2 * _MIN_COLUMNS_PER_BLOCK:
            # reading b dominates, so the threads share its columns
            lib.rs_sgemv_columns(_kernel_address("sgemv"), tb, n, k, alpha, b_ptr, ldb, a_ptr, beta, c_ptr,
                                 min(blocks, n // _MIN_COLUMNS_PER_BLOCK))
        elif trans_b:
            # c (1 x n) = a (1 x k) @ b^T is b a; OpenBLAS's sgemm would pack all of b
            gemv(_CBLAS_ROW_MAJOR, _CBLAS_NO_TRANS, n, k, alpha, b_ptr, ldb, a_ptr, 1, beta, c_ptr, 1)
        else:
            gemv(_CBLAS_ROW_MAJOR, _CBLAS_TRANS, k, n, alpha, b_ptr, ldb, a_ptr, 1, beta, c_ptr, 1)
        return
    if lib is None or 2 * m * n * k < _MIN_FLOPS_TO_SPLIT:
        fn(_CBLAS_ROW_MAJOR, _CBLAS_NO_TRANS, tb, m, n, k, alpha, a_ptr, lda, b_ptr, ldb, beta, c_ptr, n)
    elif m >= _MIN_ROWS_TO_SPLIT_ROWS or n < 2 * _MIN_COLUMNS_PER_BLOCK:
        lib.rs_sgemm_rows(_kernel_address("sgemm"), tb, m, n, k, alpha, a_ptr, lda, b_ptr, ldb, beta, c_ptr, n,
                          min(blocks, max(1, m // _MIN_ROWS_PER_BLOCK)))
    else:
        # few rows of a: packing b dominates, so each thread packs only its share of the columns
        lib.rs_sgemm_columns(_kernel_address("sgemm"), tb, m, n, k, alpha, a_ptr, lda, b_ptr, ldb, beta, c_ptr,
                             n, min(blocks, n // _MIN_COLUMNS_PER_BLOCK))


@functools.lru_cache(maxsize=None)
def _kernel_address(name: str) -> int:
    """The C address of ``_openblas_sgemm`` or ``_openblas_sgemv`` (for the shim), found once."""
    return function_address(_openblas_sgemv() if name == "sgemv" else _openblas_sgemm())


def _address(array: np.ndarray) -> int:
    """The data pointer of a C-contiguous array (the buffer protocol is ~4x faster than ``.ctypes``)."""
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(array))
    except (TypeError, ValueError):  # read-only or empty arrays
        return array.ctypes.data


def _numpy_sgemm(a2, b, c, trans_a, trans_b, alpha, beta) -> None:
    product = np.matmul(a2.T if trans_a else a2, b.T if trans_b else b)
    c2 = c.reshape(-1, c.shape[-1])
    if beta == 0.0:
        np.multiply(product, np.float32(alpha), out=c2)
    else:
        c2 *= np.float32(beta)
        c2 += np.float32(alpha) * product
