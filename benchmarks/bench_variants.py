"""Multi-version kernels (issue 16 item 5): the same module built with and without the default
schedules' variants, side by side, at and around each condition's boundary.

Workloads, on the C target's pipeline without library dispatch (what a target without a BLAS
runs, where every matmul is a generated kernel):
  linear  y = gelu(x @ W.T + b), W (1536, 576): nn.Linear's layout
  matmul  y = relu(x @ W), W (576, 1536)
  mlp     the MLP of workloads.py (x @ w1 + b1, gelu_tanh, @ w2 + b2 + x; 1024 -> 4096 -> 1024)
Builds per workload: "single" (DefaultCPUSchedule(variants=False)), "one_row" (an n == 1 GEMV
version only), "default" (n == 1, then n <= 16 for a weight stored reduction-axis innermost) and
"default+rows_x4" (also an n % 4 == 0 version without the row tile's guard). All run in this
process on the same inputs, interleaved per size, alternating builds (the order turning) for a few
rounds and keeping each build's best median, so load from other processes hits all alike. On a
shared machine the numbers are noisy: where two builds run the same kernel (e.g. n = 64), their
difference is the noise.

    python benchmarks/bench_variants.py [--workloads linear matmul mlp] [--sizes 1 2 3 4 5 8 9 64 65]
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from timing import format_table, median_ms  # noqa: E402
from workloads import MLP_SOURCE, WORKLOADS  # noqa: E402

import numpy as np  # noqa: E402

import relaxscript as rx  # noqa: E402
from relaxscript.transform import DefaultCPUSchedule, DispatchLibrary  # noqa: E402

K, M = 576, 1536
SOURCES = {
    "linear": f'''
@R.ir_module
class Linear:
    @R.function
    def main(x: R.Tensor(("n", {K}), "float32"), w: R.Tensor(({M}, {K}), "float32"), b: R.Tensor(({M},), "float32")):
        n = T.int64()
        with R.dataflow():
            y = R.nn.gelu(R.add(R.matmul(x, R.permute_dims(w)), b))
            R.output(y)
        return y
''',
    "matmul": f'''
@R.ir_module
class Matmul:
    @R.function
    def main(x: R.Tensor(("n", {K}), "float32"), w: R.Tensor(({K}, {M}), "float32")):
        n = T.int64()
        with R.dataflow():
            y = R.nn.relu(R.matmul(x, w))
            R.output(y)
        return y
''',
    "mlp": MLP_SOURCE,
}
BUILDS = {"single": False, "one_row": ("one_row",), "default": True,
          "default+rows_x4": ("one_row", "few_rows", "rows_x4")}


def pipeline(variants):
    return [DefaultCPUSchedule(variants) if isinstance(p, DefaultCPUSchedule) else p
            for p in rx.get_pipeline("c") if not isinstance(p, DispatchLibrary)]


def inputs(name: str, n: int, rng):
    if name == "mlp":
        return WORKLOADS["mlp"].inputs(n)
    w_shape = (M, K) if name == "linear" else (K, M)
    args = [rng.standard_normal((n, K)).astype("float32"), rng.standard_normal(w_shape).astype("float32")]
    if name == "linear":
        args.append(rng.standard_normal(M).astype("float32"))
    return args


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", nargs="+", default=list(SOURCES), choices=list(SOURCES))
    parser.add_argument("--sizes", nargs="+", type=int, default=[1, 2, 4, 7, 8, 9, 16, 17, 64, 65])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    for name in args.workloads:
        mod = rx.from_source(SOURCES[name])
        runs = {build: rx.VirtualMachine(rx.build(mod, target="c", pipeline=pipeline(v)))["main"]
                for build, v in BUILDS.items()}
        rows = []
        for n in args.sizes:
            data = inputs(name, n, np.random.default_rng(n))
            want = runs["single"](*data)
            best = {build: float("inf") for build in runs}
            for round_ in range(args.rounds):
                # the order turns every round, so no build is always measured first
                order = list(runs.items())
                order = order[round_ % len(order):] + order[:round_ % len(order)]
                for build, run in order:
                    np.testing.assert_allclose(run(*data), want, rtol=1e-3, atol=1e-3)
                    best[build] = min(best[build], median_ms(lambda: run(*data), budget_s=0.3))
            rows.append([str(n)] + [f"{best[b]:.3f}" for b in BUILDS]
                        + [f"{best['single'] / best['default']:.2f}x"])
        print(f"\n{name}: median ms (best of {args.rounds} rounds); speed-up of the default variants")
        print(format_table(["n"] + list(BUILDS) + ["single/default"], rows))


if __name__ == "__main__":
    main()
