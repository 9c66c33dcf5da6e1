"""The graph-level reference interpreter on hand-built modules: every construct.

The IR is built node by node (annotations set by hand) so these tests depend
only on the core IR; the helpers below are shared with the other
test_interpreter_* files.
"""
import numpy as np
import pytest

import tensorir as tir
from relaxscript import interpret
from relaxscript.expr import (BindingBlock, Call, Constant, DataflowBlock, DataflowVar, ExternFunc,
                              Function, GlobalVar, If, MatchCast, Op, PrimValue, SeqExpr, ShapeExpr,
                              StringImm, Tuple, TupleGetItem, Var, VarBinding)
from relaxscript.interpreter import ShapeTuple
from relaxscript.irmodule import IRModule
from relaxscript.struct_info import (FuncStructInfo, ObjectStructInfo, PrimStructInfo, ShapeStructInfo,
                                     TensorStructInfo, TupleStructInfo)
from tensorir.errors import IRError

# ---------------------------------------------------------------- IR-building helpers


def tensor(shape=None, dtype="float32", ndim=-1):
    return TensorStructInfo(shape, dtype, ndim)


def fn(params, bindings, body, ret=None, dataflow=False):
    """A Function whose body is one block of ``bindings`` (VarBinding or MatchCast)."""
    block = (DataflowBlock if dataflow else BindingBlock)(bindings)
    return Function(params, SeqExpr([block] if bindings else [], body), ret)


def bind(var, value):
    return VarBinding(var, value)


def library_call(name, args, out_sinfo):
    return Call(Op("relax.call_dps_library"), [StringImm(name), Tuple(args)], sinfo_args=[out_sinfo])


def call_tir(gvar_name, args, out_sinfo, tir_vars=None):
    call_args = [GlobalVar(gvar_name), Tuple(args)] + ([ShapeExpr(tir_vars)] if tir_vars else [])
    sinfo = out_sinfo if isinstance(out_sinfo, list) else [out_sinfo]
    return Call(Op("relax.call_tir"), call_args, sinfo_args=sinfo)


def exp_prim_func():
    """y[i, j] = exp(x[i, j]) over (n, 4), written with plain loops."""
    n = tir.size_var("n")
    x, y = tir.Buffer("x", (n, 4), "float32"), tir.Buffer("y", (n, 4), "float32")
    i, j = tir.Var("i"), tir.Var("j")
    store = tir.BufferStore(y, tir.call_intrin("exp", x[i, j]), (i, j))
    body = tir.For(i, 0, n, "serial", tir.For(j, 0, 4, "serial", store))
    return tir.PrimFunc([x, y], body, name="exp")


def scale_prim_func():
    """y[i] = x[i] * k + m, with k and m scalar parameters (passed as tir_vars)."""
    n, k, m = tir.size_var("n"), tir.Var("k"), tir.Var("m")
    x, y = tir.Buffer("x", (n,), "int64"), tir.Buffer("y", (n,), "int64")
    i = tir.Var("i")
    body = tir.For(i, 0, n, "serial", tir.BufferStore(y, x[i] * k + m, (i,)))
    return tir.PrimFunc([x, y, k, m], body, name="scale")


# ---------------------------------------------------------------- values


def test_identity_returns_the_argument():
    n = tir.size_var("n")
    x = Var("x", tensor((n, 4)))
    func = fn([x], [], x, tensor((n, 4)))
    data = np.ones((3, 4), "float32")
    assert interpret(IRModule({"main": func}), "main", data) is data
    assert interpret(func, data) is data  # bare Function, name omitted


def test_constant_shape_and_prim_values_use_symbolic_bindings():
    n, m = tir.size_var("n"), tir.size_var("m")
    x = Var("x", tensor((n, m)))
    const = Constant(np.array([1, 2], "int32"))
    body = Tuple([const, ShapeExpr([n * 2, m + 1]), PrimValue(n * m), PrimValue(tir.GT(n, m))])
    result = interpret(fn([x], [], body), np.zeros((3, 5), "float32"))
    np.testing.assert_array_equal(result[0], [1, 2])
    assert isinstance(result[1], ShapeTuple) and result[1] == (6, 6)
    assert result[2] == 15 and isinstance(result[2], int)
    assert result[3] is False


def test_tuples_in_and_out_and_tuple_get_item():
    n = tir.size_var("n")
    pair = TupleStructInfo([tensor((n,)), TupleStructInfo([PrimStructInfo("int64"), tensor((n,))])])
    t = Var("t", pair)
    inner, second, scalar = Var("inner"), Var("second"), Var("scalar")
    bindings = [bind(inner, TupleGetItem(t, 1)), bind(second, TupleGetItem(inner, 1)),
                bind(scalar, TupleGetItem(inner, 0))]
    func = fn([t], bindings, Tuple([second, TupleGetItem(t, 0), scalar]))
    a, b = np.arange(3.0, dtype="float32"), np.ones(3, "float32")
    out = interpret(func, (a, (7, b)))
    assert isinstance(out, tuple) and len(out) == 3
    assert out[0] is b and out[1] is a and out[2] == 7


def test_shape_parameter_binds_its_values():
    n = tir.size_var("n")
    s = Var("s", ShapeStructInfo([n, 4]))
    func = fn([s], [], ShapeExpr([n * 4]), ShapeStructInfo([n * 4]))
    assert interpret(func, ShapeTuple((5, 4))) == (20,)
    assert interpret(func, (2, 4)) == (8,)  # a plain tuple of ints is accepted as a shape


# ---------------------------------------------------------------- control flow and calls


def countdown_module():
    """main(x, k) doubles x k times through a recursive subgraph call."""
    n, k = tir.size_var("n"), tir.Var("k", "int64")
    x = Var("x", tensor((n,)))
    kk = Var("k", PrimStructInfo("int64", k))
    doubled, rec = Var("doubled", tensor((n,))), Var("rec", tensor((n,)))
    then_branch = SeqExpr([BindingBlock([
        bind(doubled, library_call("numpy.add", [x, x], tensor((n,)))),
        bind(rec, Call(GlobalVar("main"), [doubled, PrimValue(k - 1)])),
    ])], rec)
    body = If(PrimValue(tir.GT(k, 0)), then_branch, SeqExpr([], x))
    result = Var("result", tensor((n,)))
    main = fn([x, kk], [bind(result, body)], result, tensor((n,)))
    return IRModule({"main": main})


@pytest.mark.parametrize("times", [0, 1, 4])
def test_recursive_subgraph_call_with_if(times):
    x = np.arange(5, dtype="float32")
    out = interpret(countdown_module(), "main", x, times)
    np.testing.assert_array_equal(out, x * 2 ** times)


def test_deep_recursion_beyond_the_default_python_limit():
    out = interpret(countdown_module(), "main", np.ones(1, "float32"), 120)
    assert out[0] == np.float32(2.0 ** 120)


def test_if_on_zero_d_array_and_python_bool():
    c = Var("c", tensor((), "bool"))
    func = fn([c], [], If(c, SeqExpr([], PrimValue(1)), SeqExpr([], PrimValue(2))))
    assert interpret(func, np.array(True)) == 1
    assert interpret(func, np.array(False)) == 2
    flag = Var("flag", PrimStructInfo("bool"))
    func = fn([flag], [], If(flag, SeqExpr([], PrimValue(1)), SeqExpr([], PrimValue(2))))
    assert interpret(func, False) == 2


def test_subgraph_call_has_its_own_symbolic_scope():
    # helper's n is a different Var from main's n, bound independently per call.
    n_main, n_helper = tir.size_var("n"), tir.size_var("n")
    hx = Var("x", tensor((n_helper,)))
    helper = fn([hx], [], ShapeExpr([n_helper]), ShapeStructInfo([n_helper]))
    x, y = Var("x", tensor((n_main,))), Var("y", tensor(ndim=1))
    a, b = Var("a"), Var("b")
    main = fn([x, y], [bind(a, Call(GlobalVar("helper"), [x])), bind(b, Call(GlobalVar("helper"), [y]))],
              Tuple([a, b, ShapeExpr([n_main])]))
    out = interpret(IRModule({"main": main, "helper": helper}), "main", np.ones(3, "float32"),
                    np.ones(7, "float32"))
    assert out == ((3,), (7,), (3,))


def test_local_function_captures_outer_variables():
    n = tir.size_var("n")
    x = Var("x", tensor((n,)))
    y = Var("y", tensor((n,)))
    inner = fn([y], [], library_call("numpy.multiply", [x, y], tensor((n,))), tensor((n,)))
    f = Var("f", FuncStructInfo([tensor((n,))], tensor((n,))))
    out = Var("out")
    main = fn([x], [bind(f, inner), bind(out, Call(f, [x]))], out)
    data = np.arange(4, dtype="float32")
    np.testing.assert_array_equal(interpret(main, data), data * data)


def test_closure_value_is_callable_from_python():
    x = Var("x", tensor(ndim=1))
    inner_x = Var("ix", tensor(ndim=1))
    inner = fn([inner_x], [], inner_x)
    f = Var("f")
    closure = interpret(fn([x], [bind(f, inner)], f), np.zeros(2, "float32"))
    data = np.ones(3, "float32")
    assert closure(data) is data


def test_extern_func_call_uses_the_library_registry():
    x = Var("x", tensor(ndim=2))
    func = fn([x], [], Call(ExternFunc("numpy.negative"), [x]))
    data = np.arange(6, dtype="float32").reshape(2, 3)
    np.testing.assert_array_equal(interpret(func, data), -data)


def test_dataflow_and_plain_blocks():
    n = tir.size_var("n")
    x = Var("x", tensor((n,)))
    lv0, lv1, gv = DataflowVar("lv0", tensor((n,))), DataflowVar("lv1", tensor((n,))), Var("gv", tensor((n,)))
    out = Var("out", tensor((n,)))
    body = SeqExpr([
        DataflowBlock([bind(lv0, library_call("numpy.exp", [x], tensor((n,)))),
                       bind(lv1, library_call("numpy.negative", [lv0], tensor((n,)))),
                       bind(gv, lv1)]),
        BindingBlock([bind(out, library_call("numpy.add", [gv, x], tensor((n,))))]),
    ], out)
    data = np.linspace(-1, 1, 5, dtype="float32")
    np.testing.assert_allclose(interpret(Function([x], body, tensor((n,))), data), -np.exp(data) + data,
                               rtol=1e-6)


def test_match_cast_binds_new_symbolic_vars():
    m, k = tir.size_var("m"), tir.size_var("k")
    x = Var("x", tensor(ndim=2))
    y = Var("y", tensor((m, k)))
    func = fn([x], [MatchCast(y, x, tensor((m, k)))], Tuple([y, ShapeExpr([m * k, k])]))
    data = np.zeros((3, 5), "float32")
    out = interpret(func, data)
    assert out[0] is data and out[1] == (15, 5)


def test_unbound_variable_is_reported():
    x, ghost = Var("x", tensor(ndim=1)), Var("ghost")
    with pytest.raises(IRError, match="'ghost' is used before it is bound"):
        interpret(fn([x], [], ghost), np.zeros(1, "float32"))


# ---------------------------------------------------------------- cross-level calls


def test_call_dps_library_with_several_outputs():
    from backends import register_library, unregister_library
    register_library("test.split_sign", lambda a: (np.maximum(a, 0), np.minimum(a, 0)))
    try:
        n = tir.size_var("n")
        x = Var("x", tensor((n,)))
        out_sinfo = TupleStructInfo([tensor((n,)), tensor((n,))])
        func = fn([x], [], library_call("test.split_sign", [x], out_sinfo))
        data = np.array([-2, 3, 0, -1], "float32")
        pos, neg = interpret(func, data)
        np.testing.assert_array_equal(pos, [0, 3, 0, 0])
        np.testing.assert_array_equal(neg, [-2, 0, 0, -1])
    finally:
        unregister_library("test.split_sign")


def test_call_dps_library_unknown_name_suggests():
    x = Var("x", tensor(ndim=1))
    func = fn([x], [], library_call("numpy.negatve", [x], tensor((2,))))
    with pytest.raises(ValueError, match="did you mean 'numpy.negative'"):
        interpret(func, np.zeros(2, "float32"))


@pytest.mark.parametrize("n", [1, 3])
def test_call_tir_allocates_symbolic_outputs(n):
    sym = tir.size_var("n")
    x = Var("x", tensor((sym, 4)))
    y = Var("y", tensor((sym, 4)))
    main = fn([x], [bind(y, call_tir("exp", [x], tensor((sym, 4))))], y, tensor((sym, 4)))
    mod = IRModule({"main": main, "exp": exp_prim_func()})
    data = np.random.default_rng(n).standard_normal((n, 4)).astype("float32")
    np.testing.assert_allclose(interpret(mod, "main", data), np.exp(data), rtol=1e-6)


def test_call_tir_passes_tir_vars_to_scalar_parameters():
    n = tir.size_var("n")
    x = Var("x", tensor((n,), "int64"))
    main = fn([x], [], call_tir("scale", [x], tensor((n,), "int64"), tir_vars=[n * 2, 7]))
    mod = IRModule({"main": main, "scale": scale_prim_func()})
    data = np.arange(5, dtype="int64")
    np.testing.assert_array_equal(interpret(mod, "main", data), data * 10 + 7)


def test_direct_prim_func_call_in_destination_passing_style():
    # The form CallTIRRewrite produces: the caller allocates and passes the output.
    n = tir.size_var("n")
    x, out = Var("x", tensor((n,), "int64")), Var("out", tensor((n,), "int64"))
    unit = Var("unit")
    main = fn([x, out], [bind(unit, Call(GlobalVar("scale"), [x, out, ShapeExpr([3, 1])]))],
              Tuple([unit, out]))
    mod = IRModule({"main": main, "scale": scale_prim_func()})
    data, dest = np.arange(4, dtype="int64"), np.zeros(4, "int64")
    unit_value, result = interpret(mod, "main", data, dest)
    assert unit_value == () and result is dest
    np.testing.assert_array_equal(dest, data * 3 + 1)


# ---------------------------------------------------------------- instrument


def test_instrument_sees_every_binding_in_every_function():
    seen = []
    out = interpret(countdown_module(), "main", np.ones(2, "float32"), 2,
                    instrument=lambda func, var, value: seen.append((func, var.name_hint, value)))
    np.testing.assert_array_equal(out, [4, 4])
    names = [(f, v) for f, v, _ in seen]
    # Inner calls finish (and report) before the outer binding that called them.
    assert names == [("main", "doubled"), ("main", "doubled"), ("main", "result"), ("main", "rec"),
                     ("main", "result"), ("main", "rec"), ("main", "result")]
    np.testing.assert_array_equal(seen[0][2], [2, 2])


def test_instrument_may_stop_execution():
    class Stop(Exception):
        pass

    def stop_at_rec(func, var, value):
        if var.name_hint == "rec":
            raise Stop(var.name_hint)

    with pytest.raises(Stop):
        interpret(countdown_module(), "main", np.ones(2, "float32"), 3, instrument=stop_at_rec)


def test_object_annotation_accepts_anything():
    x = Var("x", ObjectStructInfo())
    func = fn([x], [], x)
    assert interpret(func, "f", "anything") == "anything"  # a bare Function's name may be given
    marker = object()
    assert interpret(func, marker) is marker
