"""Run-time edges of the loop-level interpreter: empty reductions give the identity (as
compiled code does), integer scalars beyond their dtype are clear errors, an ndarray subclass
is read as its buffer, and an impossible alloc_buffer raises AllocationError."""
from __future__ import annotations

import numpy as np
import pytest

from tensorir import T, interpret, lower
from tensorir.errors import AllocationError, ShapeMismatchError


@T.prim_func
def row_sum(x: T.Buffer(("n", "m"), "float32"), y: T.Buffer(("n",), "float32")):
    n = T.int64()
    m = T.int64()
    for i, k in T.grid(n, m):
        with T.block("sum"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                y[vi] = T.float32(0)
            y[vi] = y[vi] + x[vi, vk]


@T.prim_func
def row_max(x: T.Buffer(("n", "m"), "float32"), y: T.Buffer(("n",), "float32")):
    n = T.int64()
    m = T.int64()
    for i, k in T.grid(n, m):
        with T.block("max"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                y[vi] = T.float32("-inf")
            y[vi] = T.max(y[vi], x[vi, vk])


@T.prim_func
def shift(x: T.Buffer(("n",), "float32"), y: T.Buffer(("n",), "float32"), k: T.int64, j: T.int32):
    n = T.int64()
    for i in range(n):
        with T.block("shift"):
            vi = T.axis.spatial(n, i)
            y[vi] = x[vi] + T.Cast("float32", k) + T.Cast("float32", j)


@T.prim_func
def scratch(y: T.Buffer((4,), "float32"), n: T.int64):
    tmp = T.alloc_buffer((n, n), "float32")  # noqa: F841 - only its allocation is tested
    for i in range(4):
        with T.block("copy"):
            vi = T.axis.spatial(4, i)
            y[vi] = T.float32(1)


@pytest.mark.parametrize("vectorize", [True, False])
@pytest.mark.parametrize("func, identity", [(row_sum, 0.0), (row_max, -np.inf)])
def test_an_empty_reduction_writes_its_init_like_compiled_code(func, identity, vectorize):
    y = np.full(3, np.nan, "float32")
    interpret(func, np.zeros((3, 0), "float32"), y, vectorize=vectorize)
    np.testing.assert_array_equal(y, np.full(3, identity, "float32"))
    # the lowered form (init hoisted by lowering) agrees
    y_lowered = np.full(3, np.nan, "float32")
    interpret(lower(func), np.zeros((3, 0), "float32"), y_lowered)
    np.testing.assert_array_equal(y_lowered, y)
    # a non-empty reduction is unchanged
    x = np.arange(12, dtype="float32").reshape(3, 4)
    interpret(func, x, y, vectorize=vectorize)
    np.testing.assert_array_equal(y, x.sum(1) if func is row_sum else x.max(1))


def test_integer_scalars_beyond_their_dtype_are_shape_errors():
    x, y = np.zeros(2, "float32"), np.zeros(2, "float32")
    for k, j, text in [(2**64 + 3, 0, "'k' = 18446744073709551619 is outside the int64 range"),
                       (-2**63 - 1, 0, "outside the int64 range"),
                       (0, 2**31, "'j' = 2147483648 is outside the int32 range")]:
        with pytest.raises(ShapeMismatchError, match="shift: scalar parameter") as err:
            interpret(shift, x, y, k=k, j=j)
        assert text in str(err.value)
    interpret(shift, x, y, k=2**40, j=-2**31)
    np.testing.assert_array_equal(y, np.full(2, 2.0**40 - 2.0**31, "float32"))


class LyingShape(np.ndarray):
    @property
    def shape(self):
        return (1000,)


def test_an_ndarray_subclass_is_bound_by_its_buffer_not_its_shape_property():
    x = np.arange(4, dtype="float32").view(LyingShape)
    y = np.zeros(4, "float32")
    interpret(shift, x, y, k=1, j=0)
    np.testing.assert_array_equal(y, np.arange(4) + 1.0)


def test_an_alloc_buffer_too_large_to_exist_is_an_allocation_error():
    y = np.zeros(4, "float32")
    with pytest.raises(AllocationError, match=r"scratch: cannot allocate buffer 'tmp'.*symbolic var n = 4294967296"):
        interpret(scratch, y, n=2**32)
    with pytest.raises(AllocationError, match="negative"):
        interpret(scratch, y, n=-1)
    interpret(scratch, y, n=3)
    np.testing.assert_array_equal(y, np.ones(4))
