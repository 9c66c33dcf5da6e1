"""Issue 15, items 1 and 5: TVMScript-style prim_funcs parse, print, re-parse
structurally equal (printing a fixpoint), interpret equal to NumPy for
several symbolic sizes, and build with the C target where it takes them."""
from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tensorir as tir
from backends.c import CodegenError
from backends.target import build_kernels
from tensorir import ParseError, from_source

from .tvmscript_corpus import CORPUS

by_name = pytest.mark.parametrize("entry", CORPUS, ids=[e.name for e in CORPUS])


@functools.lru_cache(maxsize=None)
def parsed(name):
    entry = next(e for e in CORPUS if e.name == name)
    return from_source(entry.source)


@functools.lru_cache(maxsize=None)
def compiled(name):
    return build_kernels("c", parsed(name))


@by_name
def test_round_trip(entry):
    func = parsed(entry.name)
    text = func.script()
    again = from_source(text)
    tir.assert_structural_equal(func, again)
    assert again.script() == text


def _run_and_compare(entry, run, size):
    rng = np.random.default_rng(size)
    args = entry.inputs(rng, size)
    expected = entry.reference(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
    run(args)
    for index, value in expected.items():
        np.testing.assert_allclose(args[index], value, rtol=1e-5, atol=1e-6)


@by_name
@settings(max_examples=4, deadline=None)
@given(size=st.integers(1, 9))
def test_interpreter_matches_numpy(entry, size):
    func = parsed(entry.name)
    _run_and_compare(entry, lambda args: tir.interpret(func, *args), size)


@pytest.mark.parametrize("entry", [e for e in CORPUS if e.c], ids=[e.name for e in CORPUS if e.c])
@settings(max_examples=3, deadline=None)
@given(size=st.integers(1, 9))
def test_c_build_matches_numpy(entry, size):
    kernel = compiled(entry.name)[parsed(entry.name).name]
    _run_and_compare(entry, lambda args: kernel(*args), size)


def test_opaque_handle_is_refused_by_the_c_target():
    with pytest.raises(CodegenError, match="dtype handle"):
        build_kernels("c", parsed("opaque_handle"))


def test_handle_parameters_become_the_matched_buffers():
    func = parsed("handle_elementwise")
    assert [p.name for p in func.params] == ["A", "B"]
    assert func.attrs == {"global_symbol": "relu_plus_one", "tir.noalias": True}
    n, m = func.params[0].shape
    assert func.params[1].shape[0] is n and func.params[1].shape[1] is m
    strided = parsed("strided_match").params[0]
    assert [s.name if isinstance(s, tir.Var) else s.value for s in strided.strides] == ["s0", 1]
    assert strided.elem_offset.name == "off"
    assert parsed("opaque_handle").params[1].dtype == "handle"


def test_printer_writes_buffer_parameters():
    # The documented choice: a matched handle prints as a T.Buffer parameter.
    text = parsed("handle_matmul").script()
    assert "def matmul(A: T.Buffer((16, 8), \"float32\"), B:" in text
    assert "T.match_buffer" not in text


MISTAKES = [
    ("match_twice", '''
@T.prim_func
def f(a: T.handle):
    A = T.match_buffer(a, (4,))
    A2 = T.match_buffer(a, (4,))
    A[0] = T.float32(0)
''', "matched by a buffer twice"),
    ("match_in_loop", '''
@T.prim_func
def f(a: T.handle, B: T.Buffer((4,), "float32")):
    for i in range(4):
        A = T.match_buffer(a, (4,))
        B[i] = A[i]
''', "top level of the function body"),
    ("match_after_let", '''
@T.prim_func
def f(a: T.handle):
    off = T.int64(3)
    A = T.match_buffer(a, (4,), elem_offset=off)
    A[0] = T.float32(0)
''', "ahead of any let binding"),
    ("return_type", '''
@T.prim_func
def f(A: T.Buffer((4,), "float32")) -> T.int32:
    A[0] = T.float32(0)
''', "does not end with `return value`"),
    ("bad_keyword", '''
@T.prim_func
def f(A: T.Buffer((4,), "float32")):
    A[0] = T.if_then_else(cond=A[1] > 0, t=A[1], g=A[2])
''', "unexpected or repeated argument 'g'"),
    ("annotated_dtype", '''
@T.prim_func
def f(A: T.Buffer((4,), "float32")):
    x: T.int32 = A[0]
    A[1] = T.float32(x)
''', "annotated int32 but the value is float32"),
    ("grid_star_of_scalar", '''
@T.prim_func
def f(A: T.Buffer((4,), "float32")):
    for i in T.grid(*A.dtype):
        A[i] = T.float32(0)
''', "must be a tuple of extents"),
    ("launch_without_name", '''
@T.prim_func
def f(A: T.Buffer((4,), "float32")):
    T.launch_thread("threadIdx.x", 4)
    A[0] = T.float32(0)
''', "T.launch_thread"),
    ("unmatched_handle_as_value", '''
@T.prim_func
def f(a: T.handle, B: T.Buffer((4,), "float32")):
    B[0] = a
''', "handle"),
]


@pytest.mark.parametrize("source,message", [m[1:] for m in MISTAKES], ids=[m[0] for m in MISTAKES])
def test_mistakes_are_parse_errors_at_the_line(source, message):
    with pytest.raises((ParseError, ValueError, TypeError), match=message) as info:
        from_source(source)
    assert isinstance(info.value, ParseError)


def test_scan_and_opaque_iterations_stay_in_order():
    from tensorir import ScheduleError
    from tensorir.analysis import PatternKind, analyze_pattern
    from tensorir.schedule import Schedule
    func = parsed("scan_and_opaque_axes")
    assert analyze_pattern(func) == PatternKind.Opaque
    sch = Schedule(func)
    for block in ("scan", "twice"):
        loop, = sch.get_loops(sch.get_block(block))
        with pytest.raises(ScheduleError, match="would race"):
            sch.parallel(loop)
    with pytest.raises(ScheduleError):
        sch.compute_inline(sch.get_block("scan"))


def test_pointers_to_extern_calls_round_trip_and_are_refused_at_run_time():
    from tensorir.interpreter import InterpretError
    from .tvmscript_corpus import EXTERN_SOURCES
    func = from_source(EXTERN_SOURCES["pointers_to_extern"])
    text = func.script()
    assert "T.address_of(A[0]), T.address_of(B[1, 1]), T.address_of(A[n])" in text
    tir.assert_structural_equal(from_source(text), func)
    assert from_source(text).script() == text
    a, b = np.zeros(16, "float32"), np.zeros((4, 4), "float32")
    with pytest.raises(InterpretError, match="no implementation of call 'my_copy'"):
        tir.interpret(func, a, b, 2)


@pytest.mark.parametrize("call,message", [
    ('A.access_ptr("x")', "access mask must be"),
    ("A.access_ptr()", "needs an access mask"),
    ('A.access_ptr("r", content_lanes=4)', "content_lanes=1 only"),
    ("T.address_of(3)", "takes a buffer element"),
])
def test_pointer_mistakes(call, message):
    with pytest.raises(ParseError, match=message):
        from_source(f'''
@T.prim_func
def f(A: T.Buffer((4,), "float32")):
    T.evaluate(T.call_extern("int32", "g", {call}))
''')


def test_decorated_python_function_with_handles():
    from tensorir import T

    @T.prim_func
    def add_one(a: T.handle, b: T.handle) -> None:
        T.func_attr({"tir.noalias": T.bool(True)})
        n = T.int64()
        A = T.match_buffer(a, (n,))
        B = T.match_buffer(b, (n,))
        for i in T.grid(*A.shape):
            with T.block("B"):
                vi = T.axis.spatial(n, i)
                B[vi] = A[vi] + T.float32(1)

    x = np.arange(3, dtype="float32")
    y = np.zeros_like(x)
    tir.interpret(add_one, x, y)
    np.testing.assert_array_equal(y, x + 1)
    tir.assert_structural_equal(from_source(add_one.script()), add_one)
