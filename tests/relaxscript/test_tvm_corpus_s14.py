"""Graph-level forms the s14 sweep of public TVMScript found missing (docs/ARCHITECTURE.md,
"s14-tvms"): scalar parameters annotated with a T dtype (newer TVM's ``n: T.int64``, which also
names the symbolic variable ``n`` for the annotations after it; ``flag: T.bool``;
``value: T.float16``), and a variable bound to ``R.ExternFunc("name")`` as the callee of a
packed call. Sources are written for this project; each parses, round-trips and runs on the
interpreter and every VM target, equal to NumPy formulas written here."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import relaxscript as rx
from tensorir.errors import ParseError, ShapeMismatchError

from .tvm_compat import TARGETS, assert_round_trip, assert_runs_alike, module_of

SCALAR_PARAMS = '''
@I.ir_module
class Module:
    @R.function
    def main(n: T.int64, flag: T.bool, x: R.Tensor([n + 1], "float32"), s: R.Shape([n]),
             scale: T.float32):
        if flag:
            y = R.add(x, R.const(1, "float32"))
        else:
            y = R.multiply(x, x)
        return (y, scale)
'''


@settings(max_examples=5, deadline=None)
@given(n=st.integers(0, 6), flag=st.booleans(), scale=st.floats(-4, 4, width=32), seed=st.integers(0, 2**31))
def test_scalar_parameters_annotated_with_a_t_dtype(n, flag, scale, seed):
    """``n: T.int64`` is ``R.Prim(value="n")``: one name, the scalar in the body and the symbolic
    variable in the later annotations (``R.Tensor([n + 1])``, ``R.Shape([n])``)."""
    mod = module_of(SCALAR_PARAMS)
    text = assert_round_trip(mod)
    assert "def main(n: T.int64, flag: R.Prim(\"bool\")" in text and 'R.Prim("float32")' in text
    assert "n_1" not in text  # the parameter and its symbolic variable print as one name
    x = np.random.default_rng(seed).standard_normal(n + 1).astype("float32")
    want = ((x + 1) if flag else (x * x)).astype("float32")
    got = assert_runs_alike(mod, n, flag, x, (n,), np.float32(scale))
    np.testing.assert_allclose(np.asarray(got[0]), want, rtol=1e-6)
    assert float(got[1]) == np.float32(scale)


def test_a_scalar_parameter_disagreeing_with_the_shapes_is_a_run_time_error():
    mod = module_of(SCALAR_PARAMS)
    x = np.zeros(4, "float32")
    with pytest.raises(ShapeMismatchError, match="symbolic var n"):
        rx.interpret(mod, "main", 2, True, x, (2,), np.float32(1))
    for target in TARGETS:
        vm = rx.VirtualMachine(rx.build(mod, target=target))
        with pytest.raises(ShapeMismatchError):
            vm["main"](3, True, x, (2,), np.float32(1))


def test_an_int64_scalar_parameter_is_the_prim_value_form():
    written = module_of(SCALAR_PARAMS)
    prim = module_of(SCALAR_PARAMS.replace("n: T.int64", 'n: R.Prim(value="n")')
                     .replace("flag: T.bool", 'flag: R.Prim("bool")'))
    rx.assert_structural_equal(written, prim)


def test_an_int32_scalar_parameter_is_no_shape_variable():
    """TVM refuses ``n: T.int32`` used in a shape (shapes are int64); so do we, at the use."""
    src = '''
@R.function
def main(n: T.int32, x: R.Tensor([n], "float32")):
    return x
'''
    with pytest.raises(ParseError, match="'n'") as err:
        module_of(src)
    assert err.value.lineno == 3


@pytest.mark.parametrize("annotation", ["T.handle", "T.void", "T.float32x4", "T.Buffer"])
def test_only_number_and_bool_dtypes_are_scalar_annotations(annotation):
    src = f'''
@R.function
def main(h: {annotation}, x: R.Tensor([2], "float32")):
    return x
'''
    with pytest.raises(ParseError, match="expected an annotation such as R.Tensor") as err:
        module_of(src)
    assert err.value.lineno == 3


def test_a_scalar_parameter_may_be_returned_and_passed_on():
    src = '''
@I.ir_module
class Module:
    @R.function
    def twice(m: T.int64, v: T.float16) -> R.Tuple(R.Prim("int64"), R.Prim("float16")):
        return (m, v)

    @R.function
    def main(n: T.int64, x: R.Tensor([n], "float32"), v: T.float16):
        cls = Module
        pair = cls.twice(n, v)
        return pair
'''
    mod = module_of(src)
    assert_round_trip(mod)
    got = assert_runs_alike(mod, 3, np.zeros(3, "float32"), np.float16(1.5))
    assert int(got[0]) == 3 and float(got[1]) == 1.5


# ---------------------------------------------------------------- R.ExternFunc variables
EXTERN_VAR = '''
@R.function
def main(A: R.Tensor([3, 4], "float32")):
    func = R.ExternFunc("test_s14.add_one")
    B: R.Tensor([3, 4], "float32") = R.call_dps_packed(func, [A], out_ty=R.Tensor([3, 4], "float32"))
    C = R.call_dps_packed(func, (B,), out_sinfo=R.Tensor([3, 4], "float32"))
    D = R.call_pure_packed(func, C, sinfo_args=R.Tensor([3, 4], "float32"))
    return D
'''


@pytest.fixture
def add_one():
    def dps(x, out):
        out[...] = np.asarray(x) + 1

    rx.register_func("test_s14.add_one", dps, dps=True)
    yield
    rx.unregister_func("test_s14.add_one")


def test_an_extern_func_variable_is_the_packed_callee(add_one):
    """TVM's relax round-trip test binds ``func = R.ExternFunc("dummy_func")`` and passes ``func``
    to ``R.call_dps_packed``: the call names that registered function."""
    mod = module_of(EXTERN_VAR.replace("    D = R.call_pure_packed(func, C, sinfo_args=R.Tensor([3, 4], \"float32\"))\n",
                                       "").replace("return D", "return C"))
    text = assert_round_trip(mod)
    assert text.count('R.call_dps_packed("test_s14.add_one"') == 2
    a = np.arange(12, dtype="float32").reshape(3, 4)
    assert_runs_alike(mod, a, expected=a + 2)


def test_extern_func_variables_in_every_packed_call_form():
    mod = module_of(EXTERN_VAR)
    calls = [b.value for b in mod["main"].body.blocks[0].bindings if isinstance(b.value, rx.Call)]
    callees = [c.args[0] for c in calls if isinstance(c.args[0], rx.ExternFunc)]
    assert [c.global_symbol for c in callees] == ["test_s14.add_one"] * 3


def test_a_plain_variable_is_still_no_packed_callee():
    src = '''
@R.function
def main(A: R.Tensor([3], "float32")):
    B = R.call_dps_packed(A, [A], out_ty=R.Tensor([3], "float32"))
    return B
'''
    with pytest.raises(ParseError, match="callee must be a registered function's name") as err:
        module_of(src)
    assert err.value.lineno == 4


# ---------------------------------------------------------------- scalar-valued prim_funcs
SCALAR_CALLS = '''
@I.ir_module
class Module:
    @R.function(pure=False)
    def main(A: R.Tensor(["N"], "float32"), k: T.int64):
        N = T.int64()
        cls = Module
        condition: R.Prim("bool") = cls.divisible(R.prim_value(N), k)
        _ = R.assert_op(condition, format="N must be a multiple of k")
        span: R.Prim("int64") = cls.padded(R.prim_value(N), R.prim_value(3))
        return (A, span)

    @T.prim_func(private=True)
    def divisible(N: T.int64, k: T.int64) -> T.bool:
        T.func_attr({"tir.is_host_func": True})
        T.ret(N % k == 0)

    @T.prim_func(private=True)
    def padded(N: T.int64, pad: T.int64) -> T.int64:
        half = T.bind(pad // 2)
        return N + half * 2 + T.Div(N, 4)
'''


@settings(max_examples=6, deadline=None)
@given(k=st.integers(1, 4), mult=st.integers(0, 5))
def test_graph_calls_of_scalar_valued_prim_funcs(k, mult):
    """TVM's ComputePrimValue output: ``condition = cls.f(R.prim_value(N))`` with a prim_func of
    scalars returning ``T.ret(expr)``; the call is the expression of the arguments' values."""
    mod = module_of(SCALAR_CALLS)
    text = assert_round_trip(mod)
    assert "cls.divisible(R.prim_value(N), k)" in text and "-> T.bool:" in text
    n = k * mult
    got = assert_runs_alike(mod, np.zeros(n, "float32"), k)
    assert int(got[1]) == n + 2 + n // 4


def test_a_failed_condition_from_a_scalar_prim_func_stops_every_target():
    mod = module_of(SCALAR_CALLS)
    with pytest.raises(AssertionError, match="multiple of k"):
        rx.interpret(mod, "main", np.zeros(5, "float32"), 2)
    for target in TARGETS:
        vm = rx.VirtualMachine(rx.build(mod, target=target))
        with pytest.raises(AssertionError, match="multiple of k"):
            vm["main"](np.zeros(5, "float32"), 2)


def test_an_argument_of_unknown_value_is_an_error_naming_the_call():
    """A scalar whose value the graph does not know symbolically (a packed call's result)."""
    from tensorir.errors import IRError
    mod = module_of(SCALAR_CALLS.replace(
        'condition: R.Prim("bool") = cls.divisible(R.prim_value(N), k)',
        'kk = R.call_pure_packed("test_s14.unknown", A, sinfo_args=R.Prim("int64"))\n'
        '        condition: R.Prim("bool") = cls.divisible(R.prim_value(N), kk)'))
    with pytest.raises(IRError, match="'main' calls prim_func 'divisible': the argument for 'k'"):
        rx.build(mod, target="interp")


def test_a_scalar_prim_func_running_statements_is_an_error_naming_it():
    from tensorir.errors import IRError
    src = SCALAR_CALLS.replace('''        half = T.bind(pad // 2)
        return N + half * 2 + T.Div(N, 4)''', '''        B = T.alloc_buffer((1,), "int64")
        B[0] = pad
        return N + B[0]''')
    mod = module_of(src)
    with pytest.raises(IRError, match="'main' calls prim_func 'padded' for its value"):
        rx.interpret(mod, "main", np.zeros(4, "float32"), 2)
