"""Time ``tensorir.arith.simplify`` on typical shape expressions, next to sympy.

Run: ``python benchmarks/bench_simplify.py``. Prints microseconds per call.
"""
from __future__ import annotations

import os
import sys
import timeit

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

import sympy  # noqa: E402

from tensorir.arith import simplify, to_sympy  # noqa: E402
from tensorir.expr import Max, Min, ceildiv, size_var  # noqa: E402


def cases():
    n, m, k = size_var("n"), size_var("m"), size_var("k")
    i, j = size_var("i"), size_var("j")
    return [
        ("(n * 4) // 2 * 2", (n * 4) // 2 * 2),
        ("(n + 1) * 4 - 4", (n + 1) * 4 - 4),
        ("ceildiv(n * 4, 4) * m", ceildiv(n * 4, 4) * m),
        ("(i * m + j) // m * m + (i * m + j) % m", (i * m + j) // m * m + (i * m + j) % m),
        ("min(n, n + 1) + max(m * 2, m)", Min(n, n + 1) + Max(m * 2, m)),
        ("((k * m + i) * n + j) * 4", ((k * m + i) * n + j) * 4),
    ]


def per_call_us(fn, min_time: float = 0.2) -> float:
    timer = timeit.Timer(fn)
    number, _ = timer.autorange()
    number = max(number, int(number * min_time / 0.2))
    best = min(timer.repeat(repeat=3, number=number))
    return best / number * 1e6


def main() -> None:
    print(f"{'expression':44s} {'simplify':>12s} {'sympy':>12s}  result")
    for label, expr in cases():
        ours = per_call_us(lambda: simplify(expr))
        sym = to_sympy(expr)
        theirs = per_call_us(lambda: sympy.simplify(sym), min_time=0.05)
        print(f"{label:44s} {ours:10.1f}us {theirs:10.1f}us  {simplify(expr)}")


if __name__ == "__main__":
    main()
