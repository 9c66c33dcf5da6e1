"""Issue 15 item 4: scalars as TVMScript writes them: arithmetic and comparisons on
``R.Prim`` values and between tensors and ``R.Prim`` values, ``R.prim_value``,
``R.Prim(value=...)``, ``R.dtype``, ``R.str`` and shape arithmetic."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import relaxscript as rx
from relaxscript.op.registry import OpDeductionError
from tensorir.errors import ParseError

from .tvm_compat import assert_round_trip, assert_runs_alike, module_of

TENSOR_PLUS_PRIM = '''
@R.function
def main(x: R.Tensor(("n", 4), dtype="float32"), y: R.Prim("float32")) -> R.Tensor(("n", 4), dtype="float32"):
    n = T.int64()
    with R.dataflow():
        lv: R.Tensor((n, 4), dtype="float32") = R.add(x, y)
        lv1: R.Tensor((n, 4), dtype="float32") = R.multiply(y, lv)
        gv: R.Tensor((n, 4), dtype="float32") = R.subtract(lv1, x)
        R.output(gv)
    return gv
'''

PRIM_ARITHMETIC = '''
@R.function
def main(a: R.Prim("int64"), b: R.Prim("int64"), s: R.Prim("float32")):
    c: R.Prim("int64") = R.add(a, b)
    d: R.Prim("int64") = R.multiply(c, a)
    e: R.Prim("int64") = R.floor_divide(d, b)
    f: R.Prim("bool") = R.less(e, a)
    g: R.Prim("float32") = R.multiply(s, s)
    h: R.Prim("bool") = R.greater_equal(g, s)
    return (d, e, f, g, h)
'''

# symbolic values are deduced through the arithmetic, and a tensor op with a known
# R.Prim legalizes into a kernel reading it as an expression of n
KNOWN_VALUES = '''
@R.function
def main(x: R.Tensor(("n",), dtype="float32"), k: R.Prim(value="n")) -> R.Tensor(("n",), dtype="int64"):
    n = T.int64()
    two: R.Prim("int64", value=2) = R.prim_value(T.int64(2))
    m: R.Prim("int64", value=n * 2) = R.multiply(k, two)
    i: R.Tensor((n,), dtype="int64") = R.astype(x, "int64")
    out: R.Tensor((n,), dtype="int64") = R.add(i, m)
    return out
'''

DTYPE_AND_STR = '''
@R.function
def main(x: R.Tensor((2, 3), dtype="float32")):
    n: R.Tensor((2, 3), dtype="float16") = R.astype(x, R.dtype("float16"))
    s: R.Object = R.str("done")
    return (n, s)
'''

SHAPE_ARITHMETIC = '''
@R.function
def main(x: R.Tensor(("n", "m"), dtype="float32")) -> R.Tensor(("n * m + 2",), dtype="float32"):
    n = T.int64()
    m = T.int64()
    s: R.Shape([n * m, 1]) = R.shape([n * m, 1])
    flat: R.Tensor((n * m, 1), dtype="float32") = R.reshape(x, s)
    pad: R.Tensor((2, 1), dtype="float32") = R.zeros(R.shape([2, 1]), dtype="float32")
    joined: R.Tensor((n * m + 2, 1), dtype="float32") = R.concat((flat, pad), axis=0)
    out: R.Tensor((n * m + 2,), dtype="float32") = R.reshape(joined, R.shape([n * m + 2]))
    return out
'''


@settings(max_examples=6, deadline=None)
@given(n=st.integers(0, 5), y=st.floats(-4, 4, width=32), seed=st.integers(0, 2**31))
def test_tensor_and_prim_operands_match_numpy_on_every_target(n, y, seed):
    mod = module_of(TENSOR_PLUS_PRIM)
    x = np.random.default_rng(seed).standard_normal((n, 4)).astype("float32")
    y32 = np.float32(y)
    assert_runs_alike(mod, x, float(y), expected=(y32 * (x + y32) - x).astype("float32"))


def test_tensor_and_prim_round_trips_and_deduces_tensor():
    mod = module_of(TENSOR_PLUS_PRIM)
    text = assert_round_trip(mod)
    assert "R.add(x, y)" in text and "R.multiply(y, lv)" in text


@pytest.mark.parametrize("a,b,s", [(3, 5, 1.5), (-7, 2, -0.25), (0, 1, 0.0)])
def test_prim_arithmetic_gives_scalars_on_every_target(a, b, s):
    mod = module_of(PRIM_ARITHMETIC)
    assert_round_trip(mod)
    d = (a + b) * a
    e = d // b
    g = float(np.float32(s) * np.float32(s))
    assert_runs_alike(mod, a, b, s, expected=(d, e, e < a, g, g >= s))


def test_prim_arithmetic_deduces_symbolic_values_and_legalizes_into_a_kernel():
    mod = module_of(KNOWN_VALUES)
    assert_round_trip(mod)
    legalized = rx.transform.LegalizeOps()(mod)
    calls = legalized.script()
    assert "R.add(i, m)" not in calls and "R.call_tir" in calls   # a kernel, not the fallback
    for n in (0, 3, 5):
        x = np.arange(n, dtype="float32")
        assert_runs_alike(mod, x, n, expected=np.arange(n, dtype="int64") + 2 * n)


def test_prim_value_argument_must_match_its_symbolic_value():
    mod = module_of(KNOWN_VALUES)
    with pytest.raises(rx.ShapeMismatchError):
        rx.interpret(mod, "main", np.zeros(3, "float32"), 4)


def test_prim_operands_need_one_dtype():
    with pytest.raises(OpDeductionError, match="different dtypes"):
        rx.from_source('''
@R.function
def main(x: R.Tensor((4,), "float32"), y: R.Prim("int64")):
    z = R.add(x, y)
    return z
''')


def test_dtype_and_str_values():
    mod = module_of(DTYPE_AND_STR)
    text = assert_round_trip(mod)
    assert 'R.astype(x, dtype="float16")' in text
    x = np.ones((2, 3), "float32")
    result = assert_runs_alike(mod, x)
    assert result[1] == "done" and result[0].dtype == np.float16


def test_r_dtype_rejects_an_unknown_dtype():
    with pytest.raises(ParseError, match="R.dtype"):
        rx.from_source('''
@R.function
def main(x: R.Tensor((4,), "float32")):
    y = R.astype(x, R.dtype("float33"))
    return y
''')


@pytest.mark.parametrize("n,m", [(1, 1), (2, 3), (0, 4)])
def test_shape_arithmetic(n, m):
    mod = module_of(SHAPE_ARITHMETIC)
    assert_round_trip(mod)
    x = np.arange(n * m, dtype="float32").reshape(n, m)
    assert_runs_alike(mod, x, expected=np.concatenate([x.reshape(-1), np.zeros(2, "float32")]))


BINARY_OPS = ["add", "subtract", "multiply", "floor_divide", "floor_mod", "maximum", "minimum",
              "equal", "not_equal", "less", "less_equal", "greater", "greater_equal"]


def _python_meaning(name: str, a, b):
    import operator
    return {"add": operator.add, "subtract": operator.sub, "multiply": operator.mul,
            "floor_divide": operator.floordiv, "floor_mod": operator.mod, "maximum": max,
            "minimum": min, "equal": operator.eq, "not_equal": operator.ne, "less": operator.lt,
            "less_equal": operator.le, "greater": operator.gt, "greater_equal": operator.ge}[name](a, b)


@settings(max_examples=8, deadline=None)
@given(name=st.sampled_from(BINARY_OPS), dtype=st.sampled_from(["int64", "float32"]),
       a=st.integers(-50, 50), b=st.integers(1, 20), seed=st.integers(0, 3))
def test_every_binary_op_on_prims_and_on_a_tensor_and_a_prim(name, dtype, a, b, seed):
    """Both operand kinds on the interpreter and both VMs, against Python's meaning (scalars)
    and NumPy's (a tensor with n elements, n drawn)."""
    compare = name in ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal")
    tensor_result = "bool" if compare else dtype
    result = f'R.Prim("{tensor_result}")'
    mod = module_of(f'''
@R.function
def main(x: R.Tensor(("n",), "{dtype}"), a: R.Prim("{dtype}"), b: R.Prim("{dtype}")):
    n = T.int64()
    c: {result} = R.{name}(a, b)
    t: R.Tensor((n,), "{tensor_result}") = R.{name}(x, b)
    return (c, t)
''')
    value = int if dtype == "int64" else float
    x = np.random.default_rng(seed).integers(-9, 9, size=seed + 1).astype(dtype)
    expected_scalar = _python_meaning(name, value(a), value(b))
    reference = getattr(np, {"add": "add", "subtract": "subtract", "multiply": "multiply",
                             "floor_divide": "floor_divide", "floor_mod": "mod"}.get(name, name))
    expected_tensor = np.asarray(reference(x, np.asarray(value(b), dtype)), dtype=tensor_result)
    assert_runs_alike(mod, x, value(a), value(b), expected=(expected_scalar, expected_tensor))
