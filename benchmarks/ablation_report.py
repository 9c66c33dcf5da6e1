"""Each optimization's own gain, switched on and off, per workload (issue 16's closing report).

For every workload of ``workloads.py`` and a few ``n``, the C build with everything on is timed
next to builds with one optimization off at a time:

- ``InlineFunctions``, ``ApplyShapeConstraints``, ``MergeParallelMatmul``, ``FuseAttention``,
  ``FuseOps`` (with ``FuseTIR``), ``StaticPlanBlockMemory``: the pass left out
  (``rx.get_pipeline("c", skip=[...])``);
- generated GEMM: DispatchLibrary's per-matmul choice off, every float32 matmul on OpenBLAS;
- library dispatch: no BLAS at all, every matmul a generated loop-nest kernel (what a target
  without a BLAS runs);
- multi-version kernels: ``DefaultCPUSchedule(variants=False)``, one version per kernel (the
  generated GEMM's own run-time choice among its skinny/medium/large code is inside one C
  function and stays);
- VM prebinding: ``VirtualMachine(exe, prebind=False)``.

The weights are constants of the build by default (as in ``bench_models.py``; onnxruntime's are
initializers), ``--relax-weights args`` passes them per call. ``--cpu-time`` runs on one thread
and measures this thread's CPU time (``time.thread_time``), which a loaded machine does not
stretch (wall-clock medians there swing by 2-5x). All builds run in this one process
on the same inputs, interleaved round by round, each keeping its best median, so load from
other processes hits all alike; every build's result is checked against NumPy first. The gain
of an optimization is (time with it off) / (time with everything on): above 1 it helps. On a
shared machine differences under about 10% are noise.

    python benchmarks/ablation_report.py [--workloads llama,mlp] [--sizes 1,32] [--rounds 3]
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from timing import median_ms  # noqa: E402
from workloads import WORKLOADS  # noqa: E402

import relaxscript as rx  # noqa: E402
from relaxscript.transform import DefaultCPUSchedule, DispatchLibrary  # noqa: E402
from relaxscript.transform.dispatch_library import DEFAULT_CPU_REGISTRY, LibraryRegistry  # noqa: E402

RTOL, ATOL = 2e-3, 2e-3
SIZES = {"mlp": (1, 16, 128), "norm_softmax": (1, 64, 512), "llama": (1, 32, 128)}


@dataclass(frozen=True)
class Setting:
    """One build: a label, its pass list and the VM's options."""
    label: str
    pipeline: Callable[[], list]
    prebind: bool = True


def _skip(*names: str) -> Callable[[], list]:
    return lambda: rx.get_pipeline("c", skip=names)


def _replace(kind: type, make: Callable[[], object]) -> Callable[[], list]:
    def pipeline():
        passes = rx.get_pipeline("c")
        if not any(isinstance(p, kind) for p in passes):
            raise RuntimeError(f"the C pipeline has no {kind.__name__} to switch")
        return [make() if isinstance(p, kind) else p for p in passes]
    return pipeline


def _openblas_only() -> DispatchLibrary:
    """DispatchLibrary with the per-matmul choice off: every float32 matmul goes to OpenBLAS."""
    return DispatchLibrary(LibraryRegistry([dataclasses.replace(p, choose=None) for p in DEFAULT_CPU_REGISTRY]))


ALL_ON = Setting("all on", lambda: rx.get_pipeline("c"))
SETTINGS = (
    Setting("InlineFunctions", _skip("InlineFunctions")),
    Setting("ApplyShapeConstraints", _skip("ApplyShapeConstraints")),
    Setting("MergeParallelMatmul", _skip("MergeParallelMatmul")),
    Setting("FuseAttention", _skip("FuseAttention")),
    Setting("generated GEMM (OpenBLAS only)", _replace(DispatchLibrary, _openblas_only)),
    Setting("library dispatch (no BLAS)", _skip("DispatchLibrary")),
    Setting("multi-version kernels", _replace(DefaultCPUSchedule, lambda: DefaultCPUSchedule(variants=False))),
    Setting("fusion (FuseOps + FuseTIR)", _skip("FuseOps", "FuseTIR")),
    Setting("static memory plan", _skip("StaticPlanBlockMemory")),
    Setting("VM prebinding", lambda: rx.get_pipeline("c"), prebind=False),
)


def measure(name: str, sizes, settings, bound_weights: bool, rounds: int, budget_s: float,
            clock=time.perf_counter) -> dict:
    """``{(setting label, n): best median ms}`` for one workload."""
    workload = WORKLOADS[name]
    mod = workload.module(bound_weights)
    executables = {}
    runs = {}
    for setting in (ALL_ON, *settings):
        key = id(setting.pipeline)   # one build serves the settings that differ only in the VM
        if key not in executables:
            executables[key] = rx.build(mod, target="c", pipeline=setting.pipeline())
        runs[setting.label] = rx.VirtualMachine(executables[key], prebind=setting.prebind)["main"]
    times = {}
    for n in sizes:
        args = workload.inputs(n)
        want = workload.numpy_fn(*args)
        args = args[:len(workload.activations(n))] if bound_weights else args
        for label, run in runs.items():
            got = run(*args)
            if not np.allclose(got, want, rtol=RTOL, atol=ATOL):
                raise AssertionError(f"{name} n={n} with {label!r} off differs from NumPy "
                                     f"(max abs error {np.abs(got - want).max():.3e})")
        for _ in range(rounds):   # interleaved: load from other processes hits every build alike
            for label, run in runs.items():
                ms = median_ms(lambda: run(*args), budget_s=budget_s, warmup_s=0.05, clock=clock)
                times[label, n] = min(times.get((label, n), float("inf")), ms)
    return times


def markdown_table(cells: list[tuple[str, int]], times: dict, settings) -> str:
    """Rows: everything on (ms), then one row per optimization switched off (gain = off / on)."""
    header = "| optimization switched off | " + " | ".join(f"{w} n={n}" for w, n in cells) + " |"
    lines = [header, "|" + "---|" * (len(cells) + 1),
             "| (everything on, ms) | " + " | ".join(f"{times[w][ALL_ON.label, n]:.3f}" for w, n in cells) + " |"]
    for setting in settings:
        gains = [times[w][setting.label, n] / times[w][ALL_ON.label, n] for w, n in cells]
        lines.append(f"| {setting.label} | " + " | ".join(f"{g:.2f}x" for g in gains) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default=",".join(WORKLOADS), help="comma-separated names")
    parser.add_argument("--sizes", default=None, help="comma-separated n (default: per workload)")
    parser.add_argument("--settings", default=None,
                        help="comma-separated labels of the optimizations to switch off (default: all)")
    parser.add_argument("--relax-weights", choices=("bound", "args"), default="bound")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--budget", type=float, default=0.15, help="seconds per timing")
    parser.add_argument("--cpu-time", action="store_true",
                        help="one thread, timed by its CPU time (steady on a loaded machine)")
    args = parser.parse_args(argv)
    clock = time.perf_counter
    if args.cpu_time:
        os.environ["RELAXSCRIPT_NUM_THREADS"] = "1"   # read by the VM at every call
        clock = time.thread_time
    names = [w.strip() for w in args.workloads.split(",") if w.strip()]
    unknown = [w for w in names if w not in WORKLOADS]
    by_label = {s.label: s for s in SETTINGS}
    chosen = ([by_label.get(label.strip()) for label in args.settings.split(",")] if args.settings
              else list(SETTINGS))
    if unknown or None in chosen:
        print(f"choose workloads from {list(WORKLOADS)} and settings from {list(by_label)}", file=sys.stderr)
        return 2
    times, cells = {}, []
    for name in names:
        sizes = tuple(int(s) for s in args.sizes.split(",")) if args.sizes else SIZES[name]
        print(f"{name}: {WORKLOADS[name].description}", flush=True)
        times[name] = measure(name, sizes, chosen, args.relax_weights == "bound", args.rounds, args.budget, clock)
        cells += [(name, n) for n in sizes]
    timed = "CPU time of one thread" if args.cpu_time else "wall time"
    print(f"\nEach optimization's own gain: time with it off / time with everything on (weights "
          f"{args.relax_weights}; {timed}; best of {args.rounds} interleaved medians)\n")
    print(markdown_table(cells, times, chosen))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
