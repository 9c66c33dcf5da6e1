"""LegalizeOps as a pass: sharing of identical prim_funcs, tir_vars for symbolic
vars no buffer defines, fresh loop-level vars, coarse and data-dependent
calls left alone, customisation, round trip, and a small MLP end to end."""
from __future__ import annotations

import numpy as np
import pytest

import relaxscript as rx
import tensorir as tir
from relaxscript import op
from relaxscript.expr import Call, ShapeExpr, Var
from relaxscript.struct_info import TensorStructInfo
from relaxscript.transform import LegalizeOps
from relaxscript.transform.legalize import legalized_op_names
from tensorir import expr as E
from tensorir.functor import collect

from .test_legalize_util import legalize_and_check, one_op_module, op_calls, symbols

MLP = '''
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 16), "float32"), w1: R.Tensor((16, 32), "float32"),
             b1: R.Tensor((32,), "float32"), w2: R.Tensor((32, 16), "float32"),
             b2: R.Tensor((16,), "float32")) -> R.Tensor(("n", 16), "float32"):
        n = T.int64()
        with R.dataflow():
            h = R.matmul(x, w1)
            h1 = R.add(h, b1)
            a = R.nn.gelu_tanh(h1)
            o = R.matmul(a, w2)
            o1 = R.add(o, b2)
            y = R.add(o1, x)
            R.output(y)
        return y
'''


def _call_tirs(func):
    return [c for c in collect(func, lambda n: isinstance(n, Call))
            if c.op.name == "relax.call_tir"]


def test_mlp_legalizes_fully_and_interprets_equal():
    mod = rx.from_source(MLP)
    rng = np.random.default_rng(0)
    weights = [rng.standard_normal(s).astype("float32") * 0.3
               for s in ((16, 32), (32,), (32, 16), (16,))]
    inputs = [[rng.standard_normal((n, 16)).astype("float32"), *weights] for n in (1, 3, 7)]
    legalized = legalize_and_check(mod, inputs)
    # one prim_func per distinct op and static shape: bias adds (32 and 16 wide), residual add
    assert sorted(legalized.prim_funcs) == ["add", "add1", "add2", "gelu_tanh", "matmul", "matmul1"]
    assert op_calls(legalized).count("relax.call_tir") == 6


def test_identical_prim_funcs_are_shared_across_symbolic_names():
    syms = symbols()
    n, m = syms["n"], syms["m"]
    sinfos = [TensorStructInfo((n, 4), "float32"), TensorStructInfo((m, 4), "float32"),
              TensorStructInfo((n, 4), "int32")]
    bb = rx.BlockBuilder()
    params = [Var(name, s) for name, s in zip("xyz", sinfos)]
    with bb.function("main", params):
        with bb.dataflow():
            a = bb.emit(op.add(params[0], params[0]))
            b = bb.emit(op.add(params[1], params[1]))
            c = bb.emit(op.add(params[2], params[2]))
            out = bb.emit_output(rx.Tuple([a, b, c]))
        bb.emit_func_output(out)
    mod = bb.get()
    rng = np.random.default_rng(1)
    legalized = legalize_and_check(mod, [[rng.standard_normal((2, 4)).astype("float32"),
                                          rng.standard_normal((5, 4)).astype("float32"),
                                          rng.integers(0, 9, (2, 4)).astype("int32")]])
    assert sorted(legalized.prim_funcs) == ["add", "add1"]
    callees = [c.args[0].name_hint for c in _call_tirs(legalized["main"])]
    assert callees == ["add", "add", "add1"]


def test_existing_equal_prim_func_is_reused_and_names_stay_unique():
    syms = symbols()
    mod = one_op_module(op.exp, [TensorStructInfo((syms["n"], 4), "float32")])
    once = LegalizeOps()(mod)
    # a second function with the same op, legalized into the already legalized module
    other = one_op_module(op.exp, [TensorStructInfo((symbols()["m"], 4), "float32")])
    combined = once.with_function("other", other["main"])
    twice = LegalizeOps()(combined)
    assert sorted(twice.prim_funcs) == ["exp"]
    rx.assert_structural_equal(twice["exp"], once["exp"])


def test_prim_func_names_avoid_graph_function_names():
    syms = symbols()
    mod = one_op_module(op.exp, [TensorStructInfo((syms["n"],), "float32")])
    mod = mod.with_function("exp", mod["main"])
    legalized = LegalizeOps()(mod)
    assert "exp1" in legalized.prim_funcs and "exp" not in legalized.prim_funcs


def test_var_inside_expression_is_passed_as_tir_var():
    syms = symbols()
    n = syms["n"]
    mod = one_op_module(op.exp, [TensorStructInfo((n * 4,), "float32")])
    legalized = legalize_and_check(mod, [[np.linspace(-1, 1, 4 * k).astype("float32")]
                                         for k in (1, 3)])
    func = legalized["exp"]
    (scalar,) = func.scalar_params
    assert scalar.name == "n"
    (call,) = _call_tirs(legalized["main"])
    assert isinstance(call.args[2], ShapeExpr) and call.args[2].values[0] is n


def test_slice_bound_var_is_passed_as_tir_var():
    syms = symbols()
    n, m = syms["n"], syms["m"]
    mod = one_op_module(lambda x, y: op.strided_slice(x, [0], [m], [n]),
                        [TensorStructInfo((n,), "float32"), TensorStructInfo((m,), "float32")])
    inputs = [[np.arange(k, dtype="float32"), np.zeros(j, "float32")] for k, j in ((5, 2), (3, 4))]
    legalized = legalize_and_check(mod, inputs)
    (func,) = legalized.prim_funcs.values()
    assert [v.name for v in func.scalar_params] == ["m"]


def test_generated_prim_funcs_use_fresh_vars():
    syms = symbols()
    mod = one_op_module(op.nn.softmax, [TensorStructInfo((syms["n"], syms["m"]), "float32")])
    legalized = LegalizeOps()(mod)
    loop_vars = collect(legalized["softmax"], lambda node: isinstance(node, E.Var))
    assert {v.name for v in loop_vars} >= {"n", "m"}
    assert all(v is not syms["n"] and v is not syms["m"] for v in loop_vars)


def test_coarse_and_data_dependent_calls_stay():
    syms = symbols()
    n, m = syms["n"], syms["m"]
    sinfos = [TensorStructInfo(ndim=2, dtype="float32"), TensorStructInfo((n,), "float32"),
              TensorStructInfo((m,), "float32"), TensorStructInfo((n,), dtype=None)]
    params = [Var(f"x{i}", s) for i, s in enumerate(sinfos)]
    bb = rx.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            coarse = bb.emit(op.exp(params[0]))                  # shape unknown
            undecided = bb.emit(op.add(params[1], params[2]))    # n vs m: only the rank is known
            unique = bb.emit(op.unique(params[1]))               # data-dependent
            no_dtype = bb.emit(op.negative(params[3]))           # dtype unknown
            legal = bb.emit(op.exp(params[1]))
            out = bb.emit_output(rx.Tuple([coarse, undecided, unique, no_dtype, legal]))
        bb.emit_func_output(out)
    mod = bb.get()
    rng = np.random.default_rng(2)
    arrays = [rng.standard_normal((2, 3)).astype("float32"), rng.standard_normal(4).astype("float32"),
              rng.standard_normal(4).astype("float32"), rng.standard_normal(4).astype("float32")]
    legalized = legalize_and_check(mod, [arrays], full=False)
    assert sorted(op_calls(legalized)) == ["relax.add", "relax.call_tir", "relax.exp",
                                           "relax.negative", "relax.unique"]


def test_customize_overrides_and_can_keep_calls():
    syms = symbols()
    mod = one_op_module(lambda x: op.multiply(op.add(x, x), x),
                        [TensorStructInfo((syms["n"],), "float32")])

    def doubled(ctx, call):
        te = ctx.te(call)
        x = te.placeholder(call.args[0], "x")
        out = tir.compute.compute(te.out_shape(), lambda i: x[i] * 2.0, "T_double")
        return te.emit("double", out)

    legalized = LegalizeOps(customize={"relax.add": doubled, "relax.multiply": lambda c, k: None})(mod)
    assert sorted(legalized.prim_funcs) == ["double"]
    assert sorted(op_calls(legalized)) == ["relax.call_tir", "relax.multiply"]
    x = np.array([1.0, -2.0, 3.0], "float32")
    np.testing.assert_allclose(rx.interpret(legalized, "main", x), rx.interpret(mod, "main", x))
    with pytest.raises(TypeError, match="customize"):
        LegalizeOps(customize={"relax.add": 3})


def test_pass_does_not_mutate_input_and_is_idempotent():
    mod = rx.from_source(MLP)
    text = mod.script()
    once = LegalizeOps()(mod)
    assert mod.script() == text
    rx.assert_structural_equal(LegalizeOps()(once), once)


def test_every_library_op_with_a_fixed_output_shape_has_a_legalization():
    # Kept: data-dependent ops, shape_of, cross-level and packed calls and the lowered memory/DPS ops
    # of later passes (relax.memory.*, relax.builtin.*, *_dps); tensor_to_shape makes a VM shape value;
    # assert_op and print are effects the VM runs; null_value makes no tensor (the empty object).
    kept = {"relax.unique", "relax.nonzero", "relax.shape_of", "relax.tensor_to_shape",
            "relax.assert_op", "relax.print", "relax.null_value", "relax.call_tir", "relax.call_tir_inplace",
            "relax.call_dps_library", "relax.call_dps_packed", "relax.call_pure_packed"}
    registered = {spec.name for spec in op.all_op_specs()
                  if not spec.name.startswith(("relax.memory.", "relax.builtin."))
                  and not spec.name.endswith("_dps")}
    assert registered - kept == set(legalized_op_names())
