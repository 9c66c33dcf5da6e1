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
#include <stdlib.h>
#include <omp.h>
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

/* y = alpha * x @ b + beta * y for one row x (k) and a row-major b (k x n). Each thread streams a
   contiguous block of b's rows into its own partial row (in L1/L2), then the threads add the
   partials for their share of y. A contiguous stream per thread is what the prefetchers like best:
   splitting b's columns instead makes every thread skip through all of b. Measured on 2 cores for a
   1024x4096 then a 4096x1024 product (32 MB of weights, the MLP at n=1): 0.26 ms for this, 0.30 ms
   for NumPy's threaded OpenBLAS, 0.39 ms for OpenBLAS's sgemv on column blocks; four rows per
   sweep instead of eight took 0.34 ms, sixteen 0.37 ms. Returns -1 when the partials cannot be
   allocated (y is then unchanged). */
int rs_sgemv_rows(int k, int n, float alpha, const float* restrict x, const float* restrict b,
                  float beta, float* restrict y, int blocks) {
  float* part = (float*)malloc(sizeof(float) * (size_t)n * (size_t)blocks);
  if (part == NULL) return -1;
  #pragma omp parallel num_threads(blocks)
  {
    const int t = omp_get_thread_num(), count = omp_get_num_threads();
    const long lo = (long)k * t / count, hi = (long)k * (t + 1) / count;
    float* restrict acc = part + (size_t)t * n;
    for (long j = 0; j < n; ++j) acc[j] = 0.0f;
    long r = lo;
    /* eight rows per sweep of the partial row: eight weight streams per load/store of acc */
    for (; r + 8 <= hi; r += 8) {
      const float* restrict w = b + (size_t)r * n;
      const float* restrict a = x + r;
      #pragma omp simd
      for (long j = 0; j < n; ++j)
        acc[j] += ((a[0] * w[j] + a[1] * w[n + j]) + (a[2] * w[2 * n + j] + a[3] * w[3 * n + j]))
                + ((a[4] * w[4 * n + j] + a[5] * w[5 * n + j]) + (a[6] * w[6 * n + j] + a[7] * w[7 * n + j]));
    }
    for (; r < hi; ++r) {
      const float a0 = x[r];
      const float* restrict w0 = b + (size_t)r * n;
      #pragma omp simd
      for (long j = 0; j < n; ++j) acc[j] += a0 * w0[j];
    }
    #pragma omp barrier
    const long jlo = (long)n * t / count, jhi = (long)n * (t + 1) / count;
    for (long j = jlo; j < jhi; ++j) {
      float sum = 0.0f;
      for (int u = 0; u < count; ++u) sum += part[(size_t)u * n + j];
      y[j] = beta == 0.0f ? alpha * sum : alpha * sum + beta * y[j];
    }
  }
  free(part);
  return 0;
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
    lib.rs_sgemv_rows.argtypes = [_I, _I, _F, _P, _P, _F, _P, _I]
    lib.rs_sgemv_rows.restype = _I
    return lib


def function_address(cfunc) -> int:
    return ctypes.cast(cfunc, ctypes.c_void_p).value
