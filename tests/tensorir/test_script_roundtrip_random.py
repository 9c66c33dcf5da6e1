"""Random functions (tests/tensorir/generators.py) and random expressions survive print -> parse."""
import ast

from hypothesis import given, settings
from hypothesis import strategies as st

import tensorir as tir
from tensorir import expr as E
from tensorir.script import SourceInfo, format_expr, parse_prim_expr

from tests.tensorir.generators import prim_funcs


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_generated_functions_round_trip(data):
    generated = data.draw(prim_funcs())
    func = getattr(generated, "func", generated)
    text = func.script()
    again = tir.from_source(text)
    tir.assert_structural_equal(func, again)
    assert again.script() == text


_N = E.size_var("n")
_M = E.Var("m", "int64", upper=100)
_K32 = E.Var("k", "int32")
_X = E.Var("x", "float32")
_H = E.Var("h", "float16")
NAMES = {"n": _N, "m": _M, "k": _K32, "x": _X, "h": _H}


_INT_OPS = (E.add, E.sub, E.mul, E.floordiv, E.floormod, E.min_, E.max_, E.div)
_FLOAT_OPS = (E.add, E.sub, E.mul, E.div, E.min_, E.max_)
_CMPS = (E.LT, E.LE, E.EQ, E.NE, E.GT, E.GE)


def _leaf(draw, dtype):
    if draw(st.booleans()):
        return {"int64": lambda: draw(st.sampled_from([_N, _M])), "int32": lambda: _K32,
                "float32": lambda: _X, "float16": lambda: _H}[dtype]()
    if dtype.startswith("int"):
        return E.IntImm(draw(st.integers(-20, 20)), dtype)
    return E.FloatImm(draw(st.floats(-4, 4, allow_nan=False, width=16)), dtype)


def _expr(draw, dtype, depth):
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return _leaf(draw, dtype)
    choice = draw(st.integers(0, 5))
    if choice == 0:
        return -_expr(draw, dtype, depth - 1)
    if choice == 1:
        return E.Select(_cond(draw, dtype, depth - 1), _expr(draw, dtype, depth - 1),
                        _expr(draw, dtype, depth - 1))
    op = draw(st.sampled_from(_INT_OPS if dtype.startswith("int") else _FLOAT_OPS))
    return op(_expr(draw, dtype, depth - 1), _expr(draw, dtype, depth - 1))


def _cond(draw, dtype, depth):
    choice = draw(st.integers(0, 3)) if depth > 0 else 0
    if choice == 1:
        return E.Not(_cond(draw, dtype, depth - 1))
    if choice in (2, 3):
        cls = E.And if choice == 2 else E.Or
        return cls(_cond(draw, dtype, depth - 1), _cond(draw, dtype, depth - 1))
    cmp = draw(st.sampled_from(_CMPS))
    return cmp(_expr(draw, dtype, depth), _expr(draw, dtype, depth))


@st.composite
def prim_exprs(draw):
    return _expr(draw, draw(st.sampled_from(["int64", "int32", "float32", "float16"])), 4)


@settings(max_examples=150, deadline=None)
@given(prim_exprs())
def test_expressions_round_trip(expr):
    text = format_expr(expr)
    parsed = parse_prim_expr(ast.parse(text, mode="eval").body, NAMES, SourceInfo.from_text(text))
    tir.assert_structural_equal(expr, parsed, map_free_vars=False)
    assert format_expr(parsed) == text
