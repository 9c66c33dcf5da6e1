"""LegalizeOps on elementwise ops: unary, activations, clip, astype, binary with
broadcasting, comparisons, logical ops and where. Each case: a one-op module
over symbolic shapes, legalized, and interpreted before/after on several bindings."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import numpy as np

import relaxscript as rx
from relaxscript import op

from .test_legalize_util import bindings, check_one_op, shape_templates

FAST = settings(max_examples=8, deadline=None)

# op name -> input range (positive where the function needs it)
UNARY_FLOAT = {"exp": (-2, 2), "log": (0.1, 3), "sqrt": (0.1, 3), "rsqrt": (0.1, 3),
               "sin": (-3, 3), "cos": (-3, 3), "tan": (-1, 1), "tanh": (-3, 3),
               "sigmoid": (-3, 3), "erf": (-2, 2), "abs": (-2, 2), "negative": (-2, 2),
               "square": (-2, 2), "sign": (-2, 2), "floor": (-3, 3), "ceil": (-3, 3),
               "round": (-3, 3), "isnan": (-2, 2), "isinf": (-2, 2), "isfinite": (-2, 2),
               "logical_not": (-1, 1), "trunc": (-3, 3), "asin": (-0.95, 0.95),
               "acos": (-0.95, 0.95), "atan": (-3, 3), "sinh": (-2, 2), "cosh": (-2, 2),
               "asinh": (-3, 3), "acosh": (1.05, 4), "atanh": (-0.95, 0.95)}
UNARY_INT = ["abs", "negative", "square", "sign", "floor", "ceil", "round", "trunc", "logical_not",
             "isnan", "isfinite"]


@pytest.mark.parametrize("name", sorted(UNARY_FLOAT))
@FAST
@given(template=shape_templates(0, 3), envs=bindings())
def test_unary_float(name, template, envs):
    low, high = UNARY_FLOAT[name]
    check_one_op(getattr(op, name), [template], ["float32"], envs, low=low, high=high)


@pytest.mark.parametrize("name", UNARY_INT)
@settings(max_examples=2, deadline=None)
@given(template=shape_templates(), envs=bindings())
def test_unary_int(name, template, envs):
    check_one_op(getattr(op, name), [template], ["int32"], envs, low=-3, high=3)


@pytest.mark.parametrize("name", ["exp", "tanh", "sigmoid"])
@settings(max_examples=2, deadline=None)
@given(template=shape_templates(), envs=bindings())
def test_unary_float16(name, template, envs):
    check_one_op(getattr(op, name), [template], ["float16"], envs)


@pytest.mark.parametrize("name", ["relu", "gelu", "gelu_tanh", "silu"])
@FAST
@given(template=shape_templates(), envs=bindings())
def test_activation(name, template, envs):
    check_one_op(getattr(op.nn, name), [template], ["float32"], envs, low=-4, high=4)


@FAST
@given(template=shape_templates(), envs=bindings(), bounds=st.tuples(st.floats(-2, 0), st.floats(0, 2)),
       dtype=st.sampled_from(["float32", "int64"]))
def test_clip(template, envs, bounds, dtype):
    lo, hi = (round(b, 2) for b in bounds)
    check_one_op(lambda x: op.clip(x, lo, hi), [template], [dtype], envs, low=-3, high=3)


@FAST
@given(template=shape_templates(), envs=bindings(),
       pair=st.sampled_from([("float32", "int32"), ("int64", "float32"), ("float32", "float16"),
                             ("int32", "bool"), ("bool", "float32"), ("float16", "float32")]))
def test_astype(template, envs, pair):
    source, target = pair
    check_one_op(lambda x: op.astype(x, target), [template], [source], envs, low=-3, high=3)


# ---------------------------------------------------------------- binary
@st.composite
def broadcast_operands(draw, count=2):
    """Operand templates that broadcast together: suffixes of one output
    template with some dims replaced by 1."""
    out = draw(shape_templates(1, 3))

    def operand():
        rank = draw(st.integers(0, len(out)))
        dims = out[len(out) - rank:]
        return [1 if draw(st.booleans()) and draw(st.booleans()) else d for d in dims]

    return [operand() for _ in range(count)]


ARITH = ["add", "subtract", "multiply", "divide", "floor_divide", "floor_mod", "power",
         "maximum", "minimum"]
COMPARE = ["equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
           "logical_and", "logical_or", "logical_xor"]


@pytest.mark.parametrize("name", ARITH + COMPARE)
@FAST
@given(pair=broadcast_operands(), envs=bindings(), dtype=st.sampled_from(["float32", "int32"]))
def test_binary(name, pair, envs, dtype):
    if dtype == "float32" and name in ("floor_divide", "floor_mod"):
        low, high = 1, 5   # integer-valued floats: floor(a / b) is exact
        check_one_op(lambda a, b: getattr(op, name)(op.round(a), op.round(b)), pair,
                     [dtype] * 2, envs, low=low, high=high)
        return
    low, high = ((1, 4) if name in ("divide", "floor_divide", "floor_mod", "power")
                 else (-3, 3))
    if name == "power" and dtype == "int32":
        # bases and exponents whose powers pass float32's 24 bits and int32's range (wrapping)
        low, high = (-40, 0), (40, 40)
    check_one_op(getattr(op, name), pair, [dtype] * 2, envs, low=low, high=high)


@pytest.mark.parametrize("name", ["bitwise_and", "bitwise_or", "bitwise_xor", "left_shift",
                                  "right_shift"])
@settings(max_examples=4, deadline=None)
@given(pair=broadcast_operands(), envs=bindings())
def test_bitwise(name, pair, envs):
    check_one_op(getattr(op, name), pair, ["int32"] * 2, envs, low=0, high=7)


@settings(max_examples=4, deadline=None)
@given(template=shape_templates(), envs=bindings())
def test_bitwise_not(template, envs):
    check_one_op(op.bitwise_not, [template], ["int32"], envs, low=-7, high=7)


@FAST
@given(templates=broadcast_operands(3), envs=bindings())
def test_where(templates, envs):
    check_one_op(op.where, templates, ["bool", "float32", "float32"], envs)


CLIP_UINT8 = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n",), "uint8")):
        with R.dataflow():
            z = R.clip(x, LOW, HIGH)
            R.output(z)
        return z
'''


@pytest.mark.parametrize("low, high", [(-3, 300), (-3, 100), (7, 1000)])
def test_clip_bounds_past_an_integer_range_clip_as_numpy(low, high):
    """s14: a bound outside the dtype's range (R.clip of uint8 by -3) raised a bare ValueError from
    the legalization ("integer -3 does not fit in uint8"); NumPy drops such a bound."""
    mod = rx.from_source(CLIP_UINT8.replace("LOW", str(low)).replace("HIGH", str(high)))
    x = np.array([0, 5, 99, 200, 255], np.uint8)
    expected = rx.interpret(mod, "main", x)
    np.testing.assert_array_equal(expected, np.clip(x, low, high))
    for target in ("interp", "c"):
        np.testing.assert_array_equal(rx.VirtualMachine(rx.build(mod, target=target))["main"](x), expected)


def test_clip_bounds_numpy_refuses_are_a_named_error():
    mod = rx.from_source(CLIP_UINT8.replace("LOW", "300").replace("HIGH", "400"))
    with pytest.raises(ValueError, match=r"R.clip of a uint8 tensor: the bound 300 is outside the uint8 range"):
        rx.build(mod, target="c")
