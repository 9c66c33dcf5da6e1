"""The three benchmark workloads on every target beside C, and NVRTC's compile time of the demo decoder.

Each workload is built once per target (C; OpenCL when pyopencl is installed) and run for every
``n``: kernel launches per call (counted from the executable's launch plans), median ms, and
OpenCL / C. Informative only: PoCL runs OpenCL on the CPU, and the GPU schedules are written for a
GPU (thousands of threads, shared memory), so the ratio says nothing about a real GPU. Every
result is checked against NumPy before it is timed. With NVRTC installed, the demo's decoder is
built for CUDA (PTX for every kernel, no GPU needed) and NVRTC's share of the build is reported.

    python benchmarks/bench_targets.py [--workloads mlp,norm_softmax,llama] [--sizes 1,16] [--targets c,opencl]
"""
from __future__ import annotations

import argparse
import functools
import importlib.util
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))

from timing import format_table, median_ms  # noqa: E402
from workloads import WORKLOADS  # noqa: E402

import relaxscript as rx  # noqa: E402

RTOL, ATOL = 2e-3, 2e-3
DEFAULT_SIZES = {"mlp": (1, 16, 128), "norm_softmax": (1, 64, 512), "llama": (1, 32, 128)}


def kernel_count(exe) -> tuple[int, int, int]:
    """(kernels the VM calls, device launches of one call (a GPU kernel may be several launches),
    library calls such as OpenBLAS matmuls)."""
    from relaxscript.vm.instructions import CallLibrary
    library = sum(isinstance(ins, CallLibrary) for f in exe.functions.values() for ins in f.code)
    image = exe.kernels
    if image is None:
        return 0, 0, library
    plans = getattr(image, "plans", None)
    names = image.kernel_names()
    launches = sum(len(plans[n].launches) for n in names) if plans else len(names)
    return len(names), launches, library


def run_target(workload, target: str, sizes, budget_s: float) -> dict:
    start = time.perf_counter()
    exe = rx.build(rx.from_source(workload.source), target=target)
    build_s = time.perf_counter() - start
    main = rx.VirtualMachine(exe)["main"]
    out = {"build_s": build_s, "kernels": kernel_count(exe), "ms": {}}
    for n in sizes:
        args = workload.inputs(n)
        got, want = main(*args), workload.numpy_fn(*args)
        if got.shape != want.shape or not np.allclose(got, want, rtol=RTOL, atol=ATOL):
            raise AssertionError(f"{workload.name} on {target}, n={n}: differs from NumPy "
                                 f"(max abs error {np.abs(got - want).max():.3e})")
        out["ms"][n] = median_ms(functools.partial(main, *args), min_runs=3, budget_s=budget_s, warmup_s=0.1)
    return out


def nvrtc_decoder_compile() -> str:
    if importlib.util.find_spec("cuda") is None:
        return "NVRTC: cuda-bindings not installed, skipped"
    from examples.llama_decoder import LlamaConfig, llama_source
    mod = rx.from_source(llama_source(LlamaConfig()))
    start = time.perf_counter()
    exe = rx.build(mod, target="cuda")
    total = time.perf_counter() - start
    image = exe.kernels
    return (f"demo decoder for CUDA (sm_80): build {total:.2f} s, of which NVRTC {image.compile_seconds:.2f} s "
            f"for {len(image.kernel_names())} kernels ({len(image.ptx) // 1024} KiB of PTX)")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--sizes", default=None, help="comma-separated n (default: per workload)")
    parser.add_argument("--targets", default="c,opencl")
    parser.add_argument("--budget", type=float, default=0.5, help="seconds of timing per cell")
    args = parser.parse_args(argv)
    targets = [t for t in args.targets.split(",") if t]
    if "opencl" in targets and importlib.util.find_spec("pyopencl") is None:
        print("pyopencl is not installed: the opencl column is skipped")
        targets.remove("opencl")
    rows, counts = [], []
    for name in args.workloads.split(","):
        workload = WORKLOADS[name]
        sizes = tuple(int(s) for s in args.sizes.split(",")) if args.sizes else DEFAULT_SIZES[name]
        results = {}
        for target in targets:
            try:
                results[target] = run_target(workload, target, sizes, args.budget)
            except AssertionError as err:
                print(f"CORRECTNESS FAILURE: {err}", file=sys.stderr)
                return 1
            kernels, launches, library = results[target]["kernels"]
            counts.append([name, target, str(kernels), str(launches), str(library),
                           f"{results[target]['build_s']:.2f}"])
        for n in sizes:
            ms = [results[t]["ms"][n] for t in targets]
            ratio = (f"{results['opencl']['ms'][n] / results['c']['ms'][n]:.2f}x"
                     if {"c", "opencl"} <= set(targets) else "-")
            rows.append([name, str(n), *[f"{m:.3f}" for m in ms], ratio])
            print(f"  {name:<13} n={n:<5} " + "   ".join(f"{t} {m:9.3f} ms" for t, m in zip(targets, ms)),
                  flush=True)
    print("\n" + format_table(["workload", "target", "kernels", "launches", "library calls", "build s"], counts))
    print("\n" + format_table(["workload", "n", *[f"{t} ms" for t in targets], "opencl/c"], rows))
    print("(OpenCL runs on PoCL's CPU device: informative only)")
    print("\n" + nvrtc_decoder_compile())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
