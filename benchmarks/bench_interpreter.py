"""Time the TensorIR reference interpreter on a few typical prim_funcs.

Run: python3 benchmarks/bench_interpreter.py   (prints milliseconds per run)
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from tensorir import (Block, BlockRealize, Buffer, BufferRegion, BufferStore, FloatImm,  # noqa: E402
                      For, IterVar, PrimFunc, Range, Var, call_intrin, seq, size_var)
from tensorir.expr import max_  # noqa: E402
from tensorir.interpreter import interpret  # noqa: E402


def _nest(name, extents, kinds, make):
    loops = [Var(f"{name}_i{k}") for k in range(len(extents))]
    ivs = [Var(f"{name}_v{k}") for k in range(len(extents))]
    body, init, reads, writes = make(ivs)
    block = Block(name, [IterVar(v, Range(0, e), k) for v, e, k in zip(ivs, extents, kinds)],
                  reads, writes, body, init=init)
    stmt = BlockRealize(loops, None, block)
    for var, extent in reversed(list(zip(loops, extents))):
        stmt = For(var, 0, extent, "serial", stmt)
    return stmt


def _point(buf, idx):
    return BufferRegion(buf, [Range(i, 1) for i in idx])


def _func(name, params, body, allocs=()):
    root = Block("root", [], [], [], body, alloc_buffers=allocs)
    return PrimFunc(params, BlockRealize([], None, root), name=name)


def matmul_func():
    m, n, k = size_var("m"), size_var("n"), size_var("k")
    a, b, c = Buffer("A", [m, k]), Buffer("B", [k, n]), Buffer("C", [m, n])

    def make(v):
        i, j, r = v
        return (BufferStore(c, c[i, j] + a[i, r] * b[r, j], [i, j]), BufferStore(c, 0.0, [i, j]),
                [_point(a, [i, r]), _point(b, [r, j])], [_point(c, [i, j])])
    return _func("matmul", [a, b, c], _nest("matmul", [m, n, k], "SSR", make))


def elementwise_func():
    n, m = size_var("n"), size_var("m")
    x, y = Buffer("X", [n, m]), Buffer("Y", [n, m])

    def make(v):
        value = call_intrin("tanh", x[v[0], v[1]]) * FloatImm(2.0, "float32") + x[v[0], v[1]]
        return BufferStore(y, value, v), None, [_point(x, v)], [_point(y, v)]
    return _func("elementwise", [x, y], _nest("ew", [n, m], "SS", make))


def softmax_func():
    n, m = size_var("n"), size_var("m")
    x, y = Buffer("X", [n, m]), Buffer("Y", [n, m])
    row_max, row_exp, row_sum = Buffer("row_max", [n]), Buffer("row_exp", [n, m]), Buffer("row_sum", [n])

    def reduce_max(v):
        i, j = v
        return (BufferStore(row_max, max_(row_max[i], x[i, j]), [i]),
                BufferStore(row_max, FloatImm(float(np.finfo("float32").min), "float32"), [i]),
                [_point(x, v)], [_point(row_max, [i])])

    def exp(v):
        i, j = v
        return (BufferStore(row_exp, call_intrin("exp", x[i, j] - row_max[i]), v), None,
                [_point(x, v), _point(row_max, [i])], [_point(row_exp, v)])

    def reduce_sum(v):
        i, j = v
        return (BufferStore(row_sum, row_sum[i] + row_exp[i, j], [i]), BufferStore(row_sum, 0.0, [i]),
                [_point(row_exp, v)], [_point(row_sum, [i])])

    def normalize(v):
        i, j = v
        return (BufferStore(y, row_exp[i, j] / row_sum[i], v), None,
                [_point(row_exp, v), _point(row_sum, [i])], [_point(y, v)])

    body = seq(_nest("max", [n, m], "SR", reduce_max), _nest("exp", [n, m], "SS", exp),
               _nest("sum", [n, m], "SR", reduce_sum), _nest("norm", [n, m], "SS", normalize))
    return _func("softmax", [x, y], body, [row_max, row_exp, row_sum])


def _time(fn, repeat=5) -> float:
    fn()  # warm-up
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best * 1e3


def main():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((256, 256), dtype=np.float32)
    b = rng.standard_normal((256, 256), dtype=np.float32)
    c = np.zeros((256, 256), np.float32)
    mm = matmul_func()
    t = _time(lambda: interpret(mm, a, b, c))
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    print(f"matmul 256x256x256 (float32):        {t:8.1f} ms")

    x = rng.standard_normal((1024, 1024), dtype=np.float32)
    y = np.zeros_like(x)
    ew = elementwise_func()
    t = _time(lambda: interpret(ew, x, y))
    np.testing.assert_allclose(y, np.tanh(x) * 2 + x, rtol=1e-5, atol=1e-6)
    print(f"elementwise 1024x1024 (tanh*2+x):    {t:8.1f} ms")

    sm = softmax_func()
    t = _time(lambda: interpret(sm, x, y))
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)
    print(f"row softmax 1024x1024 (4 blocks):    {t:8.1f} ms")


if __name__ == "__main__":
    main()
