"""Model-shaped kernels (add+gelu, softmax, layer_norm, matmul) with a
symbolic row count, built with ``tensorir.compute`` as legalization would,
and checks that their default schedules keep results and take the intended
shape. The builders are shared with benchmarks/bench_cpu_schedules.py."""
from __future__ import annotations

import math

import numpy as np
import pytest

import tensorir as tir
from tensorir import FloatImm, call_intrin, size_var
from tensorir.compute import (compute, create_prim_func, placeholder, reduce_axis, reduce_max,
                              reduce_sum)
from tensorir.schedule_rules import default_cpu_schedule

GELU_C = math.sqrt(2.0 / math.pi)


def _f(value: float) -> FloatImm:
    return FloatImm(value, "float32")


def add_gelu_func(width: int):
    n = size_var("n")
    x, y = placeholder((n, width), "float32", "x"), placeholder((n, width), "float32", "y")
    s = compute((n, width), lambda i, j: x[i, j] + y[i, j], "s")

    def gelu(i, j):
        v = s[i, j]
        inner = _f(GELU_C) * (v + _f(0.044715) * v * v * v)
        return _f(0.5) * v * (_f(1.0) + call_intrin("tanh", inner))
    out = compute((n, width), gelu, "out")
    return create_prim_func([x, y, out], name="add_gelu")


def add_gelu_numpy(x, y):
    v = x + y
    return (0.5 * v * (1.0 + np.tanh(GELU_C * (v + 0.044715 * v * v * v)))).astype(np.float32)


def softmax_func(width: int):
    n = size_var("n")
    x = placeholder((n, width), "float32", "x")
    k1, k2 = reduce_axis(width, "k1"), reduce_axis(width, "k2")
    row_max = compute((n,), lambda i: reduce_max(x[i, k1], [k1]), "row_max")
    e = compute((n, width), lambda i, j: call_intrin("exp", x[i, j] - row_max[i]), "e")
    total = compute((n,), lambda i: reduce_sum(e[i, k2], [k2]), "total")
    out = compute((n, width), lambda i, j: e[i, j] / total[i], "out")
    return create_prim_func([x, out], name="softmax")


def softmax_numpy(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)).astype(np.float32)


def layer_norm_func(width: int, eps: float = 1e-5):
    n = size_var("n")
    x = placeholder((n, width), "float32", "x")
    gamma, beta = placeholder((width,), "float32", "gamma"), placeholder((width,), "float32", "beta")
    k1, k2 = reduce_axis(width, "k1"), reduce_axis(width, "k2")
    total = compute((n,), lambda i: reduce_sum(x[i, k1], [k1]), "total")
    mean = compute((n,), lambda i: total[i] * _f(1.0 / width), "mean")
    sq = compute((n,), lambda i: reduce_sum((x[i, k2] - mean[i]) * (x[i, k2] - mean[i]), [k2]), "sq")
    rstd = compute((n,), lambda i: call_intrin("rsqrt", sq[i] * _f(1.0 / width) + _f(eps)), "rstd")
    out = compute((n, width), lambda i, j: (x[i, j] - mean[i]) * rstd[i] * gamma[j] + beta[j], "out")
    return create_prim_func([x, gamma, beta, out], name="layer_norm")


def layer_norm_numpy(x, gamma, beta, eps: float = 1e-5):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return ((x - mean) / np.sqrt(var + eps) * gamma + beta).astype(np.float32)


def matmul_func(k: int, m: int, bias: bool = False):
    n = size_var("n")
    a, b = placeholder((n, k), "float32", "a"), placeholder((k, m), "float32", "b")
    r = reduce_axis(k, "r")
    c = compute((n, m), lambda i, j: reduce_sum(a[i, r] * b[r, j], [r]), "c")
    if not bias:
        return create_prim_func([a, b, c], name="matmul")
    bias_t = placeholder((m,), "float32", "bias")
    out = compute((n, m), lambda i, j: c[i, j] + bias_t[j], "out")
    return create_prim_func([a, b, bias_t, out], name="matmul_bias")


KERNELS = {
    "add_gelu": (lambda w: add_gelu_func(w), lambda rng, n, w: [rng.standard_normal((n, w)),
                                                               rng.standard_normal((n, w))],
                 add_gelu_numpy),
    "softmax": (softmax_func, lambda rng, n, w: [rng.standard_normal((n, w)) * 4], softmax_numpy),
    "layer_norm": (layer_norm_func, lambda rng, n, w: [rng.standard_normal((n, w)) + 3,
                                                       rng.standard_normal(w), rng.standard_normal(w)],
                   layer_norm_numpy),
    "matmul": (lambda w: matmul_func(48, w), lambda rng, n, w: [rng.standard_normal((n, 48)),
                                                               rng.standard_normal((48, w))],
               lambda a, b: (a @ b).astype(np.float32)),
    "matmul_bias": (lambda w: matmul_func(48, w, bias=True),
                    lambda rng, n, w: [rng.standard_normal((n, 48)), rng.standard_normal((48, w)),
                                       rng.standard_normal(w)],
                    lambda a, b, c: (a @ b + c).astype(np.float32)),
}


def _kinds(func):
    return {f.kind for f in tir.collect(func.body, lambda node: isinstance(node, tir.For))}


@pytest.mark.parametrize("name", sorted(KERNELS))
@pytest.mark.parametrize("width", [80, 128])
def test_scheduled_kernel_matches_numpy_in_c_and_interpreter(name, width):
    from backends.target import build_kernels
    build, make_args, reference = KERNELS[name]
    func = build(width)
    scheduled = default_cpu_schedule(func)
    assert scheduled.attrs["tir.is_scheduled"] is True
    assert "parallel" in _kinds(scheduled) and "vectorized" in _kinds(scheduled)
    module = build_kernels("c", scheduled)
    rng = np.random.default_rng(0)
    for n in (1, 5, 13):
        args = [a.astype(np.float32) for a in make_args(rng, n, width)]
        want = reference(*args)
        got_c = np.zeros_like(want)
        module[func.name](*args, got_c)
        np.testing.assert_allclose(got_c, want, rtol=2e-4, atol=2e-5)
        got_interp = np.zeros_like(want)
        tir.interpret(scheduled, *args, got_interp)
        np.testing.assert_allclose(got_interp, want, rtol=2e-4, atol=2e-5)
