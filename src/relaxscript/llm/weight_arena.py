"""The engine's parameters in one block of memory backed by transparent huge pages.

Why: a decode step reads every weight once. Loaded one NumPy array per tensor, a layer's weights
(0.2-0.6 MB each for SmolLM2) sit in 4 KiB pages: a step crosses ~24000 pages, each a TLB miss,
and with the caches cold (a model larger than them) each walk of the page tables may wait on
memory too. NumPy asks for huge pages only for arrays of 4 MiB or more (its ``madvise`` threshold),
so the largest tensors had them and the layers did not. Here every array is copied, in the order
given (the model's), into one private anonymous mapping aligned to 2 MiB and advised
``MADV_HUGEPAGE``: the kernel backs it with 2 MiB pages where it can
(``/sys/kernel/mm/transparent_hugepage/enabled`` set to ``always`` or ``madvise``), and otherwise it
is ordinary memory. Values, dtypes and shapes are unchanged; each array starts on a cache line.
"""
from __future__ import annotations

import mmap
import os

import numpy as np

HUGE_PAGE = 2 << 20
ALIGN = 64


def arena_enabled() -> bool:
    """False when ``RELAXSCRIPT_WEIGHT_ARENA=0``: every parameter stays its own array (to compare)."""
    return os.environ.get("RELAXSCRIPT_WEIGHT_ARENA", "1") != "0"


def _block(nbytes: int) -> np.ndarray:
    """``nbytes`` of zeroed memory starting on a 2 MiB boundary, advised for huge pages where the
    platform has them."""
    if not (hasattr(mmap, "MAP_PRIVATE") and hasattr(mmap, "MAP_ANONYMOUS")):   # Windows
        memory = np.zeros(nbytes + ALIGN, np.uint8)
        start = -memory.ctypes.data % ALIGN
        return memory[start:start + nbytes]
    # private: a shared anonymous mapping (mmap's default) is shmem, which THP's "madvise" mode
    # leaves in 4 KiB pages; the mapping is page-aligned only, so the block starts at the first
    # 2 MiB boundary in it
    mapping = mmap.mmap(-1, nbytes + HUGE_PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    memory = np.frombuffer(mapping, np.uint8)     # keeps the mapping alive
    start = -memory.ctypes.data % HUGE_PAGE
    if hasattr(mapping, "madvise") and hasattr(mmap, "MADV_HUGEPAGE"):
        try:
            mapping.madvise(mmap.MADV_HUGEPAGE, start, -(-nbytes // mmap.PAGESIZE) * mmap.PAGESIZE)
        except OSError:      # a kernel without transparent huge pages: ordinary pages
            pass
    return memory[start:start + nbytes]


def pack(arrays: list) -> list:
    """Copies of ``arrays`` (NumPy arrays) as views of one huge-page-advised block, in order; an array
    listed twice (a tied embedding) is copied once and both entries are the same view."""
    unique = list({id(a): np.asarray(a) for a in arrays}.items())
    offsets, total = {}, 0
    for key, a in unique:
        offsets[key] = total
        total += -(-a.nbytes // ALIGN) * ALIGN
    if total == 0:
        return list(arrays)
    memory = _block(total)
    views = {}
    for key, a in unique:
        view = memory[offsets[key]:offsets[key] + a.nbytes].view(a.dtype).reshape(a.shape)
        view[...] = a
        views[key] = view
    return [views[id(a)] for a in arrays]
