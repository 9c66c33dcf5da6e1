"""One owner for CPU threads: generated OpenMP kernels and BLAS calls share the cores.

OpenMP and OpenBLAS each keep a pool of busy-waiting worker threads by
default; on a small machine the two pools take turns starving each other
(every parallel region then waits a scheduler time slice). So: OpenMP
threads sleep when idle (``OMP_WAIT_POLICY=passive``, read when libgomp
loads, hence set before the first kernel library is loaded), OpenBLAS runs
single-threaded, and large GEMMs are split by rows over this module's
thread pool (ctypes releases the GIL during a foreign call). Settings the
user made in the environment are left alone.
"""
from __future__ import annotations

import concurrent.futures
import functools
import os


def configure_openmp() -> None:
    """Call before loading a library that uses OpenMP."""
    os.environ.setdefault("OMP_WAIT_POLICY", "passive")


@functools.lru_cache(maxsize=None)
def num_threads() -> int:
    for name in ("RELAXSCRIPT_NUM_THREADS", "OMP_NUM_THREADS"):
        value = os.environ.get(name, "").strip()
        if value.isdigit() and int(value) > 0:
            return int(value)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


@functools.lru_cache(maxsize=None)
def pool() -> concurrent.futures.ThreadPoolExecutor:
    return concurrent.futures.ThreadPoolExecutor(max_workers=num_threads(),
                                                 thread_name_prefix="relaxscript")


def run_row_blocks(rows: int, min_rows_per_block: int, work) -> None:
    """Run ``work(start, stop)`` over ``[0, rows)``, split across the thread pool
    when there is enough work for more than one block."""
    blocks = min(num_threads(), rows // max(1, min_rows_per_block))
    if blocks <= 1:
        work(0, rows)
        return
    bounds = [rows * i // blocks for i in range(blocks + 1)]
    futures = [pool().submit(work, lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:]) if hi > lo]
    for f in futures:
        f.result()
