"""C time of unscheduled vs default-scheduled kernels (and BLAS sgemm), against NumPy.

Kernels: add+gelu on (n, 4096), softmax over (n, 4096), layer_norm over
(n, 4096), and (n, 1024) x (1024, 4096) matmul (GEMM schedule and
OpenBLAS/NumPy sgemm), for n in 1, 64, 512. Run:
``python benchmarks/bench_cpu_schedules.py [--sizes 1 64 512] [--quick]``.
The unscheduled matmul is skipped for n=512 unless ``--all`` (it takes seconds).
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
for _path in (ROOT, os.path.join(ROOT, "src")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from backends import blas  # noqa: E402
from backends.target import build_kernels  # noqa: E402
from benchmarks.timing import format_table, median_ms  # noqa: E402
from tensorir.schedule_rules import default_cpu_schedule  # noqa: E402
from tests.tensorir.test_schedule_rules_kernels import (add_gelu_func, add_gelu_numpy,  # noqa: E402
                                                        layer_norm_func, layer_norm_numpy,
                                                        matmul_func, softmax_func, softmax_numpy)

WIDTH, K = 4096, 1024


def _workloads():
    return [
        ("add+gelu", add_gelu_func(WIDTH), lambda rng, n: [rng.standard_normal((n, WIDTH)),
                                                          rng.standard_normal((n, WIDTH))], add_gelu_numpy),
        ("softmax", softmax_func(WIDTH), lambda rng, n: [rng.standard_normal((n, WIDTH))], softmax_numpy),
        ("layer_norm", layer_norm_func(WIDTH), lambda rng, n: [rng.standard_normal((n, WIDTH)),
                                                              rng.standard_normal(WIDTH),
                                                              rng.standard_normal(WIDTH)], layer_norm_numpy),
        ("matmul", matmul_func(K, WIDTH), lambda rng, n: [rng.standard_normal((n, K)),
                                                         rng.standard_normal((K, WIDTH))],
         lambda a, b: a @ b),
    ]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 64, 512])
    parser.add_argument("--all", action="store_true", help="also time the slow unscheduled matmul at n>=512")
    parser.add_argument("--budget", type=float, default=1.0, help="seconds per measurement")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    rows = []
    for name, func, make_args, reference in _workloads():
        plain = build_kernels("c", func)[func.name]
        scheduled = build_kernels("c", default_cpu_schedule(func))[func.name]
        for n in args.sizes:
            inputs = [a.astype(np.float32) for a in make_args(rng, n)]
            want = np.asarray(reference(*inputs), dtype=np.float32)
            out = np.zeros_like(want)
            scheduled(*inputs, out)
            np.testing.assert_allclose(out, want, rtol=1e-3, atol=1e-3)
            t_numpy = median_ms(lambda: reference(*inputs), budget_s=args.budget)
            slow = name == "matmul" and n >= 512 and not args.all
            t_plain = float("nan") if slow else median_ms(lambda: plain(*inputs, out), max_runs=10,
                                                          budget_s=args.budget)
            t_sched = median_ms(lambda: scheduled(*inputs, out), budget_s=args.budget)
            row = [f"{name} n={n}", f"{t_plain:.3f}", f"{t_sched:.3f}", f"{t_numpy:.3f}", "-"]
            if name == "matmul":
                row[4] = f"{median_ms(lambda: blas.sgemm(*inputs, out), budget_s=args.budget):.3f}"
            rows.append(row)
            print(format_table(["kernel", "C unscheduled ms", "C scheduled ms", "numpy ms",
                                f"sgemm ({blas.backend()}) ms"], rows[-1:]).splitlines()[-1], flush=True)
    print()
    print(f"threads: OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'default')}, "
          f"cpus={os.cpu_count()}, sgemm backend: {blas.backend()}")
    print(format_table(["kernel", "C unscheduled ms", "C scheduled ms", "numpy ms",
                        f"sgemm ({blas.backend()}) ms"], rows))


if __name__ == "__main__":
    main()
