"""Graph-level forms the s12 sweep of public TVMScript found missing (docs/ARCHITECTURE.md,
"s12-tvms"): ``R.null_value()`` (every ``nn.Module`` export's effect chain starts with it),
``out_dtype="void"`` on ``R.matmul``, a string among graph values (``R.str``),
``R.cumsum(exclusive=None)`` and ``R.multinomial_from_uniform``. Sources are written for this
project in the style TVM's printer writes: each parses, round-trips, and runs on the
interpreter and every VM target, equal to NumPy formulas written here (not the op
references), the symbolic dims bound to several values by hypothesis."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import relaxscript as rx
from relaxscript.op.registry import OpAttributeError, OpDeductionError
from tensorir.errors import ParseError

from .tvm_compat import TARGETS, assert_round_trip, assert_runs_alike, module_of

# ---------------------------------------------------------------- R.null_value
EFFECTS = '''
@I.ir_module
class Module:
    @R.function
    def _initialize_effect() -> R.Tuple(R.Object):
        with R.dataflow():
            _io: R.Object = R.null_value()
            lv: R.Tuple(R.Object) = (_io,)
            gv: R.Tuple(R.Object) = lv
            R.output(gv)
        return gv

    @R.function
    def main(x: R.Tensor(("n", 4), dtype="float32"), w: R.Tensor((3, 4), dtype="float32"), _io: R.Object) -> R.Tuple(R.Tensor(("n", 3), dtype="float32"), R.Tuple(R.Object)):
        n = T.int64()
        R.func_attr({"num_input": 3})
        with R.dataflow():
            permute_dims: R.Tensor((4, 3), dtype="float32") = R.permute_dims(w, axes=None)
            matmul: R.Tensor((n, 3), dtype="float32") = R.matmul(x, permute_dims, out_dtype="void")
            gv1: R.Tuple(R.Tensor((n, 3), dtype="float32"), R.Tuple(R.Object)) = matmul, (_io,)
            R.output(gv1)
        return gv1
'''


@settings(max_examples=4, deadline=None)
@given(n=st.integers(1, 6), seed=st.integers(0, 2**31))
def test_an_nn_module_export_runs_with_its_effect_object(n, seed):
    mod = module_of(EFFECTS)
    assert_round_trip(mod)
    rng = np.random.default_rng(seed)
    x, w = rng.standard_normal((n, 4)).astype("float32"), rng.standard_normal((3, 4)).astype("float32")
    assert rx.interpret(mod, "_initialize_effect") == (None,)
    expected = (x @ w.T, (None,))
    assert_runs_alike(mod, x, w, None, expected=expected, tol=1e-5)
    # (a build keeps only what "main" reaches: the functions of a parsed module carry no
    # global_symbol, so _initialize_effect is not an entry there; see docs/ARCHITECTURE.md)


def test_null_value_takes_no_arguments():
    with pytest.raises(ParseError) as err:
        module_of('''
@R.function
def main():
    v = R.null_value(1)
    return v
''')
    assert err.value.lineno == 4


# ---------------------------------------------------------------- "void" dtypes
def test_void_out_dtype_is_none_given_and_void_is_no_element_dtype():
    void = module_of('''
@R.function
def main(a: R.Tensor((2, 3), dtype="float16"), b: R.Tensor((3, 4), dtype="float16")):
    c = R.matmul(a, b, out_dtype="void")
    return c
''')
    plain = module_of('''
@R.function
def main(a: R.Tensor((2, 3), dtype="float16"), b: R.Tensor((3, 4), dtype="float16")):
    c = R.matmul(a, b)
    return c
''')
    rx.assert_structural_equal(void, plain)
    assert void["main"].ret_struct_info.dtype == "float16"
    with pytest.raises(OpAttributeError, match="not a tensor element dtype"):
        rx.op.astype(rx.Var("x", rx.TensorStructInfo((2,), "float32")), "void")
    with pytest.raises(ParseError, match="not a tensor element dtype") as err:
        module_of('''
@R.function
def main(x: R.Tensor((2,), dtype="float32")):
    y = R.zeros((2,), dtype="handle")
    return y
''')
    assert err.value.lineno == 4


# ---------------------------------------------------------------- strings among graph values
def test_a_string_in_a_graph_tuple_is_r_str():
    bare = module_of('''
@R.function
def main(x: R.Tensor((4,), dtype="float32")):
    y = R.call_dps_packed("my.op", (x, "identity", R.prim_value(1)), out_sinfo=R.Tensor((4,), dtype="float32"))
    return y
''')
    wrapped = module_of('''
@R.function
def main(x: R.Tensor((4,), dtype="float32")):
    y = R.call_dps_packed("my.op", (x, R.str("identity"), R.prim_value(1)), out_sinfo=R.Tensor((4,), dtype="float32"))
    return y
''')
    rx.assert_structural_equal(bare, wrapped)
    assert 'R.str("identity")' in assert_round_trip(bare)


def test_other_python_values_in_a_graph_tuple_stay_errors():
    with pytest.raises(ParseError, match="cannot hold the Python value 1.5") as err:
        module_of('''
@R.function
def main(x: R.Tensor((4,), dtype="float32")):
    t = (x, 1.5)
    return t
''')
    assert err.value.lineno == 4


# ---------------------------------------------------------------- cumsum(exclusive=None)
def test_cumsum_exclusive_none_is_the_default():
    mod = module_of('''
@R.function
def main(x: R.Tensor((2, 3), dtype="float32")):
    c = R.cumsum(x, axis=1, dtype="void", exclusive=None)
    return c
''')
    x = np.arange(6, dtype="float32").reshape(2, 3)
    assert_runs_alike(mod, x, expected=np.cumsum(x, axis=1))
    with pytest.raises(OpAttributeError, match="exclusive must be a bool"):
        rx.op.cumsum(rx.Var("x", rx.TensorStructInfo((2,), "float32")), exclusive=2)


# ---------------------------------------------------------------- multinomial_from_uniform
SAMPLE = '''
@R.function
def main(prob: R.Tensor(("b", "v"), dtype="float32"), u: R.Tensor(("n", 1), dtype="float32"), s: R.Tensor(("n", 1), dtype="int64")) -> R.Tensor(("n", 1), dtype="int32"):
    n = T.int64()
    with R.dataflow():
        c: R.Tensor((n, 1), dtype="int32") = R.multinomial_from_uniform(prob, u, s, dtype="int32")
        R.output(c)
    return c
'''


def _draw(prob, u, s):
    """The first index whose running sum (float64 here) passes ``u``; the last if none does."""
    out = []
    for ui, si in zip(u[:, 0], s[:, 0]):
        total = 0.0
        row = prob[si]
        pick = len(row) - 1
        for j, p in enumerate(row):
            total += float(p)
            if total > ui:
                pick = j
                break
        out.append(pick)
    return np.array(out, dtype="int32").reshape(-1, 1)


@settings(max_examples=6, deadline=None)
@given(b=st.integers(1, 4), v=st.integers(1, 9), n=st.integers(1, 6), seed=st.integers(0, 2**31))
def test_multinomial_from_uniform_draws_where_the_running_sum_passes_u(b, v, n, seed):
    mod = module_of(SAMPLE)
    assert_round_trip(mod)
    rng = np.random.default_rng(seed)
    prob = rng.random((b, v)).astype("float32") + np.float32(0.05)
    prob /= prob.sum(axis=1, keepdims=True)
    s = rng.integers(-b, b, size=(n, 1)).astype("int64")
    # u between two running sums (never on one, where float32 and float64 sums could disagree),
    # or past the total (the last index)
    running = np.cumsum(prob.astype("float64"), axis=1)
    picks = rng.integers(0, v + 1, size=n)
    u = np.empty((n, 1), "float32")
    for i, (row, k) in enumerate(zip(s[:, 0], picks)):
        lo = running[row, k - 1] if k > 0 else 0.0
        hi = running[row, k] if k < v else 1.5
        u[i, 0] = (lo + hi) / 2
    assert_runs_alike(mod, prob, u, s, expected=_draw(prob, u, s))


def test_multinomial_from_uniform_checks_the_row_index_on_every_target():
    mod = module_of(SAMPLE)
    prob = np.full((2, 3), 1 / 3, "float32")
    u = np.full((1, 1), 0.5, "float32")
    bad = np.array([[2]], "int64")
    with pytest.raises(rx.IndexOutOfRangeError):
        rx.interpret(mod, "main", prob, u, bad)
    for target in TARGETS:
        with pytest.raises(rx.IndexOutOfRangeError):
            rx.VirtualMachine(rx.build(mod, target=target))["main"](prob, u, bad)


@pytest.mark.parametrize("args, message", [
    ("prob, u, u", "sample_indices must be an integer tensor"),
    ("s, u, s", "prob must be a float tensor"),
    ("prob, prob, s", "uniform_sample must have shape \\(n, 1\\)"),
])
def test_multinomial_from_uniform_misuse(args, message):
    src = '''
@R.function
def main(prob: R.Tensor((2, 3), dtype="float32"), u: R.Tensor((4, 1), dtype="float32"), s: R.Tensor((4, 1), dtype="int64")):
    c = R.multinomial_from_uniform(ARGS)
    return c
'''.replace("ARGS", args)
    with pytest.raises((ParseError, OpDeductionError), match=message) as err:
        module_of(src)
    assert getattr(err.value, "lineno", 4) == 4


def test_multinomial_from_uniform_dtype_is_an_integer_type():
    with pytest.raises(ParseError, match="integer type") as err:
        module_of(SAMPLE.replace('dtype="int32")\n', 'dtype="float32")\n'))
    assert err.value.lineno == 6


# ---------------------------------------------------------------- T.target through a saved executable
TARGETED = '''
@I.ir_module
class Module:
    @T.prim_func
    def double(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
        T.func_attr({"target": T.target({"kind": "llvm", "mcpu": "generic"}), "tir.noalias": True})
        for i in range(8):
            B[i] = A[i] * T.float32(2)

    @R.function
    def main(x: R.Tensor((8,), "float32")):
        cls = Module
        y = R.call_tir(cls.double, (x,), out_sinfo=R.Tensor((8,), "float32"))
        return y
'''


@pytest.mark.parametrize("target", TARGETS)
def test_a_target_attribute_survives_build_save_and_load(target, tmp_path):
    from tensorir.script.literals import TargetAttr
    mod = module_of(TARGETED)
    assert_round_trip(mod)
    x = np.arange(8, dtype="float32")
    exe = rx.build(mod, target=target)
    path = tmp_path / "exe.rxe"
    exe.save(str(path))
    loaded = rx.Executable.load(str(path))
    np.testing.assert_array_equal(rx.VirtualMachine(loaded)["main"](x), x * 2)
    if target == "interp":  # the interp executable keeps its prim_funcs, attributes included
        kept = [f.attrs["target"] for f in loaded.prim_funcs.values() if "target" in f.attrs]
        assert kept == [TargetAttr({"kind": "llvm", "mcpu": "generic"})]
