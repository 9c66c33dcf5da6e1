"""Analyzer proofs and bounds: unit cases, facts, scopes, and soundness properties."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tensorir import Range, Var, size_var
from tensorir.arith import Analyzer, ArithError, evaluate, prove_with_sympy, to_sympy
from tensorir.expr import EQ, LE, LT, And, CmpOp, Max, Min, Not, Or, floordiv, floormod

from .test_arith_support import VARS, M, N, assignments, bool_exprs, grid, int_exprs, show

n, m = N, M  # the sample grid knows these two
i, j = Var("i"), Var("j")


def test_facts_upper_and_multiple_of():
    v = size_var("v", upper=4096, multiple_of=8)
    ana = Analyzer()
    assert ana.can_prove(EQ(v % 8, 0))
    assert ana.can_prove(v <= 4096)
    assert ana.can_prove_divisible(v * 3 + 16, 8)
    assert not ana.can_prove_divisible(v + 4, 8)
    assert not ana.can_prove(v <= 4095 - 8)
    assert ana.const_int_bound(v) == (0, 4096)


def test_prove_equal_less_equal_divisible():
    ana = Analyzer()
    assert ana.can_prove_equal((n + 1) * 4, n * 4 + 4)
    assert ana.can_prove_equal(n // 4 * 4 + n % 4, n)
    assert not ana.can_prove_equal(n, m)
    assert ana.can_prove_less_equal(n, n * 2)          # n >= 0
    assert not ana.can_prove_less_equal(i, i * 2)      # i may be negative
    assert ana.can_prove_less_equal(Min(n, m), Max(n, m))
    assert ana.can_prove_divisible(n * 6 + m * 4, 2)
    assert not ana.can_prove_divisible(n * 6 + m * 4, 4)


def test_const_int_bound():
    ana = Analyzer()
    assert ana.const_int_bound(n) == (0, None)
    assert ana.const_int_bound(i) == (None, None)
    assert ana.const_int_bound(i % 8) == (0, 7)
    assert ana.const_int_bound(n * 4 + 3) == (3, None)
    assert ana.const_int_bound(Min(n, 10) - 20) == (-20, -10)
    assert ana.const_int_bound(n < 0) == (0, 0)


def test_symbolic_loop_ranges():
    ana = Analyzer()
    ana.bind(i, Range(0, m))
    ana.bind(j, Range(0, n))
    assert ana.can_prove(i * n + j < m * n)
    assert ana.can_prove(j < n)
    assert not ana.can_prove(j < n - 1)
    assert ana.const_int_bound(j) == (0, None)


def test_constant_loop_range_bounds():
    ana = Analyzer()
    ana.bind(i, Range(2, 8))
    assert ana.const_int_bound(i * 2 + 1) == (5, 19)
    assert ana.can_prove(i // 16 < 1)


def test_constraint_scope_adds_and_removes_facts():
    ana = Analyzer()
    assert not ana.can_prove(i < n)
    with ana.constraint_scope(LT(i, n)):
        assert ana.can_prove(i < n)
        assert ana.can_prove(i <= n)
        assert ana.can_prove(i - n < 5)
    assert not ana.can_prove(i < n)
    from tensorir.expr import And
    with ana.constraint_scope(And(i >= 0, i < 16)):
        assert ana.const_int_bound(i) == (0, 15)
        assert ana.can_prove(EQ(i // 16, 0))
    with ana.constraint_scope(EQ(n % 4, 0)):
        assert ana.can_prove_divisible(n * 3, 4)
    assert not ana.can_prove_divisible(n * 3, 4)


def test_constraint_scope_of_a_disjunction_proves_neither_side():
    # Or once subclassed And, so `i < 4 or j < 4` was assumed as `i < 4 and j < 4`.
    ana = Analyzer()
    with ana.constraint_scope(Or(LT(i, 4), LT(j, 4))):
        assert not ana.can_prove(LT(i, 4))
        assert not ana.can_prove(LT(j, 4))
        assert ana.const_int_bound(i) == (None, None)
    with ana.constraint_scope(Not(Or(LT(i, 4), LT(j, 4)))):  # i >= 4 and j >= 4
        assert ana.can_prove(LE(4, i)) and ana.can_prove(LE(4, j))


def test_bind_errors_are_clear():
    ana = Analyzer()
    ana.bind(m, n + 1)
    with pytest.raises(ArithError, match="already bound"):
        ana.bind(m, n)
    with pytest.raises(ArithError, match="contains it"):
        ana.bind(i, i + 1)
    with pytest.raises(ValueError, match="positive integer divisor"):
        ana.can_prove_divisible(n, 0)


def test_floordiv_bounds_through_the_numerator():
    ana = Analyzer()
    assert ana.can_prove(LE(floordiv(n, 2) * 2, n))
    assert ana.can_prove(LE(floordiv(n, 2), n))
    assert ana.can_prove(LE(n - 3, floordiv(n, 4) * 4))
    assert not ana.can_prove(LE(n, floordiv(n, 4) * 4))


def test_sympy_fallback_proves_what_the_fast_path_cannot():
    ana = Analyzer()
    square = LE(0, (n - 1) * (n - 1))
    assert not ana.can_prove(square)
    assert ana.can_prove(square, use_sympy=True)
    assert prove_with_sympy(square)
    assert not ana.can_prove(LE(i, i * i - 1), use_sympy=True)
    assert not prove_with_sympy(EQ(n, m))


# ------------------------------------------------------------------ soundness properties
def _holds_everywhere(cond, vars_=VARS) -> bool:
    return all(evaluate(cond, env) for env in grid(vars_, per_var=3))


@settings(max_examples=150, deadline=None)
@given(int_exprs(max_leaves=8), int_exprs(max_leaves=8))
def test_prover_never_claims_something_false(a, b):
    ana = Analyzer()
    if ana.can_prove_less_equal(a, b):
        assert _holds_everywhere(LE(a, b)), (show(a), show(b))
    if ana.can_prove_equal(a, b):
        assert _holds_everywhere(EQ(a, b)), (show(a), show(b))
    for k in (2, 3, 4):
        if ana.can_prove_divisible(a, k):
            assert _holds_everywhere(EQ(floormod(a, k), 0)), (show(a), k)


@settings(max_examples=200, deadline=None)
@given(int_exprs(), assignments())
def test_const_int_bound_contains_every_value(e, env):
    lo, hi = Analyzer().const_int_bound(e)
    value = evaluate(e, env)
    assert (lo is None or lo <= value) and (hi is None or value <= hi), (show(e), lo, hi, value)


@settings(max_examples=25, deadline=None)
@given(int_exprs(vars_=(n, m), max_leaves=5), int_exprs(vars_=(n, m), max_leaves=5))
def test_prover_agrees_with_sympy_where_sympy_decides(a, b):
    """A fast-path proof is never contradicted by sympy proving the opposite."""
    import sympy
    ana = Analyzer()
    table: dict = {}
    diff = sympy.simplify(to_sympy(b - a, table))
    if ana.can_prove_less_equal(a, b):
        assert diff.is_negative is not True, (show(a), show(b))
    if ana.can_prove_equal(a, b):
        assert diff.is_nonzero is not True, (show(a), show(b))
    if diff == 0:  # sympy finds them identical: the canonical form must agree on samples
        assert _holds_everywhere(EQ(a, b), (n, m))


@settings(max_examples=100, deadline=None)
@given(int_exprs(vars_=(n, m), max_leaves=6), st.integers(0, 12), st.integers(0, 12))
def test_proofs_under_loop_ranges_are_sound(e, extent_i, extent_j):
    ana = Analyzer()
    ana.bind(i, Range(0, n))
    ana.bind(j, Range(i, m))
    for claim in (LT(e, n), LE(e, m), LT(i, m), LE(j, m + n)):
        if not ana.can_prove(claim):
            continue
        for nv in range(0, extent_i):
            for iv in range(0, nv):
                for jv in range(iv, extent_j):
                    env = {n: nv, m: extent_j, i: iv, j: jv}
                    assert evaluate(claim, env), (show(claim), env)


# ------------------------------------------------------------------ proofs under drawn constraints
def _leaf_comparisons(cond) -> list:
    if isinstance(cond, (And, Or)):
        return _leaf_comparisons(cond.a) + _leaf_comparisons(cond.b)
    if isinstance(cond, Not):
        return _leaf_comparisons(cond.a)
    return [cond] if isinstance(cond, CmpOp) else []


def _check_under_constraint(fact, claim, e, per_var: int):
    """Every proof, simplification and bound made under ``fact`` holds at each grid point
    (a brute-force search over the vars' sample values) where ``fact`` holds."""
    ana = Analyzer()
    with ana.constraint_scope(fact):
        proven = ana.can_prove(claim)
        simplified = ana.simplify(claim)
        lo, hi = ana.const_int_bound(e)
        simplified_e = ana.simplify(e)
    for env in grid(VARS, per_var=per_var):
        if not evaluate(fact, env):
            continue
        where = (show(fact), show(claim), show(e), env)
        if proven:
            assert evaluate(claim, env), where
        assert evaluate(simplified, env) == evaluate(claim, env), (show(simplified),) + where
        value = evaluate(e, env)
        assert (lo is None or lo <= value) and (hi is None or value <= hi), (lo, hi) + where
        assert evaluate(simplified_e, env) == value, (show(simplified_e),) + where


@st.composite
def _constraint_cases(draw, max_terms: int):
    fact = draw(bool_exprs(max_terms=max_terms))
    # Half the claims are pieces of the fact itself, which the analyzer is most tempted to prove.
    leaves = _leaf_comparisons(fact)
    claim = draw(st.one_of(bool_exprs(max_terms=2), st.sampled_from(leaves)))
    e = draw(st.one_of(int_exprs(max_leaves=4), st.sampled_from([x for c in leaves for x in (c.a, c.b)])))
    return fact, claim, e


@settings(max_examples=40, deadline=None)
@given(_constraint_cases(max_terms=3))
def test_proofs_under_constraint_scope_hold_wherever_the_constraint_does(case):
    _check_under_constraint(*case, per_var=2)


@pytest.mark.fuzz
@settings(max_examples=1500, deadline=None)
@given(_constraint_cases(max_terms=5))
def test_proofs_under_constraint_scope_hold_wherever_the_constraint_does_fuzz(case):
    _check_under_constraint(*case, per_var=3)
