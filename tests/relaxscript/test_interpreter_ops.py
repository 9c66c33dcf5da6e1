"""The interpreter on modules built with the BlockBuilder and the op constructors:
op calls go through the registry's NumPy references, and every binding's value
agrees with its deduced annotation."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tensorir as tir
from relaxscript import BlockBuilder, interpret, op
from relaxscript.expr import Call, Tuple, Var
from relaxscript.interpreter import ShapeTuple
from relaxscript.struct_info import TensorStructInfo, TupleStructInfo
from tensorir.arith import evaluate
from tensorir.errors import ShapeMismatchError

from .test_interpreter import exp_prim_func


def deduced_shape_checker(symbols):
    """An instrument hook asserting each tensor binding has its deduced shape and dtype."""
    checked = []

    def check(func_name, var, value):
        sinfo = var.struct_info
        if isinstance(sinfo, TensorStructInfo) and isinstance(value, np.ndarray):
            if sinfo.dtype is not None:
                assert value.dtype.name == sinfo.dtype, var.name_hint
            if sinfo.shape is not None:
                expected = tuple(evaluate(d, symbols) for d in sinfo.shape)
                assert value.shape == expected, (var.name_hint, expected, value.shape)
            checked.append(var.name_hint)
    return check, checked


def mlp_module():
    """main(x: (n, 8), w: (8, 6)) -> softmax(relu(x @ w + 1)), summed per row, plus its shape."""
    n = tir.size_var("n")
    x = Var("x", TensorStructInfo((n, 8), "float32"))
    w = Var("w", TensorStructInfo((8, 6), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            h = bb.emit(op.matmul(x, w), "h")
            h = bb.emit(op.add(h, op.ones((6,), "float32")), "biased")
            h = bb.emit(op.nn.relu(h), "relu")
            p = bb.emit(op.nn.softmax(h, axis=-1), "probs")
            s = bb.emit(op.sum(p, axis=1), "rowsum")
            out = bb.emit_output(Tuple([p, s]), "out")
        bb.emit_func_output(out)
    return bb.get(), n


@pytest.mark.parametrize("rows", [1, 2, 5])
def test_registry_ops_match_numpy(rows):
    mod, n = mlp_module()
    rng = np.random.default_rng(rows)
    x = rng.standard_normal((rows, 8)).astype("float32")
    w = rng.standard_normal((8, 6)).astype("float32")
    hook, checked = deduced_shape_checker({n: rows})
    probs, rowsum = interpret(mod, "main", x, w, instrument=hook, check_bindings=True)
    h = np.maximum(x @ w + 1, 0)
    e = np.exp(h - h.max(axis=-1, keepdims=True))
    np.testing.assert_allclose(probs, e / e.sum(-1, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(rowsum, np.ones(rows), rtol=1e-5)
    assert {"h", "biased", "relu", "probs", "rowsum"} <= set(checked)


def test_match_cast_after_data_dependent_op():
    x = Var("x", TensorStructInfo(ndim=1, dtype="int64"))
    m = tir.size_var("m")
    bb = BlockBuilder()
    with bb.function("main", [x]):
        u = bb.emit(op.unique(x), "u")
        fixed = bb.match_cast(u, TensorStructInfo((m,), "int64"), "fixed")
        shape = bb.emit(op.shape_of(fixed), "shape")
        bb.emit_func_output(Tuple([fixed, shape]))
    values, shape = interpret(bb.get(), "main", np.array([3, 1, 3, 2, 1], "int64"))
    np.testing.assert_array_equal(values, [1, 2, 3])
    assert isinstance(shape, ShapeTuple) and shape == (3,)


def test_split_then_subgraph_call_and_call_tir():
    n = tir.size_var("n")
    bb = BlockBuilder()
    exp_gv = bb.add_func(exp_prim_func(), "exp")
    y = Var("y", TensorStructInfo((n, 4), "float32"))
    with bb.function("halves", [y]):
        parts = bb.emit(op.split(y, 2, axis=1), "parts")
        bb.emit_func_output(parts)
    halves_gv = bb.get().get_global_var("halves")
    x = Var("x", TensorStructInfo((n, 4), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            e = bb.emit(op.call_tir(exp_gv, [x], TensorStructInfo((n, 4), "float32")), "e")
            neg = bb.emit(op.call_dps_library("numpy.negative", [e], TensorStructInfo((n, 4), "float32")),
                          "neg")
            gv = bb.emit_output(neg, "gv")
        pair = bb.emit(Call(halves_gv, [gv]), "pair")
        bb.emit_func_output(pair)
    data = np.linspace(-1, 1, 12, dtype="float32").reshape(3, 4)
    left, right = interpret(bb.get(), "main", data)
    np.testing.assert_allclose(left, -np.exp(data[:, :2]), rtol=1e-6)
    np.testing.assert_allclose(right, -np.exp(data[:, 2:]), rtol=1e-6)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 6), st.integers(1, 4))
def test_reshape_and_shape_values_for_random_sizes(rows, cols):
    n, m = tir.size_var("n"), tir.size_var("m")
    x = Var("x", TensorStructInfo((n, m), "int32"))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        flat = bb.emit(op.reshape(x, (n * m,)), "flat")
        two = bb.emit(op.full((1,), 2, "int32"), "two")
        doubled = bb.emit(op.multiply(flat, two), "doubled")
        shape = bb.emit(op.shape_of(doubled), "shape")
        bb.emit_func_output(Tuple([doubled, shape]))
    data = np.arange(rows * cols, dtype="int32").reshape(rows, cols)
    hook, checked = deduced_shape_checker({n: rows, m: cols})
    result, shape = interpret(bb.get(), "main", data, instrument=hook)
    np.testing.assert_array_equal(result, data.reshape(-1) * 2)
    assert shape == (rows * cols,)
    assert checked == ["flat", "two", "doubled"]


def test_declared_return_annotation_is_checked_at_run_time():
    # unique(x) has no static length, so "same length as x" can only be checked when run.
    n = tir.size_var("n")
    x = Var("x", TensorStructInfo((n,), "int64"))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        u = bb.emit(op.unique(x), "u")
        bb.emit_func_output(u, TensorStructInfo((n,), "int64"))
    np.testing.assert_array_equal(interpret(bb.get(), "main", np.array([2, 1], "int64")), [1, 2])
    with pytest.raises(ShapeMismatchError) as info:
        interpret(bb.get(), "main", np.array([2, 2, 1], "int64"))
    message = str(info.value)
    assert "function 'main', return value" in message
    assert "symbolic var n: expected 3 (bound by x.shape[0]), got 2" in message


def test_tuple_annotation_of_split_holds_at_run_time():
    n = tir.size_var("n")
    x = Var("x", TensorStructInfo((n * 2,), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        parts = bb.emit(op.split(x, 2), "parts")
        bb.emit_func_output(parts)
    func = bb.get()["main"]
    assert isinstance(func.params[0].struct_info, TensorStructInfo)
    assert isinstance(func.body.struct_info, TupleStructInfo)
    a, b = interpret(bb.get(), "main", np.arange(6, dtype="float32"))
    np.testing.assert_array_equal(a, [0, 1, 2])
    np.testing.assert_array_equal(b, [3, 4, 5])


def test_runtime_failure_of_an_op_names_the_function_and_shapes():
    n, m = tir.size_var("n"), tir.size_var("m")
    x = Var("x", TensorStructInfo((n,), "float32"))
    y = Var("y", TensorStructInfo((m,), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x, y]):
        s = bb.emit(op.add(x, y), "s")  # deducible only if n == m, which holds at run time or not
        bb.emit_func_output(s)
    np.testing.assert_array_equal(interpret(bb.get(), "main", np.ones(2, "float32"), np.ones(2, "float32")),
                                  [2, 2])
    with pytest.raises(ShapeMismatchError, match=r"function 'main': R.add failed on arguments \(2,\), \(3,\)"):
        interpret(bb.get(), "main", np.ones(2, "float32"), np.ones(3, "float32"))
