"""The registry API, one sample call of every operator (constructor round trip,
deduction vs reference), cross-level calls and the paper's Figure 2."""
import inspect

import numpy as np
import pytest

import tensorir as tir
from relaxscript import op
from relaxscript.expr import Call, ExternFunc, GlobalVar, Op, Tuple, Var
from relaxscript.op import DeductionContext, OpAttributeError, OpDeductionError, OpSpec
from relaxscript.op.layout_transform import IndexMap
from relaxscript.struct_info import ShapeStructInfo, TensorStructInfo, TupleStructInfo

from .op_helpers import SYMBOLS, check_call, infer, shape_equal, tensor_var, valid_index_arrays

n, m, k = SYMBOLS
X = tensor_var("x", (n, 4))
X3 = tensor_var("x3", (2, n, 4))
IDX = tensor_var("idx", (m,), "int64")
B = tensor_var("b", (n, 4), "bool")
W = tensor_var("w", (4,))
IMAGE = tensor_var("image", (2, 3, n, m))  # NCHW


_LT = [tir.Var(name, "int64") for name in ("a", "b", "c")]
# (2, n, 4) -> (n, 2, 2, 3): a permutation with the last dim split by a non-divisor (padding)
_SPLIT_LAST = IndexMap(_LT, [_LT[1], _LT[0], _LT[2] // 3, _LT[2] % 3])


def sample_calls():
    """One call per operator, with attributes away from their defaults."""
    calls = [getattr(op, name)(X) for name in
             ("abs", "negative", "square", "sign", "floor", "ceil", "round", "exp", "log", "sqrt",
              "rsqrt", "sin", "cos", "tan", "tanh", "sigmoid", "erf", "isnan", "isinf", "isfinite",
              "logical_not", "flatten", "unique", "nonzero", "shape_of", "trunc", "asin", "acos",
              "atan", "sinh", "cosh", "asinh", "acosh", "atanh")]
    calls += [op.bitwise_not(IDX)]
    calls += [getattr(op, name)(IDX, IDX) for name in
              ("bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift")]
    calls += [getattr(op, name)(X, W) for name in
              ("add", "subtract", "multiply", "divide", "floor_divide", "floor_mod", "mod", "power",
               "maximum", "minimum", "equal", "not_equal", "less", "less_equal", "greater",
               "greater_equal")]
    calls += [getattr(op, name)(B, B) for name in ("logical_and", "logical_or", "logical_xor")]
    calls += [getattr(op, name)(X3, axis=(0, -1), keepdims=True)
              for name in ("sum", "mean", "max", "min", "prod", "variance")]
    calls += [getattr(op, name)(X3, axis=1, keepdims=True) for name in ("argmax", "argmin")]
    calls += [getattr(op.nn, name)(X) for name in ("relu", "gelu", "gelu_tanh", "silu")]
    calls += [
        op.where(B, X, 0.5), op.clip(X, -1.0, 1.0), op.astype(X, "float16"),
        op.reshape(X3, (-1, 4)), op.permute_dims(X3, (2, 0, 1)), op.expand_dims(X, (0, -1)),
        op.squeeze(tensor_var("u", (n, 1)), 1), op.broadcast_to(W, (m, n, 4)), op.repeat(X, 2, 0),
        op.tile(X, (2, 1, 3)), op.concat([X, X], 1), op.split(X3, (1, 3), -1),
        op.take(X, IDX, 0), op.strided_slice(X3, [1, 2], [n - 1, 1], [0, 4], [-1, 2]),
        op.matmul(X3, tensor_var("r", (4, m)), "float64"),
        op.nn.softmax(X, 0), op.nn.log_softmax(X, 1),
        op.nn.layer_norm(X3, tensor_var("g", (n, 4)), tensor_var("b2", (n, 4)), (1, 2), 1e-6),
        op.nn.rms_norm(X, W, -1, 1e-6),
        op.nn.conv2d(IMAGE, tensor_var("w4", (6, 1, 2, 3)), (1, 2), (1, 0, 0, 1), (2, 1), 3),
        op.nn.conv2d_transpose(IMAGE, tensor_var("wt", (3, 2, 3, 2)), (2, 1), (1, 0, 0, 1), (1, 0),
                               (1, 2), 1),
        op.nn.conv1d(tensor_var("s3", (2, 2, n)), tensor_var("w3", (3, 2, 2)), 2, 1, 1, 1),
        op.nn.max_pool2d(IMAGE, (2, 2), (1, 2), (1, 1), (1, 1), True),
        op.nn.avg_pool2d(IMAGE, (2, 3), (2, 1), (0, 1, 1, 1), (1, 1), True, True),
        op.nn.adaptive_avg_pool2d(IMAGE, (2, 3)),
        op.cumsum(X3, 1, "float64", True), op.cumsum(X), op.flip(X3, -2),
        op.one_hot(IDX, 2.5, 0.0, 4, 0),
        op.gather_nd(X3, tensor_var("nd", (m, 2), "int64"), 0),
        op.scatter_nd(X3, tensor_var("nd", (m, 2), "int64"), tensor_var("upd", (m, 4)), "add"),
        op.scatter_elements(X, tensor_var("se", (2, 4), "int64"), tensor_var("sv", (2, 4)), 0,
                            "max"),
        op.argsort(X3, 1, True, "int64"), op.topk(X3, 2, -1, "both", False, "int64"),
        op.sort(X3, 1, True), op.cumprod(X3, -1, "float64", True), op.std(X3, (0, 2), True),
        op.einsum([X3, tensor_var("e2", (4, m))], "bij,jk->bik"),
        op.einsum([tensor_var("e3", (1, n, 4)), X3], "...j,...j->..."),
        op.nn.batch_norm(X3, tensor_var("c1", (n,)), tensor_var("c2", (n,)), tensor_var("c3", (n,)),
                         tensor_var("c4", (n,)), 1, 1e-3, True, False, 0.25, True),
        op.nn.group_norm(tensor_var("gx", (2, 4, n)), tensor_var("gg", (4,)),
                         tensor_var("gb", (4,)), 2, 1, (2,), 1e-4, False, True),
        op.nn.instance_norm(X3, tensor_var("ig", (n,)), tensor_var("ib", (n,)), 1, None),
        op.nn.prelu(X3, tensor_var("pa", (n,)), 1),
        op.layout_transform(X3, _SPLIT_LAST, 1.5), op.concat([X, W], None),
        op.nn.pad(X3, (0, 1, 2, -1, 1, 0), 0.5), op.nn.leakyrelu(X, 0.3),
        op.nn.pixel_shuffle(tensor_var("ps", (2, 8, n, 3)), 2), op.nn.dropout(X3, 0.25),
        op.nn.conv3d(tensor_var("v3", (1, 2, 3, n, 4)), tensor_var("k3", (4, 1, 2, 1, 2)), (1, 1, 2),
                     (0, 1, 0, 1, 0, 1), 1, 2),
        op.nn.max_pool3d(tensor_var("p3", (1, 2, n, 3, 4)), (2, 1, 2), (1, 1, 2), (0, 1, 0, 1, 0, 1)),
        op.nn.avg_pool3d(tensor_var("p3", (1, 2, n, 3, 4)), (2, 2, 2), (2, 1, 1), (1, 0, 0, 1, 1, 1),
                         (1, 1, 1), True, True),
        op.nn.adaptive_avg_pool3d(tensor_var("p3", (1, 2, n, 3, 4)), (2, 2, 3)),
        op.nn.conv3d_transpose(tensor_var("t3", (1, 2, 3, n, 2)), tensor_var("tk", (2, 1, 2, 1, 2)),
                               (2, 1, 1), (1, 0, 0, 0, 0, 1), (1, 0, 0), (1, 1, 2), 2),
        op.median(X3, [1]), op.median(X3, -1, True), op.median(X), op.median(X3, None, True),
        op.image.affine_grid(tensor_var("th", (m, 2, 3)), (n, 3)),
        op.image.affine_grid(tensor_var("th", (m, 2, 3)), (2, n * 2), False),
        op.take(X, IDX, 0, "clip"), op.take(X, IDX, None, "wrap"),
        op.mod(X, 1.5),
        op.gather_elements(X3, tensor_var("ge", (1, n, 3), "int64"), -1),
        op.multinomial_from_uniform(tensor_var("mp", (n, 4)), tensor_var("mu", (m, 1)),
                                    tensor_var("ms", (m, 1), "int64"), "int32"),
        op.null_value(),
        op.index_put(X, (tensor_var("ip0", (m,), "int64"), tensor_var("ip1", (m,), "int64")),
                     tensor_var("ipv", (m,)), True),
        op.slice_scatter(X3, tensor_var("ss", (2, n, 2)), 1, 4, 2, -1),
        op.slice_scatter(X3, tensor_var("ss0", (1, n, 4)), 1, None, 1, 0),
        op.image.resize3d(tensor_var("vol", (1, 2, n, 3, 4)), (m, 2, 3), None, "NCDHW", "linear",
                          "align_corners"),
        op.image.resize3d(tensor_var("vol", (1, 2, n, 3, 4)), (n * 2, 4, 2), None, "NDHWC",
                          "nearest_neighbor", "half_pixel", "round_prefer_floor"),
        op.quantize(X3, tensor_var("qs", (4,)), tensor_var("qz", (4,), "int8"), -1, "int8"),
        op.dequantize(tensor_var("qd", (2, n, 4), "uint8"), tensor_var("qs0", ()),
                      tensor_var("qz0", (), "int32"), axis=1, out_dtype="float16"),
        op.image.resize2d(IMAGE, (m, 3), None, "NCHW", "linear", "align_corners"),
        op.image.resize2d(IMAGE, (n * 2, 2), None, "NCHW", "nearest_neighbor", "asymmetric", "floor"), op.nn.softplus(X, 2.0, 1.0), op.nn.selu(X),
        op.nn.cross_entropy_with_logits(X3, tensor_var("lab", (2, n, 4))),
        op.nn.nll_loss(X3, tensor_var("nt", (2, 4), "int64"), tensor_var("nw", (n,)), "mean", -1),
        op.collapse_sum_to(X3, (n, 1)), op.collapse_sum_like(X3, tensor_var("ct", (1, n, 4))),
        op.shape_to_tensor((n, 4, m * 2)), op.tensor_to_shape(tensor_var("dims3", (3,), "int64")),
        op.nn.attention(tensor_var("q", (2, n, 3, 4)), tensor_var("kk", (2, m, 3, 4)),
                        tensor_var("v", (2, m, 3, 5)), tensor_var("bias", (n, m)), 0.5, "BottomRight"),
        op.full((n, 2), 1.5, "float32"), op.zeros((n, 3), "int32"), op.ones((2, m), "float32"),
        op.full_like(X, 2.0), op.zeros_like(X, "int8"), op.ones_like(X),
        op.arange(1, n * 2 + 1, 2, "int32"), op.triu(X, 1), op.tril(X, -1),
        op.dequantize(tensor_var("q4", (32, n), "uint8"), tensor_var("s4", (2, n)),
                      tensor_var("m4", (2, n)), format="q4_1"),
        op.dequantize(tensor_var("q8", (64, m), "int8"), tensor_var("s8", (2, m)), format="q8_0"),
        op.fake_quantize(tensor_var("a8", (n, 64)), format="q8_0"),
        op.call_tir(GlobalVar("exp"), [X], TensorStructInfo((n, 4), "float32")),
        op.call_tir_inplace(GlobalVar("exp_inplace"), [X], [0], TensorStructInfo((n, 4), "float32")),
        op.call_dps_library("numpy.negative", [X], TensorStructInfo((n, 4), "float32")),
        op.call_dps_packed("numpy.negative", [X], TensorStructInfo((n, 4), "float32")),
        op.call_pure_packed("numpy.negative", X, sinfo_args=TensorStructInfo((n, 4), "float32")),
    ]
    return calls


# The impure operators are the lowered forms that memory planning introduces
# (explicit allocation, storage reuse, destination-passing calls); they never
# appear in user programs and are exercised by the memory-planning tests
# (test_call_tir_rewrite.py, test_memory_plan.py, test_memory_checker.py).
LOWERED_MEMORY_OPS = {
    "relax.builtin.alloc_tensor", "relax.memory.alloc_storage", "relax.memory.alloc_tensor",
    "relax.memory.kill_storage", "relax.memory.kill_tensor", "relax.call_tir_dps",
    "relax.call_dps_library_dps",
}


def _is_lowered_memory_op(name: str) -> bool:
    return name.startswith(("relax.memory.", "relax.builtin.")) or name.endswith("_dps")


def test_every_registered_operator_has_a_sample():
    """Every pure (library) operator has a sample call below."""
    names = {c.op.name for c in sample_calls()}
    assert names == {spec.name for spec in op.all_op_specs() if spec.pure}


# Operators run for their effect (op/side_effects.py): impure, with NumPy references that
# the interpreter and the VM run in program order (tests/relaxscript/test_tvm_side_effects.py).
SIDE_EFFECT_OPS = {"relax.assert_op", "relax.print"}


def test_impure_operators_are_exactly_the_lowered_memory_ops():
    impure = {spec.name for spec in op.all_op_specs() if not spec.pure} - SIDE_EFFECT_OPS
    assert impure == LOWERED_MEMORY_OPS
    assert all(not op.get_op_spec(name).pure and op.get_op_spec(name).reference is not None
               for name in SIDE_EFFECT_OPS)
    assert all(_is_lowered_memory_op(name) for name in impure)
    # no library operator hides under the lowered namespaces
    assert not any(_is_lowered_memory_op(spec.name) for spec in op.all_op_specs() if spec.pure)
    # lowered ops have no NumPy reference: the interpreter implements each one itself
    from relaxscript.interpreter import BUILTINS
    assert all(op.get_op_spec(name).reference is None and name in BUILTINS for name in impure)


def test_registry_api():
    assert op.get_op("relax.add") is op.get_op("relax.add")
    assert isinstance(op.get_op("relax.nn.softmax"), Op)
    spec = op.get_op_spec("relax.nn.softmax")
    assert isinstance(spec, OpSpec) and spec.path == "nn.softmax" and spec.attr_names == ("axis",)
    assert op.add(X, X).op is op.get_op("relax.add")
    with pytest.raises(OpDeductionError, match="unknown operator"):
        op.get_op_spec("relax.no_such_op")
    with pytest.raises(ValueError, match="already registered"):
        op.register_op("relax.add", spec.infer, None)
    assert all(s.pure for s in op.all_op_specs()
               if not _is_lowered_memory_op(s.name) and s.name not in SIDE_EFFECT_OPS)


@pytest.mark.parametrize("call", sample_calls(), ids=lambda c: c.op.name)
def test_constructor_accepts_its_normalised_call_back(call):
    """The parser rebuilds a printed call as constructor(*args, **attrs)."""
    spec = op.get_op_spec(call.op.name)
    params = inspect.signature(spec.constructor).parameters
    assert all(name in params for name in spec.attr_names)
    assert set(call.attrs) == set(spec.attr_names)
    if call.op.name in ("relax.call_tir", "relax.call_tir_inplace", "relax.call_dps_library",
                        "relax.call_dps_packed", "relax.call_pure_packed"):
        return
    rebuilt = spec.constructor(*call.args, **call.attrs)
    tir.assert_structural_equal(rebuilt, call)


@pytest.mark.parametrize("call", [c for c in sample_calls() if op.get_op_spec(c.op.name).reference],
                         ids=lambda c: c.op.name)
def test_sample_deduction_matches_reference(call):
    env = {n: 3, m: 5, k: 2}
    rng = np.random.default_rng(0)
    arrays = {**valid_index_arrays(env, rng), "idx": np.array([0, 2, 1, 2, -3]),
              "u": np.ones((3, 1), "float32")}
    exact = call.op.name not in ("relax.unique", "relax.nonzero", "relax.tensor_to_shape")
    check_call(call, env, rng, arrays, exact=exact)


def test_deduction_context():
    ctx = DeductionContext(location="model.py:12")
    with pytest.raises(OpDeductionError, match=r"model\.py:12"):
        op.get_op_spec("relax.add").infer(op.add(X, tensor_var("y", (n, 5))), ctx)
    assert isinstance(OpDeductionError("x"), ValueError) and issubclass(OpAttributeError, ValueError)


# ---------------------------------------------------------------- cross-level calls
def test_call_tir_and_library_use_the_given_annotation():
    out = TensorStructInfo((n * 2,), "float32")
    call = op.call_tir(GlobalVar("f"), [X], out, tir_vars=[n])
    assert infer(call) is out and isinstance(call.args[1], Tuple) and len(call.args) == 3
    pair = op.call_tir(GlobalVar("f"), (X,), [out, TensorStructInfo((n,), "int32")])
    assert isinstance(infer(pair), TupleStructInfo)
    lib = op.call_dps_library("numpy.negative", [X], out)
    assert isinstance(lib.args[0], ExternFunc) and infer(lib) is out
    with pytest.raises(OpAttributeError):
        op.call_tir(GlobalVar("f"), [X], ShapeStructInfo([n]))
    bad = Call(op.get_op("relax.call_tir"), [GlobalVar("f"), X], {}, [out])
    with pytest.raises(OpDeductionError, match="tuple"):
        infer(bad)
    assert op.get_op_spec("relax.call_tir").reference is None


# ---------------------------------------------------------------- paper Figure 2 / 3
def test_figure_2_and_3_annotations():
    x = tensor_var("x", (n, 2, 2))
    lv0 = Var("lv0", infer(op.reshape(x, (n, 4))))
    assert shape_equal(lv0.struct_info.shape, (n, 4))
    lv1 = Var("lv1", infer(op.flatten(lv0)))
    assert shape_equal(lv1.struct_info.shape, (n * 4,))
    relu = infer(op.nn.relu(lv1))
    assert shape_equal(relu.shape, (n * 4,))
    lv2 = infer(op.unique(lv1))
    assert (lv2.ndim, lv2.shape, lv2.dtype) == (1, None, "float32")
    halves = infer(op.split(lv1, 2))
    assert [shape_equal(f.shape, (n * 2,)) for f in halves.fields] == [True, True]
