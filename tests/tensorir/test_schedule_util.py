"""Shared checks for the schedule and lowering tests (and tests of the checks themselves).

``assert_same_results`` runs a reference and candidate PrimFuncs with the
interpreter on the same random inputs for several symbolic sizes.
"""
from __future__ import annotations

import numpy as np
import pytest

import tensorir as tir
from tensorir import Var


def concrete_shape(buffer, sizes: dict[str, int]) -> tuple[int, ...]:
    """Shape of a parameter buffer for given values of its symbolic vars (by name)."""
    from tensorir.arith import Analyzer
    out = []
    for d in buffer.shape:
        vmap = {v: tir.const(sizes[v.name]) for v in tir.collect(d, lambda n: isinstance(n, Var))}
        value = Analyzer().simplify(tir.substitute(d, vmap))
        out.append(int(value.value))
    return tuple(out)


def make_arrays(func, sizes: dict[str, int], rng: np.random.Generator, num_inputs: int | None = None):
    """Random inputs for every buffer param; the last ``n - num_inputs`` (default: last one) zeroed."""
    params = func.buffer_params
    num_inputs = len(params) - 1 if num_inputs is None else num_inputs
    arrays = []
    for index, buf in enumerate(params):
        shape = concrete_shape(buf, sizes)
        if index < num_inputs:
            arrays.append(rng.uniform(-1, 1, size=shape).astype(buf.dtype))
        else:
            arrays.append(np.zeros(shape, buf.dtype))
    return arrays


def run(func, arrays, sizes, vectorize=True):
    copies = [a.copy() for a in arrays]
    scalars = {p.name: sizes[p.name] for p in func.scalar_params}
    tir.interpret(func, *copies, vectorize=vectorize, **scalars)
    return copies


def assert_same_results(reference, candidates, size_list, num_inputs=None, seed=0, rtol=1e-4, atol=1e-5):
    """Every candidate computes what ``reference`` computes, for each sizes dict."""
    rng = np.random.default_rng(seed)
    for sizes in size_list:
        arrays = make_arrays(reference, sizes, rng, num_inputs)
        expected = run(reference, arrays, sizes)
        for cand in candidates:
            # The interpreter's scalar path: the plainest semantics for transformed loop nests.
            got = run(cand, arrays, sizes)
            for g, e in zip(got, expected):
                np.testing.assert_allclose(g, e, rtol=rtol, atol=atol, err_msg=f"sizes {sizes}")


def assert_roundtrip(func):
    text = func.script()
    tir.assert_structural_equal(tir.from_source(text), func)


def assert_replays(sch, original):
    fresh = tir.Schedule(original)
    sch.trace.apply_to(fresh)
    tir.assert_structural_equal(fresh.func, sch.func)
    assert str(fresh.trace) == str(sch.trace)


# ---------------------------------------------------------------- the checks themselves can fail
def _axpy():
    from tensorir import T, prim_func

    @prim_func
    def axpy(x: T.Buffer(("n",), "float32"), y: T.Buffer(("n",), "float32")):
        n = T.int64()
        for i in range(n):
            with T.block("y"):
                vi = T.axis.remap("S", [i])
                y[vi] = x[vi] * T.float32(2)
    return axpy


def test_concrete_shape_evaluates_symbolic_dims():
    f = _axpy()
    assert concrete_shape(f.buffer_params[0], {"n": 7}) == (7,)


def test_assert_same_results_detects_a_different_function():
    f = _axpy()
    g = tir.from_source(f.script().replace("T.float32(2)", "T.float32(3)").replace("* 2.0", "* 3.0"))
    with pytest.raises(AssertionError):
        assert_same_results(f, [g], [{"n": 4}])
