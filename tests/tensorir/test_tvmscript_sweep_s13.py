"""T-level forms the s13 sweep of public TVMScript found missing (docs/ARCHITECTURE.md,
"s13-tvms"): calls between the prim_funcs of a module (``cls.sub(args)``), typed pointer
parameters (``p: T.handle("float32")`` read through ``T.decl_buffer(..., data=p)``), and
prim_funcs returning a scalar (``-> T.int32`` with ``return v`` / ``T.ret(v)``). Sources are
written for this project in TVM's style: each parses and round-trips; calls run inlined
(the build's ``inline_subroutines``) in the interpreter and the C build equal to NumPy
formulas written here, sizes drawn by hypothesis; what cannot run (recursion, a subroutine
built as a kernel) is an error naming the function, and misuse a ParseError at its line."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import relaxscript as rx
import tensorir as tir
from backends.target import build_kernels
from tensorir.errors import IRError, ParseError
from tensorir.transform.inline_subroutines import calls_of, inline_subroutines

from ..relaxscript.tvm_compat import assert_round_trip, module_of

HEAD = "from tvm.script import ir as I\nfrom tvm.script import tir as T\nfrom tvm.script import relax as R\n"


def _kernels(mod, name="main"):
    """The interpreter's and the C build's kernel ``name`` of a module's prim_funcs."""
    funcs = dict(mod.functions)
    return [build_kernels(t, funcs)[name] for t in ("interp", "c")]


# ---------------------------------------------------------------- pointer parameters and calls
ROW_SUMS = HEAD + '''
@I.ir_module
class Before:
    @T.prim_func
    def main(A: T.Buffer(({rows}, {cols}), "float32"), B: T.Buffer(({outs}, {cols}), "float32")):
        for i in range({outs}):
            Before.subroutine(T.address_of(A[i, 0]), T.address_of(B[i, 0]))

    @T.prim_func(private=True)
    def subroutine(A_data: T.handle("float32"), B_data: T.handle("float32")):
        A = T.decl_buffer([{win}, {cols}], "float32", data=A_data)
        B = T.decl_buffer([{cols}], "float32", data=B_data)
        for i in range({win}):
            B[i] = 0.0
            for j in range({cols}):
                B[i] = B[i] + A[i, j]
'''


@settings(max_examples=6, deadline=None)
@given(outs=st.integers(1, 5), cols=st.integers(1, 6), extra=st.integers(0, 3), seed=st.integers(0, 2**31))
def test_a_subroutine_over_pointers_runs_inlined(outs, cols, extra, seed):
    """TVM's InlinePrivateFunctions example: the callee sums a window of rows starting at the
    element the caller points to (the window reads past the caller's row into the next ones)."""
    win = cols  # B's row has `cols` entries; the callee writes `win` of them
    rows = outs + win - 1 + extra
    mod = module_of(ROW_SUMS.format(rows=rows, cols=cols, outs=outs, win=win))
    text = assert_round_trip(mod)
    assert "cls.subroutine(T.address_of(A[i, 0]), T.address_of(B[i, 0]))" in text
    assert 'A_data: T.handle("float32")' in text and "data=A_data)" in text
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((rows, cols)).astype("float32")
    # A row of the flat storage at offset i * cols, win rows of cols: rows i .. i + win - 1.
    want = np.stack([[a[i + k].sum() for k in range(win)] for i in range(outs)]).astype("float32")
    for kernel in _kernels(mod):
        b = np.zeros((outs, cols), "float32")
        kernel(a, b)
        np.testing.assert_allclose(b, want, rtol=1e-5, atol=1e-5)


DATA_ARG = HEAD + '''
@I.ir_module
class mod:
    @T.prim_func
    def main(A: T.Buffer(({n},), "int32"), B: T.Buffer(({n},), "int32")):
        mod.scale(A.data, B.data, T.int32({n}), 3)
        cls.scale(T.address_of(B[1]), T.address_of(A[1]), {n} - 1, T.int32(-2))

    @T.prim_func
    def scale(X_data: T.handle("int32"), Y_data: T.handle("int32"), n: T.int32, k: T.int32):
        X = T.decl_buffer((n,), "int32", data=X_data)
        Y = T.decl_buffer((n,), "int32", data=Y_data)
        for i in range(n):
            Y[i] = X[i] * k + n
'''


@settings(max_examples=5, deadline=None)
@given(n=st.integers(2, 9), seed=st.integers(0, 2**31))
def test_data_pointers_and_scalar_arguments(n, seed):
    """``A.data`` passes the storage's start; scalars (a literal takes the parameter's dtype,
    an expression is evaluated once before the body); two calls of one callee in one caller."""
    mod = module_of(DATA_ARG.format(n=n))
    assert_round_trip(mod)
    a = np.random.default_rng(seed).integers(-50, 50, n).astype("int32")
    b_want = a * 3 + n
    a_want = a.copy()
    a_want[1:] = b_want[1:] * -2 + (n - 1)
    for kernel in _kernels(mod):
        x, y = a.copy(), np.zeros(n, "int32")
        kernel(x, y)
        np.testing.assert_array_equal(y, b_want)
        np.testing.assert_array_equal(x, a_want)


BLOCKS = HEAD + '''
@I.ir_module
class Before:
    @T.prim_func
    def main(A: T.Buffer([2, {n}], "float32"), B: T.Buffer([2, {n}], "float32")):
        Before.subroutine(T.address_of(A[0, 0]), T.address_of(B[0, 0]))
        Before.subroutine(T.address_of(A[1, 0]), T.address_of(B[1, 0]))

    @T.prim_func(private=True)
    def subroutine(A_data: T.handle("float32"), B_data: T.handle("float32")):
        A = T.decl_buffer({n}, "float32", data=A_data)
        B = T.decl_buffer({n}, "float32", data=B_data)
        for i in range({n}):
            with T.sblock("scalar_mul"):
                B[i] = A[i] * 2.0
'''


@settings(max_examples=4, deadline=None)
@given(n=st.integers(1, 12), seed=st.integers(0, 2**31))
def test_a_callee_with_blocks_inlined_twice_gets_distinct_block_names(n, seed):
    mod = module_of(BLOCKS.format(n=n))
    assert_round_trip(mod)
    inlined = inline_subroutines(dict(mod.functions))["main"]
    names = [b.name for b in tir.collect(inlined.body, lambda x: isinstance(x, tir.Block))]
    assert sorted(names) == ["root", "scalar_mul_1", "scalar_mul_2"]
    assert not calls_of(inlined)
    tir.from_source(inlined.script())  # the inlined function is itself a valid script
    a = np.random.default_rng(seed).standard_normal((2, n)).astype("float32")
    for kernel in _kernels(mod):
        b = np.zeros((2, n), "float32")
        kernel(a, b)
        np.testing.assert_array_equal(b, a * 2)


# ---------------------------------------------------------------- results
IN_EXPRESSION = HEAD + '''
@I.ir_module
class Before:
    @T.prim_func
    def main(A: T.Buffer({n}, "float32"), B: T.Buffer({n}, "float32")):
        for i in range({n}):
            A[i] = Before.subroutine(i) + Before.square(B[i])

    @T.prim_func(private=True)
    def subroutine(i: T.int32) -> T.float32:
        cos = T.cos(T.cast(i, "float32"))
        sin = T.sin(T.cast(i, "float32"))
        retval = cos * cos + sin * sin
        T.ret(retval)

    @T.prim_func(private=True)
    def square(x: T.float32) -> T.float32:
        return x * x
'''


@settings(max_examples=4, deadline=None)
@given(n=st.integers(1, 16), seed=st.integers(0, 2**31))
def test_a_call_inside_an_expression_is_the_callee_result(n, seed):
    mod = module_of(IN_EXPRESSION.format(n=n))
    text = assert_round_trip(mod)
    assert "def square(x: T.float32) -> T.float32:" in text and "return x * x" in text
    assert mod["square"].ret_dtype == "float32" and mod["main"].ret_dtype is None
    b = np.random.default_rng(seed).standard_normal(n).astype("float32")
    i = np.arange(n, dtype="float32")
    want = np.cos(i) ** 2 + np.sin(i) ** 2 + b * b
    for kernel in _kernels(mod):
        a = np.zeros(n, "float32")
        kernel(a, b)
        np.testing.assert_allclose(a, want, rtol=1e-5, atol=1e-6)


def test_result_forms_parse_and_print_back():
    for body, dtype in (("return 0", "int32"), ("T.ret(M * N)", "int32"), ("T.evaluate(T.ret(M + N))", "int32"),
                        ("return T.float32(42.0)", "float32")):
        func = tir.from_source(f'''
@T.prim_func
def func(M: T.int32, N: T.int32) -> T.{dtype}:
    T.func_attr({{"greeting": "hello"}})
    {body}
''')
        assert func.ret_dtype == dtype
        text = func.script()
        assert f"-> T.{dtype}:" in text and "    return " in text
        again = tir.from_source(text)
        tir.assert_structural_equal(again, func)
        assert again.script() == text


def test_a_result_after_loops_and_an_allocation_round_trips():
    func = tir.from_source('''
@T.prim_func
def func(A: T.Buffer([16, 16], "float32")) -> T.float32:
    Sum = T.decl_buffer([], "float32")
    Sum[()] = 0.0
    for i, j in T.grid(16, 16):
        Sum[()] = Sum[()] + A[i, j]
    T.ret(Sum[()])
''')
    assert func.ret_dtype == "float32"
    again = tir.from_source(func.script())
    tir.assert_structural_equal(again, func)


# ---------------------------------------------------------------- what cannot run: named errors
def test_a_subroutine_is_no_kernel():
    mod = module_of(ROW_SUMS.format(rows=4, cols=2, outs=3, win=2))
    with pytest.raises(IRError, match="'subroutine' takes pointer parameters"):
        build_kernels("c", mod["subroutine"])
    with pytest.raises(IRError, match="'subroutine' takes pointer parameters"):
        tir.interpret(mod["subroutine"])
    with pytest.raises(IRError, match="'main' calls prim_func 'subroutine': build it together"):
        tir.interpret(mod["main"], np.zeros((4, 2), "float32"), np.zeros((3, 2), "float32"))
    scalar = tir.from_source("@T.prim_func\ndef f(M: T.int32) -> T.int32:\n    return M * 2\n")
    for run in (lambda: build_kernels("c", scalar), lambda: tir.interpret(scalar, 3)):
        with pytest.raises(IRError, match=r"'f' returns a value \(-> T.int32\)"):
            run()


def test_recursion_is_refused_by_name_at_build():
    mod = module_of(HEAD + '''
@I.ir_module
class Before:
    @T.prim_func
    def main(A: T.Buffer(16, "float32")):
        Before.subroutine(T.address_of(A[0]), 16)

    @T.prim_func(private=True)
    def subroutine(A_data: T.handle("float32"), A_size: T.int32):
        A = T.decl_buffer(A_size, "float32", data=A_data)
        A[1] = A[0] + A[1]
        if A_size > 1:
            Before.subroutine(T.address_of(A[1]), A_size - 1)
''')
    assert_round_trip(mod)
    with pytest.raises(IRError, match="'subroutine' calls itself .*recursive calls between prim_funcs"):
        build_kernels("c", dict(mod.functions))


def test_a_callee_with_statements_inside_an_expression_is_refused_by_name():
    mod = module_of(HEAD + '''
@I.ir_module
class Module:
    @T.prim_func
    def main(A: T.Buffer((4, 4), "float32"), B: T.Buffer((1,), "float32")):
        B[0] = Module.total(A.data) * 2.0

    @T.prim_func
    def total(A_data: T.handle("float32")) -> T.float32:
        A = T.decl_buffer((4, 4), "float32", data=A_data)
        acc = T.decl_buffer((1,), "float32")
        acc[0] = 0.0
        for i, j in T.grid(4, 4):
            acc[0] = acc[0] + A[i, j]
        return acc[0]
''')
    assert_round_trip(mod)
    with pytest.raises(IRError, match="'main' calls 'total' inside an expression.*runs statements"):
        build_kernels("interp", dict(mod.functions))


GRAPH = HEAD + '''
@I.ir_module
class Module:
    @T.prim_func
    def double_rows(A: T.Buffer((3, 4), "float32"), B: T.Buffer((3, 4), "float32")):
        for i in range(3):
            Module.row(T.address_of(A[i, 0]), T.address_of(B[i, 0]), T.float32(2))

    @T.prim_func(private=True)
    def row(x_data: T.handle("float32"), y_data: T.handle("float32"), k: T.float32):
        x = T.decl_buffer((4,), "float32", data=x_data)
        y = T.decl_buffer((4,), "float32", data=y_data)
        for j in range(4):
            y[j] = x[j] * k + T.Cast("float32", j)

    @R.function
    def main(a: R.Tensor((3, 4), "float32")) -> R.Tensor((3, 4), "float32"):
        cls = Module
        b = R.call_tir(cls.double_rows, (a,), out_sinfo=R.Tensor((3, 4), "float32"))
        return b
'''


@pytest.mark.parametrize("target", ["interp", "c"])
def test_a_graph_module_calls_a_kernel_that_calls_a_subroutine(target):
    mod = module_of(GRAPH)
    assert_round_trip(mod)
    a = np.random.default_rng(0).standard_normal((3, 4)).astype("float32")
    want = a * 2 + np.arange(4, dtype="float32")
    np.testing.assert_allclose(rx.interpret(mod, "main", a), want, rtol=1e-6)
    vm = rx.VirtualMachine(rx.build(mod, target=target))
    np.testing.assert_allclose(vm["main"](a), want, rtol=1e-6)


def test_a_graph_function_may_not_call_a_subroutine_as_a_kernel():
    mod = module_of(GRAPH.replace("cls.double_rows, (a,)", "cls.row, (a,)"))
    with pytest.raises(IRError, match="'row' takes pointer parameters"):
        rx.build(mod, target="c")


# ---------------------------------------------------------------- misuse: ParseErrors at the line
MISUSE = [
    ("def f(A: T.Buffer((4,), 'int32')) -> T.int32:\n    return A[0]\n    A[1] = 2\n",
     "a return is supported only as the last statement"),
    ("def f(A: T.Buffer((4,), 'int32')):\n    for i in range(4):\n        return A[i]\n    A[0] = 1\n",
     "a return is supported only as the last statement"),
    ("def f(n: T.int32) -> T.int32:\n    T.evaluate(n)\n", "annotated -> T.int32 but does not end with"),
    ("def f(n: T.int32) -> T.int32:\n    return T.float32(1)\n", "annotated -> T.int32 but returns a float32"),
    ("def f(p: T.handle('float32')):\n    T.evaluate(p[0])\n", "'p' is a pointer"),
    ("def f(p: T.handle('float32')):\n    p[0] = 1.0\n", "'p' is a pointer"),
    ("def f(p: T.handle('float32', 'shared')):\n    T.evaluate(0)\n", "storage scope must be"),
    ("def f(n: T.int32) -> T.Buffer((4,), 'int32'):\n    return n\n", "unknown type|returns a scalar"),
]


@pytest.mark.parametrize("source, message", MISUSE)
def test_misuse_is_a_parse_error(source, message):
    with pytest.raises(ParseError, match=message):
        tir.from_source("@T.prim_func\n" + source)


CALL_MISUSE = [
    ("Module.sub(A.data)", "takes 2 argument"),
    ("Module.sub(A[0], 1)", "takes a pointer"),
    ("Module.sub(T.address_of(C[0]), 1)", "takes a float32 pointer here, got the address of a int32"),
    ("Module.sub(A.data, T.float32(1))", "takes a int32 here, got a float32"),
    ("Module.other(A)", "only scalars and typed pointers"),
]


@pytest.mark.parametrize("call, message", CALL_MISUSE)
def test_call_misuse_is_a_parse_error(call, message):
    source = HEAD + f'''
@I.ir_module
class Module:
    @T.prim_func
    def main(A: T.Buffer((4,), "float32"), C: T.Buffer((4,), "int32")):
        {call}

    @T.prim_func
    def sub(p: T.handle("float32"), n: T.int32):
        T.evaluate(n)

    @T.prim_func
    def other(A: T.Buffer((4,), "float32")):
        T.evaluate(0)
'''
    with pytest.raises(ParseError, match=message) as info:
        rx.from_source(source)
    assert "line 9" in str(info.value) or ":9:" in str(info.value)


# ---------------------------------------------------------------- loop jumps
JUMPS = '''
@T.prim_func
def func(In: T.Buffer((1,), "int32"), Out: T.Buffer((2,), "int32")):
    Out[0] = 0
    Out[1] = 0
    for i in range({n}):
        if i % {m} == 0:
            Out[1] = Out[1] + 1
            continue
        Out[0] = Out[0] + 1
        if Out[0] >= In[0]:
            break
'''


def _jumps_reference(limit, n, m):
    out = [0, 0]
    for i in range(n):
        if i % m == 0:
            out[1] += 1
            continue
        out[0] += 1
        if out[0] >= limit:
            break
    return out


def _both(func):
    return [lambda *a, **k: tir.interpret(func, *a, **k), build_kernels("c", func)[func.name]]


@settings(max_examples=8, deadline=None)
@given(n=st.integers(1, 300), m=st.integers(1, 20), limit=st.integers(-3, 400))
def test_break_and_continue_run_as_python_runs_them(n, m, limit):
    func = tir.from_source(JUMPS.format(n=n, m=m))
    text = func.script()
    assert "            continue" in text and "            break" in text
    again = tir.from_source(text)
    tir.assert_structural_equal(again, func)
    assert again.script() == text
    for run in _both(func):
        out = np.full(2, 7, "int32")
        run(np.array([limit], "int32"), out)
        assert list(out) == _jumps_reference(limit, n, m)


IRREGULAR = '''
@T.prim_func
def before(A: T.Buffer((10,), "int32")):
    for i in T.serial(1):
        if A[i] > 5:
            break
        A[i] = A[i] + 1
    for j in T.serial(1):
        if A[j] > 5:
            continue
        A[j] = A[j] + 1
    for k in T.serial(1):
        A[k] = A[k] + 1
    for r in range(9):
        for c in range(10):
            if c > r:
                break
            A[r + 1] = A[r + 1] + 1
    x = T.decl_buffer((1,), "int32")
    x[0] = 0
    while x[0] < 100:
        x[0] = x[0] + 1
        if x[0] % 2 == 0:
            continue
        if x[0] > A[9] * 3:
            break
        A[9] = A[9] + 1
'''


def _irregular_reference(a):
    a = a.copy()
    if not a[0] > 5:
        a[0] += 1
    if not a[0] > 5:
        a[0] += 1
    a[0] += 1
    for r in range(9):
        for c in range(10):
            if c > r:
                break
            a[r + 1] += 1
    x = 0
    while x < 100:
        x += 1
        if x % 2 == 0:
            continue
        if x > a[9] * 3:
            break
        a[9] += 1
    return a


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2**31))
def test_jumps_leave_only_their_own_loop_and_unit_loops_stay(seed):
    """TVM's irregular-loop example: a unit loop a jump leaves is not replaced by its body
    (the jump would reach another loop); nested loops and a while with both jumps."""
    func = tir.from_source(IRREGULAR)
    tir.assert_structural_equal(tir.from_source(func.script()), func)
    lowered = tir.lower(func)
    assert sum(isinstance(n, tir.For) and n.extent.value == 1 if isinstance(n.extent, tir.IntImm) else False
               for n in tir.collect(lowered.body, lambda n: isinstance(n, tir.For))) >= 2
    a = np.random.default_rng(seed).integers(0, 10, 10).astype("int32")
    for run in _both(func):
        got = a.copy()
        run(got)
        np.testing.assert_array_equal(got, _irregular_reference(a))


JUMP_MISUSE = [
    ("for i in T.parallel(4):\n        if A[i] > 0:\n            break\n", "break in a parallel loop"),
    ("for i in T.vectorized(4):\n        continue\n", "continue in a vectorized loop"),
    ("for i in T.unroll(4):\n        break\n", "break in an unrolled loop"),
    ("break\n", "break outside a loop"),
    ("for i in range(4):\n        with T.block('b'):\n            vi = T.axis.spatial(4, i)\n"
     "            if A[vi] > 0:\n                break\n", "break cannot leave a block"),
]


@pytest.mark.parametrize("body, message", JUMP_MISUSE)
def test_jump_misuse_is_a_parse_error(body, message):
    with pytest.raises(ParseError, match=message):
        tir.from_source(f'@T.prim_func\ndef f(A: T.Buffer((4,), "float32")):\n    {body}')


def test_schedules_leave_a_function_with_jumps_as_written():
    from tensorir.errors import ScheduleError
    from tensorir.schedule_rules import default_cpu_schedule
    func = tir.from_source('''
@T.prim_func
def f(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32")):
    for i, j in T.grid(8, 8):
        with T.block("copy"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj]
    for k in range(8):
        if B[k, 0] > 0.0:
            break
        B[k, 0] = 1.0
''')
    assert default_cpu_schedule(func) is func
    with pytest.raises(ScheduleError, match="loop jumps"):
        tir.Schedule(func).get_block("copy")
    a = np.random.default_rng(1).standard_normal((8, 8)).astype("float32")
    want = a.copy()
    for k in range(8):
        if want[k, 0] > 0:
            break
        want[k, 0] = 1.0
    for run in _both(func):
        b = np.zeros((8, 8), "float32")
        run(a, b)
        np.testing.assert_array_equal(b, want)


# ---------------------------------------------------------------- T.attr
def test_a_thread_extent_attribute_is_a_thread_loop():
    func = tir.from_source('''
@T.prim_func
def kernel(A: T.Buffer([256], "float32")):
    threadIdx_x = T.int32()
    T.attr(T.iter_var(threadIdx_x, T.Range(0, 256), "ThreadIndex", "threadIdx.x"), "thread_extent", 256)
    A[threadIdx_x] = A[threadIdx_x] + T.float32(1)
''')
    loop = func.body
    assert isinstance(loop, tir.For) and loop.kind == "thread_binding" and loop.thread_tag == "threadIdx.x"
    assert loop.loop_var.dtype == "int32" and loop.extent.value == 256
    text = func.script()
    assert 'T.thread_binding(T.int32(256), thread="threadIdx.x")' in text
    tir.assert_structural_equal(tir.from_source(text), func)
    with_env = tir.from_source('''
@T.prim_func
def kernel(A: T.Buffer([256], "float32")):
    tx = T.env_thread("threadIdx.x")
    with T.attr(tx, "thread_extent", 256):
        A[tx] = A[tx] + T.float32(1)
''')
    assert with_env.body.kind == "thread_binding" and with_env.body.thread_tag == "threadIdx.x"
    a = np.arange(256, dtype="float32")
    tir.interpret(func, a)
    np.testing.assert_array_equal(a, np.arange(256, dtype="float32") + 1)


PRAGMA = '''
@T.prim_func
def main(A: T.handle, n: T.int64):
    m = T.int64()
    Ab = T.match_buffer(A, (m,), "int64")
    with T.attr(T.int32(0), "pragma_auto_unroll_max_step", 16):
        for i in T.serial(n, n + 2):
            for j in T.unroll(8):
                Ab[j + 1] = Ab[i] + T.int64(1)
'''


@settings(max_examples=5, deadline=None)
@given(n=st.integers(0, 12), seed=st.integers(0, 2**31))
def test_a_pragma_attribute_is_its_loop_annotation(n, seed):
    func = tir.from_source(PRAGMA)
    assert func.body.annotations == {"pragma_auto_unroll_max_step": 16}
    text = func.script()
    assert 'annotations={"pragma_auto_unroll_max_step": 16}' in text
    tir.assert_structural_equal(tir.from_source(text), func)
    size = max(n + 2, 9)  # the body writes Ab[1..8] and reads Ab[n], Ab[n + 1]
    a = np.random.default_rng(seed).integers(-9, 9, size).astype("int64")
    want = a.copy()
    for i in range(n, n + 2):
        for j in range(8):
            want[j + 1] = want[i] + 1
    for run in _both(func):
        got = a.copy()
        run(got, n=n)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("body, message", [
    ('with T.attr(T.int32(0), "pragma_x", 1):\n        A[0] = 1.0\n        A[1] = 2.0\n', "enclose exactly one loop"),
    ('with T.attr(T.int32(0), "storage_alignment", 1):\n        A[0] = 1.0\n', "key 'storage_alignment' is not supported"),
    ('T.attr(T.iter_var(x, T.Range(1, 4), "ThreadIndex", "threadIdx.x"), "thread_extent", 4)\n    A[0] = 1.0\n',
     "T.Range.0, extent."),
])
def test_attr_misuse_is_a_parse_error(body, message):
    with pytest.raises(ParseError, match=message):
        tir.from_source(f'@T.prim_func\ndef f(A: T.Buffer((4,), "float32")):\n    {body}')


# ---------------------------------------------------------------- LLVM intrinsics
CTPOP = '''
@T.prim_func
def ctpop(A: T.Buffer(({n},), "{dtype}"), B: T.Buffer(({n},), "{dtype}"), C: T.Buffer(({n},), "float32")):
    for i in range({n}):
        with T.block("A"):
            vi = T.axis.remap("S", [i])
            B[vi] = T.call_llvm_pure_intrin(T.llvm_lookup_intrinsic_id("llvm.ctpop.{suffix}"), A[vi], dtype="{dtype}")
            C[vi] = T.call_llvm_pure_intrin("float32", "llvm.sqrt.f32", T.uint32(1), T.Cast("float32", B[vi]))
'''


@settings(max_examples=6, deadline=None)
@given(n=st.integers(1, 20), dtype=st.sampled_from(["uint8", "int32", "int64"]), seed=st.integers(0, 2**31))
def test_generic_llvm_intrinsics_run_as_our_ops(n, dtype, seed):
    suffix = {"uint8": "i8", "int32": "i32", "int64": "i64"}[dtype]
    func = tir.from_source(CTPOP.format(n=n, dtype=dtype, suffix=suffix))
    text = func.script()
    assert f'T.llvm_lookup_intrinsic_id("llvm.ctpop.{suffix}")' in text
    assert 'T.call_llvm_pure_intrin(T.llvm_lookup_intrinsic_id("llvm.sqrt.f32"), T.uint32(1)' in text
    again = tir.from_source(text)
    tir.assert_structural_equal(again, func)
    assert again.script() == text
    info = np.iinfo(dtype)
    a = np.random.default_rng(seed).integers(info.min, info.max, n, dtype=dtype, endpoint=True)
    bits = np.array([bin(int(x) & ((1 << info.bits) - 1)).count("1") for x in a], dtype)
    for run in _both(func):
        b, c = np.zeros(n, dtype), np.zeros(n, "float32")
        run(a, b, c)
        np.testing.assert_array_equal(b, bits)
        np.testing.assert_allclose(c, np.sqrt(bits.astype("float32")), rtol=1e-6)


@pytest.mark.parametrize("call, named", [
    ('T.call_llvm_pure_intrin(T.llvm_lookup_intrinsic_id("llvm.x86.avx2.pmadd.wd"), A[i], A[i], dtype="int32")',
     "'llvm.x86.avx2.pmadd.wd'"),
    ('T.call_llvm_intrin(4390, T.uint32(1), A[i], dtype="int32")', "4390"),
    ('T.call_llvm_pure_intrin(T.llvm_lookup_intrinsic_id("llvm.ctpop.i32"), A[i], A[i], dtype="int32")',
     "'llvm.ctpop.i32'"),
])
def test_other_llvm_intrinsics_parse_and_name_themselves_at_build(call, named):
    func = tir.from_source(f'''
@T.prim_func
def uses_llvm(A: T.Buffer((4,), "int32"), B: T.Buffer((4,), "int32")):
    for i in range(4):
        B[i] = {call}
''')
    tir.assert_structural_equal(tir.from_source(func.script()), func)
    for build in (lambda: build_kernels("c", func), lambda: tir.interpret(func, np.zeros(4, "int32"),
                                                                          np.zeros(4, "int32"))):
        with pytest.raises(IRError, match=f"'uses_llvm' calls LLVM intrinsic {named}"):
            build()


# ---------------------------------------------------------------- slices as vector accesses
SLICES = '''
@T.prim_func
def buffer_ramp_access(a: T.handle, b: T.handle, c: T.handle) -> None:
    A = T.match_buffer(a, (128,), "float32")
    B = T.match_buffer(b, (128,), "float32")
    C = T.match_buffer(c, (128,), "float32")
    for i in range(128):
        A[i : i + 1 : 1] = i
    for i in range(4):
        B[i * 32 : i * 32 + 32] = A[T.Ramp(i * 32, 1, 32)] + T.broadcast(1.0, 32)
    for i in range(4):
        C[i : i + 128 : 4] = B[T.Ramp(i, 4, 32)] + T.broadcast(1.0, 32)
    for i in range(8):
        C[i * 16 : i * 16 + 16 : 2] += A[i * 16 + 1 : i * 16 + 17 : 2]
'''


def test_slices_in_loads_and_stores_are_vector_accesses():
    func = tir.from_source(SLICES)
    stores = tir.collect(func.body, lambda n: isinstance(n, tir.BufferStore))
    assert [s.indices[0].lanes if isinstance(s.indices[0], tir.Ramp) else 1 for s in stores] == [1, 32, 32, 8]
    text = func.script()
    again = tir.from_source(text)
    tir.assert_structural_equal(again, func)
    a_want = np.arange(128, dtype="float32")
    b_want = a_want + 1
    c_want = np.zeros(128, "float32")
    for i in range(4):
        c_want[i:i + 128:4] = b_want[i:i + 128:4] + 1
    for i in range(8):
        c_want[i * 16:i * 16 + 16:2] += a_want[i * 16 + 1:i * 16 + 17:2]
    for run in _both(func):
        a, b, c = (np.zeros(128, "float32") for _ in range(3))
        run(a, b, c)
        np.testing.assert_array_equal(a, a_want)
        np.testing.assert_array_equal(b, b_want)
        np.testing.assert_array_equal(c, c_want)


@pytest.mark.parametrize("store, message", [
    ("A[i:i + n] = 1.0", "constant number of elements"),
    ("A[i:i + 4:-1] = 1.0", "positive constant step"),
    ("A[i:] = 1.0", "needs both bounds"),
    ("A[i:i] = 1.0", "selects no element"),
])
def test_slice_misuse_is_a_parse_error(store, message):
    with pytest.raises(ParseError, match=message):
        tir.from_source(f'@T.prim_func\ndef f(A: T.Buffer((64,), "float32"), n: T.int64):\n'
                        f'    for i in range(8):\n        {store}\n')


# ---------------------------------------------------------------- pointer locals
ROW_SUMS_INLINED = HEAD + '''
@I.ir_module
class Expected:
    @T.prim_func
    def main(A: T.Buffer(({rows}, {cols}), "float32"), B: T.Buffer(({outs}, {cols}), "float32")):
        for i in range({outs}):
            a_ptr: T.handle("float32") = T.address_of(A[i, 0])
            a_rows = T.decl_buffer([{win}, {cols}], "float32", data=a_ptr)
            b_ptr = T.bind(T.address_of(B[i, 0]), T.handle("float32"))
            b_row = T.decl_buffer([{cols}], "float32", data=b_ptr)
            for j in range({win}):
                b_row[j] = 0.0
                for k in range({cols}):
                    b_row[j] = b_row[j] + a_rows[j, k]
'''


@settings(max_examples=4, deadline=None)
@given(outs=st.integers(1, 4), cols=st.integers(1, 5), extra=st.integers(0, 2), seed=st.integers(0, 2**31))
def test_pointer_locals_read_the_storage_they_point_into(outs, cols, extra, seed):
    """A buffer over a pointer local (``p: T.handle(dtype) = T.address_of(A[i, 0])`` or
    ``T.bind(..., T.handle(dtype))``) reads the storage at that element: the form TVM's
    inlining pass writes, and exactly what the build's inlining makes of the call."""
    sizes = dict(rows=outs + cols - 1 + extra, cols=cols, outs=outs, win=cols)
    expected = module_of(ROW_SUMS_INLINED.format(**sizes))
    assert_round_trip(expected)
    before = module_of(ROW_SUMS.format(**sizes))
    tir.assert_structural_equal(inline_subroutines(dict(before.functions))["main"], expected["main"])
    a = np.random.default_rng(seed).standard_normal((sizes["rows"], cols)).astype("float32")
    want = np.stack([[a[i + k].sum() for k in range(cols)] for i in range(outs)]).astype("float32")
    for kernel in _kernels(expected):
        b = np.zeros((outs, cols), "float32")
        kernel(a, b)
        np.testing.assert_allclose(b, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("body, message", [
    ('p: T.handle("int32") = T.address_of(A[0])\n    T.evaluate(0)\n', "points into float32 buffer"),
    ('p: T.handle("float32") = A[0]\n    T.evaluate(0)\n', "takes T.address_of"),
    ('p: T.handle("float32") = T.address_of(A[1])\n    V = T.decl_buffer((2,), "int32", data=p)\n',
     "the dtypes must agree"),
    ('p: T.handle("float32") = A.data\n    T.evaluate(p + 1)\n', "'p' is a pointer"),
])
def test_pointer_local_misuse_is_a_parse_error(body, message):
    with pytest.raises(ParseError, match=message):
        tir.from_source(f'@T.prim_func\ndef f(A: T.Buffer((4,), "float32")):\n    {body}')


# ---------------------------------------------------------------- T.allocate_const
@settings(max_examples=6, deadline=None)
@given(rows=st.integers(1, 4), cols=st.integers(1, 5), dtype=st.sampled_from(["int32", "float32"]),
       seed=st.integers(0, 2**31))
def test_allocate_const_holds_its_values(rows, cols, dtype, seed):
    rng = np.random.default_rng(seed)
    table = rng.integers(-100, 100, (rows, cols)).astype(dtype)
    if dtype == "float32":
        table = table / np.float32(4)   # exact in float32, printed exactly
    values = ", ".join(repr(v.item()) for v in table.ravel())
    func = tir.from_source(f'''
@T.prim_func
def lookup(A: T.Buffer(({rows}, {cols}), "{dtype}"), C: T.Buffer(({rows}, {cols}), "{dtype}")):
    K_data = T.allocate_const([{values}], "{dtype}", extents=[{rows}, {cols}])
    K = T.decl_buffer(({rows}, {cols}), "{dtype}", data=K_data)
    for i, j in T.grid({rows}, {cols}):
        with T.block("compute"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = A[vi, vj] * K[vi, vj]
''')
    tir.assert_structural_equal(tir.from_source(func.script()), func)
    a = rng.integers(-9, 9, (rows, cols)).astype(dtype)
    for run in _both(func):
        c = np.zeros((rows, cols), dtype)
        run(a, c)
        np.testing.assert_array_equal(c, a * table)


@pytest.mark.parametrize("call, message", [
    ('T.allocate_const([1, 2, 3], "int32", extents=[4])', "has 3 values for extents"),
    ('T.allocate_const([1, 2], "int32", extents=[n])', "extents are constants"),
    ('T.allocate_const([1.5, 2], "int32", extents=[2])', "cannot represent 1.5"),
    ('T.allocate_const([0] * 2, "int32", extents=[2])', "flat list of numbers|expected a scalar expression"),
])
def test_allocate_const_misuse_is_a_parse_error(call, message):
    with pytest.raises(ParseError, match=message):
        tir.from_source(f'@T.prim_func\ndef f(A: T.Buffer((4,), "int32"), n: T.int64):\n'
                        f'    K = {call}\n    T.evaluate(0)\n')


GRAPH_JUMPS = HEAD + '''
@I.ir_module
class Module:
    @T.prim_func
    def first_negative(A: T.Buffer((6, 8), "float32"), B: T.Buffer((6,), "int64")):
        for r in range(6):
            B[r] = T.int64(-1)
            for c in range(8):
                if A[r, c] >= T.float32(0):
                    continue
                B[r] = T.Cast("int64", c)
                break

    @R.function
    def main(a: R.Tensor((6, 8), "float32")) -> R.Tensor((6,), "int64"):
        cls = Module
        b = R.call_tir(cls.first_negative, (R.add(a, a),), out_sinfo=R.Tensor((6,), "int64"))
        return b
'''


@pytest.mark.parametrize("target", ["interp", "c"])
def test_a_graph_module_runs_a_kernel_with_loop_jumps(target):
    mod = module_of(GRAPH_JUMPS)
    assert_round_trip(mod)
    a = np.random.default_rng(3).standard_normal((6, 8)).astype("float32")
    a[2] = np.abs(a[2])   # a row without a negative entry
    neg = a < 0
    want = np.where(neg.any(axis=1), neg.argmax(axis=1), -1).astype("int64")
    np.testing.assert_array_equal(rx.interpret(mod, "main", a), want)
    vm = rx.VirtualMachine(rx.build(mod, target=target))
    np.testing.assert_array_equal(vm["main"](a), want)


# ---------------------------------------------------------------- found by the --run sweep
NOT_QUASI_AFFINE = '''
@T.prim_func
def rowsum(A: T.Buffer(({rows}, {width}), "float32"), B: T.Buffer(({rows},), "float32")):
    for i, k in T.grid({rows}, {trips}):
        with T.block("B"):
            vi = T.axis.spatial({rows}, i)
            vk = T.axis.reduce({width}, k * k // {div})
            with T.init():
                B[vi] = 0.0
            B[vi] = B[vi] + A[vi, vk]
'''


@settings(max_examples=8, deadline=None)
@given(rows=st.integers(1, 5), trips=st.integers(1, 9), div=st.integers(1, 4), seed=st.integers(0, 2**31))
def test_an_init_runs_wherever_the_reduce_vars_come_back_to_their_minimum(rows, trips, div, seed):
    """A block's init runs where every reduce iter var is at its minimum (TVM's LowerInitBlock).
    With ``vk = k * k // 2`` that is k = 0 and k = 1: the C build hoisted the init before the
    loop (one initialisation) while the interpreter re-initialised at k = 1; found by the
    sweep's interp-vs-C run of TVM's ``rowsum_not_quasi_affine``. The init now stays guarded
    where a binding is not recognised as reaching its minimum only on the first pass."""
    width = (trips - 1) ** 2 // div + 1
    func = tir.from_source(NOT_QUASI_AFFINE.format(rows=rows, width=width, trips=trips, div=div))
    a = np.random.default_rng(seed).standard_normal((rows, width)).astype("float32")
    want = np.zeros(rows, "float32")
    for k in range(trips):
        vk = k * k // div
        if vk == 0:
            want[:] = 0
        want += a[:, vk]
    for run in _both(func):
        b = np.random.default_rng(seed + 1).standard_normal(rows).astype("float32")
        run(a, b)
        np.testing.assert_allclose(b, want, rtol=1e-5, atol=1e-5)


def test_strides_give_one_entry_per_dimension():
    """TVM's cache_index test prints ``T.alloc_buffer((80, 80), "int32", strides=[1])``; the
    interpreter and the C build read such a buffer differently (found by the sweep's --run).
    One stride per dimension, or none: anything else is refused where it is written."""
    with pytest.raises(ParseError, match="2 dimension.s. but strides= gives 1") as err:
        tir.from_source('''
@T.prim_func
def f(A: T.Buffer((8, 8), "int32")):
    idx = T.alloc_buffer((8, 8), "int32", strides=(1,))
    for i, j in T.grid(8, 8):
        with T.block("b"):
            vi, vj = T.axis.remap("SS", [i, j])
            idx[vi, vj] = vi
''')
    assert err.value.lineno == 4
    with pytest.raises(ValueError, match="has 2 dimension.s. but 1 stride"):
        tir.Buffer("B", (4, 4), "float32", strides=(1,))


def test_a_malformed_storage_align_annotation_is_named_at_build():
    """``T.block_attr({"buffer_dim_align": [0]})`` (TVM's invalid-annotation schedule test) was a
    TypeError from inside lowering; found by the sweep's --run."""
    func = tir.from_source('''
@T.prim_func
def f(A: T.Buffer((8, 8), "float32"), C: T.Buffer((8, 8), "float32")):
    B = T.alloc_buffer((8, 8))
    for i, j in T.grid(8, 8):
        with T.block("B"):
            T.block_attr({"buffer_dim_align": [0]})
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(8, 8):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj]
''')
    with pytest.raises(IRError, match=r"block 'B': each buffer_dim_align entry is .* got 0"):
        build_kernels("c", func)


def test_a_call_statement_discards_the_result():
    mod = module_of(HEAD + '''
@I.ir_module
class Module:
    @T.prim_func
    def main(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
        Module.fill(B.data, T.float32(2))
        for i in range(4):
            A[i] = A[i] + B[i]

    @T.prim_func
    def fill(p: T.handle("float32"), v: T.float32) -> T.int32:
        X = T.decl_buffer((4,), "float32", data=p)
        for i in range(4):
            X[i] = v * T.Cast("float32", i)
        return 4
''')
    assert_round_trip(mod)
    inlined = inline_subroutines(dict(mod.functions))["main"]
    assert inlined.result is None
    for kernel in _kernels(mod):
        a, b = np.ones(4, "float32"), np.zeros(4, "float32")
        kernel(a, b)
        np.testing.assert_array_equal(b, 2 * np.arange(4, dtype="float32"))
        np.testing.assert_array_equal(a, 1 + b)


def test_a_decorated_module_calls_its_own_prim_funcs():
    """``@T.prim_func`` runs on each method while the class body runs (before the module
    decorator): the class's other prim_funcs are callable there too, by the class's name or cls."""
    from relaxscript import R
    from tensorir import T

    @R.ir_module
    class Decorated:
        @T.prim_func
        def main(A: T.Buffer((5,), "float32")):
            for i in range(5):
                A[i] = Decorated.square(A[i]) + cls.square(T.float32(1))  # noqa: F821 - read by the parser, never run

        @T.prim_func
        def square(x: T.float32) -> T.float32:
            return x * x

    assert calls_of(Decorated["main"])
    assert_round_trip(Decorated)
    a = np.arange(5, dtype="float32")
    for kernel in _kernels(Decorated):
        got = a.copy()
        kernel(got)
        np.testing.assert_array_equal(got, a * a + 1)
