"""Single-precision GEMM through OpenBLAS from the ``scipy-openblas32``
package (a core dependency, loaded with ctypes); NumPy's matmul when it
cannot be loaded (a C build then warns once: that path is several times slower).

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
import warnings
from math import prod

import numpy as np

from tensorir.errors import ShapeMismatchError

from .blas_parallel import function_address, shim

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
    backends/threading.py); rows are split over our team instead. Also when OPENBLAS_NUM_THREADS
    is set: that is meant for NumPy's copy of OpenBLAS, while this private copy runs inside our
    parallel regions, where a threaded OpenBLAS built with pthreads warns "Detect OpenMP Loop"."""
    setter = _openblas_symbol(("scipy_openblas_set_num_threads", "openblas_set_num_threads"), (_I32,))
    if setter is not None:
        setter(1)


@functools.lru_cache(maxsize=None)
def _openblas_sgemv():
    """cblas_sgemv: used for a single row of ``a``, where OpenBLAS's sgemm would pack all of ``b``."""
    return _openblas_symbol(("scipy_cblas_sgemv", "cblas_sgemv"),
                            (_I32, _I32, _I32, _I32, _F32, _PTR, _I32, _PTR, _I32, _F32, _PTR, _I32))


@functools.lru_cache(maxsize=None)
def _dispatcher():
    """The shim (blas_parallel.py) bound to OpenBLAS, or None without OpenBLAS or a C compiler."""
    gemm, gemv = _openblas_sgemm(), _openblas_sgemv()
    lib = shim() if gemm is not None and gemv is not None else None
    if lib is not None:
        lib.rs_blas_bind(function_address(gemm), function_address(gemv))
    return lib


def native_address(symbol: str) -> int | None:
    """Address of one of the shim's native VM entries (``rs_sgemm_native``, ...), or None."""
    lib = _dispatcher()
    if lib is None:
        _warn_fallback()
        return None
    return function_address(getattr(lib, symbol))


@functools.lru_cache(maxsize=None)
def _warn_fallback() -> None:
    """Once per process: a C build whose matmuls run on NumPy is several times slower."""
    why = "scipy-openblas32 (a dependency of relaxscript) cannot be loaded" if _openblas_sgemm() is None \
        else "the C shim for OpenBLAS could not be compiled"
    warnings.warn(f"{why}: matmuls in compiled code fall back to NumPy, several times slower; "
                  "reinstall relaxscript to get the OpenBLAS path", RuntimeWarning, stacklevel=3)


def backend() -> str:
    """"openblas" when sgemm calls OpenBLAS, "numpy" for the fallback."""
    return "openblas" if _openblas_sgemm() is not None else "numpy"


def num_threads() -> int:
    """Threads a BLAS call splits over: 0 means the calling thread's current OpenMP team size, which
    the VM sets per call (backends/threading.py); tests patch in fixed counts."""
    return 0


def _check(name: str, array, ndim_min: int) -> None:
    if not isinstance(array, np.ndarray) or array.dtype != np.float32 or array.ndim < ndim_min:
        raise ShapeMismatchError(f"sgemm: {name} must be a float32 array with at least {ndim_min} dims, "
                                 f"got {getattr(array, 'dtype', type(array).__name__)} "
                                 f"{getattr(array, 'shape', '')}")
    if not array.flags.c_contiguous:
        raise ShapeMismatchError(f"sgemm: {name} must be C-contiguous")


def product_dims(a_shape: tuple, b_shape: tuple, c_shape: tuple, trans_a: bool = False,
                 trans_b: bool = False) -> tuple[int, int, int]:
    """``(m, n, k)`` of ``c = op(a) @ op(b)``, the leading dims of ``a`` and ``c`` flattened into rows;
    raises ShapeMismatchError when the shapes do not fit."""
    text = (f"sgemm: shapes {a_shape}{'^T' if trans_a else ''} @ {b_shape}{'^T' if trans_b else ''} "
            f"do not give {c_shape}")
    if len(b_shape) != 2 or len(a_shape) < 2 or len(c_shape) < 2:
        raise ShapeMismatchError(text + " (b must be 2-D, a and c at least 2-D)")
    if trans_a and len(a_shape) != 2:
        raise ShapeMismatchError(f"sgemm: a transposed a must be 2-D, got shape {a_shape}")
    rows = prod(a_shape[:-1])
    m, k = (a_shape[-1], rows) if trans_a else (rows, a_shape[-1])
    kb, n = (b_shape[1], b_shape[0]) if trans_b else b_shape
    if k != kb or c_shape[-1] != n or prod(c_shape) != m * n:
        raise ShapeMismatchError(text)
    return m, n, k


def native_params(a_shape: tuple, b_shape: tuple, c_shape: tuple) -> tuple[int, int, int, int]:
    """The params of the shim's native entries: ``(m, n, k, threads)`` of ``c = a @ b``."""
    return (*product_dims(a_shape, b_shape, c_shape), num_threads())


def batched_params(a_shape: tuple, b_shape: tuple, c_shape: tuple) -> tuple[int, int, int, int, int]:
    """``(batch, m, n, k, threads)`` of ``c[i] = a[i] @ b[i]`` over equal leading (batch) dims;
    raises ShapeMismatchError when the shapes do not fit."""
    if len(a_shape) < 3 or len(b_shape) != len(a_shape) or len(c_shape) != len(a_shape) or \
            a_shape[:-2] != b_shape[:-2] or c_shape[:-2] != a_shape[:-2] or a_shape[-1] != b_shape[-2] or \
            c_shape[-2:] != (a_shape[-2], b_shape[-1]):
        raise ShapeMismatchError(f"sgemm_batched: shapes {a_shape} @ {b_shape} do not give {c_shape} "
                                 "(equal batch dims, at least 3-D)")
    return prod(a_shape[:-2]), a_shape[-2], b_shape[-1], a_shape[-1], num_threads()


def sgemm_batched(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
    """``c[i] = a[i] @ b[i]`` (destination-passing) for float32 arrays with equal batch dims."""
    for name, array in (("a", a), ("b", b), ("c", c)):
        _check(name, array, 3)
    batch, m, n, k, threads = batched_params(a.shape, b.shape, c.shape)
    lib = _dispatcher()
    if lib is None:
        np.matmul(a, b, out=c)
        return
    operands = (ctypes.c_void_p * 3)(_address(a), _address(b), _address(c))
    lib.rs_sgemm_batched_native(operands, (ctypes.c_int64 * 5)(batch, m, n, k, threads))


def sgemm(a: np.ndarray, b: np.ndarray, c: np.ndarray, trans_a: bool = False, trans_b: bool = False,
          alpha: float = 1.0, beta: float = 0.0) -> None:
    _check("a", a, 2)
    _check("c", c, 2)
    _check("b", b, 2)
    m, n, k = product_dims(a.shape, b.shape, c.shape, trans_a, trans_b)
    a2 = a.reshape(prod(a.shape[:-1]), a.shape[-1])   # not -1: ambiguous for an empty a
    fn = _openblas_sgemm()
    if fn is None or m == 0 or n == 0:
        _numpy_sgemm(a2, b, c, trans_a, trans_b, alpha, beta)
        return
    a_ptr, b_ptr, c_ptr = _address(a2), _address(b), _address(c)
    lib = _dispatcher()
    if lib is not None:
        lib.rs_sgemm(trans_a, trans_b, m, n, k, alpha, a_ptr, b_ptr, beta, c_ptr, num_threads())
        return
    # no C compiler for the shim: one OpenBLAS call on one thread
    fn(_CBLAS_ROW_MAJOR, _CBLAS_TRANS if trans_a else _CBLAS_NO_TRANS, _CBLAS_TRANS if trans_b else _CBLAS_NO_TRANS,
       m, n, k, alpha, a_ptr, a2.shape[1], b_ptr, b.shape[1], beta, c_ptr, n)


def _address(array: np.ndarray) -> int:
    """The data pointer of a C-contiguous array (the buffer protocol is ~4x faster than ``.ctypes``)."""
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(array))
    except (TypeError, ValueError):  # read-only or empty arrays
        return array.ctypes.data


def _numpy_sgemm(a2, b, c, trans_a, trans_b, alpha, beta) -> None:
    product = np.matmul(a2.T if trans_a else a2, b.T if trans_b else b)
    c2 = c.reshape(prod(c.shape[:-1]), c.shape[-1])
    if beta == 0.0:
        np.multiply(product, np.float32(alpha), out=c2)
    else:
        c2 *= np.float32(beta)
        c2 += np.float32(alpha) * product
