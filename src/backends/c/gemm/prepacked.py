"""A constant weight packed once, at build time, into the micro-kernel's B panels.

``pack_weight(w, nr)`` turns a row-major ``(k, n)`` float32 weight into ``(ceil(n / nr), k, nr)``:
panel ``q`` holds columns ``[q * nr, q * nr + nr)`` as ``k`` rows of ``nr`` floats (the B_pack
layout of ``microkernel.py`` over the whole ``k``), zero-padded past ``n``. The driver's
``B_PREPACKED`` path reads kc-row slices of a panel where it lies, so a call packs nothing of B
(OpenBLAS and the per-call variants pack their share of B on every call).

The library entries ``generated.sgemm_prepacked(a, packed, w, c)`` and
``generated.sgemm_bias_prepacked(a, packed, w, bias, c)`` take the packed weight and the weight
itself: up to ``driver.prepacked_rows(params)`` rows run the generated kernel on the panels, more run
OpenBLAS on ``w`` where the target has it (one branch on the actual rows; the price is the weight's
memory twice). The output width ``n`` comes from ``c`` (the padding hides it in ``packed``).
DispatchLibrary sends a matmul there when its weight is a constant (transform/gemm_choice.py).
"""
from __future__ import annotations

import numpy as np

from ...aligned_memory import aligned_empty
from tensorir.errors import ShapeMismatchError


def pack_weight(weight: np.ndarray, nr: int) -> np.ndarray:
    """``weight`` (k, n) float32 as ``(ceil(n / nr), k, nr)`` panels, zero-padded past ``n``."""
    weight = np.asarray(weight)
    if weight.ndim != 2 or weight.dtype != np.float32:
        raise ShapeMismatchError(f"pack_weight: expected a 2-D float32 weight, got {weight.dtype} {weight.shape}")
    k, n = weight.shape
    panels = -(-n // nr)
    packed = aligned_empty((panels, k, nr), np.float32)   # the micro-kernel's B loads take whole lines
    full = n // nr
    packed[:full] = weight[:, :full * nr].reshape(k, full, nr).transpose(1, 0, 2)
    if full < panels:                                     # the last panel, zero past n
        packed[full] = 0
        packed[full, :, :n - full * nr] = weight[:, full * nr:]
    return packed


def unpack_weight(packed: np.ndarray, n: int) -> np.ndarray:
    """The ``(k, n)`` weight ``pack_weight`` packed (the NumPy implementations compute with it)."""
    panels, k, nr = packed.shape
    return packed.transpose(1, 0, 2).reshape(k, panels * nr)[:, :n]


def prepacked_dims(a_shape: tuple, packed_shape: tuple, c_shape: tuple, nr: int | None = None) -> tuple[int, int, int]:
    """``(m, n, k)`` of ``c = a @ unpack(packed)``, leading dims of ``a`` and ``c`` flattened into rows;
    ``nr`` (when given) is the panel width the compiled kernel expects. Raises ShapeMismatchError."""
    text = f"generated sgemm (prepacked weight): shapes {a_shape} @ packed {packed_shape} do not give {c_shape}"
    if len(packed_shape) != 3 or len(a_shape) < 2 or len(c_shape) < 2:
        raise ShapeMismatchError(text + " (packed must be 3-D: panels, k, panel width)")
    panels, k, width = packed_shape
    m, n = int(np.prod(a_shape[:-1])), c_shape[-1]
    if a_shape[-1] != k or int(np.prod(c_shape)) != m * n or panels != -(-n // width):
        raise ShapeMismatchError(text)
    if nr is not None and width != nr:
        raise ShapeMismatchError(f"generated sgemm: the weight was packed in panels of {width} columns, "
                                 f"this machine's kernel reads {nr} (rebuild the module here)")
    return m, n, k
