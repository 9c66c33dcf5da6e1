"""Prefill quantized GEMM on the C backend: the scheduled loop nest (weight tiles) and the
generated kernel (``backends/c/quantized_gemm.py``) side by side in one run, per kernel ms
and GFLOP/s at several token counts, on SmolLM2-135M's projection shapes and its fused
epilogues, next to NumPy's OpenBLAS sgemm on a float32 weight of the same shape.

Timings on a shared machine are noisy; compare numbers from one run.

``--baseline SRC`` instead compares two emitters of the generated kernel: ``SRC``'s
``backends/c/quantized_gemm.py`` (e.g. ``/work/main/src``) and this tree's, the same modules as
the engine runs them (q8_0-rounded activations, float16 scales), weights cycled over ``--copies``
copies (from L3, as in a model), calls alternating in one process; ``--clock cpu`` (the default
there) times this thread's CPU time, for one thread (``RELAXSCRIPT_NUM_THREADS=1``).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "2")   # same threads as ours; set before NumPy loads

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

import relaxscript as rx  # noqa: E402
from bench_quant import EPILOGUE_SHAPES, SHAPES, linear_module  # noqa: E402
from relaxscript.quantization import quantize_numpy  # noqa: E402
from timing import format_table, median_ms  # noqa: E402

# the plain projections (q, k/v) and the fused ones (gate+silu, up*gate, residual adds)
KERNELS = [(name, k, n, fmt, (), ()) for name, k, n, fmt in SHAPES[:2]] + \
    [tuple(shape[:4]) + (tuple(shape[4]), tuple(shape[5])) for shape in EPILOGUE_SHAPES]


def build(fmt: str, k: int, n: int, extra: tuple, epilogue: tuple, generated: bool):
    previous = os.environ.get("RELAXSCRIPT_GENERATED_KERNELS")
    os.environ["RELAXSCRIPT_GENERATED_KERNELS"] = "1" if generated else "0"
    try:
        built = rx.build(linear_module(fmt, k, n, '"n"', extra, epilogue), target="c")
    finally:
        if previous is None:
            del os.environ["RELAXSCRIPT_GENERATED_KERNELS"]
        else:
            os.environ["RELAXSCRIPT_GENERATED_KERNELS"] = previous
    if generated != (" gemm n x " in built.c_library.source):
        raise SystemExit(f"{fmt} {k}x{n}: expected the {'generated' if generated else 'loop nest'} kernel")
    return rx.VirtualMachine(built)["main"]


def rows_for(tokens: list[int], budget: float) -> list[list[str]]:
    rng = np.random.default_rng(1)
    rows = []
    for name, k, n, fmt, extra, epilogue in KERNELS:
        runs = [build(fmt, k, n, extra, epilogue, generated) for generated in (False, True)]
        tensors = quantize_numpy(rng.standard_normal((k, n)).astype(np.float32), fmt, "float32")
        dense = rng.standard_normal((k, n)).astype(np.float32)
        for count in tokens:
            x = rng.standard_normal((count, k)).astype(np.float32)
            others = [rng.standard_normal((count, n)).astype(np.float32) for _ in extra]
            old, new = (median_ms(lambda: run(x, *tensors, *others), budget_s=budget) for run in runs)
            blas = median_ms(lambda: x @ dense, budget_s=budget)
            gflop = 2 * count * k * n / 1e9
            rows.append([name, f"{k}x{n}", str(count), f"{old:.3f}", f"{gflop / old * 1e3:.1f}",
                         f"{new:.3f}", f"{gflop / new * 1e3:.1f}", f"{old / new:.1f}x",
                         f"{gflop / blas * 1e3:.1f}"])
    return rows


def baseline_module(k: int, n: int, extra: tuple, epilogue: tuple):
    """``x @ dequantize(q4_1 with float16 scales)`` and its epilogue, x rounded to q8_0 blocks first."""
    from relaxscript.transform.quantize_activations import QuantizeActivations
    others = "".join(f', {name}: R.Tensor(("n", {n}), "float32")' for name in extra)
    stages = "".join(f"\n        {line}" for line in epilogue)
    return QuantizeActivations()(rx.IRModule({"main": rx.from_source(f"""
from relaxscript import R
@R.function
def main(x: R.Tensor(("n", {k}), "float32"), qd: R.Tensor(({k // 2}, {n}), "uint8"),
         qs: R.Tensor(({k // 32}, {n}), "float16"), qm: R.Tensor(({k // 32}, {n}), "float16"){others}):
    with R.dataflow():
        y = R.matmul(x, R.dequantize(qd, qs, qm, format="q4_1")){stages}
        R.output(y)
    return y
""")}))


def compare_rows(baseline: str, tokens: list[int], rounds: int, copies: int, clock) -> list[list[str]]:
    import importlib.util
    import backends.c.codegen as codegen
    spec = importlib.util.spec_from_file_location("backends.c.quantized_gemm_baseline",
                                                  str(Path(baseline) / "backends" / "c" / "quantized_gemm.py"))
    other = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = other
    spec.loader.exec_module(other)
    ours = codegen.gemm_source
    rng = np.random.default_rng(1)
    rows, totals = [], {}
    for name, k, n, _, extra, epilogue in [("attn_q+k+v", 576, 960, "q4_1", (), ())] + KERNELS[2:]:
        runs = []
        for source in (other.gemm_source, ours):
            codegen.gemm_source = source
            try:
                runs.append(rx.VirtualMachine(rx.build(baseline_module(k, n, extra, epilogue), target="c"))["main"])
            finally:
                codegen.gemm_source = ours
        weights = [quantize_numpy(rng.standard_normal((k, n)).astype(np.float32), "q4_1", "float16")
                   for _ in range(copies)]
        for count in tokens:
            x = rng.standard_normal((count, k)).astype(np.float32)
            others = [rng.standard_normal((count, n)).astype(np.float32) for _ in extra]
            times, turn = [[], []], iter(range(1 << 62))
            for r in range(rounds):
                for side in ((0, 1) if r % 2 == 0 else (1, 0)):
                    best = float("inf")
                    for _ in range(3):
                        start = clock()
                        runs[side](x, *weights[next(turn) % copies], *others)
                        best = min(best, clock() - start)
                    times[side].append(best * 1e3)
            old, new = (float(np.median(t)) for t in times)
            for side, ms in enumerate((old, new)):
                totals[(count, side)] = totals.get((count, side), 0.0) + ms
            gflop = 2 * count * k * n / 1e9
            rows.append([name, f"{k}x{n}", str(count), f"{old:.3f}", f"{gflop / old * 1e3:.1f}", f"{new:.3f}",
                         f"{gflop / new * 1e3:.1f}", f"{old / new:.2f}x"])
    for count in tokens:
        old, new = totals[(count, 0)], totals[(count, 1)]
        rows.append(["all of the above", "", str(count), f"{old:.3f}", "", f"{new:.3f}", "", f"{old / new:.2f}x"])
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, nargs="+", default=[16, 64, 256])
    parser.add_argument("--budget", type=float, default=0.5, help="seconds per measurement")
    parser.add_argument("--baseline", help="compare this tree's emitter with SRC's (a src folder)")
    parser.add_argument("--rounds", type=int, default=9, help="--baseline: rounds, each the best of 3 calls a side")
    parser.add_argument("--copies", type=int, default=30, help="--baseline: weight copies cycled through")
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu", help="--baseline: what is timed")
    args = parser.parse_args(argv)
    if args.baseline:
        clock = time.thread_time if args.clock == "cpu" else time.perf_counter
        print(f"load average {os.getloadavg()[0]:.1f}; threads {os.environ.get('RELAXSCRIPT_NUM_THREADS', 'default')}; "
              f"clock {args.clock}; medians of {args.rounds} rounds")
        print(format_table(["kernel", "in x out", "n", "baseline ms", "GFLOP/s", "this tree ms", "GFLOP/s",
                            "speedup"], compare_rows(args.baseline, args.tokens, args.rounds, args.copies, clock)))
        return
    print(f"load average {os.getloadavg()[0]:.1f}; NumPy's OpenBLAS threads: "
          f"{os.environ.get('OPENBLAS_NUM_THREADS')}")
    start = time.perf_counter()
    print(format_table(["kernel", "in x out", "n", "loop nest ms", "GFLOP/s", "generated ms", "GFLOP/s",
                        "speedup", "sgemm GFLOP/s"], rows_for(args.tokens, args.budget)))
    print(f"\n({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
