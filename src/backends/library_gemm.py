"""Library entries of the generated fp32 GEMM (``backends/c/gemm``), as the graph level sees them:
their names and how many rows the generated code keeps beside OpenBLAS, without importing a
target folder from ``relaxscript`` (tests/test_target_boundary.py). Importing this module
registers the entries (``generated.sgemm``, ``generated.sgemm_nt``, ``generated.sgemm_bias`` and, for a
constant weight packed at build time, ``generated.sgemm_prepacked``, ``generated.sgemm_bias_prepacked``,
and each of them with a fused epilogue: ``epilogue_entry``)."""
from __future__ import annotations

import functools

from .c.gemm import library as _gemm_library
from .c.gemm.driver import ALIAS_BYTES as _ALIAS_BYTES
from .c.gemm.driver import packed_beats_blas as _packed_beats_blas
from .c.gemm.driver import prepacked_rows as _prepacked_rows
from .c.gemm.driver import skinny_limit as _skinny_limit

SGEMM = _gemm_library.SGEMM
SGEMM_NT = _gemm_library.SGEMM_NT
SGEMM_BIAS = _gemm_library.SGEMM_BIAS
SGEMM_PREPACKED = _gemm_library.SGEMM_PREPACKED
SGEMM_BIAS_PREPACKED = _gemm_library.SGEMM_BIAS_PREPACKED
PREPACKED = (SGEMM_PREPACKED, SGEMM_BIAS_PREPACKED)
# ``epilogue_entry(base, act, residual)``: the entry of ``base`` with a fused activation and residual
epilogue_entry = _gemm_library.epilogue_entry
EPILOGUE_ACTIVATIONS = tuple(_gemm_library.ACTIVATIONS)


@functools.lru_cache(maxsize=None)
def _params():
    """The generated kernel's tiles on this machine, or None when it cannot be built (no C
    compiler: the interp target still dispatches)."""
    from .c.compiler import CompileError
    from .c.gemm.params import gemm_params
    try:
        return gemm_params()
    except (CompileError, OSError):
        return None


def skinny_rows(width=None) -> int | None:
    """Most rows the generated kernel keeps beside OpenBLAS for an output ``width`` (an int, or
    None when symbolic: the smaller bound), or None without a C compiler."""
    params = _params()
    if params is None:
        return None
    if isinstance(width, int):
        return _skinny_limit(width, params)
    return min(_skinny_limit(w, params) for w in (1, _ALIAS_BYTES // 4))   # the smaller of its two values


def prepacked_rows() -> int | None:
    """Most rows a prepacked weight runs on its panels beside OpenBLAS on this machine (more go to
    OpenBLAS on the weight itself), or None without a C compiler."""
    params = _params()
    return None if params is None else _prepacked_rows(params)


def packed_rows_beside_blas() -> int | None:
    """The fewest rows from which the generated kernel's medium and large variants keep a product
    (B stored (k, n)) beside OpenBLAS on this machine (their packed tile runs level with or ahead
    of it, ``driver.packed_beats_blas``), or None where OpenBLAS keeps them (or no C compiler)."""
    params = _params()
    return None if params is None or not _packed_beats_blas(params) else params.skinny_rows + 1


def pack_constant_weight(weight):
    """A constant ``(k, n)`` float32 weight in the panels ``generated.sgemm[_bias]_prepacked`` read
    (this machine's panel width), or None without a C compiler."""
    from .c.gemm.prepacked import pack_weight
    params = _params()
    return None if params is None else pack_weight(weight, params.nr)
