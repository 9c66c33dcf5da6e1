"""R.power on integers: NumPy's exact, wrapping power on every target (it used to go through
float32: 3**19 came out 1162261504 on C), and NumPy's refusal of negative exponents, raised by
every target. T.int_pow's GPU form runs on OpenCL and compiles with NVRTC."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tensorir as tir
from tensorir.errors import NegativeIntegerPowerError
from tests.backends.gpu_launch import check_on_opencl
from tests.targets import AVAILABLE_VM_TARGETS, HAVE_OPENCL, OPENCL_REASON, built_main

INT_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint32", "uint64"]


def _vm(target: str, base_dtype: str, exponent_dtype: str):
    return built_main(f'''
@R.function
def main(x: R.Tensor(("n",), "{base_dtype}"), y: R.Tensor(("n",), "{exponent_dtype}")):
    return R.power(x, y)
''', target)


def _operands(data, dtype: str, n: int):
    info = np.iinfo(dtype)
    bases = data.draw(st.lists(st.integers(max(info.min, -1000), min(info.max, 1000)), min_size=n, max_size=n))
    exponents = data.draw(st.lists(st.integers(0, 70), min_size=n, max_size=n))
    return np.array(bases, dtype), np.array(exponents, dtype)


@pytest.mark.parametrize("target", AVAILABLE_VM_TARGETS)
@pytest.mark.parametrize("dtype", INT_DTYPES)
@settings(max_examples=8, deadline=None)
@given(data=st.data(), n=st.sampled_from([1, 7, 33]))
def test_integer_power_equals_numpy(target, dtype, data, n):
    x, y = _operands(data, dtype, n)
    out = _vm(target, dtype, dtype)(x, y)
    np.testing.assert_array_equal(np.asarray(out), np.power(x, y))


@pytest.mark.parametrize("target", AVAILABLE_VM_TARGETS)
def test_powers_past_float32_and_the_type_wrap(target):
    x = np.array([3, 7, -3, 2, 5, 10, 0, 2, -1, 0], "int64")
    y = np.array([19, 11, 5, 40, 27, 18, 0, 62, 63, 5], "int64")
    np.testing.assert_array_equal(np.asarray(_vm(target, "int64", "int64")(x, y)), np.power(x, y))
    narrow = x.astype("int32"), y.astype("int32")
    np.testing.assert_array_equal(np.asarray(_vm(target, "int32", "int32")(*narrow)), np.power(*narrow))


@pytest.mark.parametrize("target", AVAILABLE_VM_TARGETS)
def test_negative_exponent_raises_as_numpy(target):
    x, y = np.array([2, 3, 4], "int32"), np.array([1, -1, 2], "int32")
    with pytest.raises(ValueError, match="negative integer powers"):
        np.power(x, y)
    with pytest.raises(NegativeIntegerPowerError, match="negative integer powers"):
        _vm(target, "int32", "int32")(x, y)
    # the VM keeps working after the error
    np.testing.assert_array_equal(np.asarray(_vm(target, "int32", "int32")(x, np.abs(y))), [2, 3, 16])


def test_float_power_is_unchanged():
    x, y = np.array([2.0, 9.0], "float32"), np.array([0.5, -1.0], "float32")
    np.testing.assert_allclose(np.asarray(_vm("c", "float32", "float32")(x, y)), np.power(x, y), rtol=1e-6)


INT_POW_GPU = '''
@T.prim_func
def int_pow_gpu(a: T.Buffer((64,), "{dtype}"), b: T.Buffer((64,), "{dtype}"), c: T.Buffer((64,), "{dtype}")):
    for i in T.thread_binding(64, thread="threadIdx.x"):
        c[i] = T.int_pow(a[i], b[i])
'''


@pytest.mark.skipif(not HAVE_OPENCL, reason=OPENCL_REASON)
@pytest.mark.parametrize("dtype", ["int32", "int64", "uint8"])
def test_int_pow_on_opencl_and_nvrtc(dtype):
    func = tir.from_source(INT_POW_GPU.format(dtype=dtype))
    rng = np.random.default_rng(0)
    info = np.iinfo(dtype)

    def arrays(seed):
        r = np.random.default_rng(seed)
        return [r.integers(max(info.min, -50), min(info.max, 50) + 1, 64).astype(dtype),
                r.integers(0, 40, 64).astype(dtype), np.zeros(64, dtype)]
    check_on_opencl(func, arrays, [int(rng.integers(1 << 30)) for _ in range(3)])


def test_int_pow_refuses_floats():
    with pytest.raises(ValueError, match="integer operands"):
        tir.expr.call_intrin("int_pow", tir.expr.FloatImm(2.0, "float32"), tir.expr.IntImm(3, "int32"))
