"""Per-operator profile of onnxruntime running one benchmark workload: the peer's side of
``profile_workload.py`` (where onnxruntime's time goes, to set beside ours).

Exports the workload as bench_models.py's onnxruntime peer does (benchmarks/peers.py), runs it
with onnxruntime's own profiler on, and prints per operator type the mean time per call and
the nodes per call. onnxruntime and torch (its exporter) must be installed, as in the bench session.

    python benchmarks/profile_onnxruntime.py llama 128 [--calls 50] [--threads 2]
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import peers  # noqa: E402
from workloads import WORKLOADS  # noqa: E402

WARMUP_CALLS = 5


def operator_times(profile_events: list, calls: int) -> list[tuple[str, float, int]]:
    """[(operator type, ms per call, nodes per call)] from onnxruntime's profile events (Chrome
    trace format: one ``<node>_kernel_time`` event per node run, ``dur`` in microseconds), slowest first."""
    spent, runs = collections.defaultdict(float), collections.Counter()
    for event in profile_events:
        if event.get("cat") == "Node" and event.get("name", "").endswith("_kernel_time"):
            op = event.get("args", {}).get("op_name", "?")
            spent[op] += event["dur"]
            runs[op] += 1
    return sorted(((op, spent[op] / calls / 1e3, runs[op] // calls) for op in spent), key=lambda row: -row[1])


def profile(name: str, n: int, calls: int, threads: int) -> tuple[float, list]:
    """(wall ms per profiled call, operator rows) for ``calls`` calls after a warm-up."""
    torch, reason = peers.import_torch()
    if torch is None:
        raise RuntimeError(f"onnxruntime's model is exported by torch: {reason}")
    workload = WORKLOADS[name]
    with tempfile.TemporaryDirectory(prefix="relaxscript-ort-profile-") as folder:
        session, names = peers.onnxruntime_session(torch, workload, threads,
                                                   profile_prefix=os.path.join(folder, "ort"))
        feed = dict(zip(names, workload.activations(n)))
        for _ in range(WARMUP_CALLS):
            session.run(None, feed)
        start = time.perf_counter()
        for _ in range(calls):
            session.run(None, feed)
        wall = (time.perf_counter() - start) / calls * 1e3
        with open(session.end_profiling()) as handle:
            events = json.load(handle)
    return wall, operator_times(events, calls + WARMUP_CALLS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload", choices=sorted(WORKLOADS))
    parser.add_argument("n", type=int)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--threads", type=int, default=peers.THREADS)
    args = parser.parse_args()
    reason = peers.availability("onnxruntime")
    if reason is not None:
        sys.exit(f"onnxruntime peer unavailable: {reason}")
    wall, rows = profile(args.workload, args.n, args.calls, args.threads)
    print(f"onnxruntime {args.workload} n={args.n} ({args.threads} threads): {wall:.3f} ms per call (profiler on), "
          f"operators {sum(ms for _, ms, _ in rows):.3f} ms, {sum(c for _, _, c in rows)} nodes per call")
    for op, ms, count in rows:
        print(f"{ms:8.4f} ms  x{count:3d}  {op}")


if __name__ == "__main__":
    main()
