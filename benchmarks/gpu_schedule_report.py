"""Which default GPU schedule rule takes each kernel of the benchmark
workloads and the demo decoder: the graph passes up to FuseTIR (no library
dispatch, as for the GPU targets), then DefaultGPUSchedule.

    PYTHONPATH=src:. python benchmarks/gpu_schedule_report.py
"""
from __future__ import annotations

import os
import sys
import time
from collections import Counter

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import relaxscript as rx  # noqa: E402
from benchmarks.workloads import WORKLOADS  # noqa: E402
from examples.llama_decoder import TINY, llama_source  # noqa: E402
from relaxscript import transform as T  # noqa: E402


def schedule_for_gpu(mod):
    """``(scheduled module, {rule: [kernel names]})``."""
    for step in (T.InlineFunctions(), T.LegalizeOps(), T.AnnotateTIROpPattern(), T.FuseOps(), T.FuseTIR()):
        mod = step(mod)
    schedule = T.DefaultGPUSchedule()
    return schedule(mod), schedule.last_report


def main() -> int:
    sources = {name: w.source for name, w in WORKLOADS.items()}
    sources["demo decoder"] = llama_source(TINY)
    totals = Counter()
    for name, source in sources.items():
        start = time.perf_counter()
        _, report = schedule_for_gpu(rx.from_source(source))
        seconds = time.perf_counter() - start
        kernels = sum(len(v) for v in report.values())
        print(f"{name}: {kernels} kernels ({seconds:.1f} s)")
        for rule, funcs in sorted(report.items()):
            totals[rule] += len(funcs)
            print(f"  {rule:14s} {len(funcs):3d}  {', '.join(sorted(funcs))}")
    total = sum(totals.values())
    print("all workloads: " + ", ".join(f"{rule} {count} ({100 * count / total:.0f}%)"
                                        for rule, count in totals.most_common()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
