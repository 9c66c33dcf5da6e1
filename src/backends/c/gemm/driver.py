"""C source of the blocked, threaded fp32 GEMM built around the micro-kernel.

``rs_gen_gemm(m, n, k, a, b, trans_b, c, bias, residual, act, threads)`` computes
``c = act(a @ op(b) + bias + residual)`` (``a`` m x k, ``op(b)`` k x n with ``b`` (k x n), or
(n x k) read transposed when ``trans_b``; ``bias`` (n) and ``residual`` (m x n) may be NULL;
``act`` one of ``ACTIVATIONS``, with ``RESIDUAL_AFTER_ACT`` or'ed in for ``act(a @ op(b) + bias) +
residual``). Everything is row-major and contiguous.

Variants, chosen per call by the actual ``m`` (the symbolic row count, ``n`` tokens):

- **skinny** (``m <= skinny_rows``, 16 with a 32 KiB L1): A is not packed; the micro-kernel
  reads its rows in place (``m x kc`` floats stay in L1 beside the B panel, so packing would
  only add a copy as large as the product's reads). B stored ``(k, n)`` is read in place too,
  streamed once, ``SKINNY_KC`` rows at a time swept across the columns; more rows than one
  register tile go in the fewest tiles, evened out (``row_tiles``), each taking a panel right after
  the one before (``sweep_tiles``), in column blocks whose rows of c stay in L2. With B stored
  ``(n, k)`` and up to ``NT_DOT_ROWS`` rows, every output is a dot product of two contiguous rows,
  ``nt_rows`` rows by a few outputs per register tile (``gemv.py``'s ``dot_block_nt``), and nothing
  is packed. Threads split the columns.
- **medium** (``skinny_rows < m``, unless large): A and B packed (Goto/BLIS loops
  ``jc -> pc -> ic -> jr -> ir``) on the packed tile (``params.py``: its own register tile and
  blocks, each B panel in L2, the next prefetched); threads split the columns, each packing the
  whole A block itself rather than waiting at a barrier for a shared one.
- **large** (``m >= threads * packed_mc`` and ``m > n``): the same loops, threads split the rows in
  ``packed_mc`` blocks: every thread gets whole L2 blocks of A and packs its own B blocks. Each
  thread packs all of the operand the split does not divide, so the rows are split only where A is
  the larger (``m > n``): 512 rows of 1024 x 4096 on 2 threads packed 16 MB of B per thread split by
  rows, 8 MB plus 2 MB of A by columns (process CPU time 61.5 -> 50.2 ms; OpenBLAS's shim splits the same way).

Products below ``MIN_FLOPS_TO_SPLIT`` run on one thread (handing work over costs more).
The epilogue (bias, residual, activation) is applied to each register tile right after its
last k block, while the tile is in L1. Pack buffers are per thread, grown on demand and kept
(OpenMP's threads persist, so a call allocates nothing once warm).
"""
from __future__ import annotations

import re
from dataclasses import replace

from .gemv import NT_DOT_ROWS, emit_gemv
from .microkernel import emit_microkernel, switch_on_rows, vector_type, vector_typedefs
from .params import GemmParams

# The epilogue's elementwise activations: name -> (code, C expression of the float ``v``). Each is applied
# in a loop of its own over a tile's row (in L1), so GCC vectorizes it, the math calls through glibc's
# libmvec (declared ``omp declare simd`` below, as backends/c/codegen.py does for loop nests). The
# expressions follow the ops' legalization (transform/legalize/elementwise.py); exp's argument is kept
# within +-80 (glibc's vector expf hands lanes near overflow/underflow to a slow scalar path; the
# result changes by less than 1e-34).
_EXP_NEG = "expf(v > 80.0f ? -80.0f : v < -80.0f ? 80.0f : -v)"
ACTIVATION_C = {
    "none": "v",
    "relu": "((v > 0.0f || v != v) ? v : 0.0f)",   # NaN stays NaN, as np.maximum(v, 0)
    # -inf: x * sigmoid(x) is -inf * 0, NaN in the reference; the clamped exp would give -inf
    "silu": f"(v == -INFINITY ? NAN : v / (1.0f + {_EXP_NEG}))",
    "gelu": "(0.5f * v * (1.0f + erff(v * 0.70710678118654752f)))",
    "gelu_tanh": "(0.5f * v * (1.0f + tanhf(0.79788456080286536f * (v + 0.044715f * (v * v * v)))))",
    "sigmoid": f"(1.0f / (1.0f + {_EXP_NEG}))",
    "tanh": "tanhf(v)",
}
ACTIVATIONS = {name: code for code, name in enumerate(ACTIVATION_C)}
# glibc's vector variants of the activations' math calls (glibc >= 2.35 has them): the epilogue's
# loops vectorize without -ffast-math
_VECTOR_MATH = "\n".join(
    ["#if defined(__x86_64__) && defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 35)"]
    + [f"#pragma omp declare simd notinbranch\nextern float {fn}(float);" for fn in ("expf", "tanhf", "erff")]
    + ["#endif"])
# or'ed into the activation code: the residual is added after the activation (act(c + bias) + residual)
# instead of before it (act(c + bias + residual))
RESIDUAL_AFTER_ACT = 256
# rs_gen_gemm's trans_b for a B packed at build time into panels (prepacked.py)
B_PREPACKED = 2
# Most rows a prepacked weight serves beside OpenBLAS (policy WITH_BLAS, the unpacked weight kept
# too), in multiples of the machine's skinny_rows (half of L1 over a kc row of A; it equals the
# register tile's width nr with kc derived from the same L1): 64 rows with AVX2's 16-wide panels
# and a 32 KiB L1, 128 with AVX-512's 32-wide ones. One thread, thread CPU time, prepacked against
# OpenBLAS's sgemm (which packs B every call): AMD Zen 3 (AVX2, skinny 16) 64 rows 0.98-1.10x,
# 96 0.98-1.08x, 128 0.96-1.0x, 512 0.93-0.97x; Intel Xeon (AVX-512, skinny 32), the Llama's 8
# products in a row / the MLP's 2, with the B prefetch: 96 rows 1.13/1.16x, 128 1.06/1.07x,
# 192 1.03/1.02x, 256 0.97/0.95x, 512 0.89/0.94x. The crossover sits at 6-8 skinny_rows on both;
# 4 keeps a margin for the machines between. The panels apply a fused epilogue to each tile in L1,
# where OpenBLAS's path fills c with the bias first and makes a pass over c after it; at 128 rows
# the whole workloads (Zen 3, 2 threads, best decile of 200 calls, two A/B rounds) ran on the panels
# in 12.3-12.65 ms against 13.25-13.8 (MLP) and 10.2-10.7 against 10.85-11.0 (2-layer Llama), so the
# panels keep at least PREPACKED_MIN_ROWS rows.
PREPACKED_SKINNY_MULTIPLE = 4
PREPACKED_MIN_ROWS = 128


# Multiply-adds per load (mr * nv / (mr + nv)) from which the packed tile runs level with or ahead of
# OpenBLAS at every row count of the medium and large variants. 2 threads, per-call packing, the
# workloads' shapes (bench_gemm.py, Xeon AVX-512): the 6 x 64 tile (2.4) 1.04-1.17x OpenBLAS at 64
# rows, 1.04-1.08x at 128, 0.98-1.06x at 512, 0.98-1.04x at 1024; the 6 x 16 tile of AVX2 (1.5) was
# not measured ahead (Zen 3, the prepacked kernel on it: 0.93-0.97x at 512 rows), so those keep OpenBLAS.
# B stored (n, k) keeps OpenBLAS too: packing it transposed costs 0.80-0.96x.
PACKED_BLAS_RATIO = 2.0


def packed_beats_blas(params: GemmParams) -> bool:
    """Whether the medium and large variants stay generated beside OpenBLAS (policy WITH_BLAS)."""
    nv = params.packed_nr // params.lanes
    return params.packed_mr * nv / (params.packed_mr + nv) >= PACKED_BLAS_RATIO


def prepacked_rows(params: GemmParams) -> int:
    """Most rows the prepacked kernel keeps beside OpenBLAS on this machine (see above)."""
    return max(PREPACKED_SKINNY_MULTIPLE * params.skinny_rows, PREPACKED_MIN_ROWS)
# Prepacked panels one row of A reads at once (separate sequential streams; see row_panels). One
# thread, CPU time, MLP weights from memory: 1 panel at a time 0.67-0.77 ms, 4 at once 0.51-0.56, 8 0.54-0.55
PANEL_STREAMS = 4
# x86's L1 is indexed by the address bits inside a 4 KiB page: rows a multiple of this apart
# fall into the same cache sets
ALIAS_BYTES = 4096
# Most rows the skinny variant keeps beside OpenBLAS on such widths. One thread, thread CPU time,
# the MLP's 1024x4096 and 4096x1024 (load average 6-8 from other sessions): 1.4-2.2x OpenBLAS at
# 4 rows, 0.97-1.33x at 8, 0.61-0.99x at 12 and 0.79-0.92x at 16 (OpenBLAS's own tiles are 4
# rows, so it is slower at 9..11 and 13..15; not kept: one rule, no parity games).
ALIASED_ROWS = 8
# Most rows the skinny variant keeps beside OpenBLAS at all. Session 5 (B packed once a thread's
# rows need more than one register tile, see block_skinny), 2 threads, best of 30 interleaved calls
# on a loaded machine (load average 2.5-4): 1.24-2.24x OpenBLAS at 5 rows, 1.32-1.91x at 6 and
# 1.22-1.51x at 7 on the six workload shapes, 0.88-1.12x at 8; one thread, thread CPU time:
# 0.85-1.10x at 8..16. OpenBLAS's register tile spans 4 of our rows (it computes the transposed
# product), so 5..7 rows leave its tiles ragged while 8, 12 and 16 fill them; there the two are
# level and OpenBLAS keeps them (a weight packed once at build time changes that: prepacked.py).
BLAS_SKINNY_ROWS = 7
# 2 * m * n * k below this: one thread (a parallel region costs ~5-10 us on this class of machine)
MIN_FLOPS_TO_SPLIT = 1 << 21
# Rows of B the skinny variant streams at once (contiguous runs, one per row, swept across the
# columns): few enough for the hardware prefetchers to follow every stream. One thread, CPU time,
# MLP shapes (1024x4096, 4096x1024) at m = 2/4/6: 8 rows 0.49-0.65/0.75-0.86/1.13-1.22 ms against
# 1.20-1.22/1.24-1.33/1.35-1.38 with 16 and worse with 4 or 12; the Llama shapes level.
SKINNY_KC = 8
# The prepacked path's kernels prefetch the next B panel into L2 (microkernel's prefetch_b): a
# module switch so the emitter can build both for an A/B measurement. One thread, thread CPU time,
# the 2-layer Llama's 8 products in a row (26 MB of weights, so each panel comes from L3): 1.05-1.18x
# at 16..128 rows, interleaved; prefetching into L1 (t0) or L3 (t2) instead measured within noise.
PREFETCH_B = True


def _row_kernels(params: GemmParams) -> str:
    """Micro-kernels reading A in place, one per row count 1..mr (a skinny product of 1 row does
    not pay for mr rows of multiply-adds), with B packed (``kernel_rows``) or read in place swept
    across whole panels (``sweep_rows``), and their dispatch on the row count."""
    out, packed_calls, sweep_calls = [], [], []
    for rows in range(1, params.mr + 1):
        tile = replace(params, mr=rows)
        out.append(emit_microkernel(f"rs_gemm_kernel_rows{rows}", tile, a_packed=False, b_packed=True,
                                    prefetch_c=True))
        out.append(emit_microkernel(f"rs_gemm_kernel_rows{rows}_direct_b", tile, a_packed=False, b_packed=False))
        out.append(f"static void sweep_rows{rows}(int kc, const float* a, int lda, const float* b, int ldb, "
                   f"float* c, int ldc, int w, int acc) {{\n"
                   f"  for (int jr = 0; jr < w; jr += {params.nr})\n"
                   f"    rs_gemm_kernel_rows{rows}_direct_b(kc, a, lda, b + jr, ldb, c + jr, ldc, {rows}, "
                   f"{params.nr}, acc);\n}}\n")
        packed_calls.append(f"rs_gemm_kernel_rows{rows}(kc, a, lda, b, c, ldc, {rows}, cols, acc)")
        sweep_calls.append(f"sweep_rows{rows}(kc, a, lda, b, ldb, c, ldc, w, acc)")
    out.append(switch_on_rows("kernel_rows(int rows, int kc, const float* a, int lda, const float* b, float* c, "
                              "int ldc, int cols, int acc)", packed_calls) + "\n")
    out.append("/* whole panels only: w a multiple of NR */\n"
               + switch_on_rows("sweep_rows(int rows, int kc, const float* a, int lda, const float* b, int ldb, "
                                "float* c, int ldc, int w, int acc)", sweep_calls) + "\n")
    tile_calls = ["return" for _ in range(params.mr)]
    for rows in range(params.mr + 1, params.skinny_rows + 1):
        out.append(_sweep_tiles(rows, params))
        tile_calls.append(f"sweep_tiles{rows}(kc, ap, b, ldb, c, ldc, w, acc)")
    out.append("/* more rows than MR, A packed k-major (ap[p * rows + i]); whole panels only */\n"
               + switch_on_rows("sweep_tiles(int rows, int kc, const float* ap, const float* b, int ldb, "
                                "float* c, int ldc, int w, int acc)", tile_calls) + "\n")
    return "\n".join(out)


def row_tiles(rows: int, mr: int) -> list[int]:
    """``rows`` split into the fewest tiles of at most ``mr`` rows, as even as possible (8 rows of a
    6-row tile as 4 + 4, not 6 + 2: a tile of few rows issues nearly as many loads as multiply-adds)."""
    tiles = -(-rows // mr)
    return [rows // tiles + (1 if t < rows % tiles else 0) for t in range(tiles)]


def _sweep_tiles(rows: int, params: GemmParams) -> str:
    """``sweep_tiles<rows>``: more rows than one register tile against ``kc`` rows of B read in place,
    panel by panel, every row tile (``row_tiles``) right after the other on the same panel, so the
    panel's lines come from memory for the first tile and from L1/L2 for the rest. The ``rows x kc``
    slice of A comes packed k-major (``ap[p * rows + i]``, 128 floats at most for 16 rows): read in
    place, every row needs a pointer, and two 6-row tiles' 12 (hoisted out of the panel loop) spilled
    to the stack (12 rows of 1024x4096 ran 1.5x slower than 8)."""
    out, calls, r0 = [], [], 0
    for tile in sorted(set(row_tiles(rows, params.mr))):
        out.append(emit_microkernel(f"rs_gemm_sweep{rows}_rows{tile}", replace(params, mr=tile), a_packed=True,
                                    b_packed=False, a_stride=rows))
    for tile in row_tiles(rows, params.mr):
        calls.append(f"    rs_gemm_sweep{rows}_rows{tile}(kc, ap + {r0}, b + jr, ldb, c + (long){r0} * ldc + jr, ldc, "
                     f"{tile}, {params.nr}, acc);")
        r0 += tile
    body = "\n".join(calls)
    return "\n".join(out) + (
        f"static __attribute__((noinline)) void sweep_tiles{rows}(int kc, const float* ap, const float* b, int ldb, "
        f"float* c, int ldc, int w, int acc) {{\n  for (int jr = 0; jr < w; jr += {params.nr}) {{\n"
        f"{body}\n  }}\n}}\n")


def _prepacked_kernels(params: GemmParams) -> str:
    """The prepacked path's micro-kernels for more rows than ``a_in_place_rows``, one per row count
    1..mr: ``kernel_packed_rows`` reads an MR-wide packed A panel and a prepacked B panel and takes
    the next panel to prefetch (``prefetch_b``). A ragged last row tile runs its own row count, so
    no tile multiplies padding rows (the packed 14-row kernel did: 8 of 64 rows, 12 of 96). (Fewer
    rows read A in place through ``kernel_rows``.)"""
    out, packed_calls = [], []
    for rows in range(1, params.mr + 1):
        tile = replace(params, mr=rows)
        out.append(emit_microkernel(f"rs_gemm_kernel_packed_rows{rows}", tile, a_packed=True, b_packed=True,
                                    prefetch_c=True, a_stride=params.mr, prefetch_b=PREFETCH_B))
        nxt = "b_next, pf_step, " if PREFETCH_B else ""
        packed_calls.append(f"rs_gemm_kernel_packed_rows{rows}(kc, a, b, {nxt}c, ldc, {rows}, cols, acc)")
    out.append(switch_on_rows("kernel_packed_rows(int rows, int kc, const float* a, const float* b, "
                              "const float* b_next, long pf_step, float* c, int ldc, int cols, int acc)",
                              packed_calls, "  (void)b_next; (void)pf_step;\n") + "\n")
    return "\n".join(out)


def _packed_tile_kernels(params: GemmParams) -> str:
    """The medium and large variants' micro-kernels on the packed tile (``params.packed()``), one per
    row count 1..packed_mr (a ragged last row tile multiplies only its rows), each prefetching its
    share of the next B panel (which sits in L2 at this tile's kc, see params.py), and their
    dispatch ``kernel_wide_rows``."""
    wide = params.packed()
    out, calls = [], []
    for rows in range(1, wide.mr + 1):
        out.append(emit_microkernel(f"rs_gemm_kernel_wide_rows{rows}", replace(wide, mr=rows), prefetch_c=True,
                                    a_stride=wide.mr, prefetch_b=True))
        calls.append(f"rs_gemm_kernel_wide_rows{rows}(kc, a, b, b_next, pf_step, c, ldc, {rows}, cols, acc)")
    out.append(switch_on_rows("kernel_wide_rows(int rows, int kc, const float* a, const float* b, "
                              "const float* b_next, long pf_step, float* c, int ldc, int cols, int acc)",
                              calls) + "\n")
    return "\n".join(out)


def skinny_limit(n: int, params: GemmParams) -> int:
    """Most rows the skinny variant keeps under the WITH_BLAS policy (see ``rs_gen_gemm_variant``)."""
    aliased = (n * 4) % ALIAS_BYTES == 0
    return min(BLAS_SKINNY_ROWS, ALIASED_ROWS if aliased else params.skinny_rows, params.skinny_rows)


def variant_for(m: int, params: GemmParams, threads: int, blas: bool = False, n: int = 1) -> str:
    """The variant ``rs_gen_gemm`` runs for ``m`` rows of width ``n`` (the same conditions as the C
    code, B stored (k, n)); with ``blas`` (policy 1, OpenBLAS bound) 2..``skinny_limit`` rows stay
    generated, and where ``packed_beats_blas`` the medium and large variants too."""
    if blas and m > skinny_limit(n, params) and not (packed_beats_blas(params) and m > params.skinny_rows):
        return "openblas"
    if m == 1:
        return "gemv"
    if m <= params.skinny_rows:
        return "skinny"
    return "large" if m >= threads * params.packed_mc and m > n else "medium"


# The packing routines, once per register tile (the skinny/prepacked tile MR x NR, the packed tile
# PMR x PNR): written with MR and NR, which _pack_functions renames with the function names.
_PACK_C = r"""/* op(B)[p0 : p0+kcb, j0 : j0+w] into k-major panels of NR columns, zero-padded to NR */
static void pack_b_rows(int kcb, int w, const float* b, long ldb, long p0, long j0, float* out);
static void pack_b_panels(int kcb, int w, const float* b, long ldb, int trans_b, long p0, long j0, float* out) {
  for (int jp = 0; jp < w; jp += NR) {
    const int cols = w - jp < NR ? w - jp : NR;
    float* panel = out + (long)jp * kcb;
    if (!trans_b) {
      if (cols < NR)
        for (int p = 0; p < kcb; ++p) {
          const float* src = b + (p0 + p) * ldb + j0 + jp;
          float* dst = panel + (long)p * NR;
          int j = 0; for (; j < cols; ++j) dst[j] = src[j]; for (; j < NR; ++j) dst[j] = 0.0f;
        }
      continue;   /* whole panels: copied below, PACK_ROWS rows at a time */
    } else {   /* b is (n x k): row j of b is column j of op(b), contiguous in p */
      /* PACK_T_STEPS k steps at a time, all NR columns: the panel's rows being written stay in L1
         (a whole column at a time wrote every row of a panel larger than L1 once per column: the
         6 x 64 packed tile's 128 KiB panel made 576 x 1536 at 64 rows 2.5x slower than OpenBLAS) */
      for (int q = 0; q < kcb; q += PACK_T_STEPS) {
        const int steps = kcb - q < PACK_T_STEPS ? kcb - q : PACK_T_STEPS;
        for (int j = 0; j < NR; ++j) {
          float* dst = panel + (long)q * NR + j;
          if (j < cols) {
            const float* src = b + (j0 + jp + j) * ldb + p0 + q;
            for (int p = 0; p < steps; ++p) dst[(long)p * NR] = src[p];
          } else {
            for (int p = 0; p < steps; ++p) dst[(long)p * NR] = 0.0f;
          }
        }
      }
    }
  }
}

/* the whole panels of B (not transposed), PACK_ROWS rows at a time across all panels: that many
   contiguous read streams, and each panel gets PACK_ROWS consecutive rows (one run of writes),
   where a panel at a time would read kcb rows a whole row width apart for every 64 bytes */
static void pack_b_rows(int kcb, int w, const float* b, long ldb, long p0, long j0, float* out) {
  const int whole = w / NR * NR;
  for (int p = 0; p < kcb; p += PACK_ROWS) {
    const int rows = kcb - p < PACK_ROWS ? kcb - p : PACK_ROWS;
    for (int jp = 0; jp < whole; jp += NR) {
      float* dst = out + (long)jp * kcb + (long)p * NR;
      for (int r = 0; r < rows; ++r) {
        const float* src = b + (p0 + p + r) * ldb + j0 + jp;
        for (int j = 0; j < NR; ++j) dst[r * NR + j] = src[j];
      }
    }
  }
}

static void pack_b(int kcb, int w, const float* b, long ldb, int trans_b, long p0, long j0, float* out) {
  pack_b_panels(kcb, w, b, ldb, trans_b, p0, j0, out);
  if (!trans_b) pack_b_rows(kcb, w, b, ldb, p0, j0, out);
}

/* A[i0 : i0+h, p0 : p0+kcb] into k-major panels of MR rows, zero-padded to MR. A whole tile's rows
   per k step: MR contiguous writes a step (row by row, every write went to another cache line; one
   thread, the prepacked path at 8..32 rows: 2-4% faster, level with not packing at all) */
static void pack_a(int kcb, int h, const float* a, long lda, long i0, long p0, float* out) {
  for (int ip = 0; ip < h; ip += MR) {
    const int rows = h - ip < MR ? h - ip : MR;
    float* panel = out + (long)ip * kcb;
    const float* src = a + (i0 + ip) * lda + p0;
    if (rows == MR) {
      for (int p = 0; p < kcb; ++p) {
        float* dst = panel + (long)p * MR;
        #pragma GCC unroll 16
        for (int i = 0; i < MR; ++i) dst[i] = src[(long)i * lda + p];
      }
    } else {
      for (int p = 0; p < kcb; ++p) {
        float* dst = panel + (long)p * MR;
        int i = 0;
        for (; i < rows; ++i) dst[i] = src[(long)i * lda + p];
        for (; i < MR; ++i) dst[i] = 0.0f;
      }
    }
  }
}

"""
_PACK_NAMES = ("pack_b_panels", "pack_b_rows", "pack_b", "pack_a")


def _pack_functions(suffix: str, mr: str, nr: str) -> str:
    """``_PACK_C`` for the tile ``mr x nr`` (macro names), its functions named with ``suffix``."""
    text = re.sub(r"\bNR\b", nr, re.sub(r"\bMR\b", mr, _PACK_C))
    return re.sub(r"\b(" + "|".join(_PACK_NAMES) + r")\(", lambda m: m.group(1) + suffix + "(", text)


def emit_gemm_library(params: GemmParams) -> str:
    """The whole translation unit: micro-kernels, packing, drivers and the VM's native entries."""
    mr, nr, kc, mc, nc = params.mr, params.nr, params.kc, params.mc, params.nc
    vt, lanes, broadcast = vector_type(params), params.lanes, ", ".join(["s"] * params.lanes)
    activation_cases = "\n".join(
        f"    case {code}: _Pragma(\"omp simd\") for (int j = 0; j < cols; ++j) "
        f"{{ const float v = row[j]; row[j] = {ACTIVATION_C[name]}; }} break;"
        for name, code in ACTIVATIONS.items() if name != "none")
    return f"""/* generated fp32 GEMM: {params.describe()} */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <omp.h>
{_VECTOR_MATH}
{vector_typedefs(params)}
#define MR {mr}
#define NR {nr}
#define KC {kc}
#define MC {mc}
#define NC {nc}
/* the medium and large variants' packed tile and blocks (params.py) */
#define PMR {params.packed_mr}
#define PNR {params.packed_nr}
#define PKC {params.packed_kc}
#define PMC {params.packed_mc}
#define PACKED_BEATS_BLAS {int(packed_beats_blas(params))}
#define SKINNY_ROWS {params.skinny_rows}
#define A_IN_PLACE_ROWS {params.a_in_place_rows}
#define ALIAS_BYTES {ALIAS_BYTES}
#define ALIASED_ROWS {ALIASED_ROWS}
#define BLAS_SKINNY_ROWS {BLAS_SKINNY_ROWS}
#define SKINNY_NC {params.skinny_nc}
#define SKINNY_KC {SKINNY_KC}
#define SWEEP_C_FLOATS {params.sweep_c_floats}L
#define NT_DOT_ROWS {NT_DOT_ROWS}
#define MIN_FLOPS_TO_SPLIT {MIN_FLOPS_TO_SPLIT}L
/* elements of c from which a pass over it (bias fill, epilogue) is shared by the team */
#define EPILOGUE_SPLIT_ELEMENTS (1L << 15)
#define B_PREPACKED {B_PREPACKED}
#define PREPACKED_ROWS {prepacked_rows(params)}
#define PANEL_STREAMS {PANEL_STREAMS}
#define MIN_TAIL_ROWS {params.min_tail_rows}
#define NRV {params.vectors_per_row}
#define RESIDUAL_AFTER_ACT {RESIDUAL_AFTER_ACT}

{_row_kernels(params)}
{_prepacked_kernels(params)}
{_packed_tile_kernels(params)}
static int* rs_team_cell;
void rs_bind_team(int* cell) {{ rs_team_cell = cell; }}
static int team_threads(int threads) {{
  if (threads > 0) return threads;
  if (rs_team_cell != NULL && *rs_team_cell > 0) return *rs_team_cell;
  return omp_get_max_threads();
}}
static long min_long(long x, long y) {{ return x < y ? x : y; }}

/* per-thread pack buffers, grown on demand and kept */
static __thread float* rs_pack_a; static __thread size_t rs_pack_a_cap;
static __thread float* rs_pack_b; static __thread size_t rs_pack_b_cap;
static float* grow(float** buf, size_t* cap, size_t floats) {{
  if (*cap >= floats) return *buf;
  free(*buf);
  *buf = (float*)aligned_alloc(64, (floats * sizeof(float) + 63) / 64 * 64);
  *cap = *buf == NULL ? 0 : floats;
  return *buf;
}}

#define PACK_ROWS 8
#define PACK_T_STEPS 32
{_pack_functions("", "MR", "NR")}
{_pack_functions("_wide", "PMR", "PNR")}
typedef struct {{ const float* bias; const float* residual; int act; }} epilogue_t;

/* one row of a tile: row = act(row + bias [+ res]) [+ res]. One loop per step and a loop per
   activation: each vectorizes (a switch inside the loop would not, and the math calls only vectorize
   outside branches); the row is in L1. Inlined twice below: with cols = NR (a whole panel, the common
   tile) the loops have a constant trip count and no run-time alias checks. The activations' loops are
   `omp simd`: a constant NR-trip loop is otherwise unrolled whole before the vectorizer sees it, and the
   unrolled statements called scalar tanhf/erff per element and branched for relu (gelu_tanh on a
   16-row tile of the MLP's 1024x4096 product doubled its time). */
static inline __attribute__((always_inline)) void epilogue_row(float* restrict row, const float* restrict bias,
                                                               const float* restrict res, int after, int act,
                                                               int cols) {{
  if (bias != NULL) for (int j = 0; j < cols; ++j) row[j] += bias[j];
  if (res != NULL && !after) for (int j = 0; j < cols; ++j) row[j] += res[j];
  switch (act) {{
{activation_cases}
  }}
  if (res != NULL && after) for (int j = 0; j < cols; ++j) row[j] += res[j];
}}

/* c = act(c + bias [+ residual]) [+ residual] on one tile; the pointers are already at the tile's origin */
static void apply_epilogue(float* c, long ldc, int rows, int cols, const float* bias,
                           const float* residual, int act) {{
  const int after = act & RESIDUAL_AFTER_ACT;
  act &= RESIDUAL_AFTER_ACT - 1;
  for (int i = 0; i < rows; ++i) {{
    float* row = c + (long)i * ldc;
    const float* res = residual == NULL ? NULL : residual + (long)i * ldc;
    if (cols == NR) epilogue_row(row, bias, res, after, act, NR);
    else epilogue_row(row, bias, res, after, act, cols);
  }}
}}

static int has_epilogue(const epilogue_t* e) {{
  return e->bias != NULL || e->residual != NULL || (e->act & (RESIDUAL_AFTER_ACT - 1)) != 0;
}}

{emit_gemv(params)}
/* one thread's share: rows [i0, i0+h) x columns [j0, j0+w) of c, A read in place (skinny) */
static int block_skinny(long h, long w, long k, const float* a, const float* b, int trans_b, float* c,
                        long n, long i0, long j0, const epilogue_t* e) {{
  if (trans_b && h <= NT_DOT_ROWS) {{
    dot_block_nt(h, k, w, a, b, k, c, n, i0, j0, e);
    return 0;
  }}
  if (!trans_b) {{
    /* B read where it lies, SKINNY_KC rows at a time, each swept left to right across a block of the
       thread's columns (that many contiguous streams, which the prefetchers follow), accumulating
       into c; nothing of B is copied (packing it cost as much as the multiply-adds at 7..16 rows:
       its read from L3 overlapped none of them). One call per SKINNY_KC rows sweeps a run of panels
       (a call per panel cost more than its few k steps); with several row tiles (sweep_tiles) every
       tile takes each panel right after the one before, so the panel's lines come from memory once.
       c is re-read every SKINNY_KC k steps, so the columns go in blocks whose h rows stay in L2
       (SWEEP_C_FLOATS; 16 rows of 4096 columns did not, and ran 0.7x the packed path). Several row
       tiles accumulate in `acc`, rows one cache line more than a block apart, copied out per block:
       in c a panel's 7..16 rows of c fall into a few L1 sets beside its SKINNY_KC lines of B (all
       into one where rows are a multiple of ALIAS_BYTES apart, and B's loads 4 KiB-alias c's
       stores: 9 and 10 rows of 1024x4096 ran 2x slower; 16 rows of 512x1536 0.7x OpenBLAS, 1.15x
       with `acc`). A ragged last panel is copied zero-padded into `edge`. */
    float edge[SKINNY_KC * NR], ap[SKINNY_KC * SKINNY_ROWS];
    const long cw = SWEEP_C_FLOATS / h / NR * NR > NR ? SWEEP_C_FLOATS / h / NR * NR : NR;
    const int padded = h > MR;
    long ldc = n;
    float* acc = NULL;
    if (padded) {{
      ldc = (min_long(cw, w) + NR - 1) / NR * NR + 64 / (long)sizeof(float);
      if ((acc = grow(&rs_pack_b, &rs_pack_b_cap, (size_t)(h * ldc))) == NULL) return -1;
    }}
    for (long jc = 0; jc < w; jc += cw) {{
      const long wc = min_long(cw, w - jc), full = wc / NR * NR;
      float* ct = padded ? acc : c + i0 * n + j0 + jc;
      for (long pc = 0; pc < k; pc += SKINNY_KC) {{
        const int kcb = (int)min_long(SKINNY_KC, k - pc);
        const float* at = a + i0 * k + pc;
        if (h <= MR) sweep_rows((int)h, kcb, at, (int)k, b + pc * n + j0 + jc, (int)n, ct, (int)ldc, (int)full, pc > 0);
        else {{
          for (int p = 0; p < kcb; ++p)
            for (long i = 0; i < h; ++i) ap[p * h + i] = at[i * k + p];
          sweep_tiles((int)h, kcb, ap, b + pc * n + j0 + jc, (int)n, ct, (int)ldc, (int)full, pc > 0);
        }}
        if (full < wc) {{
          pack_b(kcb, (int)(wc - full), b, n, 0, pc, j0 + jc + full, edge);
          for (long ir = 0; ir < h; ir += MR)
            kernel_rows((int)min_long(MR, h - ir), kcb, at + ir * k, (int)k, edge, ct + ir * ldc + full, (int)ldc,
                        (int)(wc - full), pc > 0);
        }}
      }}
      if (padded)
        for (long i = 0; i < h; ++i) memcpy(c + (i0 + i) * n + j0 + jc, acc + i * ldc, sizeof(float) * (size_t)wc);
      if (has_epilogue(e))
        apply_epilogue(c + i0 * n + j0 + jc, n, (int)h, (int)wc, e->bias == NULL ? NULL : e->bias + j0 + jc,
                       e->residual == NULL ? NULL : e->residual + i0 * n + j0 + jc, e->act);
    }}
    return 0;
  }}
  /* B stored (n, k), more rows than NT_DOT_ROWS: packed in kc x SKINNY_NC chunks */
  float* bp = grow(&rs_pack_b, &rs_pack_b_cap, (size_t)KC * SKINNY_NC);
  if (bp == NULL) return -1;
  for (long jc = 0; jc < w; jc += SKINNY_NC) {{
    const int wc = (int)min_long(SKINNY_NC, w - jc);
    for (long pc = 0; pc < k; pc += KC) {{
      const int kcb = (int)min_long(KC, k - pc);
      const int last = pc + kcb >= k;
      pack_b(kcb, wc, b, trans_b ? k : n, trans_b, pc, j0 + jc, bp);
      for (int jr = 0; jr < wc; jr += NR) {{
        const int cols = wc - jr < NR ? wc - jr : NR;
        for (long ir = 0; ir < h; ir += MR) {{
          const int rows = (int)min_long(MR, h - ir);
          float* ct = c + (i0 + ir) * n + j0 + jc + jr;
          kernel_rows(rows, kcb, a + (i0 + ir) * k + pc, (int)k, bp + (long)jr * kcb, ct, (int)n, cols, pc > 0);
          if (last && has_epilogue(e))
            apply_epilogue(ct, n, rows, cols, e->bias == NULL ? NULL : e->bias + j0 + jc + jr,
                           e->residual == NULL ? NULL : e->residual + (i0 + ir) * n + j0 + jc + jr, e->act);
        }}
      }}
    }}
  }}
  return 0;
}}

/* one thread's share with A and B packed (medium and large), on the packed tile PMR x PNR */
static int block_packed(long h, long w, long k, const float* a, const float* b, int trans_b, float* c,
                        long n, long i0, long j0, const epilogue_t* e) {{
  float* ap = grow(&rs_pack_a, &rs_pack_a_cap, (size_t)PKC * PMC);
  float* bp = grow(&rs_pack_b, &rs_pack_b_cap, (size_t)PKC * (min_long(NC, w) + PNR));
  if (ap == NULL || bp == NULL) return -1;
  for (long jc = 0; jc < w; jc += NC) {{
    const int wc = (int)min_long(NC, w - jc);
    for (long pc = 0; pc < k; pc += PKC) {{
      const int kcb = (int)min_long(PKC, k - pc);
      const int last = pc + kcb >= k;
      pack_b_wide(kcb, wc, b, trans_b ? k : n, trans_b, pc, j0 + jc, bp);
      /* row blocks of at most PMC evened out in whole PMR (a ragged last block of a few rows would
         cost a whole pass over the packed B for little work) */
      const long blocks = (h + PMC - 1) / PMC, tiles = (h + PMR - 1) / PMR;
      for (long q = 0; q < blocks; ++q) {{
        const long ic = tiles * q / blocks * PMR;
        const int hc = (int)(min_long(h, tiles * (q + 1) / blocks * PMR) - ic);
        pack_a_wide(kcb, hc, a, k, i0 + ic, pc, ap);
        for (int jr = 0; jr < wc; jr += PNR) {{
          const int cols = wc - jr < PNR ? wc - jr : PNR;
          const float* panel = bp + (long)jr * kcb;
          const float* next = jr + PNR < wc ? panel + (long)PNR * kcb : NULL;
          for (int ir = 0; ir < hc; ir += PMR) {{
            const int rows = hc - ir < PMR ? hc - ir : PMR;
            float* ct = c + (i0 + ic + ir) * n + j0 + jc + jr;
            /* each row tile asks for its share of the next panel over its k steps (block_prepacked) */
            const float* pf = next == NULL ? NULL : next + (long)ir * kcb * PNR / hc;
            const long pf_step = (rows * PNR * (long)sizeof(float) + hc - 1) / hc;
            kernel_wide_rows(rows, kcb, ap + (long)ir * kcb, panel, pf, pf_step, ct, (int)n, cols, pc > 0);
            if (last && has_epilogue(e))
              apply_epilogue(ct, n, rows, cols, e->bias == NULL ? NULL : e->bias + j0 + jc + jr,
                             e->residual == NULL ? NULL : e->residual + (i0 + ic + ir) * n + j0 + jc + jr,
                             e->act);
          }}
        }}
      }}
    }}
  }}
  return 0;
}}

/* One row of A against PANEL_STREAMS whole prepacked panels at once, over all k: that many
   sequential streams of B (one stream, a panel at a time, ran 2x slower than the GEMV's eight on
   weights streamed from memory), PANEL_STREAMS * NR/lanes accumulators. c = the panels' columns. */
static void row_panels(long k, const float* restrict a, const float* restrict panel, long ldp, float* restrict c) {{
  {vt} acc[PANEL_STREAMS][NRV];
  for (int g = 0; g < PANEL_STREAMS; ++g) for (int v = 0; v < NRV; ++v) acc[g][v] = ({vt}){{0}};
  for (long p = 0; p < k; ++p) {{
    const float s = a[p];
    const {vt} sv = ({vt}){{{broadcast}}};
    for (int g = 0; g < PANEL_STREAMS; ++g)
      for (int v = 0; v < NRV; ++v)
        acc[g][v] += sv * {vt}_load(panel + g * ldp + p * NR + v * {lanes});
  }}
  for (int g = 0; g < PANEL_STREAMS; ++g)
    for (int v = 0; v < NRV; ++v) {vt}_store(c + g * NR + v * {lanes}, acc[g][v]);
}}

/* B packed at build time (prepacked.py, a constant weight): panel q holds columns
   [q*NR, q*NR+NR) as K x NR floats, k-major, zero-padded past n. One thread's share: rows
   [i0, i0+h) x columns [j0, j0+w), j0 a multiple of NR. Nothing of B is packed per call; A is read
   in place up to A_IN_PLACE_ROWS rows (params.py: half of L1's ways; more rows read in place
   thrashed their L1 set and spilled the row pointers: 3-11% slower at 8..14 rows of the MLP and
   Llama shapes, one thread), else packed per (row block, kc block) with the row blocks evened out in whole MR (a
   ragged last block would stream all of B again for few rows). */
static int block_prepacked(long h, long w, long k, const float* a, const float* bp, float* c, long n, long i0,
                           long j0, const epilogue_t* e) {{
  const long ldp = k * NR;   /* floats per panel */
  long jstart = 0;
  if (h == 1) {{   /* groups of PANEL_STREAMS whole panels; the rest below */
    const long groups = w / (PANEL_STREAMS * NR);
    for (long q = 0; q < groups; ++q) {{
      const long jr = q * PANEL_STREAMS * NR;
      float* ct = c + i0 * n + j0 + jr;
      row_panels(k, a + i0 * k, bp + (j0 + jr) / NR * ldp, ldp, ct);
      if (has_epilogue(e))
        apply_epilogue(ct, n, 1, PANEL_STREAMS * NR, e->bias == NULL ? NULL : e->bias + j0 + jr,
                       e->residual == NULL ? NULL : e->residual + i0 * n + j0 + jr, e->act);
    }}
    jstart = groups * PANEL_STREAMS * NR;
  }}
  if (h <= A_IN_PLACE_ROWS) {{
    /* one register tile over the whole k, A read where it lies: each panel streams past once (the
       hardware prefetcher follows the one stream; the next-panel prefetch cost 4-15% at 2..8 rows
       of the MLP, 4 multiply-adds a k step at 2 rows), no partial sums of c */
    for (long jr = jstart; jr < w; jr += NR) {{
      const int cols = (int)min_long(NR, w - jr);
      float* ct = c + i0 * n + j0 + jr;
      kernel_rows((int)h, (int)k, a + i0 * k, (int)k, bp + (j0 + jr) / NR * ldp, ct, (int)n, cols, 0);
      if (has_epilogue(e))
        apply_epilogue(ct, n, (int)h, cols, e->bias == NULL ? NULL : e->bias + j0 + jr,
                       e->residual == NULL ? NULL : e->residual + i0 * n + j0 + jr, e->act);
    }}
    return 0;
  }}
  const long tiles = (h + MR - 1) / MR;
  float* ap = grow(&rs_pack_a, &rs_pack_a_cap, (size_t)KC * MC);
  if (ap == NULL) return -1;
  const long blocks = (h + MC - 1) / MC;
  for (long pc = 0; pc < k; pc += KC) {{   /* a kc slab of B (in L3) serves every row block */
    const int kcb = (int)min_long(KC, k - pc);
    const int last = pc + kcb >= k;
    for (long q = 0; q < blocks; ++q) {{
      const long ic = tiles * q / blocks * MR, hc = min_long(h, tiles * (q + 1) / blocks * MR) - ic;
      const long qt = (hc + MR - 1) / MR;
      /* A last tile of fewer than MIN_TAIL_ROWS rows (params.py) takes rows from the tile before it
         (16 = 12 + 4, not 14 + 2): a tile of so few rows is bound by its loads, not its multiply-adds.
         Tile t is in MR-wide panel t either way. */
      const long tail = hc - (qt - 1) * MR, moved = qt > 1 && tail < MIN_TAIL_ROWS ? MIN_TAIL_ROWS - tail : 0;
      if (moved == 0) pack_a(kcb, (int)hc, a, k, i0 + ic, pc, ap);
      else {{
        pack_a(kcb, (int)((qt - 1) * MR - moved), a, k, i0 + ic, pc, ap);
        pack_a(kcb, (int)(tail + moved), a, k, i0 + ic + (qt - 1) * MR - moved, pc, ap + (qt - 1) * MR * kcb);
      }}
      for (long jr = 0; jr < w; jr += NR) {{
        const int cols = (int)min_long(NR, w - jr);
        const float* panel = bp + (j0 + jr) / NR * ldp + pc * NR;
        const float* next = jr + NR < w ? panel + ldp : NULL;
        for (long t = 0; t < qt; ++t) {{
          const long r0 = t * MR - (t == qt - 1 ? moved : 0);
          const int rows = (int)(t == qt - 1 ? hc - r0 : MR - (t == qt - 2 ? moved : 0));
          float* ct = c + (i0 + ic + r0) * n + j0 + jr;
          /* every tile asks for its rows' share of the next panel's slice, spread over its k steps,
             so the stream from L3 overlaps all of this panel's multiply-adds (the first tile alone
             asking for all of it left the later tiles' time without memory traffic) */
          const float* pf = next == NULL ? NULL : next + r0 * kcb * NR / hc;
          const long pf_step = (rows * NR * (long)sizeof(float) + hc - 1) / hc;
          /* a ragged last tile multiplies only its rows, not the panel's zero padding */
          kernel_packed_rows(rows, kcb, ap + t * MR * kcb, panel, pf, pf_step, ct, (int)n, cols, pc > 0);
          if (last && has_epilogue(e))
            apply_epilogue(ct, n, rows, cols, e->bias == NULL ? NULL : e->bias + j0 + jr,
                           e->residual == NULL ? NULL : e->residual + (i0 + ic + r0) * n + j0 + jr, e->act);
        }}
      }}
    }}
  }}
  return 0;
}}

/* c = act(a @ B + bias + residual) with B prepacked (block_prepacked); threads split the columns in
   whole panels, or the rows in whole MR tiles once each thread has MC of them */
static int gemm_prepacked(long m, long n, long k, const float* a, const float* bp, float* c, const epilogue_t* e,
                          int threads) {{
  /* one row streams B once, as the GEMV does: split by B's bytes like it (by the flops, a 512 x 1536
     weight, 3 MB, ran on one thread from L3: 0.088 ms against the split GEMV's 0.026) */
  if (m == 1 ? (double)n * k * sizeof(float) < GEMV_SPLIT_BYTES : 2.0 * m * n * k < MIN_FLOPS_TO_SPLIT) threads = 1;
  const int by_rows = m >= (long)threads * MC;
  const long col_units = (n + NR - 1) / NR, row_units = (m + MR - 1) / MR;
  const int parts = (int)min_long(threads, by_rows ? row_units : col_units);
  int status = 0;
  #pragma omp parallel num_threads(parts) if(parts > 1) reduction(|:status)
  {{
    const int t = omp_get_thread_num(), count = omp_get_num_threads();
    long i0 = 0, h = m, j0 = 0, w = n;
    if (by_rows) {{
      i0 = row_units * t / count * MR; h = min_long(m, row_units * (t + 1) / count * MR) - i0;
    }} else {{
      j0 = col_units * t / count * NR; w = min_long(n, col_units * (t + 1) / count * NR) - j0;
    }}
    if (h > 0 && w > 0) status |= block_prepacked(h, w, k, a, bp, c, n, i0, j0, e);
  }}
  return status;
}}

/* OpenBLAS through its shim (backends/blas_parallel.py's rs_sgemm), bound at load when the
   target has it: the run-time choice hands it the row counts its packed kernels serve better */
typedef int (*rs_blas_gemm_fn)(int, int, long, long, long, float, const float*, const float*, float, float*, int);
static rs_blas_gemm_fn rs_blas_gemm;
void rs_gen_bind_blas(rs_blas_gemm_fn f) {{ rs_blas_gemm = f; }}

/* Which variant runs for m rows of width n (B stored (k, n), or (n, k) with trans_b): 4 gemv (one
   row), 0 skinny, 1 medium, 2 large (the documented conditions), 3 OpenBLAS. With policy 1 and
   OpenBLAS bound, the generated code keeps the rows A can be read in place for (SKINNY_ROWS, from
   L1's size), but at most ALIASED_ROWS when rows of n floats are a multiple of ALIAS_BYTES apart
   (B's and c's rows then share L1 sets, and a second full row tile loses to OpenBLAS's packed
   kernels); more rows go to OpenBLAS, except that where the packed tile beats OpenBLAS
   (PACKED_BEATS_BLAS, see packed_beats_blas) the medium and large variants keep B stored (k, n).
   Policy 0 always runs the generated code. */
static int gemm_variant(long m, long n, int trans_b, int threads, int policy) {{
  threads = team_threads(threads);
  if (policy == 1 && rs_blas_gemm != NULL) {{
    const int aliased = (n * (long)sizeof(float)) % ALIAS_BYTES == 0;
    const long skinny_limit = min_long(BLAS_SKINNY_ROWS, aliased ? min_long(ALIASED_ROWS, SKINNY_ROWS) : SKINNY_ROWS);
    if (m > skinny_limit && !(PACKED_BEATS_BLAS && !trans_b && m > SKINNY_ROWS)) return 3;
  }}
  if (m == 1) return 4;
  if (m <= SKINNY_ROWS) return 0;
  return m >= (long)threads * PMC && m > n ? 2 : 1;
}}
int rs_gen_gemm_variant(long m, long n, int threads, int policy) {{
  return gemm_variant(m, n, 0, threads, policy);
}}

int rs_gen_gemm(long m, long n, long k, const float* a, const float* b, int trans_b, float* c,
                const float* bias, const float* residual, int act, int threads, int policy) {{
  threads = team_threads(threads);
  if (m <= 0 || n <= 0) return 0;
  const epilogue_t e = {{bias, residual, act}};
  if (trans_b == B_PREPACKED && k > 0) return gemm_prepacked(m, n, k, a, b, c, &e, threads);
  const int variant = gemm_variant(m, n, trans_b, threads, policy);
  if (k <= 0 || variant == 3) {{
    /* Without a bias OpenBLAS writes c (beta = 0); with one, c starts as the bias and OpenBLAS adds
       the product (beta = 1). The fill and the epilogue pass go over c on the team: done on one
       thread they cost 2-3% of a Llama prefill's time on 2 threads (c is n x 1536..2816). */
    const int passes = m * n >= EPILOGUE_SPLIT_ELEMENTS ? threads : 1;
    if (k > 0 && bias != NULL) {{
      #pragma omp parallel for schedule(static) num_threads(passes) if(passes > 1)
      for (long i = 0; i < m; ++i) memcpy(c + i * n, bias, sizeof(float) * (size_t)n);
    }} else if (k <= 0) {{   /* an empty sum */
      #pragma omp parallel for schedule(static) num_threads(passes) if(passes > 1)
      for (long i = 0; i < m; ++i)
        for (long j = 0; j < n; ++j) c[i * n + j] = bias == NULL ? 0.0f : bias[j];
    }}
    if (k > 0) {{
      const int status = rs_blas_gemm(0, trans_b, m, n, k, 1.0f, a, b, bias == NULL ? 0.0f : 1.0f, c, threads);
      if (status != 0) return status;
    }}
    if (residual != NULL || (act & (RESIDUAL_AFTER_ACT - 1)) != 0) {{
      #pragma omp parallel for schedule(static) num_threads(passes) if(passes > 1)
      for (long i = 0; i < m; ++i)
        apply_epilogue(c + i * n, n, 1, (int)n, NULL, residual == NULL ? NULL : residual + i * n, act);
    }}
    return 0;
  }}
  if (variant == 4) return gemv(n, k, a, b, trans_b, c, &e, threads);
  if (2.0 * m * n * k < MIN_FLOPS_TO_SPLIT) threads = 1;
  int status = 0;
  /* columns are split in whole panels; rows (large) in whole PMR tiles */
  const long panel = variant == 0 ? NR : PNR;
  const long col_units = (n + panel - 1) / panel, row_units = (m + PMC - 1) / PMC;
  const int parts = (int)min_long(threads, variant == 2 ? row_units : col_units);
  #pragma omp parallel num_threads(parts) if(parts > 1) reduction(|:status)
  {{
    const int t = omp_get_thread_num(), count = omp_get_num_threads();
    long i0 = 0, h = m, j0 = 0, w = n;
    if (variant == 2) {{   /* even shares in whole PMR tiles (whole PMC blocks left one thread 8 rows more at 512) */
      const long tiles = (m + PMR - 1) / PMR;
      i0 = tiles * t / count * PMR; h = min_long(m, tiles * (t + 1) / count * PMR) - i0;
    }} else {{
      j0 = col_units * t / count * panel; w = min_long(n, col_units * (t + 1) / count * panel) - j0;
    }}
    if (h > 0 && w > 0)
      status |= variant == 0 ? block_skinny(h, w, k, a, b, trans_b, c, n, i0, j0, &e)
                             : block_packed(h, w, k, a, b, trans_b, c, n, i0, j0, &e);
  }}
  return status;
}}

/* c = act(a @ B + bias + residual) with B prepacked, its unpacked form `b` (k x n) beside it (or
   NULL). More than PREPACKED_ROWS rows run rs_gen_gemm on `b` with the same policy when it is there
   and something beats the panels: OpenBLAS (policy 1, bound), or the packed tile (PACKED_BEATS_BLAS:
   2 threads, 512 and 1024 rows of the workloads' shapes, 4-14% faster than the panels' 14 x 32 tile);
   one branch on m. Fewer rows run the prepacked kernel. One row runs the plain GEMV on the unpacked
   weight when it is there: the panels' row kernel read 4 panel streams and made the 2-layer Llama's
   one-token call 0.55 -> 0.70-0.79 ms. */
int rs_gen_gemm_prepacked_variant(long m, int policy, int has_unpacked) {{
  const int blas = policy == 1 && rs_blas_gemm != NULL;
  /* the width only matters at skinny rows */
  if (has_unpacked && m > PREPACKED_ROWS && (blas || PACKED_BEATS_BLAS)) return gemm_variant(m, 1, 0, 0, policy);
  return m == 1 && has_unpacked ? 4 : 5;
}}
int rs_gen_gemm_prepacked(long m, long n, long k, const float* a, const float* packed, const float* b, float* c,
                          const float* bias, const float* residual, int act, int threads, int policy) {{
  const int variant = rs_gen_gemm_prepacked_variant(m, policy, b != NULL);
  if (variant == 5) return rs_gen_gemm(m, n, k, a, packed, B_PREPACKED, c, bias, residual, act, threads, policy);
  return rs_gen_gemm(m, n, k, a, b, 0, c, bias, residual, act, threads, policy);   /* the weight itself */
}}

/* The VM's native calls (library.NativeCall): operands {{a, b[, bias], c}}, params
   {{m, n, k, threads, policy}}; threads 0 follows the team size. */
int rs_gen_sgemm_native(void* const* o, const int64_t* p) {{
  return rs_gen_gemm(p[0], p[1], p[2], (const float*)o[0], (const float*)o[1], 0, (float*)o[2], NULL, NULL, 0,
                     (int)p[3], (int)p[4]);
}}
int rs_gen_sgemm_nt_native(void* const* o, const int64_t* p) {{
  return rs_gen_gemm(p[0], p[1], p[2], (const float*)o[0], (const float*)o[1], 1, (float*)o[2], NULL, NULL, 0,
                     (int)p[3], (int)p[4]);
}}
/* B prepacked (prepacked.py): operands {{a, packed b, b[, bias], c}}, the same params */
int rs_gen_sgemm_prepacked_native(void* const* o, const int64_t* p) {{
  return rs_gen_gemm_prepacked(p[0], p[1], p[2], (const float*)o[0], (const float*)o[1], (const float*)o[2],
                               (float*)o[3], NULL, NULL, 0, (int)p[3], (int)p[4]);
}}
int rs_gen_sgemm_bias_prepacked_native(void* const* o, const int64_t* p) {{
  return rs_gen_gemm_prepacked(p[0], p[1], p[2], (const float*)o[0], (const float*)o[1], (const float*)o[2],
                               (float*)o[4], (const float*)o[3], NULL, 0, (int)p[3], (int)p[4]);
}}
/* Any epilogue (library.epilogue_entry): operands {{a, [packed b,] b, [bias,] [residual,] c}} as
   p[6]'s bits say (1 prepacked, 2 bias, 4 residual), params {{m, n, k, threads, policy, act, layout}} with
   act an ACTIVATIONS code, RESIDUAL_AFTER_ACT or'ed in when the residual follows it */
int rs_gen_sgemm_epilogue_native(void* const* o, const int64_t* p) {{
  const int layout = (int)p[6], prepacked = layout & 1;
  int i = 0;
  const float* a = (const float*)o[i++];
  const float* packed = prepacked ? (const float*)o[i++] : NULL;
  const float* b = (const float*)o[i++];
  const float* bias = layout & 2 ? (const float*)o[i++] : NULL;
  const float* residual = layout & 4 ? (const float*)o[i++] : NULL;
  float* c = (float*)o[i];
  if (prepacked)
    return rs_gen_gemm_prepacked(p[0], p[1], p[2], a, packed, b, c, bias, residual, (int)p[5], (int)p[3], (int)p[4]);
  return rs_gen_gemm(p[0], p[1], p[2], a, b, 0, c, bias, residual, (int)p[5], (int)p[3], (int)p[4]);
}}
int rs_gen_sgemm_bias_native(void* const* o, const int64_t* p) {{
  return rs_gen_gemm(p[0], p[1], p[2], (const float*)o[0], (const float*)o[1], 0, (float*)o[3],
                     (const float*)o[2], NULL, 0, (int)p[3], (int)p[4]);
}}
"""
