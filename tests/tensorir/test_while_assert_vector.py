"""TIR ``while`` loops, ``assert`` statements and vector expressions (``T.Ramp``, ``T.Broadcast``).

Each construct goes through the parser, the printer (round trip), the interpreter (checked against
NumPy), the C backend (checked against the interpreter) and, where the test machine has PoCL, the
OpenCL emitter; misuse is reported at its source line.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tensorir as tir
from backends.target import build_kernels
from tensorir import dtype as dt
from tensorir import expr as E
from tensorir import stmt as S
from tensorir.errors import KernelAssertionError, ParseError, ScheduleError
from tensorir.functor import collect
from tensorir.structural import assert_structural_equal, structural_hash
from tensorir.transform import lower, scalarize_vectors
from tests.targets import COMPILED_TARGETS

# The length of the run of positive elements at the start of A (a data-dependent trip count),
# with TVM's lowered form of a mutable local: a one-element buffer.
COUNT = '''
@T.prim_func
def count(A: T.Buffer(("n",), "int32"), out: T.Buffer((1,), "int32")):
    n = T.int32()
    i = T.decl_buffer((1,), "int32", scope="local")
    i[0] = 0
    while i[0] < n and A[i[0]] > 0:
        i[0] = i[0] + 1
    out[0] = i[0]
'''

# C = A + 2 * B over float32x4 vectors; n divisible by 4 is asserted, as lowered TVM code does
VADD = '''
@T.prim_func
def vadd(A: T.Buffer(("n",), "float32"), B: T.Buffer(("n",), "float32"), C: T.Buffer(("n",), "float32")):
    n = T.int64()
    assert n % 4 == 0, "n must be a multiple of 4"
    for i in range(n // 4):
        C[T.Ramp(i * 4, 1, 4)] = A[T.Ramp(i * 4, 1, 4)] + B[T.Ramp(i * 4, 1, 4)] * T.Broadcast(T.float32(2), 4)
'''

# Vector arithmetic, compares, selects, casts, a strided ramp and a vector let
MIXED = '''
@T.prim_func
def mixed(A: T.Buffer((16,), "float32"), B: T.Buffer((8,), "int32"), C: T.Buffer((8,), "float32")):
    for j in range(2):
        idx = T.Ramp(j, 2, 4)
        v = A[idx * 2]
        C[T.Ramp(j * 4, 1, 4)] = T.if_then_else(v > T.Broadcast(T.float32(0), 4), v,
                                                T.Cast("float32x4", B[T.Ramp(j * 4, 1, 4)]))
'''

CHECK = '''
@T.prim_func
def check(A: T.Buffer((8,), "float32"), limit: T.int64):
    for i in T.parallel(8):
        assert A[i] >= T.float32(0), "negative input"
        A[i] = A[i] * T.float32(2)
    assert limit < 5, "limit too large"
    A[0] = T.float32(-1)
'''

SHIFT = '''
@T.prim_func
def shift(A: T.Buffer((8,), "float32")):
    A[T.Ramp(1, 1, 4)] = A[T.Ramp(0, 1, 4)]
'''

ALL = (COUNT, VADD, MIXED, CHECK, SHIFT)


def _run(target, func, *arrays, **scalars):
    if target == "interp":
        tir.interpret(func, *arrays, **scalars)
    else:
        build_kernels(target, func)[func.name](*arrays, **scalars)


# ---------------------------------------------------------------- IR, parser, printer
@pytest.mark.parametrize("text", ALL)
def test_round_trip(text):
    func = tir.from_source(text)
    printed = func.script()
    again = tir.from_source(printed)
    assert_structural_equal(again, func)
    assert structural_hash(again) == structural_hash(func)
    assert again.script() == printed


def test_nodes_and_dtypes():
    func = tir.from_source(COUNT)
    loop = collect(func.body, lambda n: isinstance(n, S.While))[0]
    assert loop.condition.dtype == "bool"
    ramp = E.Ramp(E.IntImm(0, "int32"), 1, 4)
    assert ramp.dtype == "int32x4" and dt.lanes(ramp.dtype) == 4 and dt.element(ramp.dtype) == "int32"
    assert dt.normalize("f32x8") == "float32x8" and dt.bits("float16x4") == 16
    assert (ramp < 3).dtype == "boolx4"
    # a scalar operand is broadcast; a ramp plus or times a broadcast stays a ramp
    assert isinstance(ramp + 1, E.Ramp) and isinstance(ramp * 2, E.Ramp)
    assert (E.Broadcast(E.FloatImm(1.0), 4) + 1.0).dtype == "float32x4"
    with pytest.raises(TypeError, match="same lane count"):
        E.Ramp(0, 1, 4) + E.Ramp(0, 1, 8)
    with pytest.raises(TypeError, match="one boolean"):
        S.While(ramp < 2, S.Evaluate(0))


def test_t_assert_forms_mean_the_same():
    plain = tir.from_source(CHECK)
    call = tir.from_source(CHECK.replace('assert limit < 5, "limit too large"',
                                         'T.Assert(limit < 5, "limit too large")'))
    assert_structural_equal(plain, call)
    framed = tir.from_source(CHECK.replace('    assert limit < 5, "limit too large"\n    A[0] = T.float32(-1)',
                                           '    with T.Assert(limit < 5, "limit too large"):\n'
                                           '        A[0] = T.float32(-1)'))
    assert_structural_equal(plain, framed)


# ---------------------------------------------------------------- execution
@pytest.mark.parametrize("target", ["interp", *COMPILED_TARGETS])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_while_counts_a_data_dependent_run(target, data):
    n = data.draw(st.integers(0, 40))
    values = np.array(data.draw(st.lists(st.integers(-3, 5), min_size=n, max_size=n)), "int32")
    func = tir.from_source(COUNT)
    if target == "opencl":   # a GPU kernel needs its threads bound: one thread runs the loop
        func = tir.from_source(COUNT.replace("    i = T.decl_buffer", "    for bx in T.thread_binding(1, thread=\"blockIdx.x\"):\n      i = T.decl_buffer")
                               .replace("\n    i[0] = 0", "\n      i[0] = 0").replace("\n    while", "\n      while")
                               .replace("\n        i[0] = i[0] + 1", "\n          i[0] = i[0] + 1")
                               .replace("\n    out[0]", "\n      out[0]"))
    out = np.full(1, -7, "int32")
    _run(target, func, values, out)
    positive = values > 0
    expected = n if positive.all() else int(np.argmin(positive))
    assert out[0] == expected


@pytest.mark.parametrize("target", ["interp", "c"])
@settings(max_examples=15, deadline=None)
@given(quads=st.integers(0, 9), seed=st.integers(0, 2 ** 31))
def test_ramp_broadcast_vector_add(target, quads, seed):
    rng = np.random.default_rng(seed)
    n = 4 * quads
    a, b = rng.standard_normal(n).astype("float32"), rng.standard_normal(n).astype("float32")
    c = np.zeros(n, "float32")
    _run(target, tir.from_source(VADD), a, b, c)
    np.testing.assert_allclose(c, a + np.float32(2) * b, rtol=1e-6)


@pytest.mark.parametrize("target", ["interp", *COMPILED_TARGETS])
def test_vector_forms_match_numpy(target):
    rng = np.random.default_rng(3)
    a = rng.standard_normal(16).astype("float32")
    b = rng.integers(-5, 5, 8).astype("int32")
    c = np.zeros(8, "float32")
    func = tir.from_source(MIXED)
    if target == "opencl":
        func = tir.from_source(MIXED.replace("for j in range(2):", "for j in T.thread_binding(2, thread=\"threadIdx.x\"):"))
    _run(target, func, a, b, c)
    picked = a[np.arange(8) * 2]   # lane k of row j reads A[(j + 2k) * 2]
    expected = np.empty(8, "float32")
    for j in range(2):
        v = a[(j + 2 * np.arange(4)) * 2]
        expected[j * 4:(j + 1) * 4] = np.where(v > 0, v, b[j * 4:(j + 1) * 4].astype("float32"))
    assert picked.shape == (8,)
    np.testing.assert_array_equal(c, expected)


@pytest.mark.parametrize("target", ["interp", "c"])
def test_a_vector_store_reads_every_lane_first(target):
    a = np.arange(8, dtype="float32")
    _run(target, tir.from_source(SHIFT), a)
    np.testing.assert_array_equal(a, [0, 0, 1, 2, 3, 5, 6, 7])


def test_scalarized_vectors_run_like_the_vectors():
    func = tir.from_source(MIXED)
    flat = scalarize_vectors(lower(func))
    assert not collect(flat.body, lambda n: isinstance(n, E.PrimExpr) and E.is_vector(n))
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(16).astype("float32"), rng.integers(-5, 5, 8).astype("int32")
    want, got = np.zeros(8, "float32"), np.zeros(8, "float32")
    tir.interpret(func, a, b, want)
    tir.interpret(flat, a, b, got)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("target", ["interp", "c", "opencl"])
def test_a_failing_assert_raises_its_message(target):
    if target == "opencl":
        pytest.importorskip("pyopencl")
    func = tir.from_source(CHECK)
    a = np.ones(8, "float32")
    _run(target, func, a, limit=1)
    np.testing.assert_array_equal(a, [-1] + [2] * 7)
    a = np.ones(8, "float32")
    a[5] = -3
    with pytest.raises(KernelAssertionError, match="negative input"):
        _run(target, func, a, limit=1)
    a = np.ones(8, "float32")
    with pytest.raises(KernelAssertionError, match="limit too large"):
        _run(target, func, a, limit=9)
    # the statement after the failed assert did not run (a device call that raises copies nothing back)
    assert a[0] == (1 if target == "opencl" else 2)
    vadd = tir.from_source(VADD)
    with pytest.raises(AssertionError, match="n must be a multiple of 4"):
        _run(target, vadd, *(np.zeros(6, "float32") for _ in range(3)))


def test_a_c_assert_message_is_escaped():
    func = tir.from_source(CHECK.replace('"limit too large"', '"lim\\\\it \\"quoted\\" ??= é\\n"'))
    with pytest.raises(KernelAssertionError) as err:
        _run("c", func, np.ones(8, "float32"), limit=9)
    assert 'lim\\it "quoted" ??= é\n' in str(err.value)


# ---------------------------------------------------------------- misuse
def _error(text) -> ParseError:
    with pytest.raises(ParseError) as err:
        tir.from_source(text)
    return err.value


def _line(text, fragment) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if fragment in line)


@pytest.mark.parametrize("old, new, match", [
    ("* T.Broadcast(T.float32(2), 4)", "* T.Broadcast(T.float32(2), 8)", "same lane count"),
    ("= A[T.Ramp(i * 4, 1, 4)] + B[T.Ramp(i * 4, 1, 4)] * T.Broadcast(T.float32(2), 4)", "= A[i]",
     "writes 4 lane"),
    ("T.Broadcast(T.float32(2), 4)", "T.Broadcast(T.float32(2), 1)", "lane count must be from 2"),
    ("T.Broadcast(T.float32(2), 4)", "T.Broadcast(T.float32(2), i)", "lane count must be a constant"),
])
def test_wrong_lanes_point_at_the_line(old, new, match):
    text = VADD.replace(old, new)
    err = _error(text)
    assert err.lineno == _line(text, "C[T.Ramp"), str(err)
    assert match in str(err)


def test_a_vector_local_may_carry_its_type():
    text = SHIFT.replace("    A[T.Ramp(1, 1, 4)] = A[T.Ramp(0, 1, 4)]",
                         "    v: T.float32x4 = A[T.Ramp(0, 1, 4)] + T.Broadcast(T.float32(1), 4)\n"
                         "    A[T.Ramp(4, 1, 4)] = v")
    func = tir.from_source(text)
    assert_structural_equal(tir.from_source(func.script()), func)
    for target in ("interp", "c"):
        a = np.arange(8, dtype="float32")
        _run(target, func, a)
        np.testing.assert_array_equal(a, [0, 1, 2, 3, 1, 2, 3, 4])
    bad = text.replace("v: T.float32x4 = A[T.Ramp(0, 1, 4)] + T.Broadcast(T.float32(1), 4)", "v: T.float32x4 = A[0]")
    err = _error(bad)
    assert err.lineno == _line(bad, "v: T.float32x4") and "T.Broadcast(value, 4)" in str(err)


def test_a_vector_into_one_element_is_refused():
    text = SHIFT.replace("A[T.Ramp(1, 1, 4)] =", "A[1] =")
    err = _error(text)
    assert err.lineno == _line(text, "A[1] =") and "writes 1 lane" in str(err)


def test_a_ramp_past_the_buffer_is_refused_at_its_line():
    text = SHIFT.replace("A[T.Ramp(1, 1, 4)] =", "A[T.Ramp(6, 1, 4)] =")
    err = _error(text)
    assert err.lineno == _line(text, "A[T.Ramp(6"), str(err)
    assert "elements 6 .. 9" in str(err) and "extent is 8" in str(err)


def test_a_symbolic_ramp_past_the_buffer_fails_at_run_time():
    text = VADD.replace('    assert n % 4 == 0, "n must be a multiple of 4"\n', "").replace("range(n // 4)", "range(n // 3)")
    with pytest.raises(Exception, match="out of bounds|outside"):
        tir.interpret(tir.from_source(text), *(np.zeros(6, "float32") for _ in range(3)))


@pytest.mark.parametrize("text, fragment, match", [
    (COUNT.replace("while i[0] < n and A[i[0]] > 0:", "while T.Ramp(0, 1, 4) < 2:"), "while", "one boolean"),
    (CHECK.replace("assert limit < 5", "assert limit + 5"), "assert limit", "boolean"),
    (CHECK.replace('"limit too large"', "limit"), "assert limit", "message must be a constant str"),
    (COUNT.replace("        i[0] = i[0] + 1", "        i[0] = i[0] + 1\n    else:\n        i[0] = 0"), "while", "while-else"),
])
def test_misused_while_and_assert_point_at_the_line(text, fragment, match):
    err = _error(text)
    assert err.lineno == _line(text, fragment), str(err)
    assert match in str(err)


def test_schedules_refuse_blocks_under_a_while():
    func = tir.from_source('''
@T.prim_func
def f(A: T.Buffer((8,), "float32"), k: T.Buffer((1,), "int32")):
    while k[0] > 0:
        for i in range(8):
            with T.block("add"):
                vi = T.axis.spatial(8, i)
                A[vi] = A[vi] + T.float32(1)
        k[0] = k[0] - 1
''')
    sch = tir.Schedule(func)
    with pytest.raises(ScheduleError, match="inside a while loop"):
        sch.get_block("add")
    a, k = np.zeros(8, "float32"), np.array([3], "int32")
    tir.interpret(func, a, k)
    np.testing.assert_array_equal(a, 3)
    b, k = np.zeros(8, "float32"), np.array([3], "int32")
    _run("c", func, b, k)
    np.testing.assert_array_equal(b, 3)


def test_block_regions_of_vector_accesses_and_schedules():
    func = tir.from_source('''
@T.prim_func
def f(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    for i in range(4):
        with T.block("v"):
            vi = T.axis.spatial(4, i)
            C[T.Ramp(vi * 4 + 3, -1, 4)] = A[T.Ramp(vi * 4, 1, 4)] * T.Broadcast(T.float32(3), 4)
''')
    block = collect(func.body, lambda n: isinstance(n, S.Block) and n.name == "v")[0]
    (read,), (write,) = block.reads, block.writes
    for region in (read, write):   # a ramp's span, whichever way it runs: vi * 4 .. vi * 4 + 3
        assert region.region[0].extent.value == 4
        assert tir.from_source(func.script()).script() == func.script()
    sch = tir.Schedule(func)
    sch.split(sch.get_loops(sch.get_block("v"))[0], [2, 2])
    a = np.arange(16, dtype="float32")
    expected = (a.reshape(4, 4)[:, ::-1] * 3).reshape(16)
    for target, candidate in (("interp", sch.func), ("c", sch.func), ("interp", func), ("c", func)):
        c = np.zeros(16, "float32")
        _run(target, candidate, a, c)
        np.testing.assert_array_equal(c, expected)


def test_asserts_and_heap_scratch_inside_a_parallel_loop():
    # a malloc'd scratch per iteration (over 16 KiB): its failure path and the assert both leave the
    # iteration with a goto (a return from an OpenMP loop does not compile), freeing what they leave
    func = tir.from_source('''
@T.prim_func
def f(A: T.Buffer((64, 8), "float32"), B: T.Buffer((64, 8), "float32")):
    big = T.decl_buffer((8192,), "float32")
    for i in T.parallel(64):
        tmp = T.decl_buffer((8192,), "float32")
        for j in range(8):
            tmp[j] = A[i, j]
            assert tmp[j] >= T.float32(0), "negative"
            big[j] = tmp[j]
            B[i, j] = tmp[j] * T.float32(2)
''')
    for target in ("interp", "c"):
        a, b = np.ones((64, 8), "float32"), np.zeros((64, 8), "float32")
        _run(target, func, a, b)
        np.testing.assert_array_equal(b, 2)
        a[40, 3] = -1
        with pytest.raises(KernelAssertionError, match="negative"):
            _run(target, func, a, b)
