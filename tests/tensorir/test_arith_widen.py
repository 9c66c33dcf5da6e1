"""widen_index: an index in int64 with casts only at the leaves keeps its value, and the forms a
schedule mixing int32 and int64 writes become one expression."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tensorir import expr as E
from tensorir.arith import Analyzer
from tensorir.arith.evaluate import evaluate
from tensorir.arith.widen import widen_index
from tensorir.functor import collect
from tensorir.structural import structural_equal

I32 = [E.Var("a", "int32"), E.Var("b", "int32")]
I64 = [E.Var("c", "int64")]


@st.composite
def exprs(draw, depth=3):
    """Integer expressions mixing int32 and int64 leaves, as the parser writes them."""
    if depth == 0 or draw(st.booleans()):
        return draw(st.sampled_from([*I32, *I64, E.IntImm(draw(st.integers(-9, 9)), "int32")]))
    a, b = draw(exprs(depth - 1)), draw(exprs(depth - 1))
    kind = draw(st.sampled_from(["add", "sub", "mul", "floordiv", "floormod", "min", "max", "cast"]))
    if kind == "cast":
        return E.cast("int64", a) if a.dtype == "int32" else a
    if kind in ("floordiv", "floormod"):
        b = E.add(E.max_(b, E.IntImm(0, b.dtype)), 1)   # a positive divisor
    return getattr(E, kind if kind not in ("min", "max") else kind + "_")(a, b)


@settings(max_examples=300, deadline=None)
@given(exprs(), st.lists(st.integers(-50, 50), min_size=3, max_size=3))
def test_widening_keeps_the_value(e, values):
    env = dict(zip([*I32, *I64], values))
    wide = widen_index(e)
    assert wide.dtype == "int64"
    assert int(evaluate(wide, env)) == int(evaluate(e, env))
    # no cast is left above an arithmetic node
    for cast in collect(wide, lambda n: isinstance(n, E.Cast)):
        assert isinstance(cast.value, (E.Var, E.BufferLoad)), cast


def test_the_int32_and_int64_forms_of_one_index_become_equal():
    b, n = E.Var("b", "int32"), E.Var("n", "int32")
    ty = E.Var("ty", "int64")
    mixed = E.floormod(E.add(E.cast("int64", b), E.mul(ty, 0)), E.cast("int64", n))
    narrow = E.floormod(b, n)
    analyzer = Analyzer()
    assert not structural_equal(analyzer.simplify(mixed), analyzer.simplify(E.cast("int64", narrow)))
    assert structural_equal(analyzer.simplify(widen_index(mixed)), analyzer.simplify(widen_index(narrow)))


def test_narrowing_and_unsigned_casts_stay_leaves():
    u = E.Var("u", "uint32")
    c = E.Var("c", "int64")
    assert isinstance(widen_index(E.cast("int32", u)), E.Cast)          # uint32 -> int32 may change the value
    narrowed = widen_index(E.cast("int32", c))
    assert isinstance(narrowed, E.Cast) and narrowed.value.dtype == "int32"
