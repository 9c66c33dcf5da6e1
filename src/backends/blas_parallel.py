"""The C side of BLAS calls: pick OpenBLAS's routine and split it over the
kernels' OpenMP threads.

OpenBLAS runs single-threaded (its own busy-waiting pool would fight the
kernels' OpenMP threads, see threading.py), so one pool owns the cores. This
shim, compiled once into the C cache and bound to the OpenBLAS entries ctypes
found, runs blocks of one BLAS call on OpenMP threads. ``rs_sgemm`` holds the
whole choice (sgemm or sgemv, which split), so a call from Python
(``blas.sgemm``) and a native call from the VM (``rs_sgemm_native``, no Python
in between) take the same path.
"""
from __future__ import annotations

import ctypes
import functools

from .c.compiler import compile_shared

_SOURCE = r"""
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>
typedef void (*sgemm_fn)(int, int, int, int, int, int, float, const float*, int, const float*, int,
                         float, float*, int);
typedef void (*sgemv_fn)(int, int, int, int, float, const float*, int, const float*, int, float,
                         float*, int);

/* Where column block i of `blocks` starts: an equal share rounded down to a multiple of 16 floats
   (64 bytes), so on rows that start on a cache line (widths that are multiples of 16) each block
   starts on a line of its own and no line of c is written by two threads */
#define COLUMN_ALIGN 16
static int column_block_start(int n, int i, int blocks) {
  if (i >= blocks) return n;
  return (int)((long)n * i / blocks) / COLUMN_ALIGN * COLUMN_ALIGN;
}

/* c[:, lo:hi] = alpha * a @ op(b)[:, lo:hi] + beta * c[:, lo:hi], blocks of columns in parallel */
void rs_sgemm_columns(sgemm_fn f, int trans_b, int m, int n, int k, float alpha, const float* a, int lda,
                      const float* b, int ldb, float beta, float* c, int ldc, int blocks) {
  #pragma omp parallel for schedule(static) num_threads(blocks)
  for (int i = 0; i < blocks; ++i) {
    int lo = column_block_start(n, i, blocks), hi = column_block_start(n, i + 1, blocks);
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

/* OpenBLAS's entries, found by ctypes once per process (rs_blas_bind) */
static sgemm_fn bound_sgemm;
static sgemv_fn bound_sgemv;

void rs_blas_bind(sgemm_fn gemm, sgemv_fn gemv) { bound_sgemm = gemm; bound_sgemv = gemv; }

/* Splits over threads. OpenBLAS packs the operands of every call: a thread with a block of a's rows
   packs all of b again, a thread with a block of b's columns packs all of a again. So the split
   that repeats the smaller operand wins (a has m rows, b n columns, both k deep): columns when
   2 m <= n, and always below MIN_ROWS_TO_SPLIT_ROWS rows (packing b dominates there). Measured as
   each half's thread CPU time on one core (the slower half is the 2-thread call's critical path),
   Llama/MLP weights 512..4096 wide: at m = 128 rows 0.53-0.55 of the whole call, columns 0.50-0.52;
   at m = 32..64 rows 0.56-0.64, columns 0.51-0.55; at m >= 2n the two are level (0.50-0.53). */
#define MIN_ROWS_TO_SPLIT_ROWS 128
#define MIN_ROWS_PER_BLOCK 16
#define MIN_FLOPS_TO_SPLIT (1L << 21)
/* a single row of a is split by columns of b once b has this many elements: below it, handing
   work to another thread (~10 us) costs more than it saves */
#define MIN_WEIGHT_TO_SPLIT_COLUMNS (1L << 19)
/* rs_sgemv_rows gives each thread a contiguous block of b, which pays off from 512x512 weights on
   (2 threads, 8 weights in turn so they come from L3: 13.6 us against 17.5 us for one thread) */
#define MIN_WEIGHT_TO_SPLIT_ROWS (1L << 18)
#define MIN_COLUMNS_PER_BLOCK 64
#define ROW_MAJOR 101
#define NO_TRANS 111
#define TRANS 112

static long min_long(long x, long y) { return x < y ? x : y; }

/* The team size of the kernels' parallel loops and of BLAS splits, set per call by the runtime
   (backends/threading.py); kernel libraries read it through rs_bind_team. 0: OpenMP's default. */
int rs_team_threads = 0;

/* threads <= 0: the current team size */
static int team_threads(int threads) {
  return threads > 0 ? threads : rs_team_threads > 0 ? rs_team_threads : omp_get_max_threads(); }
static long max_long(long x, long y) { return x > y ? x : y; }

enum { SPLIT_NONE = 0, SPLIT_ROWS = 1, SPLIT_COLUMNS = 2 };

/* How rs_sgemm splits an (m x k) @ (k x n) product with m > 1 over `threads` threads: SPLIT_NONE
   (one call), SPLIT_ROWS or SPLIT_COLUMNS, with the block count in *blocks. */
int rs_sgemm_split(long m, long n, long k, int threads, int* blocks) {
  *blocks = 1;
  if (threads <= 1 || 2 * m * n * k < MIN_FLOPS_TO_SPLIT) return SPLIT_NONE;
  if (n >= 2 * MIN_COLUMNS_PER_BLOCK && (m < MIN_ROWS_TO_SPLIT_ROWS || 2 * m <= n)) {
    *blocks = (int)min_long(threads, n / MIN_COLUMNS_PER_BLOCK);
    return SPLIT_COLUMNS;
  }
  *blocks = (int)min_long(threads, max_long(1, m / MIN_ROWS_PER_BLOCK));
  return SPLIT_ROWS;
}

/* c (m x n) = alpha * op(a) @ op(b) + beta * c, all row-major and contiguous; a is (m x k), or
   (k x m) when trans_a; b is (k x n), or (n x k) when trans_b. Picks OpenBLAS's sgemm or sgemv and
   how to split the call over `threads` OpenMP threads (<= 0: the current team size). Returns -2
   when OpenBLAS is not bound. */
int rs_sgemm(int trans_a, int trans_b, long m, long n, long k, float alpha, const float* a,
             const float* b, float beta, float* c, int threads) {
  if (bound_sgemm == NULL || bound_sgemv == NULL) return -2;
  threads = team_threads(threads);
  if (m == 0 || n == 0) return 0;
  if (k == 0) {   /* an empty sum: BLAS's sgemv returns early without scaling c by beta */
    for (long i = 0; i < m * n; ++i) c[i] = beta == 0.0f ? 0.0f : beta * c[i];
    return 0;
  }
  const int tb = trans_b ? TRANS : NO_TRANS;
  const int lda = (int)(trans_a ? m : k), ldb = (int)(trans_b ? k : n);
  if (trans_a) {
    bound_sgemm(ROW_MAJOR, TRANS, tb, (int)m, (int)n, (int)k, alpha, a, lda, b, ldb, beta, c, (int)n);
    return 0;
  }
  if (m == 1) {
    /* reading b dominates: each thread streams a block of its rows */
    if (threads > 1 && !trans_b && k * n >= MIN_WEIGHT_TO_SPLIT_ROWS && k >= 2L * threads
        && rs_sgemv_rows((int)k, (int)n, alpha, a, b, beta, c, threads) == 0)
      return 0;
    if (threads > 1 && k * n >= MIN_WEIGHT_TO_SPLIT_COLUMNS && n >= 2 * MIN_COLUMNS_PER_BLOCK)
      /* the threads share b's columns */
      rs_sgemv_columns(bound_sgemv, tb, (int)n, (int)k, alpha, b, ldb, a, beta, c,
                       (int)min_long(threads, n / MIN_COLUMNS_PER_BLOCK));
    else if (trans_b)   /* c (1 x n) = a (1 x k) @ b^T is b a; OpenBLAS's sgemm would pack all of b */
      bound_sgemv(ROW_MAJOR, NO_TRANS, (int)n, (int)k, alpha, b, ldb, a, 1, beta, c, 1);
    else
      bound_sgemv(ROW_MAJOR, TRANS, (int)k, (int)n, alpha, b, ldb, a, 1, beta, c, 1);
    return 0;
  }
  int blocks;
  const int split = rs_sgemm_split(m, n, k, threads, &blocks);
  if (split == SPLIT_ROWS)
    rs_sgemm_rows(bound_sgemm, tb, (int)m, (int)n, (int)k, alpha, a, lda, b, ldb, beta, c, (int)n, blocks);
  else if (split == SPLIT_COLUMNS)
    rs_sgemm_columns(bound_sgemm, tb, (int)m, (int)n, (int)k, alpha, a, lda, b, ldb, beta, c, (int)n, blocks);
  else
    bound_sgemm(ROW_MAJOR, NO_TRANS, tb, (int)m, (int)n, (int)k, alpha, a, lda, b, ldb, beta, c, (int)n);
  return 0;
}

/* The VM's native calls (library.NativeCall): operands {a, b, c} and params {m, n, k, threads};
   threads 0 follows the team size (the params are computed only when a shape changes). */
int rs_sgemm_native(void* const* operands, const int64_t* p) {
  return rs_sgemm(0, 0, p[0], p[1], p[2], 1.0f, (const float*)operands[0], (const float*)operands[1],
                  0.0f, (float*)operands[2], (int)p[3]);
}

/* c = a @ b^T with b (n x k) row-major, a linear layer's (out, in) weight used as stored:
   operands {a, b, c}, params {m, n, k, threads}. */
int rs_sgemm_nt_native(void* const* operands, const int64_t* p) {
  return rs_sgemm(0, 1, p[0], p[1], p[2], 1.0f, (const float*)operands[0], (const float*)operands[1],
                  0.0f, (float*)operands[2], (int)p[3]);
}

/* c[i] = a[i] @ b[i] for every batch i, all row-major and contiguous: operands {a, b, c}, params
   {batch, m, n, k, threads}. Batches go to the threads, one single-threaded OpenBLAS sgemm each (an
   attention's heads); with fewer batches than threads each product is split by rs_sgemm instead. */
int rs_sgemm_batched_native(void* const* operands, const int64_t* p) {
  const float* a = (const float*)operands[0];
  const float* b = (const float*)operands[1];
  float* c = (float*)operands[2];
  const long batch = p[0], m = p[1], n = p[2], k = p[3];
  const int threads = team_threads((int)p[4]);
  if (bound_sgemm == NULL) return -2;
  if (batch == 0 || m == 0 || n == 0) return 0;
  if (k == 0) { memset(c, 0, sizeof(float) * (size_t)(batch * m * n)); return 0; }
  if (batch < threads) {
    for (long i = 0; i < batch; ++i)
      rs_sgemm(0, 0, m, n, k, 1.0f, a + i * m * k, b + i * k * n, 0.0f, c + i * m * n, threads);
    return 0;
  }
  const int blocks = 2 * batch * m * n * k < MIN_FLOPS_TO_SPLIT ? 1 : threads;
  #pragma omp parallel for schedule(static) num_threads(blocks) if(blocks > 1)
  for (long i = 0; i < batch; ++i)
    bound_sgemm(ROW_MAJOR, NO_TRANS, NO_TRANS, (int)m, (int)n, (int)k, 1.0f, a + i * m * k, (int)k,
                b + i * k * n, (int)n, 0.0f, c + i * m * n, (int)n);
  return 0;
}

/* c = a @ b + bias: operands {a, b, bias, c}; c's rows start as the bias, then beta = 1 adds the product */
int rs_sgemm_bias_native(void* const* operands, const int64_t* p) {
  const float* bias = (const float*)operands[2];
  float* c = (float*)operands[3];
  for (int64_t i = 0; i < p[0]; ++i) memcpy(c + i * p[1], bias, sizeof(float) * (size_t)p[1]);
  return rs_sgemm(0, 0, p[0], p[1], p[2], 1.0f, (const float*)operands[0], (const float*)operands[1],
                  1.0f, c, (int)p[3]);
}
"""

_I, _F, _P = ctypes.c_int, ctypes.c_float, ctypes.c_void_p


@functools.lru_cache(maxsize=None)
def shim():
    """The compiled shim (ctypes CDLL), or None when no C compiler is available."""
    from .threading import prepare_openmp
    try:
        path, _ = compile_shared(_SOURCE)
    except Exception:  # noqa: BLE001 - no compiler: BLAS calls simply stay single-threaded
        return None
    prepare_openmp()
    lib = ctypes.CDLL(str(path))
    gemm_args = [_P, _I, _I, _I, _I, _F, _P, _I, _P, _I, _F, _P, _I, _I]
    for name in ("rs_sgemm_columns", "rs_sgemm_rows"):
        getattr(lib, name).argtypes = gemm_args
        getattr(lib, name).restype = None
    lib.rs_sgemv_columns.argtypes = [_P, _I, _I, _I, _F, _P, _I, _P, _F, _P, _I]
    lib.rs_sgemv_columns.restype = None
    lib.rs_sgemv_rows.argtypes = [_I, _I, _F, _P, _P, _F, _P, _I]
    lib.rs_sgemv_rows.restype = _I
    lib.rs_blas_bind.argtypes = [_P, _P]
    lib.rs_blas_bind.restype = None
    lib.rs_sgemm_split.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_long, _I, ctypes.POINTER(_I)]
    lib.rs_sgemm_split.restype = _I
    lib.rs_sgemm.argtypes = [_I, _I, ctypes.c_long, ctypes.c_long, ctypes.c_long, _F, _P, _P, _F, _P, _I]
    lib.rs_sgemm.restype = _I
    return lib


SPLITS = ("none", "rows", "columns")   # rs_sgemm_split's answers, in order


def sgemm_split(m: int, n: int, k: int, threads: int) -> tuple[str, int]:
    """How the shim splits an (m x k) @ (k x n) product (m > 1) over ``threads``: ("none" | "rows" |
    "columns", blocks). Raises RuntimeError when no C compiler built the shim."""
    lib = shim()
    if lib is None:
        raise RuntimeError("the BLAS shim is not built (no C compiler)")
    blocks = _I(0)
    split = lib.rs_sgemm_split(m, n, k, threads, ctypes.byref(blocks))
    return SPLITS[split], blocks.value


def function_address(cfunc) -> int:
    return ctypes.cast(cfunc, ctypes.c_void_p).value
