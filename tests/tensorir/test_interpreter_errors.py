"""Argument checks and run-time errors of the interpreter: clear ValueErrors, never wrapping."""
from __future__ import annotations

import numpy as np
import pytest

from tensorir import (Block, BlockRealize, Buffer, BufferStore, For, IterVar, PrimFunc, Range,
                      ShapeMismatchError, Var, interpret, size_var)
from tensorir import expr as E
from tensorir.interpreter import InterpretError, OutOfBoundsError


def copy_func(x_shape, y_shape, name="copy", dtype="float32", **buffer_kw):
    """y[i] = x[i] over the (flattened) first dim of x; the shapes are what matters."""
    x, y = Buffer("x", x_shape, dtype, **buffer_kw), Buffer("y", y_shape, dtype)
    return PrimFunc([x, y], BufferStore(y, 0.0, [0] * len(y_shape)), name=name)


def f32(*shape):
    return np.zeros(shape, np.float32)


def test_symbolic_var_conflict_names_function_param_var_and_values():
    n = size_var("n")
    f = copy_func([n, 4], [n], name="rowsum")
    with pytest.raises(ShapeMismatchError) as err:
        interpret(f, f32(3, 4), f32(5))
    message = str(err.value)
    for part in ("rowsum", "'y'", "'n'", "3", "5", "'x' dim 0"):
        assert part in message
    assert isinstance(err.value, ValueError)


def test_static_dim_rank_dtype_and_contiguity_are_checked():
    f = copy_func([2, 4], [2])
    with pytest.raises(ShapeMismatchError, match=r"'x' dim 1: expected extent 4, got 5"):
        interpret(f, f32(2, 5), f32(2))
    with pytest.raises(ShapeMismatchError, match="expected rank 2"):
        interpret(f, f32(8), f32(2))
    with pytest.raises(ShapeMismatchError, match="expected dtype float32, got float64"):
        interpret(f, np.zeros((2, 4)), f32(2))
    with pytest.raises(ShapeMismatchError, match="not C-contiguous"):
        interpret(f, f32(4, 2).T, f32(2))
    with pytest.raises(ShapeMismatchError, match="expected a NumPy array"):
        interpret(f, [[0.0] * 4] * 2, f32(2))


def test_expression_dims_are_checked_and_solved():
    n = size_var("n")
    checked = copy_func([n, 4], [n * 4])
    interpret(checked, f32(3, 4), f32(12))
    with pytest.raises(ShapeMismatchError, match=r"'y' dim 0: expected extent 12 .*n = 3.*got 13"):
        interpret(checked, f32(3, 4), f32(13))
    solved = copy_func([n * 4 + 1], [2])  # n is only mentioned inside an expression
    interpret(solved, f32(13), f32(2))
    with pytest.raises(ShapeMismatchError, match="cannot determine symbolic var 'n'"):
        interpret(solved, f32(14), f32(2))


def test_declared_facts_are_checked():
    n = size_var("n", upper=8, multiple_of=4)
    f = copy_func([n], [n])
    interpret(f, f32(8), f32(8))
    with pytest.raises(ShapeMismatchError, match="'n' = 12 is above its declared upper bound 8"):
        interpret(f, f32(12), f32(12))
    with pytest.raises(ShapeMismatchError, match="'n' = 6 is not a multiple of 4"):
        interpret(f, f32(6), f32(6))


def test_argument_count_and_scalar_names():
    n, k = size_var("n"), Var("k")
    x = Buffer("x", [n])
    f = PrimFunc([x, k], BufferStore(x, 0.0, [0]), name="g")
    with pytest.raises(ShapeMismatchError, match="missing argument"):
        interpret(f, f32(2))
    with pytest.raises(ShapeMismatchError, match="expects 2 positional argument"):
        interpret(f, f32(2), 1, 2)
    with pytest.raises(ShapeMismatchError, match="unknown scalar argument 'q'"):
        interpret(f, f32(2), q=1)
    with pytest.raises(ShapeMismatchError, match="expects a int64 value"):
        interpret(f, f32(2), 1.5)


def test_declared_strides_must_match_the_array():
    x = Buffer("x", [2, 3], strides=[4, 1])
    f = PrimFunc([x], BufferStore(x, 0.0, [0, 0]))
    with pytest.raises(ShapeMismatchError, match="stride 0: expected extent 4, got 3"):
        interpret(f, f32(2, 3))


@pytest.mark.parametrize("vectorize", [True, False])
@pytest.mark.parametrize("offset", [-1, 1])
def test_out_of_bounds_load_raises_instead_of_wrapping(offset, vectorize):
    n = size_var("n")
    x, y = Buffer("x", [n]), Buffer("y", [n])
    i = Var("i")
    f = PrimFunc([x, y], For(i, 0, n, "serial", BufferStore(y, x[i + offset], [i])))
    expected = r"buffer 'x': index (-1|4) in dimension 0 is outside \[0, 4\)"
    with pytest.raises(OutOfBoundsError, match=expected):
        interpret(f, f32(4), f32(4), vectorize=vectorize)


@pytest.mark.parametrize("vectorize", [True, False])
def test_out_of_bounds_store_raises(vectorize):
    x = Buffer("x", [2, 3])
    i, j = Var("i"), Var("j")
    f = PrimFunc([x], For(i, 0, 2, "serial", For(j, 0, 3, "serial", BufferStore(x, 1.0, [j, i]))))
    data = f32(2, 3)
    with pytest.raises(OutOfBoundsError, match="index 2 in dimension 0"):
        interpret(f, data, vectorize=vectorize)
    assert isinstance(OutOfBoundsError("x"), ValueError)


@pytest.mark.parametrize("vectorize", [True, False])
def test_iter_var_bound_outside_its_domain(vectorize):
    x = Buffer("x", [8])
    i, vi = Var("i"), Var("vi")
    block = Block("b", [IterVar(vi, Range(0, 4), "S")], [], [], BufferStore(x, 1.0, [vi]))
    f = PrimFunc([x], For(i, 0, 6, "serial", BlockRealize([i], None, block)))
    expected = r"block 'b': iter var 'vi' bound to 4, outside its domain \[0, 4\)"
    with pytest.raises(InterpretError, match=expected):
        interpret(f, f32(8), vectorize=vectorize)


@pytest.mark.parametrize("vectorize", [True, False])
def test_integer_division_by_zero(vectorize):
    x = Buffer("x", [3], "int32")
    i = Var("i", "int32")
    f = PrimFunc([x], For(i, 0, 3, "serial", BufferStore(x, E.FloorDiv(x[i], x[i]), [i])))
    with pytest.raises(InterpretError, match="division by zero"):
        interpret(f, np.array([1, 0, 2], np.int32), vectorize=vectorize)


def test_undefined_buffer_is_reported():
    x, ghost = Buffer("x", [2]), Buffer("ghost", [2])
    f = PrimFunc([x], BufferStore(x, ghost[0], [0]))
    with pytest.raises(InterpretError, match="buffer 'ghost' is used but never defined"):
        interpret(f, f32(2))


def test_non_prim_func_is_rejected():
    with pytest.raises(TypeError):
        interpret("not a function")
