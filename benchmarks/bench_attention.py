"""Fused attention on and off: the Llama-style prefill workload, same process, same inputs.

Builds ``rx.get_pipeline("c")`` with and without ``FuseAttention`` and times
both executables interleaved (one call of each per round, so a busy machine
slows both alike), median ms per n. Also reports the statically planned
activation memory (StaticPlanBlockMemory's storages over all functions,
kernel workspaces included, sized at the bound of n).

    python benchmarks/bench_attention.py [--sizes 1,32,128,512] [--rounds 15]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from benchmarks.workloads import WORKLOADS  # noqa: E402

import relaxscript as rx  # noqa: E402
from relaxscript.analysis import memory_plan_info  # noqa: E402
from relaxscript.transform import FuseAttention  # noqa: E402


def pipelines() -> dict:
    # the default pipeline fuses only decode-shaped attention; "fused" lifts that bound
    default = rx.get_pipeline("c")
    every = [FuseAttention() if isinstance(p, FuseAttention) else p for p in default]
    return {"fused": every, "unfused": [p for p in default if not isinstance(p, FuseAttention)]}


def planned_bytes(mod, pipeline) -> int:
    """Activation bytes StaticPlanBlockMemory reserves over all functions (storages are sized
    at the bound of n, so this holds for every n)."""
    for p in pipeline:
        mod = p(mod)
    return sum(plan.planned_bytes_at_bounds or 0 for plan in memory_plan_info(mod).values())


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,32,128,512")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args(argv)
    workload = WORKLOADS["llama"]
    mod = rx.from_source(workload.source)
    plans = pipelines()
    mains = {name: rx.VirtualMachine(rx.build(mod, target="c", pipeline=list(p)))["main"]
             for name, p in plans.items()}
    mib = {name: planned_bytes(mod, p) / 2**20 for name, p in plans.items()}
    print(f"{workload.description}; median ms over {args.rounds} interleaved rounds")
    print(f"planned activation memory: fused {mib['fused']:.2f} MiB, unfused {mib['unfused']:.2f} MiB")
    print(f"{'n':>5} {'fused ms':>10} {'unfused ms':>11} {'speedup':>8}")
    for n in (int(s) for s in args.sizes.split(",")):
        inputs = workload.inputs(n)
        reference = workload.numpy_fn(*inputs)
        times = {name: [] for name in mains}
        for run in mains.values():
            np.testing.assert_allclose(np.asarray(run(*inputs)), reference, rtol=1e-3, atol=1e-3)
        for _ in range(args.rounds):
            for name, run in mains.items():
                start = time.perf_counter()
                run(*inputs)
                times[name].append(time.perf_counter() - start)
        ms = {name: 1e3 * float(np.median(t)) for name, t in times.items()}
        print(f"{n:>5} {ms['fused']:>10.2f} {ms['unfused']:>11.2f} {ms['unfused'] / ms['fused']:>7.2f}x",
              flush=True)


if __name__ == "__main__":
    main()
