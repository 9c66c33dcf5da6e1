"""Deduction vs NumPy for reductions and matmul."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tensorir as tir
from relaxscript import op
from relaxscript.op import OpAttributeError, OpDeductionError

from .op_helpers import (SYMBOLS, check_call, environments, infer, shape_equal, symbolic_shapes,
                         tensor_var)

n, m, k = SYMBOLS
REDUCE = ["sum", "mean", "max", "min", "prod", "variance"]
seeds = st.integers(0, 2**16)


@settings(max_examples=50, deadline=None)
@given(data=st.data(), name=st.sampled_from(REDUCE + ["argmax", "argmin"]),
       shape=symbolic_shapes(), keepdims=st.booleans(), env=environments(), seed=seeds,
       dtype=st.sampled_from(["float32", "int32"]))
def test_reductions_match_numpy(data, name, shape, keepdims, env, seed, dtype):
    ndim = len(shape)
    if name.startswith("arg"):
        axis = data.draw(st.none() | st.integers(-ndim, ndim - 1)) if ndim else None
    else:
        axis = data.draw(st.none() | st.integers(-ndim, ndim - 1) if ndim else st.none())
        if ndim and data.draw(st.booleans()):
            axis = tuple(data.draw(st.lists(st.integers(-ndim, ndim - 1), max_size=ndim,
                                            unique_by=lambda a: a % ndim)))
    call = getattr(op, name)(tensor_var("x", shape, dtype), axis=axis, keepdims=keepdims)
    sinfo = check_call(call, env, np.random.default_rng(seed))
    assert sinfo.dtype == ("int64" if name.startswith("arg") else dtype)


@st.composite
def matmul_shapes(draw):
    """Operand shapes for a valid matmul: vectors, matrices, broadcast batches."""
    rows, inner, cols = (draw(st.sampled_from([*SYMBOLS, tir.const(3), tir.const(1)]))
                         for _ in range(3))
    batch = draw(symbolic_shapes(max_ndim=2))
    a_batch = tuple(tir.const(1) if draw(st.booleans()) else d for d in batch)
    b_batch = batch[draw(st.integers(0, len(batch))):]
    a = (inner,) if draw(st.booleans()) else (*a_batch, rows, inner)
    b = (inner,) if draw(st.booleans()) else (*b_batch, inner, cols)
    return a, b


@settings(max_examples=50, deadline=None)
@given(shapes=matmul_shapes(), env=environments(), seed=seeds,
       out_dtype=st.sampled_from([None, "float64"]))
def test_matmul_matches_numpy(shapes, env, seed, out_dtype):
    call = op.matmul(tensor_var("a", shapes[0]), tensor_var("b", shapes[1]), out_dtype)
    sinfo = check_call(call, env, np.random.default_rng(seed))
    assert sinfo.dtype == (out_dtype or "float32")


def test_matmul_vector_cases():
    vec, mat = tensor_var("v", (k,)), tensor_var("w", (k, n))
    assert infer(op.matmul(vec, vec)).shape == ()
    assert shape_equal(infer(op.matmul(vec, mat)).shape, (n,))
    assert shape_equal(infer(op.matmul(tensor_var("a", (2, m, k)), vec)).shape, (2, m))
    batched = infer(op.matmul(tensor_var("a", (1, m, k)), tensor_var("b", (4, 1, k, n))))
    assert shape_equal(batched.shape, (4, 1, m, n))


def test_matmul_errors_and_coarse():
    with pytest.raises(OpDeductionError, match="contraction"):
        infer(op.matmul(tensor_var("a", (n, 4)), tensor_var("b", (5, m))))
    with pytest.raises(OpDeductionError, match="dtypes"):
        infer(op.matmul(tensor_var("a", (n, 4)), tensor_var("b", (4, m), "float16")))
    with pytest.raises(OpDeductionError, match="at least one dimension"):
        infer(op.matmul(tensor_var("a", ()), tensor_var("b", (4,))))
    with pytest.raises(OpDeductionError, match="broadcast"):
        infer(op.matmul(tensor_var("a", (2, n, 4)), tensor_var("b", (3, 4, m))))
    # undecidable contraction dim: accepted, checked at run time
    assert infer(op.matmul(tensor_var("a", (n, k)), tensor_var("b", (m, 2)))).shape is not None
    assert infer(op.matmul(tensor_var("a", None, "float32", 3), tensor_var("b", (4, m)))).ndim == 3
    assert infer(op.matmul(tensor_var("a", None, None), tensor_var("b", (4,)))).ndim == -1


def test_reduction_errors_and_coarse():
    x = tensor_var("x", (n, 4))
    with pytest.raises(OpDeductionError, match="out of range"):
        infer(op.sum(x, axis=2))
    with pytest.raises(OpDeductionError, match="repeated"):
        infer(op.mean(x, axis=(0, -2)))
    with pytest.raises(OpAttributeError):
        op.max(x, axis=1.5)
    with pytest.raises(OpAttributeError):
        op.argmax(x, axis=(0, 1))
    coarse = tensor_var("y", None, "float32", ndim=3)
    assert infer(op.sum(coarse, axis=1)).ndim == 2
    assert infer(op.sum(coarse, axis=1, keepdims=True)).ndim == 3
    assert infer(op.argmin(tensor_var("z", None, None), axis=0)).ndim == -1
    assert infer(op.prod(x)).shape == ()
