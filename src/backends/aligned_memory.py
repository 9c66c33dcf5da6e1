"""Cache-line-aligned byte buffers for the VM's storages and results.

NumPy's allocator aligns data to 16 bytes: a large block starts 16 or 48 bytes past a page.
Every 64-byte vector a kernel loads from or stores to such a tensor then straddles two cache
lines, and split accesses cost about twice a plain one (AVX-512 kernels touch a whole line per
vector). TVM aligns its allocations to 64 bytes for the same reason. Measured on the Llama
prefill's prepacked products at 128 rows, one thread: 2.5-5% slower (medians) with A and C
16 bytes off a line.
"""
from __future__ import annotations

import ctypes

import numpy as np

ALIGNMENT = 64          # one cache line, one AVX-512 vector
SMALL_BYTES = 4096      # below a page the split accesses are too few to pay for the extra view

_from_buffer = ctypes.c_char.from_buffer
_addressof = ctypes.addressof


def _skip_to_line(raw: np.ndarray) -> int:
    """Bytes from ``raw``'s start to the next ``ALIGNMENT`` boundary (through the buffer protocol:
    ``raw.ctypes.data`` costs a microsecond and a half, this a third of one)."""
    return -_addressof(_from_buffer(raw)) % ALIGNMENT


def aligned_bytes(size: int) -> np.ndarray:
    """A 1-d uint8 array of ``size`` bytes whose data starts on an ``ALIGNMENT`` boundary
    (a view into a slightly larger block, which it keeps alive)."""
    raw = np.empty(size + ALIGNMENT, np.uint8)     # MemoryError / ValueError as np.empty's
    skip = _skip_to_line(raw)
    return raw[skip:skip + size]


def aligned_empty(shape, dtype) -> np.ndarray:
    """``np.empty(shape, dtype)`` on an aligned block (plain ``np.empty`` for small arrays, object
    dtypes and negative dims, which keep NumPy's own behaviour and errors).

    Every VM call allocates its results here, so the common case is kept to a few NumPy calls:
    one ``np.empty`` and one ``np.ndarray`` over it (about 1.5 us against 9 us for
    empty -> slice -> view -> reshape with ``np.ndim`` and ``ctypes`` on the way)."""
    dtype = dtype if type(dtype) is np.dtype else np.dtype(dtype)
    if type(shape) is not tuple:
        shape = tuple(int(d) for d in shape) if np.ndim(shape) else (int(shape),)
    count = 1
    for d in shape:
        count *= d
    nbytes = count * dtype.itemsize
    if nbytes < SMALL_BYTES or dtype.hasobject or (shape and min(shape) < 0):
        return np.empty(shape, dtype)
    raw = np.empty(nbytes + ALIGNMENT, np.uint8)   # MemoryError / ValueError as np.empty's
    return np.ndarray(shape, dtype, raw, _skip_to_line(raw))
