"""Horizontal GEMM merging (MergeParallelMatmul) switched on and off, side by side.

For each workload of ``workloads.py`` the weights are bound as constants
(``BindParams``), then the module is built twice with the default pipeline:
once as is and once without MergeParallelMatmul. Both run in this process on
the same inputs, interleaved size by size,
each size alternating off/on for a few rounds and keeping each side's best
median, so load from other processes hits both alike. Prints the groups merged per
workload and the median times. On a shared machine the numbers are noisy.

    python benchmarks/bench_merge_matmul.py [--workloads llama] [--sizes 1 32 128 512]
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from timing import format_table, median_ms  # noqa: E402
from workloads import WORKLOADS  # noqa: E402

import numpy as np  # noqa: E402

import relaxscript as rx  # noqa: E402
from relaxscript.transform import MergeParallelMatmul  # noqa: E402
from relaxscript.transform.merge_parallel_matmul import merge_module  # noqa: E402


def bound_module(workload):
    """The workload's module with its weights bound as constants, and its activation count."""
    return workload.module(bound_weights=True), len(workload.activations(1))


def merged_groups(mod) -> int:
    inlined = rx.transform.InlineFunctions()(mod)  # the pipeline inlines first
    return merge_module(inlined)[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", nargs="+", default=sorted(WORKLOADS), choices=sorted(WORKLOADS))
    parser.add_argument("--sizes", nargs="+", type=int, default=None)
    parser.add_argument("--budget", type=float, default=0.5, help="seconds per timing")
    parser.add_argument("--rounds", type=int, default=3, help="alternating off/on rounds per size")
    args = parser.parse_args()
    rows = []
    for name in args.workloads:
        workload = WORKLOADS[name]
        mod, activations = bound_module(workload)
        groups = merged_groups(mod)
        on = rx.build(mod)
        off = rx.build(mod, pipeline=[p for p in rx.get_pipeline("c")
                                      if not isinstance(p, MergeParallelMatmul)])
        run_on, run_off = rx.VirtualMachine(on)["main"], rx.VirtualMachine(off)["main"]
        for n in args.sizes or workload.sizes:
            inputs = workload.inputs(n)[:activations]
            np.testing.assert_allclose(run_on(*inputs), run_off(*inputs), rtol=1e-3, atol=1e-3)
            off_ms = on_ms = float("inf")
            for _ in range(args.rounds):  # alternate, keep each side's best median: load comes and goes
                off_ms = min(off_ms, median_ms(lambda: run_off(*inputs), budget_s=args.budget, warmup_s=0.2))
                on_ms = min(on_ms, median_ms(lambda: run_on(*inputs), budget_s=args.budget, warmup_s=0.2))
            rows.append([name, str(n), str(groups), f"{off_ms:.3f}", f"{on_ms:.3f}", f"{off_ms / on_ms:.2f}x"])
    print(format_table(["workload", "n", "groups merged", "off ms", "on ms", "gain"], rows))


if __name__ == "__main__":
    main()
