"""Deduction vs NumPy for R.nn.*, creation ops, data-dependent ops and shape_of."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tensorir as tir
from relaxscript import op
from relaxscript.op import OpAttributeError, OpDeductionError
from relaxscript.expr import Var
from relaxscript.struct_info import ShapeStructInfo

from .op_helpers import (SYMBOLS, check_call, concrete, environments, infer, shape_equal,
                         symbolic_shapes, tensor_var)

n, m, k = SYMBOLS
seeds = st.integers(0, 2**16)
ACTIVATIONS = ["relu", "gelu", "gelu_tanh", "silu"]


@settings(max_examples=30, deadline=None)
@given(data=st.data(), shape=symbolic_shapes(min_ndim=1), env=environments(), seed=seeds)
def test_nn_ops_match_numpy(data, shape, env, seed):
    rng = np.random.default_rng(seed)
    ndim = len(shape)
    x = tensor_var("x", shape)
    check_call(getattr(op.nn, data.draw(st.sampled_from(ACTIVATIONS)))(x), env, rng)
    axis = data.draw(st.integers(-ndim, ndim - 1))
    check_call(getattr(op.nn, data.draw(st.sampled_from(["softmax", "log_softmax"])))(x, axis),
               env, rng)
    axes = data.draw(st.lists(st.integers(-ndim, ndim - 1), min_size=1, max_size=ndim,
                              unique_by=lambda a: a % ndim))
    param_shape = [shape[a] for a in axes]
    gamma, beta = tensor_var("g", param_shape), tensor_var("b", param_shape)
    check_call(op.nn.layer_norm(x, gamma, beta, axes, 1e-5), env, rng)
    check_call(op.nn.rms_norm(x, gamma, axes), env, rng)


def test_nn_references_are_numerically_right():
    x = np.array([[-1.0, 0.0, 2.0], [3.0, 1.0, -2.0]], "float32")
    soft = op.get_op_spec("relax.nn.softmax").reference(x, axis=-1)
    np.testing.assert_allclose(soft.sum(-1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(op.get_op_spec("relax.nn.log_softmax").reference(x, axis=1),
                               np.log(soft), rtol=1e-5, atol=1e-6)
    gelu = op.get_op_spec("relax.nn.gelu").reference(x)
    gelu_tanh = op.get_op_spec("relax.nn.gelu_tanh").reference(x)
    np.testing.assert_allclose(gelu, gelu_tanh, atol=1e-3)
    assert gelu[0, 1] == 0 and abs(gelu[0, 2] - 1.9545) < 1e-3
    ln = op.get_op_spec("relax.nn.layer_norm").reference(x, np.ones(3, "float32"),
                                                         np.zeros(3, "float32"), axes=(-1,))
    np.testing.assert_allclose(ln.mean(-1), 0, atol=1e-6)
    rms = op.get_op_spec("relax.nn.rms_norm").reference(x, np.full(3, 2.0, "float32"), axes=(1,))
    np.testing.assert_allclose(np.sqrt(np.mean((rms / 2) ** 2, -1)), 1, rtol=1e-4)


def test_nn_errors():
    x = tensor_var("x", (n, 4))
    with pytest.raises(OpDeductionError, match="floating-point"):
        infer(op.nn.softmax(tensor_var("i", (n,), "int32")))
    with pytest.raises(OpDeductionError, match="out of range"):
        infer(op.nn.softmax(x, axis=2))
    with pytest.raises(OpDeductionError, match="does not match"):
        infer(op.nn.layer_norm(x, tensor_var("g", (5,)), tensor_var("b", (4,))))
    with pytest.raises(OpDeductionError, match="dims"):
        infer(op.nn.rms_norm(x, tensor_var("w", (n, 4))))
    with pytest.raises(OpAttributeError, match="epsilon"):
        op.nn.rms_norm(x, tensor_var("w", (4,)), epsilon=-1.0)
    assert infer(op.nn.relu(tensor_var("i", (n,), "int32"))).dtype == "int32"
    assert infer(op.nn.gelu(tensor_var("c", None, None, 2))).ndim == 2


@settings(max_examples=30, deadline=None)
@given(data=st.data(), shape=symbolic_shapes(), env=environments(), seed=seeds,
       dtype=st.sampled_from(["float32", "int32", "bool"]))
def test_creation_ops_match_numpy(data, shape, env, seed, dtype):
    rng = np.random.default_rng(seed)
    fill = {"float32": 1.5, "int32": 7, "bool": True}[dtype]
    assert check_call(op.full(shape, fill, dtype), env, rng).dtype == dtype
    assert check_call(op.full(shape, 2.5), env, rng).dtype == "float32"
    for make in (op.zeros, op.ones):
        assert check_call(make(shape, dtype), env, rng).dtype == dtype
    x = tensor_var("x", shape)
    for call in (op.full_like(x, 3), op.zeros_like(x, dtype), op.ones_like(x)):
        check_call(call, env, rng)
    if len(shape) >= 2:
        kth = data.draw(st.integers(-3, 3))
        check_call(op.triu(x, kth), env, rng)
        check_call(op.tril(x, kth), env, rng)


scalars = st.one_of(st.integers(-6, 6), st.sampled_from([n, m + 2, 3 - k, n * 2]))


@settings(max_examples=40, deadline=None)
@given(start=scalars, end=scalars, step=st.integers(-3, 3).filter(bool), env=environments(),
       seed=seeds, dtype=st.sampled_from([None, "int32", "float32"]))
def test_arange_symbolic_length(start, end, step, env, seed, dtype):
    sinfo = check_call(op.arange(start, end, step, dtype), env, np.random.default_rng(seed))
    assert sinfo.dtype == (dtype or "int64")


def test_arange_forms():
    assert shape_equal(infer(op.arange(n)).shape, (n,))
    assert shape_equal(infer(op.arange(2, n + 2)).shape, (n,))
    assert shape_equal(infer(op.arange(0, n * 4, 2)).shape, (n * 2,))
    floats = infer(op.arange(0.0, 1.0, 0.25))
    assert floats.dtype == "float32" and shape_equal(floats.shape, (4,))
    assert infer(op.arange(0, n, tir.Var("s"))).shape is None  # step sign unknown
    with pytest.raises(OpAttributeError):
        op.arange(0, 4, 0)


def test_creation_errors():
    with pytest.raises(OpDeductionError, match="scalar"):
        infer(op.full((n,), tensor_var("v", (2,))))
    with pytest.raises(OpDeductionError, match="at least 2 dims"):
        infer(op.triu(tensor_var("x", (n,))))
    with pytest.raises(OpAttributeError, match="dtype"):
        op.zeros((n,), "complex")
    coarse_shape = Var("s", ShapeStructInfo(ndim=2))
    assert infer(op.full(coarse_shape, 1.0)).ndim == 2
    assert shape_equal(infer(op.zeros(Var("s", ShapeStructInfo([n, 3])))).shape, (n, 3))
    with pytest.raises(OpDeductionError, match="shape"):
        infer(op.zeros(tensor_var("t", (2,))))
    assert infer(op.tril(tensor_var("x", None, "float32"))).ndim == -1


@settings(max_examples=15, deadline=None)
@given(shape=symbolic_shapes(min_ndim=1), env=environments(), seed=seeds)
def test_data_dependent_and_shape_of(shape, env, seed):
    rng = np.random.default_rng(seed)
    x = tensor_var("x", shape, "int32")
    unique = check_call(op.unique(x), env, rng, exact=False)
    assert (unique.ndim, unique.shape, unique.dtype) == (1, None, "int32")
    nonzero = check_call(op.nonzero(x), env, rng, exact=False)
    assert (nonzero.ndim, nonzero.shape, nonzero.dtype) == (2, None, "int64")
    sinfo = check_call(op.shape_of(x), env, rng)
    assert isinstance(sinfo, ShapeStructInfo) and concrete(sinfo.values, env) == concrete(shape, env)


def test_shape_of_coarse():
    assert infer(op.shape_of(tensor_var("x", None, "float32", 3))).ndim == 3
    assert infer(op.shape_of(tensor_var("x", None, None))).values is None


@pytest.mark.parametrize("end, step", [(2**63 - 1, 1), (-(2**63) + 1, -3)])
def test_arange_too_long_to_allocate_is_an_allocation_error_in_the_reference(end, step):
    """s13: NumPy sizes a float arange in floating point, so arange(0, 2**63 - 1, 1) as float32
    came back empty and the reference reported 'return value: expected 9223372036854775807, got
    0'; every build raised the AllocationError this now gives too."""
    import relaxscript as rx
    text = f'''@R.function
def main(x: R.Tensor((3,), "float32")):
    y = R.arange(R.prim_value(0), R.prim_value({end}), R.prim_value({step}), "float32")
    return y
'''
    mod = rx.IRModule({"main": rx.from_source(text)})
    with pytest.raises(rx.AllocationError, match="function 'main', tensor 'y' .R.arange.: cannot allocate"):
        rx.interpret(mod, "main", np.zeros(3, "float32"))
    vm = rx.VirtualMachine(rx.build(mod, target="interp"))
    with pytest.raises(rx.AllocationError, match="cannot allocate"):
        vm["main"](np.zeros(3, "float32"))
