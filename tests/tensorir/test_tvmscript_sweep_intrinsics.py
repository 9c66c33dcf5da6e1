"""T-namespace spellings that ``tools/tvmscript_sweep.py`` found missing (see
docs/ARCHITECTURE.md, "s9-tvms"): C math functions TVM's legalizations emit,
``T.max_value``/``T.min_value``, ``T.likely``, ``T.truncmod``, ``T.isfinite``,
``x.astype``, integer bit operations. Our own sources: each parses, round-trips, and runs in the
interpreter and the C build equal to NumPy."""
from __future__ import annotations

import numpy as np
import pytest

import tensorir as tir
from backends.target import build_kernels
from tensorir.errors import ParseError

MATH = '''
@T.prim_func
def main(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32"), C: T.Buffer((16, 16), "float32"),
         I: T.Buffer((16,), "int32"), J: T.Buffer((16, 8), "int32")):
    T.func_attr({"tir.noalias": True})
    for i in range(16):
        with T.block("unary"):
            vi = T.axis.remap("S", [i])
            C[vi, 0] = T.fabs(A[vi])
            C[vi, 1] = T.trunc(A[vi] * T.float32(3))
            C[vi, 2] = T.nearbyint(A[vi] * T.float32(3))
            C[vi, 3] = T.log1p(T.fabs(A[vi]))
            C[vi, 4] = T.exp10(A[vi])
            C[vi, 5] = T.atan(A[vi])
            C[vi, 6] = T.asin(B[vi])
            C[vi, 7] = T.acos(B[vi])
            C[vi, 8] = T.sinh(A[vi]) + T.cosh(A[vi])
            C[vi, 9] = T.atanh(B[vi]) + T.asinh(A[vi]) + T.acosh(T.fabs(A[vi]) + T.float32(1))
            C[vi, 10] = T.atan2(A[vi], B[vi]) + T.hypot(A[vi], B[vi])
            C[vi, 11] = T.copysign(B[vi], A[vi]) + T.fmod(A[vi] * T.float32(5), T.float32(1.5))
            C[vi, 12] = T.truncmod(A[vi] * T.float32(5), T.float32(1.5))
            C[vi, 13] = T.if_then_else(T.likely(T.isfinite(A[vi] / B[vi])), A[vi].astype("float16").astype("float32"), T.min_value("float32"), dtype="float32")
            C[vi, 14] = T.max(A[vi], T.min_value("float32")) + T.min(B[vi], T.max_value("float32"))
            C[vi, 15] = T.Cast("float32", T.max_value("float16"))
    for i in range(16):
        with T.block("ints"):
            vi = T.axis.remap("S", [i])
            J[vi, 0] = T.truncmod(I[vi], 3)
            J[vi, 1] = T.indexmod(I[vi], 3)
            J[vi, 2] = T.indexdiv(I[vi], 3)
            J[vi, 3] = T.max_value("int32") + T.min(I[vi], 0)
            J[vi, 4] = T.bitwise_and(T.shift_right(I[vi], 2), 7)
            J[vi, 5] = T.bitwise_or(T.shift_left(T.bitwise_and(I[vi], 255), 3), 1)
            J[vi, 6] = T.bitwise_xor(I[vi], 5)
            J[vi, 7] = T.bitwise_not(I[vi])
'''


def _expected(a, b, i):
    c = np.empty((16, 16), "float32")
    c[:, 0] = np.abs(a)
    c[:, 1] = np.trunc(a * 3)
    c[:, 2] = np.rint(a * 3)
    c[:, 3] = np.log1p(np.abs(a))
    c[:, 4] = np.power(np.float32(10), a)
    c[:, 5] = np.arctan(a)
    c[:, 6] = np.arcsin(b)
    c[:, 7] = np.arccos(b)
    c[:, 8] = np.sinh(a) + np.cosh(a)
    c[:, 9] = np.arctanh(b) + np.arcsinh(a) + np.arccosh(np.abs(a) + 1)
    c[:, 10] = np.arctan2(a, b) + np.hypot(a, b)
    c[:, 11] = np.copysign(b, a) + np.fmod(a * 5, np.float32(1.5))
    c[:, 12] = np.fmod(a * 5, np.float32(1.5))
    with np.errstate(divide="ignore", invalid="ignore"):
        finite = np.isfinite(a / b)
    c[:, 13] = np.where(finite, a.astype("float16").astype("float32"), np.finfo("float32").min)
    c[:, 14] = a + b
    c[:, 15] = np.float32(np.finfo("float16").max)
    j = np.empty((16, 8), "int32")
    j[:, 0] = np.fmod(i, 3)
    j[:, 1] = np.mod(i, 3)
    j[:, 2] = np.floor_divide(i, 3)
    j[:, 3] = np.iinfo("int32").max + np.minimum(i, 0)
    j[:, 4] = (i >> 2) & 7
    j[:, 5] = ((i & 255) << 3) | 1
    j[:, 6] = i ^ 5
    j[:, 7] = ~i
    return c, j


def _inputs(seed):
    rng = np.random.default_rng(seed)
    a = rng.uniform(-2, 2, 16).astype("float32")
    a[3] = 0.0
    b = rng.uniform(-0.9, 0.9, 16).astype("float32")
    b[3] = 0.0  # 0 / 0: not finite
    i = rng.integers(-20, 20, 16).astype("int32")
    return a, b, i


def _check(run, seed):
    a, b, i = _inputs(seed)
    c, j = np.zeros((16, 16), "float32"), np.zeros((16, 8), "int32")
    run(a, b, c, i, j)
    want_c, want_j = _expected(a, b, i)
    np.testing.assert_allclose(c, want_c, rtol=2e-5, atol=2e-5)
    np.testing.assert_array_equal(j, want_j)


def test_math_spellings_round_trip():
    func = tir.from_source(MATH)
    text = func.script()
    again = tir.from_source(text)
    tir.assert_structural_equal(again, func)
    assert again.script() == text


@pytest.mark.parametrize("seed", [0, 1])
def test_math_spellings_interpret_like_numpy(seed):
    func = tir.from_source(MATH)
    _check(lambda *args: tir.interpret(func, *args), seed)


def test_math_spellings_compile_like_numpy():
    func = tir.from_source(MATH)
    kernel = build_kernels("c", func)[func.name]
    for seed in (0, 1):
        _check(kernel, seed)


def test_unknown_t_functions_stay_parse_errors():
    src = MATH.replace("T.truncmod(I[vi], 3)", "T.nextafter(I[vi], 3)")
    with pytest.raises(ParseError, match="unknown function 'T.nextafter'") as err:
        tir.from_source(src)
    assert err.value.lineno == 28


def test_bit_operations_refuse_floats():
    src = MATH.replace("T.bitwise_xor(I[vi], 5)", "T.bitwise_xor(A[vi], B[vi])")
    with pytest.raises(ParseError, match="T.bitwise_xor takes integer operands"):
        tir.from_source(src)
