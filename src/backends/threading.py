"""One owner for CPU threads: the generated kernels' OpenMP pool.

OpenMP and OpenBLAS each keep a pool of worker threads that busy-wait between
calls; on a small machine two such pools take turns starving each other (a
parallel region then waits a scheduler time slice: calls measured 10 to 400
times slower). So OpenBLAS runs single-threaded, and BLAS calls large enough
to share are split into blocks on the OpenMP threads by a small C shim
(blas_parallel.py). OpenMP keeps libgomp's default waiting (spin briefly,
then sleep), which measured faster than passive waiting for back-to-back
kernels. Settings the user made in the environment are left alone.
"""
from __future__ import annotations

import functools
import os


@functools.lru_cache(maxsize=None)
def num_threads() -> int:
    for name in ("RELAXSCRIPT_NUM_THREADS", "OMP_NUM_THREADS"):
        value = os.environ.get(name, "").strip()
        if value.isdigit() and int(value) > 0:
            return int(value)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
