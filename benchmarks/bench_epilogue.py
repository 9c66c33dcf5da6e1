"""The GEMM epilogue fusion switched off and on, in one process (interleaved A/B), beside onnxruntime.

Both relaxscript builds come from the same module and pipeline; "unfused" runs DispatchLibrary with the
default registry minus its epilogue patterns (the activation and the residual add then run as kernels of
their own). One thread, each call timed in the thread's CPU time (a shared machine), rounds interleaved,
each cell the median over rounds of the best of ``--calls`` calls; the order alternates between rounds.

    python benchmarks/bench_epilogue.py --workloads mlp,llama --sizes 1,16,32,128,512 --rounds 11
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.update({"RELAXSCRIPT_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"})
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

import peers  # noqa: E402
import workloads  # noqa: E402


def builds(workload):
    import relaxscript as rx
    from relaxscript.transform import DispatchLibrary
    from relaxscript.transform import dispatch_library as dl
    unfused_registry = dl.LibraryRegistry([p for p in dl.DEFAULT_CPU_REGISTRY if p not in dl.EPILOGUE_PATTERNS])
    out = {}
    for label, registry in (("unfused", unfused_registry), ("fused", None)):
        pipeline = [DispatchLibrary(registry) if p.name == "DispatchLibrary" else p for p in rx.get_pipeline("c")]
        vm = rx.VirtualMachine(rx.build(workload.module(bound_weights=True), target="c", pipeline=pipeline))
        out[label] = vm["main"]
    return out


def best_cpu_ms(fn, args, calls: int) -> float:
    best = float("inf")
    for _ in range(calls):
        start = time.thread_time()
        fn(*args)
        best = min(best, time.thread_time() - start)
    return best * 1e3


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default="mlp,llama")
    parser.add_argument("--sizes", default="1,16,32,128,512")
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--calls", type=int, default=3)
    args = parser.parse_args(argv)
    peers.THREADS = 1
    torch, why = peers.import_torch()
    if torch is None:
        raise SystemExit(f"onnxruntime needs torch for its model: {why}")
    for name in args.workloads.split(","):
        w = workloads.WORKLOADS[name]
        fns = builds(w)
        session, names = peers.onnxruntime_session(torch, w, threads=1)
        fns["onnxruntime"] = lambda *a, _s=session, _n=names: _s.run(None, dict(zip(_n, a)))[0]
        sizes = [int(s) for s in args.sizes.split(",")]
        times = {(n, label): [] for n in sizes for label in fns}
        inputs = {n: w.activations(n) for n in sizes}
        for n in sizes:
            want = w.numpy_fn(*inputs[n], *w.weights())
            for fn in fns.values():
                np.testing.assert_allclose(np.asarray(fn(*inputs[n])), want, rtol=2e-3, atol=2e-3)
        for round_ in range(args.rounds):
            for n in sizes:   # the order alternates between rounds (what ran just before warms caches)
                for label, fn in (list(fns.items()) if round_ % 2 == 0 else list(fns.items())[::-1]):
                    times[(n, label)].append(best_cpu_ms(fn, inputs[n], args.calls))
        print(f"{name}: n | unfused ms | fused ms | unfused/fused | unfused/ORT | fused/ORT  (median of "
              f"{args.rounds}; min ratio fused/ORT)")
        for n in sizes:
            med = {label: statistics.median(times[(n, label)]) for label in fns}
            ratios = [f / o for f, o in zip(times[(n, "fused")], times[(n, "onnxruntime")])]
            print(f"  {n:4d} | {med['unfused']:.3f} | {med['fused']:.3f} | {med['unfused'] / med['fused']:.3f} | "
                  f"{med['unfused'] / med['onnxruntime']:.3f} | {med['fused'] / med['onnxruntime']:.3f} "
                  f"(min {min(ratios):.3f}, ORT {med['onnxruntime']:.3f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
