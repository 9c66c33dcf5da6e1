"""The decorator path: real Python functions, constants from globals/closures, the T object."""
import textwrap

import pytest

import tensorir as tir
from tensorir import T, prim_func

N = 8
SCALE = 0.5


@prim_func
def scale_module_const(A: T.Buffer((N,), "float32"), B: T.Buffer((N,), "float32")):
    for i in range(N):
        with T.block("B"):
            vi = T.axis.spatial(N, i)
            B[vi] = A[vi] * SCALE


@T.prim_func()
def exp_paper(x: T.Buffer(("n", 4), "float32"), y: T.Buffer(("n", 4), "float32")):
    n = T.int64()
    for i, j in T.grid(n, 4):
        with T.block("exp"):
            vi, vj = T.axis.remap("SS", [i, j])
            y[vi, vj] = T.exp(x[vi, vj])


def test_decorator_returns_prim_func_named_after_def():
    assert isinstance(exp_paper, tir.PrimFunc) and exp_paper.name == "exp_paper"
    assert isinstance(scale_module_const, tir.PrimFunc)


def test_module_constants_are_inlined():
    text = scale_module_const.script()
    assert "T.Buffer((8,)" in text and "* 0.5" in text


def test_decorator_equals_from_source_of_same_text():
    with open(__file__) as f:
        lines = f.read().split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith("def exp_paper(")) - 1
    end = next(i for i in range(start + 2, len(lines)) if lines[i] and not lines[i].startswith(" "))
    tir.assert_structural_equal(exp_paper, tir.from_source("\n".join(lines[start:end])))
    tir.assert_structural_equal(exp_paper, tir.from_source(exp_paper.script()))


def test_closure_constants_and_nested_definition():
    width = 6

    def build():
        @prim_func
        def inner(A: T.Buffer((width,), "float32")):
            for i in range(width):
                A[i] = T.float32(width)
        return inner

    func = build()
    assert func.params[0].shape[0].value == 6
    expected = tir.from_source(textwrap.dedent('''
        @T.prim_func
        def inner(A: T.Buffer((6,), "float32")):
            for i in range(6):
                A[i] = T.float32(6)
    '''))
    tir.assert_structural_equal(func, expected)


def test_error_points_into_this_file():
    with pytest.raises(tir.ParseError) as info:
        @prim_func
        def bad(A: T.Buffer((4,), "float32")):
            for i in range(4):
                A[i] = undefined_thing + 1.0  # noqa: F821
    err = info.value
    assert err.filename == __file__
    with open(__file__) as f:
        expected = next(i for i, line in enumerate(f, 1) if "= undefined_thing + 1.0" in line)
    assert err.lineno == expected
    assert "undefined name 'undefined_thing'" in str(err)
    assert "A[i] = undefined_thing + 1.0" in err.text
    assert "in function 'bad'" in str(err)
    assert err.col == err.text.index("undefined_thing")


def test_t_namespace_is_harmless_and_builds_ir():
    ann = T.Buffer(("n", 4), "f32")
    assert ann.dtype == "float32"
    assert isinstance(T.int64(5), tir.IntImm) and T.int64(5).dtype == "int64"
    assert T.float16(1.5).dtype == "float16" and T.bool(True).value is True
    v = T.int64(upper=64, name="n")
    assert isinstance(v, tir.Var) and v.upper == 64 and v.lower == 0
    assert T.exp(T.float32(1.0)).op == "exp"
    assert isinstance(T.max(v, 3), tir.Max)
    assert T.prim_func is not None and repr(T.int32) == "T.int32"
    with pytest.raises(RuntimeError, match="T.grid can only be used inside"):
        T.grid(4)


def test_prim_func_is_reachable_from_package():
    assert tir.prim_func is prim_func
    assert tir.T is T
