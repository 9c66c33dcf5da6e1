"""Model benchmarks: relaxscript (one build per model, every n) vs NumPy vs PyTorch eager.

Workloads (benchmarks/workloads.py): (a) MLP block, (b) layer_norm -> scale ->
softmax, (c) 2-layer Llama-style prefill. Every relaxscript result is checked
against the NumPy version before it is timed. Performance targets are
reported, never asserted; a correctness mismatch exits non-zero.

    python benchmarks/bench_models.py [--workloads mlp,llama] [--sizes 1,128] [--no-torch]

The peers are timed in fresh worker processes (``--processes``, default 3),
one after another in each, on the same input arrays, each cell warmed up for
``WARMUP_S`` first; the order rotates from process to process and a cell is
the median over the processes. On this machine the same code runs up to 30%
faster or slower from one fresh process to the next (where the weights land
in memory decides how much of them the L3 keeps), so peers timed in
different processes would compare placements, not code; and the warm-up
lets the previous peer's spinning thread pool (OpenBLAS, OpenMP) go idle
before the next peer is timed.
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from timing import format_table, median_ms  # noqa: E402
from workloads import ONNXRUNTIME_MS, WORKLOADS  # noqa: E402

import relaxscript as rx  # noqa: E402

RTOL, ATOL = 2e-3, 2e-3
COMPILE_TARGET_COLD_S, COMPILE_TARGET_WARM_S = 5.0, 1.0
WARMUP_S = 0.25


def load_torch(enabled: bool):
    """PyTorch is an optional peer: None when absent or disabled (also by RELAXSCRIPT_BENCH_TORCH=0)."""
    if not enabled or os.environ.get("RELAXSCRIPT_BENCH_TORCH", "1") == "0":
        return None
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(2)
    return torch


def build(source: str):
    return rx.build(rx.from_source(source), target="c")


def measure_compile(name: str) -> dict:
    """Cold (fresh cache dir) and warm (second build) compile time, script text -> executable.

    Runs in this process, so call it in a fresh interpreter (see ``compile_times``).
    """
    source = WORKLOADS[name].source
    with tempfile.TemporaryDirectory(prefix="relaxscript-bench-cache-") as cache:
        os.environ["RELAXSCRIPT_CACHE_DIR"] = cache
        start = time.perf_counter()
        build(source)
        cold = time.perf_counter() - start
        start = time.perf_counter()
        build(source)
        warm = time.perf_counter() - start
    return {"cold_s": cold, "warm_s": warm}


def compile_times(name: str) -> dict:
    """``measure_compile`` in a fresh Python process, so no in-memory cache helps the cold build."""
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--measure-compile", name],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"compile-time measurement failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def check(name: str, n: int, got: np.ndarray, want: np.ndarray) -> float:
    if got.shape != want.shape:
        raise AssertionError(f"{name} n={n}: relaxscript shape {got.shape}, NumPy shape {want.shape}")
    if not np.allclose(got, want, rtol=RTOL, atol=ATOL):
        raise AssertionError(f"{name} n={n}: relaxscript differs from NumPy "
                             f"(max abs error {np.abs(got - want).max():.3e})")
    return float(np.abs(got - want).max())


PEERS = ("relaxscript", "numpy", "torch")


def time_peer(peer: str, workload, sizes, budget_s: float) -> dict:
    """Median ms per n for one peer (run in its own process: see ``run_workload``)."""
    out = {"ms": {}, "max_err": {}, "build_s": None}
    if peer == "relaxscript":
        start = time.perf_counter()
        main = rx.VirtualMachine(build(workload.source))["main"]
        out["build_s"] = time.perf_counter() - start
        for n in sizes:
            args = workload.inputs(n)
            out["max_err"][n] = check(workload.name, n, main(*args), workload.numpy_fn(*args))
            out["ms"][n] = median_ms(functools.partial(main, *args), budget_s=budget_s, warmup_s=WARMUP_S)
    elif peer == "numpy":
        for n in sizes:
            out["ms"][n] = median_ms(functools.partial(workload.numpy_fn, *workload.inputs(n)),
                                   budget_s=budget_s, warmup_s=WARMUP_S)
    else:
        torch = load_torch(True)
        if torch is None:
            return {"ms": {}}
        with torch.no_grad():
            for n in sizes:
                targs = [torch.from_numpy(a) for a in workload.inputs(n)]
                out["ms"][n] = median_ms(functools.partial(workload.torch_fn, *targs), budget_s=budget_s,
                                          warmup_s=WARMUP_S)
    return out


def run_worker(peers: list[str], name: str, sizes, budget_s: float, isolate: bool) -> dict:
    """Time ``peers`` one after another in a fresh process (or in this one when not ``isolate``),
    on the same input arrays; returns ``{peer: time_peer result}``."""
    if not isolate:
        return {peer: time_peer(peer, WORKLOADS[name], sizes, budget_s) for peer in peers}
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", ",".join(peers), "--workloads", name,
           "--sizes", ",".join(map(str, sizes)), "--budget", str(budget_s)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise AssertionError(f"worker ({', '.join(peers)}) for {name} failed:\n{proc.stderr[-3000:]}")
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    return {peer: {key: ({int(k): v for k, v in value.items()} if isinstance(value, dict) else value)
                   for key, value in result.items()} for peer, result in results.items()}


def run_workload(workload, sizes, with_torch: bool, budget_s: float, isolate: bool,
                 processes: int = 1) -> tuple[list[dict], float]:
    peers = [peer for peer in PEERS if peer != "torch" or with_torch]
    runs = {peer: [] for peer in peers}
    for turn in range(processes):
        order = peers[turn % len(peers):] + peers[:turn % len(peers)]   # rotate who goes first
        for peer, result in run_worker(order, workload.name, sizes, budget_s / processes, isolate).items():
            runs[peer].append(result)
    results = []
    for n in sizes:
        ms = {peer: _median([run["ms"][n] for run in runs[peer] if n in run["ms"]]) for peer in peers}
        row = {"workload": workload.name, "n": n, "relaxscript": ms["relaxscript"], "numpy": ms["numpy"],
               "torch": ms.get("torch"), "max_err": max(run["max_err"][n] for run in runs["relaxscript"])}
        results.append(row)
        torch_ms = row["torch"]
        print(f"  {workload.name:<13} n={n:<5} relaxscript {row['relaxscript']:9.3f} ms   "
              f"numpy {row['numpy']:9.3f} ms   torch "
              f"{'-' if torch_ms is None else format(torch_ms, '9.3f')} ms", flush=True)
    return results, runs["relaxscript"][0]["build_s"]


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def ratio(a, b) -> str:
    return "-" if a is None or b is None else f"{a / b:.2f}x"


def results_table(rows: list[dict]) -> str:
    body = [[r["workload"], str(r["n"]), f"{r['relaxscript']:.3f}", f"{r['numpy']:.3f}",
             "-" if r["torch"] is None else f"{r['torch']:.3f}", ratio(r["relaxscript"], r["numpy"]),
             ratio(r["relaxscript"], r["torch"]),
             "-" if ONNXRUNTIME_MS.get(r["workload"], {}).get(r["n"]) is None
             else f"{ONNXRUNTIME_MS[r['workload']][r['n']]:.2f}",
             f"{r['max_err']:.1e}"] for r in rows]
    return format_table(["workload", "n", "relax ms", "numpy ms", "torch ms", "relax/numpy",
                         "relax/torch", "ort ms*", "max err"], body)


def target_report(rows: list[dict], compile_s: dict | None) -> list[str]:
    """One line per target: met / missed (by how much) / not measured."""
    lines = []

    def verdict(label, ok, detail):
        lines.append(f"  [{'met' if ok else 'MISSED'}] {label}: {detail}")

    for r in rows:
        name, n, relax = r["workload"], r["n"], r["relaxscript"]
        vs_torch = None if r["torch"] is None else f"{relax / r['torch']:.2f}x torch"
        verdict(f"{name} n={n} faster than NumPy", relax < r["numpy"], f"{relax / r['numpy']:.2f}x NumPy")
        if r["torch"] is None:
            continue
        if name in ("mlp", "llama"):
            verdict(f"{name} n={n} no slower than torch", relax <= r["torch"], vs_torch)
        elif name == "norm_softmax" and n >= 512:
            verdict(f"{name} n={n} <= 0.7x torch", relax <= 0.7 * r["torch"], vs_torch)
    if compile_s is not None:
        verdict("llama compile cold < 5 s", compile_s["cold_s"] < COMPILE_TARGET_COLD_S,
                f"{compile_s['cold_s']:.2f} s")
        verdict("llama compile warm < 1 s", compile_s["warm_s"] < COMPILE_TARGET_WARM_S,
                f"{compile_s['warm_s']:.2f} s")
    return lines


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default=",".join(WORKLOADS), help="comma-separated names")
    parser.add_argument("--sizes", default=None, help="comma-separated n values (default: per workload)")
    parser.add_argument("--no-torch", action="store_true", help="skip the PyTorch column")
    parser.add_argument("--budget", type=float, default=1.0, help="seconds of timing per cell")
    parser.add_argument("--processes", type=int, default=3,
                        help="fresh worker processes per peer, in turns; a cell is their median")
    parser.add_argument("--same-process", action="store_true",
                        help="time all peers in this process instead of fresh worker processes")
    parser.add_argument("--measure-compile", metavar="NAME", help=argparse.SUPPRESS)
    parser.add_argument("--worker", help=argparse.SUPPRESS)   # comma-separated peers, timed in this order
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.measure_compile:
        print(json.dumps(measure_compile(args.measure_compile)))
        return 0
    if args.worker:
        sizes = tuple(int(x) for x in args.sizes.split(","))
        print(json.dumps({peer: time_peer(peer, WORKLOADS[args.workloads], sizes, args.budget)
                          for peer in args.worker.split(",")}))
        return 0
    torch = load_torch(not args.no_torch)
    print(f"relaxscript model benchmarks (float32; torch: "
          f"{'%s, 2 threads, eager' % torch.__version__ if torch else 'not installed, column skipped'})")
    names = [w.strip() for w in args.workloads.split(",") if w.strip()]
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        print(f"unknown workload(s) {unknown}; choose from {list(WORKLOADS)}", file=sys.stderr)
        return 2
    rows = []
    for name in names:
        workload = WORKLOADS[name]
        sizes = tuple(int(s) for s in args.sizes.split(",")) if args.sizes else workload.sizes
        print(f"\n{name}: {workload.description}", flush=True)
        try:
            workload_rows, build_s = run_workload(workload, sizes, torch is not None, args.budget,
                                                  isolate=not args.same_process,
                                                  processes=max(1, args.processes))
        except AssertionError as err:
            print(f"CORRECTNESS FAILURE: {err}", file=sys.stderr)
            return 1
        print(f"  (built once in {build_s:.2f} s, served every n)")
        rows += workload_rows
    compile_s = compile_times("llama") if "llama" in names else None
    print("\n" + results_table(rows))
    print("* ort ms: onnxruntime numbers quoted in the issue (other machine), a stretch comparison only")
    if compile_s is not None:
        print(f"\nllama compile, script text -> executable: cold cache {compile_s['cold_s']:.2f} s, "
              f"warm cache {compile_s['warm_s']:.2f} s")
    print("\ntargets (reported, not asserted):")
    print("\n".join(target_report(rows, compile_s)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
