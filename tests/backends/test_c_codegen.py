"""The C backend against the reference interpreter.

``build_kernels("c", ...)`` lowers with ``tensorir.transform.lower`` (flat views of the
parameters, ``Buffer.data``), generates C, compiles it with gcc into a
temporary cache and loads it; every kernel here must compute what
``tensorir.interpret`` computes on the unlowered function, within the
tolerance of its dtype (gcc may contract a*b+c into an FMA and reorders
vectorised reductions).
"""
from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tensorir as tir
from backends.c import CodegenError, CompileError, compile_shared
from backends.target import build_kernels
from tensorir.errors import ShapeMismatchError
from tensorir.expr import BITWISE, INTRINSICS
from tests.tensorir import catalog
from tests.tensorir.generators import CONTROL_KINDS, DTYPES, INT_DTYPES, make_inputs, prim_funcs, sym_sizes

# Catalog entries outside what the C calling convention can express.
NOT_EXPRESSIBLE = {
    "intrinsics": "calls an extern function with no C implementation",
    "lowered": "calls an extern function with no C implementation",
    "expressions": "takes a float32 scalar parameter (kernels take int64 scalars only)",
}
NEEDS_UNBOUND_VAR = {"signature_forms"}  # its elem_offset var is not a dim or scalar param


@pytest.fixture(scope="module", autouse=True)
def private_cache(tmp_path_factory):
    """Compile into a fresh cache so that cache hits and misses are this file's own."""
    old = os.environ.get("RELAXSCRIPT_CACHE_DIR")
    os.environ["RELAXSCRIPT_CACHE_DIR"] = str(tmp_path_factory.mktemp("c_cache"))
    yield
    if old is None:
        del os.environ["RELAXSCRIPT_CACHE_DIR"]
    else:
        os.environ["RELAXSCRIPT_CACHE_DIR"] = old


def tolerance(dtype) -> dict:
    dtype = np.dtype(dtype)
    if dtype == np.float64:
        return {"rtol": 1e-9, "atol": 1e-11}
    if dtype == np.float16:
        return {"rtol": 2e-3, "atol": 2e-3}
    if dtype == np.float32:
        return {"rtol": 1e-4, "atol": 1e-5}
    return {"rtol": 0, "atol": 0}


def run_both(func, kernel, arrays, **scalars):
    """(interpreter results, C results) on copies of ``arrays``."""
    expected = [a.copy() for a in arrays]
    tir.interpret(func, *expected, **scalars)
    got = [a.copy() for a in arrays]
    kernel(*got, **scalars)
    return expected, got


def assert_same(expected, got, what=""):
    for index, (e, g) in enumerate(zip(expected, got)):
        np.testing.assert_allclose(g, e, equal_nan=True, err_msg=f"{what} array {index}",
                                   **tolerance(e.dtype))


# ---------------------------------------------------------------- catalog and generated functions
def test_catalog_functions_match_the_interpreter():
    names = [n for n, e in catalog.CATALOG.items()
             if e.reference is not None and n not in NOT_EXPRESSIBLE]
    funcs = {n: catalog.load(n) for n in names}
    module = build_kernels("c", funcs)
    for name in names:
        entry = catalog.CATALOG[name]
        arrays = catalog.make_arrays(funcs[name], entry.sizes, np.random.default_rng(0))
        assert_same(*run_both(funcs[name], module[name], arrays, **entry.scalars), what=name)


def test_catalog_functions_without_reference_build_and_match():
    names = [n for n, e in catalog.CATALOG.items()
             if e.reference is None and n not in NOT_EXPRESSIBLE and n not in NEEDS_UNBOUND_VAR]
    assert names  # the catalog keeps some such entries; this test must not pass vacuously
    funcs = {n: catalog.load(n) for n in names}
    module = build_kernels("c", funcs)
    for name in names:
        arrays = catalog.make_arrays(funcs[name], {}, np.random.default_rng(1))
        assert_same(*run_both(funcs[name], module[name], arrays), what=name)


@pytest.mark.parametrize("name", sorted(NOT_EXPRESSIBLE))
def test_inexpressible_catalog_functions_raise_codegen_error(name):
    with pytest.raises(CodegenError):
        build_kernels("c", catalog.load(name))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gen=prim_funcs(), data=st.data())
def test_generated_functions_match_the_interpreter(gen, data):
    kernel = build_kernels("c", gen.func)[gen.func.name]
    rng = np.random.default_rng(2)
    for _ in range(3):
        sizes = data.draw(sym_sizes(gen, max_value=9))
        arrays = make_inputs(gen, rng, sizes)
        expected, got = run_both(gen.func, kernel, arrays)
        assert_same(expected[gen.num_inputs:], got[gen.num_inputs:], what=f"sizes {sizes}")


BRANCHING = prim_funcs(kinds=CONTROL_KINDS, dtypes=DTYPES + INT_DTYPES)


def _branching_matches(gen, data, max_value: int):
    """if/else, select, and/or/not, symbolic guards and predicates, integer division of
    negative values, integer and bool outputs: compiled as the interpreter runs them, including
    sizes that give loops no iteration."""
    kernel = build_kernels("c", gen.func)[gen.func.name]
    rng = np.random.default_rng(5)
    for _ in range(3):
        sizes = data.draw(sym_sizes(gen, min_value=0, max_value=max_value))
        arrays = make_inputs(gen, rng, sizes)
        expected, got = run_both(gen.func, kernel, arrays)
        assert_same(expected[gen.num_inputs:], got[gen.num_inputs:], what=f"sizes {sizes}")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gen=BRANCHING, data=st.data())
def test_generated_branching_functions_match_the_interpreter(gen, data):
    _branching_matches(gen, data, max_value=9)


@pytest.mark.fuzz
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gen=BRANCHING, data=st.data())
def test_generated_branching_functions_match_the_interpreter_fuzz(gen, data):
    _branching_matches(gen, data, max_value=40)


# ---------------------------------------------------------------- constructs
CONSTRUCTS = {
    "loop_kinds": '''
@T.prim_func
def loop_kinds(a: T.Buffer(("n", 8), "float32"), b: T.Buffer(("n", 8), "float32"),
               c: T.Buffer(("n", 8), "float32")):
    n = T.int64()
    for i in T.parallel(n):
        for j in T.vectorized(8):
            b[i, j] = a[i, j] * 2.0 + 1.0
    for i in T.parallel(n):
        for j in T.unroll(8):
            c[i, j] = b[i, j] - a[i, 7 - j]
''',
    "scratch": '''
@T.prim_func
def scratch(a: T.Buffer(("n",), "float32"), b: T.Buffer(("n",), "float32")):
    n = T.int64()
    with T.decl_buffer((4,), "float32") as small:
        for i in range(4):
            small[i] = T.float32(i)
        with T.decl_buffer((n,), "float32") as big:
            for i in range(n):
                big[i] = a[n - 1 - i]
            for i in range(n):
                b[i] = big[i] + small[i % 4]
''',
    "control": '''
@T.prim_func
def control(a: T.Buffer(("n",), "float32"), b: T.Buffer(("n",), "float32")):
    n = T.int64()
    for i in range(n):
        with T.LetStmt(a[i] * 2.0) as twice:
            if i % 3 == 0:
                b[i] = T.Select(twice > 0.0, twice, -twice)
            else:
                b[i] = twice - 1.0
''',
    "intdiv": '''
@T.prim_func
def intdiv(a: T.Buffer(("n",), "int64"), d: T.Buffer(("n",), "int64"),
           q: T.Buffer(("n",), "int64"), r: T.Buffer(("n",), "int64"),
           a32: T.Buffer(("n",), "int32"), d32: T.Buffer(("n",), "int32"),
           q32: T.Buffer(("n",), "int32"), r32: T.Buffer(("n",), "int32")):
    n = T.int64()
    for i in range(n):
        q[i] = T.floordiv(a[i], d[i])
        r[i] = T.floormod(a[i], d[i])
        q32[i] = T.floordiv(a32[i], d32[i])
        r32[i] = T.floormod(a32[i], d32[i])
''',
    "logic": '''
@T.prim_func
def logic(a: T.Buffer(("n",), "int32"), b: T.Buffer(("n",), "bool"), c: T.Buffer(("n",), "int64")):
    n = T.int64()
    for i in range(n):
        b[i] = a[i] > 2 and not a[i] == 4
        c[i] = T.Cast("int64", a[i]) * T.int64(3) + T.Select(b[i], T.int64(100), T.int64(0))
''',
}


def _intrinsics_source(dtype: str) -> str:
    """out[k, i] = intrinsic_k(x[i]) for every unary intrinsic, then pow(x, y)."""
    unary = sorted(op for op, arity in INTRINSICS.items() if arity == 1 and op not in BITWISE)
    lines = []
    for k, op in enumerate(unary):
        call = f"T.{op}(x[i])"
        if op in ("isnan", "isinf"):  # bool results, stored as 0/1
            call = f"T.Select({call}, T.{dtype}(1), T.{dtype}(0))"
        lines.append(f"        out[{k}, i] = {call}")
    lines.append(f"        out[{len(unary)}, i] = T.pow(x[i], y[i])")
    body = "\n".join(lines)
    return f'''
@T.prim_func
def intrinsics_{dtype}(x: T.Buffer(("n",), "{dtype}"), y: T.Buffer(("n",), "{dtype}"),
                       out: T.Buffer(({len(unary) + 1}, "n"), "{dtype}")):
    n = T.int64()
    for i in range(n):
{body}
'''


@pytest.fixture(scope="module")
def constructs():
    """One library holding every construct kernel (one gcc run for all of them)."""
    sources = dict(CONSTRUCTS)
    for dtype in ("float32", "float64"):
        sources[f"intrinsics_{dtype}"] = _intrinsics_source(dtype)
    funcs = {name: tir.from_source(text) for name, text in sources.items()}
    return funcs, build_kernels("c", funcs)


def _check(constructs, name, arrays, **scalars):
    funcs, module = constructs
    expected, got = run_both(funcs[name], module[name], arrays, **scalars)
    assert_same(expected, got, what=name)
    return got


def test_parallel_vectorized_and_unrolled_loops(constructs):
    source = constructs[1].source
    assert "#pragma omp parallel for" in source and "#pragma omp simd" in source \
        and "#pragma GCC unroll" in source
    a = np.random.default_rng(3).standard_normal((37, 8)).astype("float32")
    b, c = _check(constructs, "loop_kinds", [a, np.zeros_like(a), np.zeros_like(a)])[1:]
    np.testing.assert_allclose(c, a * 2 + 1 - a[:, ::-1], rtol=1e-6)


@pytest.mark.parametrize("n", [1, 5, 5000])  # 5000 floats: past the stack limit either way
def test_allocate_on_stack_and_heap(constructs, n):
    source = constructs[1].source
    assert "aligned(64)" in source and "malloc" in source  # small static -> stack, symbolic -> heap
    a = np.arange(n, dtype="float32")
    (b,) = _check(constructs, "scratch", [a, np.zeros(n, "float32")])[1:]
    np.testing.assert_array_equal(b, a[::-1] + np.arange(n) % 4)


def test_if_then_else_let_and_select(constructs):
    a = np.random.default_rng(4).standard_normal(20).astype("float32")
    (b,) = _check(constructs, "control", [a, np.zeros_like(a)])[1:]
    want = np.where(np.arange(20) % 3 == 0, np.abs(2 * a), 2 * a - 1)
    np.testing.assert_allclose(b, want, rtol=1e-6)


def test_integer_floordiv_and_floormod_with_negative_operands(constructs):
    a = np.array([7, -7, 7, -7, 0, -1, 6, -6, 9, -9], dtype="int64")
    d = np.array([2, 2, -2, -2, 3, 3, -4, 4, 3, -3], dtype="int64")
    zeros = np.zeros_like(a)
    arrays = [a, d, zeros, zeros, a.astype("int32"), d.astype("int32"),
              zeros.astype("int32"), zeros.astype("int32")]
    q, r, _, _, q32, r32 = _check(constructs, "intdiv", arrays)[2:]
    np.testing.assert_array_equal(q, np.floor_divide(a, d))
    np.testing.assert_array_equal(r, np.mod(a, d))
    np.testing.assert_array_equal(q32, np.floor_divide(a, d))
    np.testing.assert_array_equal(r32, np.mod(a, d))


def test_int32_int64_and_bool_buffers(constructs):
    a = np.arange(-3, 9, dtype="int32")
    b, c = _check(constructs, "logic", [a, np.zeros(a.size, bool), np.zeros(a.size, "int64")])[1:]
    want_b = (a > 2) & (a != 4)
    np.testing.assert_array_equal(b, want_b)
    np.testing.assert_array_equal(c, a.astype("int64") * 3 + np.where(want_b, 100, 0))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_every_intrinsic(constructs, dtype):
    special = [0.5, 1.5, 2.5, -0.5, -2.5, 0.0, np.inf, -np.inf, np.nan, 1e-3, 3.0, -1.25]
    x = np.array(special + list(np.linspace(-4, 4, 20)), dtype=dtype)
    y = np.array(list(np.linspace(-3, 3, x.size)), dtype=dtype)
    out = np.zeros((sum(a == 1 and op not in BITWISE for op, a in INTRINSICS.items()) + 1, x.size), dtype)
    _check(constructs, f"intrinsics_{dtype}", [x, y, out])


def test_float16_when_gcc_supports_it():
    try:
        compile_shared("_Float16 rs_half_probe(_Float16 x) { return x * x; }\n")
    except CompileError:
        pytest.skip("this gcc has no _Float16")
    func = tir.from_source('''
@T.prim_func
def half(a: T.Buffer(("n",), "float16"), b: T.Buffer(("n",), "float16")):
    n = T.int64()
    for i in range(n):
        b[i] = a[i] * T.float16(1.5) + T.exp(a[i])
''')
    a = np.linspace(-2, 2, 17).astype("float16")
    assert_same(*run_both(func, build_kernels("c", func)["half"], [a, np.zeros_like(a)]), what="half")


# ---------------------------------------------------------------- module behaviour
def test_second_build_hits_the_cache():
    func = tir.from_source('''
@T.prim_func
def cached_once(a: T.Buffer(("n",), "int64")):
    n = T.int64()
    for i in range(n):
        a[i] = a[i] * T.int64(3) + T.int64(17)
''')
    first = build_kernels("c", func)
    second = build_kernels("c", func)
    assert first.compiled and not second.compiled and second.path == first.path
    a = np.arange(4, dtype="int64")
    second["cached_once"](a)
    np.testing.assert_array_equal(a, np.arange(4) * 3 + 17)


def test_shape_mismatch_raises(constructs):
    kernel = constructs[1]["loop_kinds"]
    a = np.zeros((3, 8), "float32")
    with pytest.raises(ShapeMismatchError, match="axis 1"):
        kernel(a, np.zeros((3, 8), "float32"), np.zeros((3, 7), "float32"))
    with pytest.raises(ShapeMismatchError, match="axis 0"):
        kernel(a, np.zeros((4, 8), "float32"), np.zeros((3, 8), "float32"))
    with pytest.raises(ShapeMismatchError, match="dtype"):
        kernel(a, a.astype("float64"), a)
