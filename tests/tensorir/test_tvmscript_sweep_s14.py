"""T-level forms the s14 sweep of public TVMScript found missing (docs/ARCHITECTURE.md,
"s14-tvms"): integer ``if``/``while`` conditions (``if n:`` with ``n: T.int32``), TVM's node
constructors (``T.Div``, ``T.Mod``, ``T.FloorDiv``, ``T.Min``, ``T.EQ``, ``T.Not`` ...), Python's
bit operators on integer expressions (``C[0:5] >> 4``), negative and run-time loop steps, and a
void ``T.call_extern(..., dtype="")``. Sources are written for this project in TVM's style: each
parses and round-trips, and runs in the interpreter and the C build equal to NumPy / Python
formulas written here, values drawn by hypothesis; misuse is a ParseError at its line."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tensorir as tir
from backends.target import build_kernels
from tensorir.errors import KernelAssertionError, ParseError

from ..relaxscript.tvm_compat import assert_round_trip, module_of


def _kernels(mod, name="main"):
    """The interpreter's and the C build's kernel ``name`` of a module's prim_funcs."""
    funcs = dict(mod.functions)
    return [build_kernels(t, funcs)[name] for t in ("interp", "c")]


# ---------------------------------------------------------------- integer conditions
INT_CONDITIONS = '''
@I.ir_module
class Module:
    @T.prim_func
    def main(B: T.Buffer((4,), "int32"), c1: T.int32, c2: T.int32):
        b = T.bind(c1 - c2)
        if b:
            B[0] = 1
        else:
            B[0] = 2
        if c1:
            if c2:
                B[1] = 3
            else:
                B[1] = 4
        B[2] = 0
        i = T.alloc_buffer((1,), "int32")
        i[0] = c1 % 5
        while i[0]:
            B[2] = B[2] + 1
            i[0] = i[0] - T.if_then_else(i[0] > 0, T.int32(1), T.int32(-1))
'''


@settings(max_examples=12, deadline=None)
@given(c1=st.integers(-7, 7), c2=st.integers(-7, 7))
def test_integer_if_and_while_conditions_mean_nonzero(c1, c2):
    """TVM's CommonSubexprElim tests branch on ``b = T.bind(1)`` and ``c1: T.int32``: nonzero is
    true, as in C. The condition reads back as ``b != 0``."""
    mod = module_of(INT_CONDITIONS)
    text = assert_round_trip(mod)
    assert "if b != 0:" in text and "if c1 != 0:" in text and "while i[0] != 0:" in text
    want = np.zeros(4, "int32")
    want[0] = 1 if c1 - c2 else 2
    if c1:
        want[1] = 3 if c2 else 4
    want[2] = abs(int(np.fmod(c1, 5)) if c1 >= 0 else c1 % 5)  # floormod, counted down to 0
    for kernel in _kernels(mod):
        b = np.zeros(4, "int32")
        kernel(b, c1=c1, c2=c2)
        np.testing.assert_array_equal(b, want)


def test_a_vector_or_float_condition_is_refused_at_its_line():
    vector = '''
@T.prim_func
def f(A: T.Buffer((4,), "int32")):
    if T.Ramp(0, 1, 4):
        A[0] = 1
'''
    with pytest.raises(ParseError, match="one boolean or integer") as err:
        module_of(vector)
    assert err.value.lineno == 4
    floating = vector.replace("T.Ramp(0, 1, 4)", "T.float32(1)")
    with pytest.raises(ParseError, match="got float32"):
        module_of(floating)


# ---------------------------------------------------------------- node constructors
NODES = '''
@I.ir_module
class Module:
    @T.prim_func
    def main(A: T.Buffer((10,), "int32"), F: T.Buffer((3,), "float32"), a: T.int32, b: T.int32):
        A[0] = T.Div(a, b)
        A[1] = T.Mod(a, b)
        A[2] = T.FloorDiv(a, b)
        A[3] = T.FloorMod(a, b)
        A[4] = T.Add(T.Mul(a, 3), T.Sub(b, 1))
        A[5] = T.Min(a, b) + T.Max(a, b) * 100
        A[6] = T.Cast("int32", T.EQ(a, b)) + T.Cast("int32", T.NE(a, b)) * 2
        A[7] = T.Cast("int32", T.And(T.LT(a, b), T.LE(a, b))) + T.Cast("int32", T.Or(T.GT(a, b), T.GE(a, b))) * 2
        A[8] = T.Cast("int32", T.Not(T.LT(a, b)))
        A[9] = T.Div(T.Mul(a, 7), 4)
        F[0] = T.Div(T.Cast("float32", a), T.Cast("float32", b))
        F[1] = T.Mod(T.Cast("float32", a), T.Cast("float32", b))
        F[2] = T.Div(F[0], T.float32(2))
'''


def _trunc_div(a, b):
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


@settings(max_examples=15, deadline=None)
@given(a=st.integers(-50, 50), b=st.integers(-9, 9).filter(lambda v: v != 0))
def test_node_constructors_compute_tvm_meanings(a, b):
    """``T.Div`` is C's division (truncating on integers, true division on floats), ``T.Mod`` its
    remainder (the dividend's sign; ``fmod`` on floats); the others are the operators."""
    mod = module_of(NODES)
    text = assert_round_trip(mod)
    assert "T.Div" not in text  # printed in the operator spelling
    want = [_trunc_div(a, b), a - _trunc_div(a, b) * b, a // b, a % b, a * 3 + b - 1,
            min(a, b) + max(a, b) * 100, int(a == b) + int(a != b) * 2,
            int(a < b and a <= b) + int(a > b or a >= b) * 2, int(not a < b), _trunc_div(a * 7, 4)]
    fwant = np.array([np.float32(a) / np.float32(b), np.fmod(np.float32(a), np.float32(b)), 0], "float32")
    fwant[2] = fwant[0] / np.float32(2)
    for kernel in _kernels(mod):
        out, f = np.zeros(10, "int32"), np.zeros(3, "float32")
        kernel(out, f, a=a, b=b)
        np.testing.assert_array_equal(out, np.array(want, "int32"))
        np.testing.assert_allclose(f, fwant, rtol=1e-6)


def test_node_constructors_build_the_operators_own_nodes():
    spelled = module_of(NODES.replace("T.Div(a, b)", "T.truncdiv(a, b)", 1)
                        .replace("T.FloorDiv(a, b)", "a // b").replace("T.FloorMod(a, b)", "a % b")
                        .replace("T.Add(T.Mul(a, 3), T.Sub(b, 1))", "a * 3 + (b - 1)"))
    tir.assert_structural_equal(module_of(NODES)["main"], spelled["main"])


def test_node_constructor_arity_is_checked_at_its_line():
    src = '''
@T.prim_func
def f(A: T.Buffer((1,), "int32"), a: T.int32):
    A[0] = T.Div(a)
'''
    with pytest.raises(ParseError, match="T.Div") as err:
        module_of(src)
    assert err.value.lineno == 4


# ---------------------------------------------------------------- bit operators
BITS = '''
@I.ir_module
class Module:
    @T.prim_func
    def main(C: T.Buffer((10,), "uint32"), D: T.Buffer((6,), "int32"), s: T.int32, a: T.int32, b: T.int32):
        C[0:5] = C[0:5] % T.broadcast(T.uint32(5), 5)
        C[5:10] = C[5:10] >> 4
        C[0:5] = C[0:5] << C[5:10] % T.broadcast(T.uint32(3), 5)
        D[0] = a & b
        D[1] = a | b
        D[2] = a ^ b
        D[3] = ~a
        D[4] = (a << s) >> 1
        D[5] = a >> s
'''


@settings(max_examples=12, deadline=None)
@given(c=st.lists(st.integers(0, 2**32 - 1), min_size=10, max_size=10), s=st.integers(0, 20),
       a=st.integers(-2**20, 2**20), b=st.integers(-2**20, 2**20))
def test_python_bit_operators_are_the_bit_intrinsics(c, s, a, b):
    mod = module_of(BITS)
    text = assert_round_trip(mod)
    assert "T.shift_right(" in text and "T.bitwise_xor(a, b)" in text and "T.bitwise_not(a)" in text
    c0 = np.array(c, "uint64")
    want_c = c0.copy()
    want_c[0:5] = c0[0:5] % 5
    want_c[5:10] = c0[5:10] >> 4
    want_c[0:5] = (want_c[0:5] << (want_c[5:10] % 3)) & 0xFFFFFFFF
    ia, ib = np.int32(a), np.int32(b)
    shifted = np.left_shift(ia, np.int32(s))  # wraps at 32 bits, as the int32 program does
    want_d = [ia & ib, ia | ib, ia ^ ib, ~ia, np.right_shift(shifted, np.int32(1)), np.right_shift(ia, np.int32(s))]
    for kernel in _kernels(mod):
        cc, d = c0.astype("uint32"), np.zeros(6, "int32")
        kernel(cc, d, s=s, a=a, b=b)
        np.testing.assert_array_equal(cc, want_c.astype("uint32"))
        np.testing.assert_array_equal(d, np.array(want_d, "int32"))


def test_a_bit_operator_on_floats_is_refused_at_its_line():
    src = '''
@T.prim_func
def f(A: T.Buffer((2,), "float32")):
    A[0] = A[1] >> 1
'''
    with pytest.raises(ParseError, match="integer operands") as err:
        module_of(src)
    assert err.value.lineno == 4


# ---------------------------------------------------------------- loop steps
STEPPED = '''
@I.ir_module
class Module:
    @T.prim_func
    def main(A: T.Buffer((20,), "int32"), lo: T.int32, hi: T.int32, s: T.int32):
        for i in range(lo, hi, s):
            A[i] = A[i] + i + 100
        for j in T.serial(19, -1, step=-3):
            A[j] = A[j] * 2
'''


@settings(max_examples=20, deadline=None)
@given(lo=st.integers(0, 19), hi=st.integers(-1, 20), s=st.integers(-6, 6).filter(lambda v: v != 0))
def test_negative_and_run_time_steps_count_as_pythons_range(lo, hi, s):
    mod = module_of(STEPPED)
    text = assert_round_trip(mod)
    assert "assert s != 0" in text
    want = np.zeros(20, "int64")
    for i in range(lo, hi, s):
        want[i] += i + 100
    for j in range(19, -1, -3):
        want[j] *= 2
    for kernel in _kernels(mod):
        a = np.zeros(20, "int32")
        kernel(a, lo=lo, hi=hi, s=s)
        np.testing.assert_array_equal(a, want.astype("int32"))


def test_a_zero_run_time_step_stops_before_the_loop():
    mod = module_of(STEPPED)
    for kernel in _kernels(mod):
        a = np.zeros(20, "int32")
        with pytest.raises(KernelAssertionError, match="step of loop 'i' is zero"):
            kernel(a, lo=0, hi=5, s=0)
        assert not a.any()


@pytest.mark.parametrize("step, message", [("0", "must not be zero"), ("1.5", "must be an integer"),
                                           ("T.float32(2)", "must be an integer")])
def test_bad_loop_steps_are_refused_at_their_line(step, message):
    src = f'''
@T.prim_func
def f(A: T.Buffer((8,), "float32")):
    for i in range(0, 8, {step}):
        A[i] = T.float32(1)
'''
    with pytest.raises(ParseError, match=message) as err:
        module_of(src)
    assert err.value.lineno == 4


# ---------------------------------------------------------------- void extern calls
def test_an_extern_call_with_an_empty_dtype_is_void():
    """TVM's DeclBuffer tests: ``T.evaluate(T.call_extern("call_impl", A.data, dtype=""))``."""
    src = '''
@I.ir_module
class Module:
    @T.prim_func
    def main(A: T.Buffer((4,), "float32")):
        T.evaluate(T.call_extern("call_impl", A.data, dtype=""))
'''
    mod = module_of(src)
    text = assert_round_trip(mod)
    tir.assert_structural_equal(mod["main"], module_of(src.replace('dtype=""', 'dtype="void"'))["main"])
    assert "call_impl" in text


# ---------------------------------------------------------------- refused by name
@pytest.mark.parametrize("src, message, line", [
    ('''
@T.prim_func
def f(A: T.Buffer((16, 16), "float32")):
    B = T.decl_buffer([16, 16], dtype="float32", axis_separators=[1])
    B[0, 0] = A[0, 0]
''', r"axis_separators=\.\.\.\) is not supported", 4),
    ('''
@T.prim_func
def f(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    T.realize(B[0:8], "")
    for i in range(8):
        B[i] = A[i]
''', "T.realize is TVM's pre-TensorIR", 4),
])
def test_forms_without_a_meaning_here_are_refused_by_name(src, message, line):
    with pytest.raises(ParseError, match=message) as err:
        module_of(src)
    assert err.value.lineno == line


# ---------------------------------------------------------------- found by --run
ROLLING = '''
@I.ir_module
class Module:
    @T.prim_func
    def main(A: T.Buffer((4, 12), "int32"), C: T.Buffer((4, 8), "int32")):
        B = T.alloc_buffer([4, 6], dtype="int32")
        for c, i_0 in T.grid(4, 2):
            for ax0, ax1 in T.grid(6, 3):
                with T.block("B"):
                    T.where(i_0 < 1 or 2 <= ax0)
                    cc = T.axis.spatial(4, c)
                    vi = T.axis.opaque(10, i_0 * 4 + ax0)
                    vk = T.axis.reduce(3, ax1)
                    T.reads(A[cc, vi + vk])
                    T.writes(B[cc, vi % 6])
                    with T.init():
                        B[cc, vi % 6] = 0
                    B[cc, vi % 6] = B[cc, vi % 6] + A[cc, vi + vk]
            for i_1, k in T.grid(4, 3):
                with T.block("C"):
                    cc = T.axis.spatial(4, c)
                    vi = T.axis.opaque(8, i_0 * 4 + i_1)
                    vk = T.axis.reduce(3, k)
                    T.reads(B[cc, (vi + vk) % 6])
                    T.writes(C[cc, vi])
                    with T.init():
                        C[cc, vi] = 0
                    C[cc, vi] = C[cc, vi] + B[cc, (vi + vk) % 6]
'''


@settings(max_examples=4, deadline=None)
@given(seed=st.integers(0, 2**31))
def test_a_reduction_with_opaque_iter_vars_keeps_them_in_its_hoisted_init(seed):
    """TVM's rolling_buffer result (a window of 6 rows reused through ``% 6``; opaque iter vars):
    the C build hoisted the init of block C before its reduction loop with only the spatial iter
    vars, so the init read the opaque ``vi`` undefined (a CodegenError; the interpreter ran)."""
    mod = module_of(ROLLING)
    assert_round_trip(mod)
    a = np.random.default_rng(seed).integers(-50, 50, (4, 12)).astype("int32")
    b = a[:, 0:10] + a[:, 1:11] + a[:, 2:12]
    want = b[:, 0:8] + b[:, 1:9] + b[:, 2:10]
    for kernel in _kernels(mod):
        c = np.zeros((4, 8), "int32")
        kernel(a, c)
        np.testing.assert_array_equal(c, want)


@settings(max_examples=4, deadline=None)
@given(seed=st.integers(0, 2**31))
def test_negating_a_vector_expression(seed):
    """TVM's slice_op_test writes ``B[0:5] = -B[0:5]``: unary minus of a vector was a
    vector-typed FloatImm zero, which the C build's lane splitting refused (found by --run)."""
    src = '''
@I.ir_module
class Module:
    @T.prim_func
    def main(B: T.Buffer((10,), "float32"), C: T.Buffer((8,), "int32")):
        B[0:5] = -B[0:5]
        B[5:10] = -(B[5:10] * T.float32(2))
        C[0:8] = -C[0:8]
'''
    mod = module_of(src)
    assert_round_trip(mod)
    rng = np.random.default_rng(seed)
    b0 = rng.standard_normal(10).astype("float32")
    c0 = rng.integers(-100, 100, 8).astype("int32")
    want = np.concatenate([-b0[:5], -(b0[5:] * np.float32(2))]).astype("float32")
    for kernel in _kernels(mod):
        b, c = b0.copy(), c0.copy()
        kernel(b, c)
        np.testing.assert_array_equal(b, want)
        np.testing.assert_array_equal(c, -c0)
