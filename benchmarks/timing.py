"""Small timing helpers shared by the benchmark scripts."""
from __future__ import annotations

import statistics
import time
from typing import Callable


def median_ms(fn: Callable[[], object], min_runs: int = 5, max_runs: int = 50,
              budget_s: float = 1.0, warmup_s: float = 0.0, clock: Callable[[], float] = time.perf_counter) -> float:
    """Median wall time of ``fn()`` in milliseconds after warming up.

    Warm-up calls ``fn`` once, then until ``warmup_s`` seconds have passed (a
    process's first fraction of a second of calls can run slower: page and
    thread placement settle). Then runs at least ``min_runs`` times and stops
    after ``max_runs`` or once ``budget_s`` seconds have been spent, so slow
    cases stay affordable. ``clock``: what a sample measures (``time.thread_time``: this
    thread's CPU time, which other processes' load does not stretch; single-threaded runs only).
    """
    start = time.perf_counter()
    fn()
    while time.perf_counter() - start < warmup_s:
        fn()
    samples = []
    spent = 0.0
    while len(samples) < min_runs or (len(samples) < max_runs and spent < budget_s):
        start, wall = clock(), time.perf_counter()
        fn()
        samples.append(clock() - start)
        spent += time.perf_counter() - wall
    return 1e3 * statistics.median(samples)


def format_table(header: list[str], rows: list[list[str]]) -> str:
    """A plain-text table with right-aligned columns (the first left-aligned)."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows)]

    def line(cells):
        parts = [str(c).ljust(w) if i == 0 else str(c).rjust(w)
                 for i, (c, w) in enumerate(zip(cells, widths))]
        return "  ".join(parts)
    return "\n".join([line(header), "  ".join("-" * w for w in widths)] + [line(r) for r in rows])
