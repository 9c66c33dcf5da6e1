"""Which library a float32 matmul goes to: OpenBLAS or the generated GEMM (issue 16 item 4).

DispatchLibrary asks ``choose_gemm_library`` for every matmul its default patterns match and
records the answer with its reason (``GemmChoice``; ``gemm_dispatch_report`` lists them per
module). The rule, from ``benchmarks/bench_gemm.py`` on the workloads' shapes (see
ARCHITECTURE.md, "Generated fp32 GEMM"):

- a weight that is a constant (``x @ W`` with ``W`` bound, as onnxruntime gets initializers): the
  prepacked entry; DispatchLibrary packs ``W`` once at build time
  (``backends.library_gemm.pack_constant_weight``) and passes the panels and ``W``; at run time up
  to ``prepacked_rows()`` rows (4 x the machine's skinny_rows, at least 128: 128 with AVX2 and AVX-512) run
  the generated kernel on the panels (no call packs B), more run OpenBLAS on ``W`` (its
  micro-kernel is the faster from 6-8 x skinny_rows; see driver.py); rows provably above it skip
  the packing and
  follow the rules below;

- no BLAS on the target (scipy-openblas32 missing): the generated kernel, for every ``n``;
- a weight read transposed (``x @ w.T``): OpenBLAS, whose kernels read ``w`` in place (the
  generated kernel packs it through strided writes);
- rows (``n``, the product of ``x``'s leading dims) provably 1: the generated GEMV (no packing,
  B streamed once, threads split its rows; level with OpenBLAS's sgemv on one thread, ahead of
  the threaded split by up to 1.3x on weights of 1-2 MB);
- rows provably above the skinny limit (``backends.library_gemm.skinny_rows``: the rows of A that
  stay in L1 beside a panel of B, fewer where the output width is a multiple of 4 KiB and rows
  share L1 sets): OpenBLAS; except that where the generated medium and large variants' packed tile
  runs level with or ahead of OpenBLAS (``packed_rows_beside_blas``: AVX-512's 6 x 64 tile, from the
  machine's skinny_rows + 1 rows), rows provably from there stay generated, their epilogue fused;
- otherwise (rows may be 2..limit, e.g. a symbolic ``n``): the generated kernel. Its run-time
  choice runs the GEMV for 1 row, the skinny variant (A read in place) for 2..limit rows and
  hands more to OpenBLAS (up to the packed rows above, where those exist), so a symbolic ``n`` gets
  the faster of the two at every value with one branch.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import prod

from backends import blas
from backends import library_gemm as gemm_library
from backends.library_blas import SGEMM, SGEMM_BIAS, SGEMM_NT
from backends.library_gemm import packed_rows_beside_blas, prepacked_rows, skinny_rows
from tensorir.arith import Analyzer

BLAS_NAMES = {"sgemm": SGEMM, "sgemm_bias": SGEMM_BIAS, "sgemm_nt": SGEMM_NT}
GENERATED_NAMES = {"sgemm": gemm_library.SGEMM, "sgemm_bias": gemm_library.SGEMM_BIAS,
                   "sgemm_nt": gemm_library.SGEMM_NT}
PREPACKED_NAMES = {"sgemm": gemm_library.SGEMM_PREPACKED, "sgemm_bias": gemm_library.SGEMM_BIAS_PREPACKED}


@dataclass(frozen=True)
class GemmChoice:
    function: str
    binding: str
    rows: str        # the product's row count as printed (n, b * n, 1, ...)
    library: str
    reason: str


def product_rows(a_shape) -> object:
    """Rows of ``a @ w``: the product of ``a``'s leading dims."""
    return prod(a_shape[:-1]) if len(a_shape) > 2 else a_shape[0]


def choose_gemm_library(kind: str, rows, analyzer: Analyzer, width=None,
                        constant_weight: bool = False) -> tuple[str, str]:
    """``(library, reason)`` for a matmul of ``kind`` ("sgemm", "sgemm_bias", "sgemm_nt") with
    ``rows`` rows and output ``width`` (columns; an int when constant); ``constant_weight``: the
    weight is a float32 ``Constant`` (bound parameters), which the prepacked entries take packed."""
    generated, library = GENERATED_NAMES[kind], BLAS_NAMES[kind]
    lo, hi = analyzer.const_int_bound(rows)
    limit = prepacked_rows()
    above_prepacked = blas.backend() == "openblas" and lo is not None and limit is not None and lo > limit
    if constant_weight and kind in PREPACKED_NAMES and skinny_rows(width) is not None and not above_prepacked:
        return PREPACKED_NAMES[kind], (f"constant weight: packed once at build time into the generated kernel's "
                                       f"panels, so no call packs it; at run time up to {limit} rows "
                                       f"run on the panels, more on OpenBLAS with the weight itself")
    if blas.backend() != "openblas":
        return generated, "no BLAS on this target: the generated kernel serves every n"
    skinny = skinny_rows(width)
    if skinny is None:
        return library, "the generated kernel cannot be built here (no C compiler)"
    if kind == "sgemm_nt":
        return library, "weight read transposed: OpenBLAS reads it in place, the generated kernel would pack it"
    if hi is not None and hi <= 1:
        return generated, "one row: the generated GEMV streams the weight once, no packing"
    packed = packed_rows_beside_blas()
    if lo is not None and packed is not None and lo >= packed:
        return generated, (f"at least {lo} rows (>= {packed}): the generated kernel's packed tile, level with or "
                           f"ahead of OpenBLAS here, its epilogue fused")
    if lo is not None and lo > skinny and (packed is None or (hi is not None and hi < packed)):
        return library, f"at least {lo} rows (> {skinny}): OpenBLAS's packed kernels"
    more = f"OpenBLAS for more than {skinny}"
    if packed is not None:
        more += f" up to {packed - 1}, the packed tile from {packed}"
    return generated, (f"rows may be 1..{skinny}: at run time the GEMV for 1 row, the skinny variant "
                       f"(A read in place) for 2..{skinny}, {more}")


__all__ = ["GemmChoice", "choose_gemm_library", "product_rows", "skinny_rows"]
