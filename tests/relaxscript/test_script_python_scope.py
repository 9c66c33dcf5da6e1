"""Plain Python in decorated scripts is evaluated in the definition's scope, as TVMScript does
(tensorir/script/python_scope.py): module constants and closure values in shapes, attributes of
config objects in op attributes, NumPy calls in R.const; names the script binds stay IR, and text
given to from_source is never evaluated."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import relaxscript as rx
import tensorir as tir
from relaxscript import R, function, ir_module
from tensorir import T, prim_func

HIDDEN = 6
n = 5        # a Python global with a symbolic variable's usual name


class Config:
    hidden = 6
    eps = 1e-5
    axis = -1
    scale = 0.5


cfg = Config()


@ir_module
class Norm:
    @function
    def main(x: R.Tensor(("m", cfg.hidden), "float32"), w: R.Tensor((HIDDEN,), "float32")):
        m = T.int64()
        with R.dataflow():
            y = R.nn.rms_norm(x, w, axes=[cfg.axis], epsilon=cfg.eps)
            z = R.multiply(y, R.const(cfg.scale * 2, "float32"))
            s = R.nn.softmax(R.add(z, R.const(np.arange(HIDDEN, dtype="float32") / HIDDEN)), axis=cfg.axis)
            out = R.reshape(s, R.shape([m * HIDDEN]))
            R.output(out)
        return out


def _norm_numpy(x, w):
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-5) * w
    z = y * 1.0 + np.arange(HIDDEN, dtype="float32") / HIDDEN
    e = np.exp(z - z.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)).reshape(-1)


def test_python_values_become_literals_and_the_script_round_trips():
    main = Norm["main"]
    assert str(main.params[0].struct_info.shape[1]) == "6"
    assert main.params[1].struct_info.shape[0].value == HIDDEN
    rx.assert_structural_equal(rx.from_source(Norm.script()), Norm)
    text = Norm.script()
    assert "HIDDEN" not in text and "cfg" not in text and "epsilon=1e-05" in text


@settings(max_examples=8, deadline=None)
@given(rows=st.integers(1, 9), seed=st.integers(0, 2**16))
@pytest.mark.parametrize("target", ["interp", "c"])
def test_a_module_with_python_values_runs_like_numpy(target, rows, seed):
    run = _built(target)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, HIDDEN), dtype=np.float32)
    w = rng.standard_normal(HIDDEN, dtype=np.float32)
    np.testing.assert_allclose(run(x, w), _norm_numpy(x, w), rtol=1e-5, atol=1e-6)


_BUILT = {}


def _built(target):
    if target not in _BUILT:
        _BUILT[target] = rx.VirtualMachine(rx.build(Norm, target=target))["main"]
    return _BUILT[target]


def test_closure_values_and_script_bound_names():
    width = 3

    @function
    def main(x: R.Tensor(("n", width * 2), "float32")):
        n = T.int64()                  # the script's n, not the global n = 5
        y = R.reshape(x, R.shape([n, width, 2]))
        return y
    dim = main.params[0].struct_info.shape[0]
    assert isinstance(dim, tir.expr.Var) and dim.name == "n"
    assert main.params[0].struct_info.shape[1].value == 6
    got = rx.interpret(main, "main", np.arange(12, dtype="float32").reshape(2, 6))
    np.testing.assert_array_equal(got, np.arange(12, dtype="float32").reshape(2, 3, 2))


def test_from_source_never_evaluates_python():
    text = '''
@R.function
def main(x: R.Tensor((HIDDEN,), "float32")):
    return x
'''
    with pytest.raises(rx.ParseError, match="HIDDEN"):
        rx.from_source(text)


def test_an_expression_that_raises_is_a_parse_error_at_its_line():
    with pytest.raises(rx.ParseError) as info:
        @function
        def main(x: R.Tensor((4,), "float32")):
            y = R.add(x, R.const(np.ones(4) / np.zeros(4).reshape(5), "float32"))
            return y
    message = str(info.value)
    assert "raised ValueError" in message and "np.ones(4)" in message
    assert "test_script_python_scope.py" in message


@prim_func
def scaled(A: T.Buffer((cfg.hidden, HIDDEN // 2), "float32"), B: T.Buffer((cfg.hidden, HIDDEN // 2), "float32")):
    for i, j in T.grid(cfg.hidden, HIDDEN // 2):
        with T.block("scale"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(math.sqrt(cfg.hidden))


def test_prim_func_shapes_and_constants_from_python():
    assert [int(d.value) for d in scaled.buffer_params[0].shape] == [6, 3]
    a = np.random.default_rng(0).standard_normal((6, 3), dtype=np.float32)
    b = np.zeros((6, 3), np.float32)
    tir.interpret(scaled, a, b)
    np.testing.assert_allclose(b, a * np.float32(math.sqrt(6)), rtol=1e-6)
    tir.assert_structural_equal(tir.from_source(scaled.script()), scaled)
