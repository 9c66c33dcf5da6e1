"""Forward deduction through the BlockBuilder: paper Figures 2, 3, 7 and 8."""
import numpy as np
import pytest

import tensorir as tir
from tensorir.structural import structural_equal
from relaxscript import op
from relaxscript.block_builder import BlockBuilder, DeductionError
from relaxscript.expr import (Call, Constant, ExternFunc, Function, If, PrimValue, SeqExpr, ShapeExpr,
                              StringImm, Tuple, TupleGetItem, Var, BindingBlock)
from relaxscript.struct_info import (FuncStructInfo, ObjectStructInfo, PrimStructInfo, ShapeStructInfo,
                                     TensorStructInfo, TupleStructInfo)


def T(shape=None, dtype="float32", ndim=-1):
    return TensorStructInfo(shape, dtype, ndim)


def assert_sinfo(actual, expected):
    assert structural_equal(actual, expected, map_free_vars=False), (actual, expected)


def _add_subfn(bb):
    """Figure 7's callee: subfn(s: Shape(["n", "m"])) -> Tensor(("n * m",), "f32")."""
    n, m = tir.size_var("n"), tir.size_var("m")
    s = Var("s", ShapeStructInfo([n, m]))
    with bb.function("subfn", [s]):
        out = bb.emit(Call(ExternFunc("make"), [s], sinfo_args=[T((n * m,))]))
        bb.emit_func_output(out)
    return bb.get().get_global_var("subfn")


def test_figure7_subgraph_call_deduction():
    bb = BlockBuilder()
    subfn = _add_subfn(bb)
    n = tir.size_var("n")
    x, y = Var("x", T((n,))), Var("y", ShapeStructInfo(ndim=2))
    with bb.function("main", [x, y]):
        f0 = bb.emit(subfn, "f0")
        lv0 = bb.emit(Call(f0, [ShapeExpr([n, 4])]))
        lv1 = bb.emit(Call(subfn, [ShapeExpr([3, 4])]))
        lv2 = bb.emit(Call(subfn, [ShapeExpr([n + 1, 4])]))
        lv3 = bb.emit(Call(subfn, [y]))
        bb.emit_func_output(lv3)
    assert isinstance(f0.struct_info, FuncStructInfo)
    assert structural_equal(f0.struct_info, subfn.struct_info)
    assert_sinfo(lv0.struct_info, T((n * 4,)))
    assert_sinfo(lv1.struct_info, T((12,)))
    assert_sinfo(lv2.struct_info, T(((n + 1) * 4,)))
    assert_sinfo(lv3.struct_info, T(ndim=1))


def test_figure8_shape_parameter_carries_n():
    bb = BlockBuilder()
    n = tir.size_var("n")
    x, y, s = Var("x", T((n * 2,))), Var("y", T((n * 2,))), Var("s", ShapeStructInfo([n]))
    with bb.function("fused_add_relu", [x, y, s]):
        lv0 = bb.emit(op.add(x, y))
        lv1 = bb.emit(op.nn.relu(lv0))
        bb.emit_func_output(lv1)
    fused = bb.get().get_global_var("fused_add_relu")
    assert_sinfo(fused.struct_info.ret, T((n * 2,)))
    k = tir.size_var("n")
    x = Var("x", T((k, 2)))
    with bb.function("main", [x]):
        lv0 = bb.emit(op.flatten(x))
        lv1 = bb.emit(Call(fused, [lv0, lv0, ShapeExpr([k])]))
        bb.emit_func_output(lv1)
    assert_sinfo(lv0.struct_info, T((k * 2,)))
    assert_sinfo(lv1.struct_info, T((k * 2,)))


def test_figure2_main_and_subfunc():
    bb = BlockBuilder()
    n = tir.size_var("n")
    x = Var("x", T((n, 4)))
    with bb.function("subfunc", [x]):
        with bb.dataflow():
            lv0 = bb.emit(op.flatten(x))
            lv1 = bb.emit(op.nn.relu(lv0))
            gv = bb.emit_output(lv1)
        bb.emit_func_output(gv)
    assert_sinfo(lv1.struct_info, T((n * 4,)))
    sub = bb.get().get_global_var("subfunc")
    k = tir.size_var("n")
    x = Var("x", T((k, 4)))
    with bb.function("main", [x]):
        with bb.dataflow():
            lv0 = bb.emit(op.call_dps_library("cutlass.rms_norm", [x], T((k, 4))))
            lv1 = bb.emit_output(lv0)
        f0 = bb.emit(sub, "f0")
        lv2 = bb.emit(Call(f0, [lv1]))
        lv3 = bb.emit(op.split(lv2, 2))
        lv4 = bb.emit(TupleGetItem(lv3, 0))
        bb.emit_func_output(lv4)
    assert_sinfo(lv1.struct_info, T((k, 4)))
    assert_sinfo(lv2.struct_info, T((k * 4,)))
    assert_sinfo(lv3.struct_info, TupleStructInfo([T((k * 2,)), T((k * 2,))]))
    assert_sinfo(lv4.struct_info, T((k * 2,)))
    main = bb.get()["main"]
    assert_sinfo(main.struct_info, FuncStructInfo([T((k, 4))], T((k * 2,))))


def test_figure3_match_cast_defines_new_symbolic_var():
    bb = BlockBuilder()
    n, m = tir.size_var("n"), tir.size_var("m")
    x = Var("x", T((n, 2, 2)))
    with bb.function("symbolic_shape_fn", [x]):
        lv0 = bb.emit(op.reshape(x, (n, 4)))
        lv1 = bb.emit(op.flatten(lv0))
        lv2 = bb.emit(op.unique(lv1))
        lv3 = bb.match_cast(lv2, T((m,)))
        lv4 = bb.emit(op.exp(lv3))
        assert bb.is_symbolic_var_defined(m)
        bb.emit_func_output(lv4)
    assert_sinfo(lv1.struct_info, T((n * 4,)))
    assert_sinfo(lv2.struct_info, T(ndim=1))
    assert_sinfo(lv4.struct_info, T((m,)))
    # m is defined only inside the body: the signature erases it
    assert_sinfo(bb.get()["symbolic_shape_fn"].struct_info.ret, T(ndim=1))


def test_call_with_incompatible_argument_names_both_annotations():
    bb = BlockBuilder()
    n = tir.size_var("n")
    x = Var("x", T((n, n)))
    with bb.function("square", [x]):
        bb.emit_func_output(x)
    square = bb.get().get_global_var("square")
    y = Var("y", T((16, 32)))
    with pytest.raises(DeductionError) as info:
        with bb.function("main", [y]):
            bb.emit(Call(square, [y]))
    message = str(info.value)
    assert 'R.Tensor((16, 32), dtype="float32")' in message and 'R.Tensor((n, n), dtype="float32")' in message
    assert isinstance(info.value, ValueError)


def test_call_arity_and_callability_errors():
    bb = BlockBuilder()
    subfn = _add_subfn(bb)
    x = Var("x", T((3,)))
    with pytest.raises(DeductionError, match="takes 1 argument"):
        with bb.function("main", [x]):
            bb.emit(Call(subfn, [x, x]))
    with pytest.raises(DeductionError, match="cannot call"):
        with bb.function("main", [x]):
            bb.emit(Call(x, [x]))


def test_error_carries_the_source_line():
    bb = BlockBuilder()
    subfn = _add_subfn(bb)
    x = Var("x", T((3,)))
    call = Call(subfn, [x])
    call.span = ("model.py", 12, 8, "        lv = subfn(x)\n")
    with pytest.raises(DeductionError, match=r"model.py:12: lv = subfn\(x\)"):
        with bb.function("main", [x]):
            bb.emit(call)


def test_op_errors_are_deduction_errors_with_location():
    bb = BlockBuilder()
    x, y = Var("x", T((4,))), Var("y", T((5,)))
    call = op.add(x, y)
    call.span = ("model.py", 3, 4, "    z = x + y\n")
    with pytest.raises(DeductionError, match="model.py:3"):
        with bb.function("main", [x, y]):
            bb.emit(call)


def test_leaf_deductions():
    bb = BlockBuilder()
    n = tir.size_var("n")
    assert_sinfo(bb.normalize(Constant(np.zeros((2, 3), "int32"))).struct_info, T((2, 3), "int32"))
    assert_sinfo(bb.normalize(ShapeExpr([n, 4])).struct_info, ShapeStructInfo([n, 4]))
    assert_sinfo(bb.normalize(PrimValue(n + 1)).struct_info, PrimStructInfo("int64", n + 1))
    assert isinstance(bb.normalize(StringImm("hi")).struct_info, ObjectStructInfo)
    tup = bb.normalize(Tuple([ShapeExpr([n]), PrimValue(3)]))
    assert_sinfo(tup.struct_info, TupleStructInfo([ShapeStructInfo([n]), PrimStructInfo("int64", 3)]))
    assert_sinfo(bb.normalize(TupleGetItem(tup, 1)).struct_info, PrimStructInfo("int64", 3))
    with pytest.raises(DeductionError, match="out of range"):
        bb.normalize(TupleGetItem(tup, 2))
    with pytest.raises(DeductionError, match="needs a tuple"):
        bb.normalize(TupleGetItem(ShapeExpr([1]), 0))
    with pytest.raises(DeductionError, match="no annotation"):
        bb.normalize(Var("bare"))


def test_if_result_is_the_lca_of_branches():
    bb = BlockBuilder()
    n, m = tir.size_var("n"), tir.size_var("m")
    cond, x, y = Var("c", PrimStructInfo("bool")), Var("x", T((n, 4))), Var("y", T((m, 4)))
    with bb.function("main", [cond, x, y]):
        same = bb.emit(If(cond, SeqExpr([], x), SeqExpr([], x)))
        mixed = bb.emit(If(cond, SeqExpr([], op.exp(x)), y))
        bb.emit_func_output(mixed)
    assert_sinfo(same.struct_info, T((n, 4)))
    assert_sinfo(mixed.struct_info, T(ndim=2))
    # the non-leaf branch body was bound inside the branch (A-normal form)
    branch = bb.get()["main"].body.blocks[0].bindings[1].value.true_branch
    assert len(branch.blocks) == 1 and isinstance(branch.body, Var)
    with pytest.raises(DeductionError, match="if condition"):
        with bb.function("bad", [x]):
            bb.emit(If(x, SeqExpr([], x), SeqExpr([], x)))


def test_seq_expr_erases_vars_defined_inside():
    bb = BlockBuilder()
    m = tir.size_var("m")
    x = Var("x", T(ndim=1))
    inner = Var("inner")
    from relaxscript.expr import MatchCast
    seq = SeqExpr([BindingBlock([MatchCast(inner, x, T((m,)))])], inner)
    with bb.function("main", [x]):
        lv = bb.emit(seq)
        bb.emit_func_output(lv)
    assert_sinfo(inner.struct_info, T((m,)))
    assert_sinfo(lv.struct_info, T(ndim=1))


def test_function_declared_return_is_checked():
    bb = BlockBuilder()
    n = tir.size_var("n")
    x = Var("x", T((n, 4)))
    func = Function([x], SeqExpr([], x), T((n, 5)))
    with pytest.raises(DeductionError, match=r"declared return annotation R.Tensor\(\(n, 5\)"):
        bb.add_func(func, "f")
    ok = Function([x], SeqExpr([], x), T(ndim=2))
    gv = bb.add_func(ok, "f")
    assert_sinfo(gv.struct_info, FuncStructInfo([T((n, 4))], T(ndim=2)))


def test_match_cast_that_can_never_succeed_is_rejected():
    bb = BlockBuilder()
    x = Var("x", T((3, 4)))
    with pytest.raises(DeductionError, match="can never succeed"):
        with bb.function("main", [x]):
            bb.match_cast(x, T((3, 5)))


def test_annotated_expressions_are_not_deduced_again():
    bb = BlockBuilder()
    x = Var("x", T((3,)))
    call = op.exp(x)
    call.struct_info = T((3,), "float16")  # already normalized: trusted as is
    assert bb.normalize(call) is call
    assert call.struct_info.dtype == "float16"


def test_normalization_deduces_each_call_once(monkeypatch):
    """Linear-time normalization: building a chain of N ops runs N deductions, not O(N^2)."""
    import dataclasses

    from relaxscript.op import registry

    spec = registry.get_op_spec("relax.nn.relu")
    calls = []

    def counting_infer(call, ctx):
        calls.append(call)
        return spec.infer(call, ctx)

    monkeypatch.setitem(registry._SPECS, "relax.nn.relu", dataclasses.replace(spec, infer=counting_infer))

    def build(length):
        calls.clear()
        bb = BlockBuilder()
        n = tir.size_var("n")
        x = Var("x", T((n, 8)))
        with bb.function("main", [x]):
            cur = x
            for _ in range(length):
                cur = bb.emit(op.nn.relu(cur))
            bb.emit_func_output(cur)
        return len(calls)

    assert build(50) == 50
    assert build(400) == 400
