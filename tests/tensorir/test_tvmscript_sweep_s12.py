"""T-level forms the s12 sweep of public TVMScript found missing or mis-printed (see
docs/ARCHITECTURE.md, "s12-tvms"): ``T.Let`` re-parsing as printed, ``T.target`` attributes,
``T.Buffer[...]`` parameters, loop steps, ``T.boolean``, ``T.let[...]`` locals, ``T.bind``,
lowercase ``T.ramp``/``T.broadcast``, ``T.address_of(A)``, assert messages in parts,
``T.reinterpret``, ``T.clz``, ``T.popcount`` and ``with T.launch_thread(tx, n):``. Our own
sources: each parses, round-trips, and (where it computes) runs in the interpreter and the C
build equal to NumPy; misuse is a ParseError at its line."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tensorir as tir
from backends.target import build_kernels
from tensorir.errors import KernelAssertionError, ParseError
from tensorir.script.literals import TargetAttr


def _round_trip(func):
    text = func.script()
    again = tir.from_source(text)
    tir.assert_structural_equal(again, func)
    assert again.script() == text
    return text


def _both(func):
    """The interpreter and the C kernel of ``func`` (same calling convention)."""
    kernel = build_kernels("c", func)[func.name]
    return [lambda *a, **k: tir.interpret(func, *a, **k), kernel]


# ---------------------------------------------------------------- T.Let
def test_a_let_expression_prints_what_re_parses_to_it():
    """T.Let substituted into an already built body left ``1 + 1`` unfolded; it printed as
    ``T.int32(1) + T.int32(1)``, which the parser folds to 2 (a round-trip failure)."""
    func = tir.from_source('''
@T.prim_func
def f(A: T.Buffer((4,), "int32")):
    x = T.int32()
    T.evaluate(T.Let(x + 1, where={x: 1}))
    for i in range(4):
        A[i] = T.Let(y * 2 + i, where={y: A[i]})
''')
    text = _round_trip(func)
    assert "T.evaluate(T.int32(2))" in text or "T.evaluate(2)" in text
    a = np.arange(4, dtype="int32")
    for run in _both(func):
        out = a.copy()
        run(out)
        np.testing.assert_array_equal(out, a * 2 + np.arange(4))


# ---------------------------------------------------------------- T.target
TARGET = '''
@T.prim_func
def main(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    T.func_attr({"target": T.target("llvm"), "tir.noalias": True})
    for i in range(8):
        B[i] = A[i] * T.float32(2)
'''


def test_target_attribute_is_kept_and_printed_back():
    func = tir.from_source(TARGET)
    assert func.attrs["target"] == TargetAttr("llvm")
    assert 'T.target("llvm")' in _round_trip(func)
    a = np.arange(8, dtype="float32")
    for run in _both(func):  # a label only: the build's target decides
        b = np.zeros(8, "float32")
        run(a, b)
        np.testing.assert_array_equal(b, a * 2)


def test_target_attribute_takes_a_dict_with_a_kind():
    func = tir.from_source(TARGET.replace('T.target("llvm")', 'T.target({"kind": "cuda", "arch": "sm_80"})'))
    assert func.attrs["target"] == TargetAttr({"arch": "sm_80", "kind": "cuda"})
    _round_trip(func)
    assert func.attrs["target"] != TargetAttr("cuda")


@pytest.mark.parametrize("spec", ['T.target(3)', 'T.target({"arch": "sm_80"})', 'T.target("llvm", "c")'])
def test_target_attribute_misuse_is_a_parse_error(spec):
    with pytest.raises(ParseError, match="T.target takes") as err:
        tir.from_source(TARGET.replace('T.target("llvm")', spec))
    assert err.value.lineno == 4


# ---------------------------------------------------------------- T.Buffer[...] and T.boolean
def test_subscript_buffer_annotation_is_the_call_form():
    old = tir.from_source('''
@T.prim_func
def f(A: T.Buffer[(4, 2), "float32"], B: T.Buffer[8, "int8"], flag: T.boolean):
    for i in range(8):
        B[i] = T.Cast("int8", A[i // 2, i % 2]) + T.Cast("int8", flag)
''')
    new = tir.from_source('''
@T.prim_func
def f(A: T.Buffer((4, 2), "float32"), B: T.Buffer(8, "int8"), flag: T.bool):
    for i in range(8):
        B[i] = T.Cast("int8", A[i // 2, i % 2]) + T.Cast("int8", flag)
''')
    tir.assert_structural_equal(old, new)


# ---------------------------------------------------------------- loop steps
STEPS = '''
@T.prim_func
def f(A: T.Buffer((64,), "int32"), lo: T.int32, hi: T.int32):
    for i in range(lo, hi, STEP):
        A[i] = A[i] + 1
    for j in T.serial(lo, hi, step=STEP):
        A[j] = A[j] * 3
'''


@settings(max_examples=15, deadline=None)
@given(lo=st.integers(0, 40), length=st.integers(-3, 24), step=st.integers(1, 7))
def test_loop_steps_visit_the_range_python_would(lo, length, step):
    func = tir.from_source(STEPS.replace("STEP", str(step)))
    _round_trip(func)
    hi = min(lo + length, 64)
    expected = np.arange(64, dtype="int32")
    idx = np.arange(lo, hi, step)
    expected[idx] = (expected[idx] + 1) * 3
    for run in _both(func):
        a = np.arange(64, dtype="int32")
        run(a, lo=lo, hi=hi)
        np.testing.assert_array_equal(a, expected)


# s14: negative and run-time steps count as Python's range (test_tvmscript_sweep_s14); a zero
# constant step and a non-integer one stay refused.
@pytest.mark.parametrize("step, message", [("0", "must not be zero"), ("1.5", "must be an integer")])
def test_zero_and_non_integer_loop_steps_are_refused(step, message):
    with pytest.raises(ParseError, match=message) as err:
        tir.from_source(STEPS.replace("STEP", step))
    assert err.value.lineno == 4


# ---------------------------------------------------------------- spellings of the same IR
SPELLINGS = [
    ('''
@T.prim_func
def f(A: T.Buffer((4,), "int32")):
    a: T.let[T.bool] = A[0] > 0
    x = T.bind(A[1] * 2)
    if a:
        A[2] = x
''', '''
@T.prim_func
def f(A: T.Buffer((4,), "int32")):
    a: T.bool = A[0] > 0
    x = A[1] * 2
    if a:
        A[2] = x
'''),
    ('''
@T.prim_func
def f(A: T.Buffer((8,), "float32")):
    A[T.ramp(0, 2, 4)] = T.broadcast(T.float32(1), 4)
''', '''
@T.prim_func
def f(A: T.Buffer((8,), "float32")):
    A[T.Ramp(0, 2, 4)] = T.Broadcast(T.float32(1), 4)
'''),
    ('''
@T.prim_func
def f(A: T.Buffer((2, 3), "float32")):
    T.evaluate(T.call_extern("int32", "touch", T.address_of(A)))
''', '''
@T.prim_func
def f(A: T.Buffer((2, 3), "float32")):
    T.evaluate(T.call_extern("int32", "touch", T.address_of(A[0, 0])))
'''),
    ('''
@T.prim_func
def f(n: T.int32):
    assert n > 0, ("ValueError", ["n must be ", "positive"])
''', '''
@T.prim_func
def f(n: T.int32):
    assert n > 0, "n must be positive"
'''),
]


@pytest.mark.parametrize("tvm_form, ours", SPELLINGS)
def test_tvm_spellings_are_the_same_ir(tvm_form, ours):
    func = tir.from_source(tvm_form)
    tir.assert_structural_equal(func, tir.from_source(ours))
    _round_trip(func)


def test_assert_message_in_parts_raises_the_joined_message():
    func = tir.from_source('''
@T.prim_func
def f(A: T.Buffer((4,), "int32")):
    for i in range(4):
        assert A[i] >= 0, ("RuntimeError", ["negative ", "entry"])
        A[i] = A[i] + 1
''')
    for run in _both(func):
        a = np.array([1, 2, 3, 4], "int32")
        run(a)
        np.testing.assert_array_equal(a, [2, 3, 4, 5])
        with pytest.raises(KernelAssertionError, match="negative entry"):
            run(np.array([1, -2, 3, 4], "int32"))


def test_assert_message_parts_misuse():
    with pytest.raises(ParseError, match="error kind is a name") as err:
        tir.from_source('''
@T.prim_func
def f(n: T.int32):
    assert n > 0, ("not a name", ["m"])
''')
    assert err.value.lineno == 4
    with pytest.raises(ParseError, match="a part of an assert's message") as err:
        tir.from_source('''
@T.prim_func
def f(n: T.int32):
    assert n > 0, ("ValueError", ["m", n])
''')
    assert err.value.lineno == 4


# ---------------------------------------------------------------- reinterpret, clz, popcount
BITS = '''
@T.prim_func
def f(A: T.Buffer(("n",), "DT"), Z: T.Buffer(("n",), "int32"), P: T.Buffer(("n",), "DT"), R: T.Buffer(("n",), "FT")):
    n = T.int64()
    for i in range(n):
        Z[i] = T.clz(A[i])
        P[i] = T.popcount(A[i])
        R[i] = T.reinterpret("FT", A[i])
'''
_FLOAT_OF = {8: "uint8", 16: "float16", 32: "float32", 64: "float64"}


@settings(max_examples=12, deadline=None)
@given(dtype=st.sampled_from(["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"]),
       n=st.integers(1, 40), seed=st.integers(0, 2**31))
def test_bit_intrinsics_match_numpy(dtype, n, seed):
    bits = np.dtype(dtype).itemsize * 8
    float_type = _FLOAT_OF[bits]
    func = tir.from_source(BITS.replace("FT", float_type).replace("DT", dtype))
    _round_trip(func)
    rng = np.random.default_rng(seed)
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, size=n, dtype=dtype, endpoint=True)
    a[0] = 0
    if n > 1:
        a[1] = info.max if dtype.startswith("u") else -1
    as_unsigned = [int(v) % (1 << bits) for v in a.tolist()]
    clz = np.array([bits - v.bit_length() for v in as_unsigned], "int32")
    popcount = np.array([bin(v).count("1") for v in as_unsigned]).astype(dtype)
    for run in _both(func):
        z, p, r = np.zeros(n, "int32"), np.zeros(n, dtype), np.zeros(n, float_type)
        run(a, z, p, r)
        np.testing.assert_array_equal(z, clz)
        np.testing.assert_array_equal(p, popcount)
        assert r.tobytes() == a.tobytes()  # the same bits (NaN payloads included)


def test_reinterpret_to_its_own_type_is_the_value():
    func = tir.from_source('''
@T.prim_func
def f(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    for i in range(4):
        B[i] = T.reinterpret("float32", A[i])
''')
    assert "reinterpret" not in func.script()


@pytest.mark.parametrize("expr, message", [
    ('T.reinterpret("float64", A[i])', "same width"),
    ('T.reinterpret("bool", T.Cast("int8", A[i]))', "same width"),
    ("T.clz(A[i])", "integer operand"),
    ("T.popcount(A[i])", "integer operand"),
])
def test_bit_intrinsic_misuse_is_a_parse_error(expr, message):
    with pytest.raises(ParseError, match=message) as err:
        tir.from_source(f'''
@T.prim_func
def f(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    for i in range(4):
        B[i] = T.Cast("float32", {expr})
''')
    assert err.value.lineno == 5


# ---------------------------------------------------------------- launch_thread frames
def test_launch_thread_frame_of_an_env_thread_is_the_statement_form():
    frame = tir.from_source('''
@T.prim_func
def f(A: T.Buffer((256,), "float32")):
    tx = T.env_thread("threadIdx.x")
    with T.launch_thread(tx, 256):
        A[tx] = A[tx] + T.float32(1)
''')
    statement = tir.from_source('''
@T.prim_func
def f(A: T.Buffer((256,), "float32")):
    tx = T.env_thread("threadIdx.x")
    T.launch_thread(tx, 256)
    A[tx] = A[tx] + T.float32(1)
''')
    tir.assert_structural_equal(frame, statement)
    _round_trip(frame)


def test_launch_thread_frame_needs_an_env_thread():
    with pytest.raises(ParseError, match="launch_thread") as err:
        tir.from_source('''
@T.prim_func
def f(A: T.Buffer((256,), "float32")):
    with T.launch_thread("threadIdx.x", 256):
        A[0] = T.float32(1)
''')
    assert err.value.lineno == 4


# ---------------------------------------------------------------- T.undef
def test_undef_is_an_unspecified_value_every_target_reads_as_zero():
    func = tir.from_source('''
@T.prim_func
def f(A: T.Buffer((3,), "int32"), B: T.Buffer((3,), "float32")):
    v = T.undef(dtype="int32")
    A[0] = v
    A[1] = 1 + T.undef()
    B[2] = T.undef(dtype="float32")
''')
    assert 'T.undef(dtype="float32")' in _round_trip(func)
    for run in _both(func):
        a, b = np.full(3, 7, "int32"), np.full(3, 7, "float32")
        run(a, b)
        np.testing.assert_array_equal(a, [0, 1, 7])
        np.testing.assert_array_equal(b, [7, 7, 0])
    with pytest.raises(ParseError, match="T.undef takes only dtype=") as err:
        tir.from_source('''
@T.prim_func
def f(A: T.Buffer((3,), "int32")):
    A[0] = T.undef(1)
''')
    assert err.value.lineno == 4


@pytest.mark.parametrize("jump", ["break", "continue"])
def test_loop_jumps_outside_serial_loops_are_refused_by_name(jump):
    # (s13 made break/continue in serial for and while loops supported: test_tvmscript_sweep_s13.py)
    with pytest.raises(ParseError, match=f"{jump} in a parallel loop") as err:
        tir.from_source(f'''
@T.prim_func
def f(A: T.Buffer((10,), "int32")):
    for i in T.parallel(10):
        if A[i] > 5:
            {jump}
        A[i] = A[i] + 1
''')
    assert err.value.lineno == 6
