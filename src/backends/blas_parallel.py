"""Split BLAS calls over the kernels' OpenMP threads.

OpenBLAS runs single-threaded (its own busy-waiting pool would fight the
kernels' OpenMP threads, see threading.py), so one pool owns the cores. This shim, compiled once into the C
cache, runs blocks of one BLAS call on OpenMP threads, calling OpenBLAS
through the function pointer ctypes found.
"""
from __future__ import annotations

import ctypes
import functools

from .c.compiler import compile_shared

_SOURCE = r"""
#include <stddef.h>
typedef void (*sgemm_fn)(int, int, int, int, int, int, float, const float*, int, const float*, int,
                         float, float*, int);
typedef void (*sgemv_fn)(int, int, int, int, float, const float*, int, const float*, int, float,
                         float*, int);

/* c[:, lo:hi] = alpha * a @ op(b)[:, lo:hi] + beta * c[:, lo:hi], blocks of columns in parallel */
void rs_sgemm_columns(sgemm_fn f, int trans_b, int m, int n, int k, float alpha, const float* a, int lda,
                      const float* b, int ldb, float beta, float* c, int ldc, int blocks) {
  #pragma omp parallel for schedule(static) num_threads(blocks)
  for (int i = 0; i < blocks; ++i) {
    int lo = (int)((long)n * i / blocks), hi = (int)((long)n * (i + 1) / blocks);
    const float* bb = trans_b == 112 ? b + (size_t)lo * ldb : b + lo;
    f(101, 111, trans_b, m, hi - lo, k, alpha, a, lda, bb, ldb, beta, c + lo, ldc);
  }
}

/* rows lo:hi of c, in parallel */
void rs_sgemm_rows(sgemm_fn f, int trans_b, int m, int n, int k, float alpha, const float* a, int lda,
                   const float* b, int ldb, float beta, float* c, int ldc, int blocks) {
  #pragma omp parallel for schedule(static) num_threads(blocks)
  for (int i = 0; i < blocks; ++i) {
    int lo = (int)((long)m * i / blocks), hi = (int)((long)m * (i + 1) / blocks);
    f(101, 111, trans_b, hi - lo, n, k, alpha, a + (size_t)lo * lda, lda, b, ldb, beta,
      c + (size_t)lo * ldc, ldc);
  }
}

/* y[lo:hi] = alpha * op(b)^T x ... : a single row times b, blocks of output columns in parallel */
void rs_sgemv_columns(sgemv_fn f, int trans_b, int n, int k, float alpha, const float* b, int ldb,
                      const float* x, float beta, float* y, int blocks) {
  #pragma omp parallel for schedule(static) num_threads(blocks)
  for (int i = 0; i < blocks; ++i) {
    int lo = (int)((long)n * i / blocks), hi = (int)((long)n * (i + 1) / blocks);
    if (trans_b == 112)   /* b is (n x k): rows lo:hi */
      f(101, 111, hi - lo, k, alpha, b + (size_t)lo * ldb, ldb, x, 1, beta, y + lo, 1);
    else                  /* b is (k x n): columns lo:hi */
      f(101, 112, k, hi - lo, alpha, b + lo, ldb, x, 1, beta, y + lo, 1);
  }
}
"""

_I, _F, _P = ctypes.c_int, ctypes.c_float, ctypes.c_void_p


@functools.lru_cache(maxsize=None)
def shim():
    """The compiled shim (ctypes CDLL), or None when no C compiler is available."""
    try:
        path, _ = compile_shared(_SOURCE)
    except Exception:  # noqa: BLE001 - no compiler: BLAS calls simply stay single-threaded
        return None
    lib = ctypes.CDLL(str(path))
    gemm_args = [_P, _I, _I, _I, _I, _F, _P, _I, _P, _I, _F, _P, _I, _I]
    for name in ("rs_sgemm_columns", "rs_sgemm_rows"):
        getattr(lib, name).argtypes = gemm_args
        getattr(lib, name).restype = None
    lib.rs_sgemv_columns.argtypes = [_P, _I, _I, _I, _F, _P, _I, _P, _F, _P, _I]
    lib.rs_sgemv_columns.restype = None
    return lib


def function_address(cfunc) -> int:
    return ctypes.cast(cfunc, ctypes.c_void_p).value
