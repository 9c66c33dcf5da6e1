"""The analyzer's memo of proofs and polynomials (arith/analyzer.py): the same expression
object asked again after a state change (a binding, a loop range, a constraint scope, its
end) gets the answer of the new state, never the remembered one; and repeated questions are
served from the memo (counted through the prover)."""
from __future__ import annotations

from tensorir import Range, Var, size_var
from tensorir.arith import Analyzer
from tensorir.arith import prover
from tensorir.expr import EQ, LT, IntImm, Max, Min, floordiv


def test_binding_a_var_changes_the_next_simplification_of_the_same_node():
    x, y = size_var("x"), size_var("y")
    expr = x + y * 2
    ana = Analyzer()
    assert not isinstance(ana.simplify(expr), IntImm)
    ana.bind(x, IntImm(3))
    ana.bind(y, IntImm(4))
    assert ana.simplify(expr).value == 11


def test_loop_range_proves_what_it_could_not_before():
    i, n = Var("i"), size_var("n")
    cond = LT(i, n)
    lower = Max(i, IntImm(0))
    ana = Analyzer()
    assert not ana.can_prove(cond)
    assert not ana.can_prove(EQ(lower, i))
    ana.bind(i, Range(IntImm(0), n))
    assert ana.can_prove(cond)
    assert ana.can_prove(EQ(lower, i))


def test_constraint_scope_answers_revert_when_it_ends():
    i, n = size_var("i"), size_var("n")
    cond = LT(i, n)
    chain = Min(i, n)
    ana = Analyzer()
    assert not ana.can_prove(cond) and not ana.can_prove(EQ(chain, i))
    with ana.constraint_scope(LT(i, n)):
        assert ana.can_prove(cond)
        assert ana.can_prove(EQ(chain, i))
    assert not ana.can_prove(cond)
    assert not ana.can_prove(EQ(chain, i))


def test_divisibility_constraint_is_seen_by_a_remembered_question():
    k = size_var("k")
    cond = EQ(floordiv(k, 4) * 4, k)
    ana = Analyzer()
    assert not ana.can_prove(cond)
    with ana.constraint_scope(EQ(k % 4, 0)):
        assert ana.can_prove(cond)
    assert not ana.can_prove(cond)


def test_repeated_question_is_served_from_the_memo(monkeypatch):
    calls = []
    real = prover._prove_nonneg

    def counting(analyzer, p):
        calls.append(p)
        return real(analyzer, p)
    monkeypatch.setattr(prover, "_prove_nonneg", counting)
    i, n = Var("i"), size_var("n")
    ana = Analyzer()
    ana.bind(i, Range(IntImm(0), n))
    cond = LT(i, n)
    assert ana.can_prove(cond)
    first = len(calls)
    assert first > 0
    assert ana.can_prove(LT(i, n))          # a new node, the same polynomial question
    assert len(calls) == first
    ana.bind(Var("j"), Range(IntImm(0), IntImm(4)))   # a state change forgets the proofs
    assert ana.can_prove(cond)
    assert len(calls) > first
