"""The engine's parameters in one block of memory backed by transparent huge pages.

Why: a decode step reads every weight once. Loaded one NumPy array per tensor, a layer's weights
(0.2-0.6 MB each for SmolLM2) sit in 4 KiB pages: a step crosses ~24000 pages, each a TLB miss,
and with the caches cold (a model larger than them) each walk of the page tables waits on memory
too. NumPy asks for huge pages only for arrays of 4 MiB or more (its ``madvise`` threshold), so the
largest tensors had them and the layers did not. Here every array is copied, in the order given
(the model's), into one anonymous mapping aligned to 2 MiB and advised ``MADV_HUGEPAGE``: the
kernel backs it with 2 MiB pages where it can (``/sys/kernel/mm/transparent_hugepage/enabled``
set to ``always`` or ``madvise``), and otherwise it is ordinary memory. Values, dtypes and shapes
are unchanged; each array starts on a cache line.
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


def pack(arrays: list) -> list:
    """Copies of ``arrays`` (NumPy arrays) as views of one huge-page-advised block, in order; an array
    listed twice (a tied embedding) is copied once and both entries are the same view."""
    unique = list({id(a): a for a in arrays}.values())
    offsets, total = {}, 0
    for a in unique:
        offsets[id(a)] = total
        total += -(-a.nbytes // ALIGN) * ALIGN
    if total == 0:
        return list(arrays)
    # private: a shared anonymous mapping (mmap's default) is shmem, which THP's "madvise" mode leaves
    # in 4 KiB pages; page-aligned only, so the views start at the first 2 MiB boundary
    block = mmap.mmap(-1, total + HUGE_PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    start = -np.frombuffer(block, np.uint8, count=1).ctypes.data % HUGE_PAGE
    madvise = getattr(block, "madvise", None)
    if madvise is not None and hasattr(mmap, "MADV_HUGEPAGE"):
        try:
            madvise(mmap.MADV_HUGEPAGE, start, -(-total // mmap.PAGESIZE) * mmap.PAGESIZE)
        except OSError:      # no transparent huge pages in this kernel: ordinary pages
            pass
    memory = np.frombuffer(block, np.uint8)[start:start + total]
    views = {}
    for a in unique:
        offset = offsets[id(a)]
        view = memory[offset:offset + a.nbytes].view(a.dtype).reshape(a.shape)
        view[...] = a
        views[id(a)] = view
    return [views[id(a)] for a in arrays]
