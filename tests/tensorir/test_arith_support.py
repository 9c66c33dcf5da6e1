"""Shared helpers for the arith tests: a text form, random expressions, assignments.

(No tests here; the module name keeps it with the other arith test files.)
"""
from __future__ import annotations

import itertools

from hypothesis import strategies as st

from tensorir.expr import (EQ, GE, GT, LE, LT, NE, And, BinaryOp, Cast, FloatImm, IntImm, Max, Min,
                           Not, Or, Select, Var, floordiv, floormod, size_var)

# Four symbolic vars: two shape vars, a free (possibly negative) int, a var with facts.
N = size_var("n")
M = size_var("m")
K = Var("k")
P = size_var("p", upper=32, multiple_of=4)
VARS = (N, M, K, P)
SAMPLE_VALUES = {N: range(0, 13), M: range(0, 9), K: range(-9, 10), P: range(0, 33, 4)}


_PRECEDENCE = {"or": 1, "and": 2, "<": 4, "<=": 4, ">": 4, ">=": 4, "==": 4, "!=": 4,
               "+": 5, "-": 5, "*": 6, "/": 6, "//": 6, "%": 6}


def show(e, parent: int = 0) -> str:
    """Python-like text with minimal parentheses (the real printer is another module's).

    A right operand at the same precedence keeps its parentheses, so the tree
    shape stays visible: ``a - (b - c)``.
    """
    if isinstance(e, (Min, Max)):
        return f"{type(e).__name__.lower()}({show(e.a)}, {show(e.b)})"
    if isinstance(e, BinaryOp):
        prec = _PRECEDENCE[e.symbol]
        text = f"{show(e.a, prec)} {e.symbol} {show(e.b, prec + 1)}"
        return f"({text})" if prec < parent else text
    if isinstance(e, IntImm):
        text = str(e.value)
        return f"({text})" if e.value < 0 and parent else text
    if isinstance(e, FloatImm):
        return repr(e.value)
    if isinstance(e, Var):
        return e.name
    if isinstance(e, Not):
        return f"not {show(e.a, 3)}"
    if isinstance(e, Select):
        return f"select({show(e.condition)}, {show(e.true_value)}, {show(e.false_value)})"
    if isinstance(e, Cast):
        return f"{e.dtype}({show(e.value)})"
    return type(e).__name__


def flat(e) -> str:
    return show(e)


_COMPARE = [LT, LE, GT, GE, EQ, NE]


def int_exprs(vars_=VARS, max_leaves: int = 12):
    """Random integer expressions with +, -, *, //, % by non-zero constants, min, max, select."""
    leaves = st.one_of(st.sampled_from(vars_), st.integers(-6, 6).map(lambda v: IntImm(v)))

    def extend(children):
        divisor = st.sampled_from([1, 2, 3, 4, 6, 8, -3])
        return st.one_of(
            st.tuples(children, children).map(lambda ab: ab[0] + ab[1]),
            st.tuples(children, children).map(lambda ab: ab[0] - ab[1]),
            st.tuples(children, children).map(lambda ab: ab[0] * ab[1]),
            st.tuples(children, divisor).map(lambda ab: floordiv(ab[0], ab[1])),
            st.tuples(children, divisor).map(lambda ab: floormod(ab[0], ab[1])),
            st.tuples(children, children).map(lambda ab: Min(ab[0], ab[1])),
            st.tuples(children, children).map(lambda ab: Max(ab[0], ab[1])),
            st.tuples(st.sampled_from(_COMPARE), children, children, children, children).map(
                lambda t: Select(t[0](t[1], t[2]), t[3], t[4])),
        )
    return st.recursive(leaves, extend, max_leaves=max_leaves)


def bool_exprs(vars_=VARS, max_leaves: int = 4, max_terms: int = 3):
    """Random conditions: comparisons of ``int_exprs`` joined by and / or / not."""
    comparison = st.tuples(st.sampled_from(_COMPARE), int_exprs(vars_, max_leaves),
                           int_exprs(vars_, max_leaves)).map(lambda t: t[0](t[1], t[2]))

    def extend(children):
        return st.one_of(
            st.tuples(children, children).map(lambda ab: And(ab[0], ab[1])),
            st.tuples(children, children).map(lambda ab: Or(ab[0], ab[1])),
            children.map(Not),
        )
    return st.recursive(comparison, extend, max_leaves=max_terms)


def assignments(vars_=VARS):
    """Hypothesis strategy: one value per var, respecting its facts."""
    return st.fixed_dictionaries({v: st.sampled_from(list(SAMPLE_VALUES[v])) for v in vars_})


def grid(vars_=VARS, per_var: int = 5):
    """A deterministic spread of assignments over the sample ranges (brute force)."""
    choices = []
    for v in vars_:
        values = list(SAMPLE_VALUES[v])
        step = max(1, len(values) // per_var)
        picked = values[::step] + [values[-1]]
        choices.append(sorted(set(picked)))
    for combo in itertools.product(*choices):
        yield dict(zip(vars_, combo))
