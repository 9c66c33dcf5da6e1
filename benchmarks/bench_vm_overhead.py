"""VM per-instruction overhead: a chain of 100 tiny elementwise kernels.

Reports microseconds per kernel call through the VM (checks, allocation or
planned storage, pointer filling, the ctypes call) next to calling the same
compiled kernel directly through ctypes with prebuilt arguments, and the
overhead of an empty function call. Fusion is left out of the pipeline so
that each op stays its own kernel.

    python benchmarks/bench_vm_overhead.py [--length 100] [--repeat 200]
"""
from __future__ import annotations

import argparse
import ctypes
import os
import sys
import time
from pathlib import Path

import numpy as np

# One OpenMP thread: a 4-element kernel is all fork/join otherwise, which would
# hide the VM's own cost (set OMP_NUM_THREADS to override).
os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

import relaxscript as rx  # noqa: E402
from tests.relaxscript.vm_modules import chain_module  # noqa: E402


def best_of(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(repeat):
            fn()
        best = min(best, (time.perf_counter() - start) / repeat)
    return best


def unfused_pipeline(plan_memory: bool):
    skip = {"FuseOps", "FuseTIR"} | (set() if plan_memory else {"StaticPlanBlockMemory"})
    return [p for p in rx.get_pipeline("c") if type(p).__name__ not in skip]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--length", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    x = np.full(4, 0.5, "float32")

    rows = []
    for label, dim, plan in [("static (4,), planned storage", 4, True),
                             ("static (4,), fresh allocations", 4, False),
                             ("symbolic (n,), planned storage", "n", True)]:
        exe = rx.build(chain_module(args.length, dim), target="c", pipeline=unfused_pipeline(plan))
        vm = rx.VirtualMachine(exe)
        run = vm["main"]
        run(x)
        kernels = sum(type(i).__name__ == "CallKernel" for i in exe.functions["main"].code)
        seconds = best_of(lambda: run(x), args.repeat)
        rows.append((label, kernels, seconds, exe))

    # the same kernel called straight through ctypes, arguments prebuilt once
    exe = rows[0][3]
    lib = ctypes.CDLL(exe.c_library.path)
    cfunc = getattr(lib, next(iter(exe.c_library.symbols.values())))
    cfunc.argtypes, cfunc.restype = None, ctypes.c_int32
    a, b = np.ones(4, "float32"), np.ones(4, "float32")
    bufs = (ctypes.c_void_p * 3)(a.ctypes.data, a.ctypes.data, b.ctypes.data)
    syms = ctypes.c_void_p(None)
    n = args.length

    def direct():
        for _ in range(n):
            cfunc(bufs, syms)
    direct_s = best_of(direct, args.repeat) / n

    empty = rx.VirtualMachine(rx.build(rx.from_source(
        "from relaxscript import R\n@R.ir_module\nclass M:\n    @R.function\n"
        "    def main(x: R.Tensor((4,), 'float32')):\n        return x\n"), target="c"))["main"]
    empty_s = best_of(lambda: empty(x), args.repeat * 10)

    print(f"chain of {args.length} elementwise ops, float32[4]; ctypes direct call: "
          f"{direct_s * 1e6:.2f} us/kernel; empty VM function call: {empty_s * 1e6:.2f} us")
    for label, kernels, seconds, _ in rows:
        per = seconds / max(1, kernels)
        print(f"  {label:<34} {kernels:4d} kernels  {seconds * 1e6:9.1f} us/call  "
              f"{per * 1e6:6.2f} us/kernel  (VM overhead {(per - direct_s) * 1e6:5.2f} us/kernel)")


if __name__ == "__main__":
    main()
