"""Prefill quantized GEMM on the C backend: the scheduled loop nest (weight tiles) and the
generated kernel (``backends/c/quantized_gemm.py``) side by side in one run, per kernel ms
and GFLOP/s at several token counts, on SmolLM2-135M's projection shapes and its fused
epilogues, next to NumPy's OpenBLAS sgemm on a float32 weight of the same shape.

Timings on a shared machine are noisy; compare numbers from one run.
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


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, nargs="+", default=[16, 64, 256])
    parser.add_argument("--budget", type=float, default=0.5, help="seconds per measurement")
    args = parser.parse_args(argv)
    print(f"load average {os.getloadavg()[0]:.1f}; NumPy's OpenBLAS threads: "
          f"{os.environ.get('OPENBLAS_NUM_THREADS')}")
    start = time.perf_counter()
    print(format_table(["kernel", "in x out", "n", "loop nest ms", "GFLOP/s", "generated ms", "GFLOP/s",
                        "speedup", "sgemm GFLOP/s"], rows_for(args.tokens, args.budget)))
    print(f"\n({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
