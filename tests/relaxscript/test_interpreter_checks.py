"""Run-time annotation checks of the interpreter: every failure names the function,
the parameter (or match_cast variable), the symbolic variable, expected and actual."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tensorir as tir
from relaxscript import interpret
from relaxscript.expr import Call, GlobalVar, MatchCast, ShapeExpr, Tuple, Var, VarBinding
from relaxscript.irmodule import IRModule
from relaxscript.struct_info import PrimStructInfo, ShapeStructInfo, TupleStructInfo
from tensorir.errors import ShapeMismatchError

from .test_interpreter import fn, library_call, tensor


def single(params, body=None, ret=None, name="main"):
    func = fn(params, [], body if body is not None else params[0], ret)
    return IRModule({name: func})


def run_fails(mod, *args, name="main"):
    with pytest.raises(ShapeMismatchError) as info:
        interpret(mod, name, *args)
    assert isinstance(info.value, ValueError)
    return str(info.value)


def test_rank_mismatch():
    n = tir.size_var("n")
    msg = run_fails(single([Var("x", tensor((n, 4)))]), np.zeros((2, 4, 1), "float32"))
    assert "function 'main', parameter 'x'" in msg
    assert "expected rank 2, got rank 3" in msg


def test_dtype_mismatch():
    msg = run_fails(single([Var("x", tensor(ndim=1, dtype="float32"))]), np.zeros(3, "int32"))
    assert "parameter 'x'" in msg and "expected dtype float32, got int32" in msg


def test_contradicting_dims_name_the_var_and_where_it_was_bound():
    n = tir.size_var("n")
    msg = run_fails(single([Var("x", tensor((n, n)))]), np.zeros((3, 4), "float32"))
    assert "function 'main', parameter 'x'" in msg
    assert "x.shape[1]: symbolic var n: expected 3 (bound by x.shape[0]), got 4" in msg


def test_var_bound_by_one_parameter_checked_in_another():
    n = tir.size_var("n")
    mod = single([Var("a", tensor((n,))), Var("b", tensor((2, n)))])
    msg = run_fails(mod, np.zeros(5, "float32"), np.zeros((2, 6), "float32"))
    assert "parameter 'b'" in msg and "symbolic var n: expected 5 (bound by a.shape[0]), got 6" in msg


def test_constant_dim_mismatch():
    msg = run_fails(single([Var("x", tensor((tir.size_var("n"), 4)))]), np.zeros((2, 5), "float32"))
    assert "x.shape[1]: expected 4, got 5" in msg


def test_expression_dim_mismatch_shows_the_var_value():
    n = tir.size_var("n")
    mod = single([Var("x", tensor((n * 4,))), Var("y", tensor((n,)))])
    msg = run_fails(mod, np.zeros(10, "float32"), np.zeros(3, "float32"))
    assert "parameter 'x'" in msg and "n = 3" in msg and "expected 12, got 10" in msg


def test_expression_may_come_before_the_defining_parameter():
    n = tir.size_var("n")
    mod = single([Var("x", tensor((n * 4,))), Var("y", tensor((n,)))], ShapeExpr([n]))
    assert interpret(mod, "main", np.zeros(12, "float32"), np.zeros(3, "float32")) == (3,)


def test_var_only_in_a_linear_dim_is_solved():
    n = tir.size_var("n")
    mod = single([Var("x", tensor((n * 4 + 1,)))], ShapeExpr([n]))
    assert interpret(mod, "main", np.zeros(9, "float32")) == (2,)
    msg = run_fails(mod, np.zeros(8, "float32"))
    assert "parameter 'x'" in msg and "no integer value of symbolic var n gives 8" in msg


def test_solved_var_facts_are_checked():
    n = tir.size_var("n", upper=3)
    msg = run_fails(single([Var("x", tensor((n * 2,)))]), np.zeros(8, "float32"))
    assert "symbolic var n: expected <= 3 (its upper bound), got 4" in msg


def test_var_only_in_a_nonlinear_dim_is_reported_undefined():
    n = tir.size_var("n")
    msg = run_fails(single([Var("x", tensor((n * n,)))]), np.zeros(9, "float32"))
    assert "symbolic var n is not defined" in msg and "got 9" in msg


@pytest.mark.parametrize("fact, value, expected", [
    (dict(upper=4096), 5000, "expected <= 4096 (its upper bound), got 5000"),
    (dict(multiple_of=8), 12, "expected a multiple of 8, got 12"),
])
def test_facts_are_checked(fact, value, expected):
    n = tir.size_var("n", **fact)
    msg = run_fails(single([Var("x", tensor((n,), "int8"))]), np.zeros(value, "int8"))
    assert "parameter 'x'" in msg and f"x.shape[0]: symbolic var n: {expected}" in msg


def test_lower_bound_checked_on_prim_value():
    k = tir.Var("k", lower=1)
    msg = run_fails(single([Var("k", PrimStructInfo("int64", k))]), 0)
    assert "parameter 'k'" in msg and "symbolic var k: expected >= 1 (its lower bound), got 0" in msg


def test_upper_bound_satisfied_passes():
    n = tir.size_var("n", upper=8)
    mod = single([Var("x", tensor((n,), "int8"))], ShapeExpr([n]))
    assert interpret(mod, "main", np.zeros(8, "int8")) == (8,)


def test_kind_mismatches():
    msg = run_fails(single([Var("x", tensor(ndim=1))]), (1, 2))
    assert "expected a tensor, got a tuple of 2 fields" in msg
    msg = run_fails(single([Var("s", ShapeStructInfo(ndim=2))]), np.zeros(2))
    assert "parameter 's'" in msg and "expected a shape" in msg
    msg = run_fails(single([Var("p", PrimStructInfo("int64"))]), 2.5)
    assert "expected a int64 scalar, got 2.5" in msg
    msg = run_fails(single([Var("t", TupleStructInfo([tensor(ndim=1)] * 2))]), (np.zeros(1),))
    assert "parameter 't'" in msg and "expected a tuple of 2 fields, got 1 fields" in msg


def test_nested_paths_in_messages():
    n = tir.size_var("n")
    sinfo = TupleStructInfo([tensor((n,)), TupleStructInfo([tensor((n, 2))])])
    msg = run_fails(single([Var("t", sinfo)]), (np.zeros(3, "float32"), (np.zeros((3, 5), "float32"),)))
    assert "t[1][0].shape[1]: expected 2, got 5" in msg


def test_shape_value_mismatch():
    n = tir.size_var("n")
    mod = single([Var("s", ShapeStructInfo([n, n]))])
    msg = run_fails(mod, (2, 3))
    assert "s[1]: symbolic var n: expected 2 (bound by s[0]), got 3" in msg


def test_arity_mismatch():
    msg = run_fails(single([Var("x", tensor(ndim=1))]), np.zeros(1), np.zeros(1))
    assert "function 'main' takes 1 argument(s) (x), got 2" in msg


def test_match_cast_failure_names_the_variable():
    m = tir.size_var("m")
    x, y = Var("x", tensor(ndim=1)), Var("y", tensor((m, m)))
    mod = IRModule({"main": fn([x], [MatchCast(y, x, tensor((m, m)))], y)})
    msg = run_fails(mod, np.zeros(3, "float32"))
    assert "function 'main', match_cast of 'y'" in msg and "expected rank 2, got rank 1" in msg
    x2 = Var("x", tensor(ndim=2))
    mod = IRModule({"main": fn([x2], [MatchCast(y, x2, tensor((m, m)))], y)})
    msg = run_fails(mod, np.zeros((2, 5), "float32"))
    assert "match_cast of 'y'" in msg and "symbolic var m: expected 2 (bound by y.shape[0]), got 5" in msg


def test_match_cast_against_an_already_bound_var():
    n = tir.size_var("n")
    x, y = Var("x", tensor((n,))), Var("y", tensor(ndim=1))
    z = Var("z", tensor((n,)))
    mod = IRModule({"main": fn([x, y], [MatchCast(z, y, tensor((n,)))], z)})
    msg = run_fails(mod, np.zeros(3, "float32"), np.zeros(4, "float32"))
    assert "match_cast of 'z'" in msg and "expected 3 (bound by x.shape[0]), got 4" in msg


def test_return_annotation_is_checked():
    n = tir.size_var("n")
    x = Var("x", tensor((n, 4)))
    mod = single([x], ShapeExpr([n]), ShapeStructInfo([n * 4]))
    msg = run_fails(mod, np.zeros((2, 4), "float32"))
    assert "function 'main', return value" in msg and "n = 2" in msg and "expected 8, got 2" in msg
    mod = single([x], x, tensor((n, 4), "int32"))
    msg = run_fails(mod, np.zeros((2, 4), "float32"))
    assert "return value" in msg and "expected dtype int32, got float32" in msg


def test_check_bindings_catches_a_wrong_deduced_annotation():
    n = tir.size_var("n")
    x = Var("x", tensor((n, 4)))
    wrong = Var("lv", tensor((n, 5)))  # what a faulty deduction rule might claim
    call = library_call("numpy.negative", [x], tensor((n, 4)))
    mod = IRModule({"main": fn([x], [VarBinding(wrong, call)], wrong)})
    data = np.zeros((2, 4), "float32")
    assert interpret(mod, "main", data).shape == (2, 4)  # not checked by default
    with pytest.raises(ShapeMismatchError, match=r"binding 'lv' \(deduced annotation\): "
                                                 r"lv.shape\[1\]: expected 5, got 4"):
        interpret(mod, "main", data, check_bindings=True)


def test_callee_failure_names_the_callee():
    n = tir.size_var("n")
    callee = fn([Var("v", tensor((n, n)))], [], ShapeExpr([n]))
    x = Var("x", tensor(ndim=2))
    main = fn([x], [], Call(GlobalVar("square"), [x]))
    msg = run_fails(IRModule({"main": main, "square": callee}), np.zeros((2, 3), "float32"))
    assert "function 'square', parameter 'v'" in msg


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 6), st.integers(0, 20), st.integers(0, 6))
def test_scaled_dims_accepted_exactly_when_consistent(n_value, second, third):
    # f(x: (n, n * 3 + 1), y: (n // 2,)) accepts exactly the consistent shapes.
    n = tir.size_var("n")
    mod = single([Var("x", tensor((n, n * 3 + 1), "int8")), Var("y", tensor((n // 2,), "int8"))],
                 Tuple([ShapeExpr([n])]))
    args = (np.zeros((n_value, second), "int8"), np.zeros(third, "int8"))
    if second == 3 * n_value + 1 and third == n_value // 2:
        assert interpret(mod, "main", *args) == ((n_value,),)
    else:
        with pytest.raises(ShapeMismatchError, match="function 'main', parameter '[xy]'"):
            interpret(mod, "main", *args)
