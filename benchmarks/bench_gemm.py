"""Generated fp32 GEMM (backends/c/gemm) against OpenBLAS, side by side in one process.

Both are called through their native VM entries (``rs_gen_sgemm[_nt]_native`` and the OpenBLAS
shim's ``rs_sgemm[_nt]_native``, the calls a C build's VM makes) with the same operands and
threads, interleaved shape by shape and round by round, keeping each side's best median, so
load from other processes hits both alike. Shapes are the matmuls of the benchmark workloads
(workloads.py: the MLP's 1024->4096->1024, the Llama prefill's merged QKV, output, merged
gate/up and down projections) at several row counts ``m`` (the workloads' symbolic ``n``),
plus square products for the large-``m`` target. Prints GFLOP/s, the generated kernel's
variant, and generated/OpenBLAS; for weights stored (in, out) also the generated kernel on the
weight packed once (``rs_gen_sgemm_prepacked_native``, what a bound weight runs). On a shared
machine the numbers are noisy.

    python benchmarks/bench_gemm.py [--rows 1 4 16 64 128 512 1024] [--threads 2] [--cold]
    python benchmarks/bench_gemm.py --workloads [--sizes 1 4 8 16 32]

``--cold`` rotates each call among copies of the weight that together exceed twice the L3, so
every call streams it from memory (the decode situation); without it the weight stays in cache
between calls. The load average is printed before and after: other processes slow both sides.

``--workloads`` builds each workload of workloads.py (weights bound) twice, with the default
DispatchLibrary (its per-matmul choice, gemm_choice.py) and with every float32 matmul sent to
OpenBLAS, prints the choices with their reasons, and times both side by side.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from timing import format_table, median_ms  # noqa: E402

import numpy as np  # noqa: E402

from backends.blas import native_address as blas_address  # noqa: E402
from backends.c.gemm import library as gemm_library  # noqa: E402
from backends.c.gemm.machine import machine_params  # noqa: E402
from backends.c.gemm.params import gemm_params  # noqa: E402
from backends.c.gemm.prepacked import pack_weight  # noqa: E402

# (label, k, n, weight stored (out, in) and read transposed)
SHAPES = [
    ("mlp w1 1024->4096", 1024, 4096, False),
    ("mlp w2 4096->1024", 4096, 1024, False),
    ("llama qkv 512->1536", 512, 1536, False),
    ("llama wo 512->512", 512, 512, False),
    ("llama gate/up 512->2816", 512, 2816, False),
    ("llama down 1408->512", 1408, 512, False),
    ("nn.Linear 576->1536 (w.T)", 576, 1536, True),
]
SQUARE = [("square 1024", 1024, 1024, False), ("square 2048", 2048, 2048, False)]

_CALL = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)


def native(address: int):
    return _CALL(address)


def thread_cpu_ms(fn, budget_s: float = 0.1) -> float:
    """The calling thread's CPU time per call, in ms (best of three batches): with one thread it
    leaves out the time other processes hold the core, which a loaded machine adds at random to
    wall times (their cache traffic still counts)."""
    fn()
    calls, start = 0, time.thread_time()
    while calls < 3 or time.thread_time() - start < budget_s:
        fn()
        calls += 1
    best = float("inf")
    for _ in range(3):
        start = time.thread_time()
        for _ in range(calls):
            fn()
        best = min(best, (time.thread_time() - start) / calls)
    return best * 1e3


CPU_TIME = False   # set by --cpu-time


def entry_operands(a, b, c, prepacked: bool = False):
    """A native entry's operand array: {a, b, c}, or for the prepacked entries {a, packed, W, c}
    with no unpacked W (NULL), so the panels serve every row count."""
    pointers = (a.ctypes.data, b.ctypes.data, None, c.ctypes.data) if prepacked else \
        (a.ctypes.data, b.ctypes.data, c.ctypes.data)
    return (ctypes.c_void_p * len(pointers))(*pointers)


def time_call(fn, a, weights, c, m, n, k, threads, prepacked: bool = False) -> float:
    """The native entry's median, each call on the next of ``weights`` (one, or copies to keep
    the weight out of cache); params {m, n, k, threads, policy 0: generated code only} (the
    OpenBLAS shim reads the first four)."""
    operands = [entry_operands(a, b, c, prepacked) for b in weights]
    params = (ctypes.c_int64 * 5)(m, n, k, threads, 0)
    turn = iter(range(1 << 62))

    def call():
        fn(operands[next(turn) % len(operands)], params)
    if CPU_TIME:
        return thread_cpu_ms(call)
    return median_ms(call, min_runs=5, max_runs=200, budget_s=0.3, warmup_s=0.05)


def openblas_only_pipeline() -> list:
    """The default C pipeline with DispatchLibrary's per-matmul choice switched off (OpenBLAS, no fused epilogues)."""
    import dataclasses

    import relaxscript as rx
    from relaxscript.transform import DispatchLibrary
    from relaxscript.transform.dispatch_library import DEFAULT_CPU_REGISTRY, EPILOGUE_PATTERNS, LibraryRegistry
    # the fused-epilogue patterns only exist through the generated entry (OpenBLAS has no epilogue):
    # left out, the activation and residual stay their own kernels after OpenBLAS's product
    registry = LibraryRegistry([dataclasses.replace(p, choose=None) for p in DEFAULT_CPU_REGISTRY
                                if p not in EPILOGUE_PATTERNS])
    return [DispatchLibrary(registry) if isinstance(p, DispatchLibrary) else p for p in rx.get_pipeline("c")]


def run_workloads(sizes, rounds: int, budget: float) -> None:
    import relaxscript as rx
    from bench_merge_matmul import bound_module
    from relaxscript.transform import InlineFunctions, MergeParallelMatmul
    from relaxscript.transform.dispatch_library import gemm_dispatch_report
    from workloads import WORKLOADS
    rows = []
    widths = {"mlp": (4096, 1024), "llama": (1536, 512, 2816)}   # the products' output widths
    for name in ("mlp", "llama"):
        workload = WORKLOADS[name]
        mod, activations = bound_module(workload)
        choices = gemm_dispatch_report(MergeParallelMatmul()(InlineFunctions()(mod)))
        for choice in choices:
            print(f"{name}: {choice.function}.{choice.binding} rows={choice.rows} -> {choice.library}: {choice.reason}")
        prepacked = any("_prepacked" in choice.library for choice in choices)
        chosen = rx.VirtualMachine(rx.build(mod))["main"]
        blas_only = rx.VirtualMachine(rx.build(mod, pipeline=openblas_only_pipeline()))["main"]
        for n in sizes:
            inputs = workload.inputs(n)[:activations]
            np.testing.assert_allclose(chosen(*inputs), blas_only(*inputs), rtol=1e-3, atol=1e-3)
            off = on = float("inf")
            for _ in range(rounds):   # alternate, keep each side's best median: load comes and goes
                off = min(off, median_ms(lambda: blas_only(*inputs), budget_s=budget, warmup_s=0.1))
                on = min(on, median_ms(lambda: chosen(*inputs), budget_s=budget, warmup_s=0.1))
            if prepacked:   # bound weights: the prepacked entries' run-time choice
                variant = gemm_library.prepacked_variant(n, gemm_library.WITH_BLAS)
            else:
                variant = ",".join(sorted({gemm_library.variant(n, 0, policy=gemm_library.WITH_BLAS, n=w)
                                           for w in widths[name]}))
            rows.append([name, str(n), variant,
                         f"{off:.3f}", f"{on:.3f}", f"{off / on:.2f}x"])
            print("  ".join(rows[-1]), flush=True)
    print(format_table(["workload", "n", "variant", "openblas only ms", "with choice ms", "gain"], rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", action="store_true", help="whole workloads, choice on and off")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 4, 8, 16, 32])
    parser.add_argument("--budget", type=float, default=0.3)
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 4, 16, 17, 64, 128, 512, 1024])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--square", action="store_true", help="also square 1024 and 2048 at m = their size")
    parser.add_argument("--cold", action="store_true", help="weights streamed from memory (copies over 2x L3)")
    parser.add_argument("--cpu-time", action="store_true",
                        help="time by the thread's CPU time (needs --threads 1): steadier on a loaded machine")
    args = parser.parse_args()
    if args.workloads:
        run_workloads(args.sizes, args.rounds, args.budget)
        return
    if args.cpu_time and args.threads != 1:
        sys.exit("--cpu-time measures the calling thread only: use it with --threads 1")
    global CPU_TIME
    CPU_TIME = args.cpu_time
    params = gemm_params()
    print(f"generated kernel: {params.describe()}; load average {os.getloadavg()[0]:.2f}")
    l3_bytes = machine_params().l3_bytes
    blas_nn, blas_nt = blas_address("rs_sgemm_native"), blas_address("rs_sgemm_nt_native")
    if blas_nn is None:
        sys.exit("OpenBLAS is not available: nothing to compare against")
    prepacked = native(gemm_library.native_address("rs_gen_sgemm_prepacked_native"))
    peers = {False: (native(gemm_library.native_address("rs_gen_sgemm_native")), native(blas_nn)),
             True: (native(gemm_library.native_address("rs_gen_sgemm_nt_native")), native(blas_nt))}
    cases = [(label, m, k, n, nt) for label, k, n, nt in SHAPES for m in args.rows]
    if args.square:
        cases += [(label, k, k, n, nt) for label, k, n, nt in SQUARE]
    rng = np.random.default_rng(0)
    rows = []
    for label, m, k, n, nt in cases:
        a = rng.standard_normal((m, k), dtype=np.float32)
        copies = -(-2 * l3_bytes // (4 * k * n)) if args.cold else 1
        weights = [rng.standard_normal((n, k) if nt else (k, n), dtype=np.float32) for _ in range(copies)]
        b = weights[-1]
        c_gen, c_blas = np.empty((m, n), np.float32), np.empty((m, n), np.float32)
        generated, blas = peers[nt]
        packed = None if nt else [pack_weight(w, params.nr) for w in weights]
        c_pre = np.empty((m, n), np.float32)
        best_gen = best_blas = best_pre = float("inf")
        for _ in range(args.rounds):
            best_gen = min(best_gen, time_call(generated, a, weights, c_gen, m, n, k, args.threads))
            best_blas = min(best_blas, time_call(blas, a, weights, c_blas, m, n, k, args.threads))
            if packed is not None:
                best_pre = min(best_pre, time_call(prepacked, a, packed, c_pre, m, n, k, args.threads, prepacked=True))
        for fn, c in ((generated, c_gen), (blas, c_blas)):   # both on the same weight for the check
            fn((ctypes.c_void_p * 3)(a.ctypes.data, b.ctypes.data, c.ctypes.data),
               (ctypes.c_int64 * 5)(m, n, k, args.threads, 0))
        np.testing.assert_allclose(c_gen, c_blas, rtol=1e-3, atol=1e-3 * np.sqrt(k))
        if packed is not None:
            prepacked(entry_operands(a, packed[-1], c_pre, prepacked=True),
                      (ctypes.c_int64 * 5)(m, n, k, args.threads, 0))
            np.testing.assert_allclose(c_pre, c_blas, rtol=1e-3, atol=1e-3 * np.sqrt(k))
        gflop = 2.0 * m * n * k / 1e9
        rows.append([label, str(m), gemm_library.variant(m, args.threads, n=n), f"{best_gen:.3f}",
                     f"{best_blas:.3f}", f"{gflop / best_gen * 1e3:.1f}", f"{gflop / best_blas * 1e3:.1f}",
                     f"{best_blas / best_gen:.2f}",
                     "-" if packed is None else f"{best_pre:.3f}",
                     "-" if packed is None else f"{best_blas / best_pre:.2f}"])
        print("  ".join(rows[-1]), flush=True)
    print(f"\n{'cold' if args.cold else 'warm'} weights, {args.threads} threads, "
          f"{'thread CPU time' if args.cpu_time else 'wall time'}; load average now "
          f"{os.getloadavg()[0]:.2f}")
    print(format_table(["matmul", "m", "variant", "generated ms", "openblas ms", "gen GFLOP/s",
                        "blas GFLOP/s", "gen speedup", "prepacked ms", "prepacked speedup"], rows))


if __name__ == "__main__":
    main()
