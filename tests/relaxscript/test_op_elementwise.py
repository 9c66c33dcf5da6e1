"""Deduction vs NumPy for elementwise unary/binary operators, where, clip, astype."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tensorir as tir
from relaxscript import op
from relaxscript.op import OpAttributeError, OpDeductionError
from relaxscript.struct_info import TensorStructInfo

from .op_helpers import SYMBOLS, check_call, environments, infer, symbolic_shapes, tensor_var

FLOAT_ONLY = ["exp", "log", "sqrt", "rsqrt", "sin", "cos", "tan", "tanh", "sigmoid", "erf",
              "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh"]
ANY_DTYPE = ["abs", "negative", "square", "sign", "floor", "ceil", "round", "trunc"]
BITWISE = ["bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift"]
PREDICATES = ["isnan", "isinf", "isfinite", "logical_not"]
ARITH = ["add", "subtract", "multiply", "divide", "floor_divide", "floor_mod", "power",
         "maximum", "minimum"]
COMPARE = ["equal", "not_equal", "less", "less_equal", "greater", "greater_equal"]
LOGICAL = ["logical_and", "logical_or", "logical_xor"]


@st.composite
def broadcast_pair(draw):
    """Two shapes that broadcast provably: suffixes of one shape with some dims set to 1."""
    out = draw(symbolic_shapes(max_ndim=4))

    def operand():
        keep = draw(st.integers(0, len(out)))
        return tuple(tir.const(1) if draw(st.booleans()) and draw(st.booleans()) else d
                     for d in out[len(out) - keep:])
    return operand(), operand()


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from(FLOAT_ONLY + ANY_DTYPE + PREDICATES),
       shape=symbolic_shapes(), env=environments(), dtype=st.sampled_from(["float32", "int32"]),
       seed=st.integers(0, 2**16))
def test_unary_matches_numpy(name, shape, env, dtype, seed):
    if name in FLOAT_ONLY:
        dtype = "float32"
    sinfo = check_call(getattr(op, name)(tensor_var("x", shape, dtype)), env,
                       np.random.default_rng(seed))
    assert sinfo.dtype == ("bool" if name in PREDICATES else dtype)


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(ARITH + COMPARE + LOGICAL), shapes=broadcast_pair(),
       env=environments(), dtype=st.sampled_from(["float32", "int32"]), seed=st.integers(0, 2**16))
def test_binary_broadcast_matches_numpy(name, shapes, env, dtype, seed):
    if name in LOGICAL:
        dtype = "bool"
    a, b = tensor_var("a", shapes[0], dtype), tensor_var("b", shapes[1], dtype)
    sinfo = check_call(getattr(op, name)(a, b), env, np.random.default_rng(seed))
    assert sinfo.dtype == (dtype if name in ARITH else "bool")


@settings(max_examples=25, deadline=None)
@given(shapes=broadcast_pair(), cond_first=st.booleans(), env=environments(),
       seed=st.integers(0, 2**16))
def test_where_matches_numpy(shapes, cond_first, env, seed):
    cond_shape, value_shape = shapes if cond_first else shapes[::-1]
    call = op.where(tensor_var("c", cond_shape, "bool"), tensor_var("x", value_shape),
                    tensor_var("y", cond_shape))
    check_call(call, env, np.random.default_rng(seed))


@settings(max_examples=20, deadline=None)
@given(shape=symbolic_shapes(), env=environments(), seed=st.integers(0, 2**16),
       bounds=st.tuples(st.integers(-3, 0), st.integers(0, 3)),
       dtype=st.sampled_from(["float32", "int64"]), target=st.sampled_from(["float16", "int8", "bool"]))
def test_clip_and_astype(shape, env, seed, bounds, dtype, target):
    rng = np.random.default_rng(seed)
    x = tensor_var("x", shape, dtype)
    assert check_call(op.clip(x, *bounds), env, rng).dtype == dtype
    assert check_call(op.astype(x, target), env, rng).dtype == target


def test_python_scalars_take_the_tensor_dtype():
    n = SYMBOLS[0]
    x = tensor_var("x", (n, 4), "float16")
    call = op.multiply(x, 2)
    assert call.args[1].data.dtype == np.float16
    assert infer(call).dtype == "float16"
    assert infer(op.add(1, tensor_var("i", (n,), "int32"))).dtype == "int32"


def test_provable_conflict_names_both_annotations():
    n = SYMBOLS[0]
    call = op.add(tensor_var("a", (n, 4)), tensor_var("b", (n, 5)))
    with pytest.raises(OpDeductionError) as err:
        infer(call)
    message = str(err.value)
    assert "relax.add" in message and "4" in message and "5" in message
    assert message.count("R.Tensor") == 2


def test_symbolic_expressions_are_compared_by_the_analyzer():
    n = SYMBOLS[0]
    # n * 2 + 2 and 2 * (n + 1) are the same dim: the result keeps it.
    sinfo = infer(op.add(tensor_var("a", (n * 2 + 2,)), tensor_var("b", (2 * (n + 1),))))
    assert sinfo.shape is not None
    # n + 1 vs n + 2 differ and n + 2 is never 1, but n + 1 may be 1 (n = 0): not an error.
    coarse = infer(op.add(tensor_var("a", (n + 1,)), tensor_var("b", (n + 2,))))
    assert coarse.shape is None and coarse.ndim == 1
    with pytest.raises(OpDeductionError):
        infer(op.add(tensor_var("a", (n + 2,)), tensor_var("b", (n + 3,))))


def test_undecidable_dims_give_rank_only():
    n, m, _ = SYMBOLS
    sinfo = infer(op.multiply(tensor_var("a", (n, 3)), tensor_var("b", (2, m, 1))))
    assert sinfo == sinfo and sinfo.shape is None and sinfo.ndim == 3 and sinfo.dtype == "float32"


def test_coarse_inputs_give_coarse_outputs():
    n = SYMBOLS[0]
    two_d = tensor_var("a", None, "float32", ndim=2)
    assert (infer(op.add(two_d, tensor_var("b", (n, 4)))).ndim,
            infer(op.add(two_d, tensor_var("b", (n, 4, 1)))).ndim) == (2, 3)
    unknown = infer(op.add(tensor_var("a", None, None), tensor_var("b", (n,), None)))
    assert unknown.ndim == -1 and unknown.dtype is None
    no_dtype = infer(op.exp(tensor_var("a", (n,), None)))
    assert no_dtype.dtype is None and no_dtype.shape is not None
    assert infer(op.less(tensor_var("a", None, None), tensor_var("b", None, None))).dtype == "bool"


def test_dtype_errors():
    n = SYMBOLS[0]
    with pytest.raises(OpDeductionError, match="different dtypes"):
        infer(op.add(tensor_var("a", (n,), "float32"), tensor_var("b", (n,), "int32")))
    with pytest.raises(OpDeductionError, match="floating-point"):
        infer(op.exp(tensor_var("a", (n,), "int32")))
    with pytest.raises(OpDeductionError, match="bool"):
        infer(op.where(tensor_var("c", (n,)), tensor_var("a", (n,)), tensor_var("b", (n,))))
    with pytest.raises(OpAttributeError, match="dtype"):
        op.astype(tensor_var("a", (n,)), "float33")
    with pytest.raises(OpAttributeError, match="min"):
        op.clip(tensor_var("a", (n,)), 2, 1)


def test_integer_divide_truncates_toward_zero():
    ref = op.get_op_spec("relax.divide").reference
    out = ref(np.array([7, -7, 7, -7], "int32"), np.array([2, 2, -2, -2], "int32"))
    assert out.dtype == np.int32 and out.tolist() == [3, -3, -3, 3]
    assert isinstance(infer(op.divide(tensor_var("a", (2,), "int32"), tensor_var("b", (2,), "int32"))),
                      TensorStructInfo)


@settings(max_examples=30, deadline=None)
@given(name=st.sampled_from(BITWISE), shapes=broadcast_pair(), env=environments(),
       seed=st.integers(0, 2**16))
def test_bitwise_matches_numpy(name, shapes, env, seed):
    a, b = tensor_var("a", shapes[0], "int32"), tensor_var("b", shapes[1], "int32")
    assert check_call(getattr(op, name)(a, b), env, np.random.default_rng(seed)).dtype == "int32"
    assert check_call(op.bitwise_not(a), env, np.random.default_rng(seed)).dtype == "int32"


@pytest.mark.parametrize("call", [lambda x: op.bitwise_and(x, x), lambda x: op.bitwise_not(x),
                                  lambda x: op.left_shift(x, x)])
def test_bitwise_refuses_floats(call):
    with pytest.raises(OpDeductionError, match="requires (an )?integer"):
        infer(call(tensor_var("x", (4,), "float32")))
