"""Shape constraint facts over one function (BladeDISC section 3.1).

A ``ShapeFacts`` holds equalities between symbolic dims that hold from some
point of a function on, because a binding before that point checked them at
run time (``observe_binding``):

- ``match_cast``: each dim of the value equals the annotation's dim;
- ``R.assert_op(R.prim_value(x == y))``, the user's way to state a fact
  (conjunctions with ``and`` give several).

Only bindings at a function's top level count (a fact inside an ``If`` branch
holds in that branch alone). Reshape element counts become facts through the
checks ``ApplyShapeConstraints`` inserts (a ``match_cast`` of a shape), so
every fact here is one the VM has checked; matmul contraction dims and
broadcasts are not taken (only some kernels check them).

An equality whose one side is a bare symbolic var (``c == a * b``, ``n == 4``)
is bound in a private analyzer (``c`` simplifies to ``a * b``), so proofs see
it inside larger expressions too. An equality of two composite expressions
(``a * b == c * d``, the product classes of regrouping reshapes) goes into a
union-find keyed by the simplified expression: a dim equal to one member is
equal to all. ``FactAnalyzer`` is the analyzer the normalizer deduces with:
its simplifications keep dims as written (annotations mention only vars that
are defined where they are used), only its equality proofs use the facts.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

from tensorir import expr as E
from tensorir.arith import Analyzer

from .struct_info_util import format_prim, symbolic_vars_of


@dataclass(frozen=True)
class Fact:
    """``lhs == rhs``, known after the binding described by ``source``."""
    lhs: E.PrimExpr
    rhs: E.PrimExpr
    source: str

    def __str__(self) -> str:
        return f"{format_prim(self.lhs)} == {format_prim(self.rhs)}  ({self.source})"


class FactAnalyzer(Analyzer):
    """A plain analyzer (its simplifications keep every dim as written) whose equality
    proofs also use the current ``facts``: the normalizer deducing with it sees
    ``a * b`` and ``c`` as equal once a fact says so. The BlockBuilder sets ``facts``
    per function it builds."""

    def __init__(self, facts: "ShapeFacts | None" = None):
        super().__init__()
        self.facts = facts

    def can_prove_equal(self, a, b, use_sympy: bool = False) -> bool:
        if super().can_prove_equal(a, b, use_sympy):
            return True
        return self.facts is not None and self.facts.equal(a, b)


class ShapeFacts:
    """Equalities of symbolic dims, added in program order (see the module docstring)."""

    def __init__(self):
        self._prover = Analyzer()                    # holds the var bindings
        self.facts: list[Fact] = []
        self.bound: dict[E.Var, E.PrimExpr] = {}     # var -> the expression it equals
        self._pairs: list[tuple[E.PrimExpr, E.PrimExpr]] = []   # composite equalities
        self._parent: dict[str, str] = {}
        self._member: dict[str, E.PrimExpr] = {}     # key -> expression (first one seen)
        self._keys: dict[int, tuple] = {}            # id(expr) -> (expr, key) until a var is bound

    def __len__(self) -> int:
        return len(self.facts)

    # ------------------------------------------------------------ adding
    def add_equal(self, lhs, rhs, source: str) -> bool:
        """Record ``lhs == rhs`` (``lhs`` the side known longer); False when already known."""
        lhs, rhs = E.convert(lhs), E.convert(rhs)
        if not _is_int(lhs) or not _is_int(rhs) or self.equal(lhs, rhs):
            return False
        self.facts.append(Fact(lhs, rhs, source))
        a, b = self._prover.simplify(lhs), self._prover.simplify(rhs)
        for var, value in ((b, a), (a, b)):
            if isinstance(var, E.Var) and var not in self.bound and \
                    not any(v is var for v in symbolic_vars_of(value)):
                self._prover.bind(var, value)
                self.bound[var] = value
                self._keys.clear()
                self._rebuild_classes()    # keys change once a var has a value
                return True
        self._pairs.append((a, b))
        self._union(self._key(a), self._key(b), a, b)
        return True

    def _rebuild_classes(self) -> None:
        self._parent.clear()
        self._member.clear()
        for a, b in self._pairs:
            self._union(self._key(a), self._key(b), a, b)

    def _key(self, expr) -> str:
        hit = self._keys.get(id(expr))
        if hit is None:   # printed once per expression: deduction asks about the same dims again
            hit = self._keys[id(expr)] = (expr, format_prim(self._prover.simplify(expr)))
        return hit[1]

    def _find(self, key: str) -> str:
        while self._parent.get(key, key) != key:
            key = self._parent[key]
        return key

    def _union(self, ka: str, kb: str, a, b) -> None:
        self._member.setdefault(ka, a)
        self._member.setdefault(kb, b)
        ra, rb = self._find(ka), self._find(kb)
        if ra != rb:
            self._parent[rb] = ra     # the older side stays the representative

    # ------------------------------------------------------------ queries
    def equal(self, a, b) -> bool:
        """Whether the facts prove ``a == b`` (integer dims; anything else: False)."""
        if not self.facts:
            return False
        a, b = E.convert(a), E.convert(b)
        if not (_is_int(a) and _is_int(b)):
            return False
        if self._prover.can_prove_equal(a, b):
            return True
        if not self._member:
            return False
        ka, kb = self._key(a), self._key(b)
        return ka in self._member and kb in self._member and self._find(ka) == self._find(kb)

    def proves(self, condition) -> bool:
        return self._prover.can_prove(condition)


_ENABLED = [True]


@contextmanager
def shape_facts_disabled():
    """Deduce without facts inside the block (benchmarks compare both ways)."""
    _ENABLED.append(False)
    try:
        yield
    finally:
        _ENABLED.pop()


def observe_binding(facts: ShapeFacts, binding) -> None:
    """Add the facts a top-level ``binding`` establishes once it ran."""
    if not _ENABLED[-1]:
        return
    from .expr import Call, MatchCast, PrimValue
    from .struct_info import PrimStructInfo, ShapeStructInfo, TensorStructInfo
    name = binding.var.name_hint
    if isinstance(binding, MatchCast):
        actual, target = binding.value.struct_info, binding.struct_info
        pairs = []
        if isinstance(actual, TensorStructInfo) and isinstance(target, TensorStructInfo) \
                and actual.shape is not None and target.shape is not None:
            pairs = zip(actual.shape, target.shape) if actual.ndim == target.ndim else []
        elif isinstance(actual, ShapeStructInfo) and isinstance(target, ShapeStructInfo) \
                and actual.values is not None and target.values is not None:
            pairs = zip(actual.values, target.values) if len(actual.values) == len(target.values) else []
        elif isinstance(actual, PrimStructInfo) and isinstance(target, PrimStructInfo) \
                and actual.value is not None and target.value is not None:
            pairs = [(actual.value, target.value)]
        for dim, expected in pairs:
            facts.add_equal(dim, expected, f"match_cast '{name}'")
        return
    value = binding.value
    if isinstance(value, Call) and getattr(value.op, "name", None) == "relax.assert_op" \
            and value.args and isinstance(value.args[0], PrimValue):
        for conjunct in _conjuncts(value.args[0].value):
            if isinstance(conjunct, E.EQ):
                facts.add_equal(conjunct.a, conjunct.b, "R.assert_op")


def _conjuncts(cond) -> list:
    if isinstance(cond, E.And):
        return [*_conjuncts(cond.a), *_conjuncts(cond.b)]
    return [cond]


def _is_int(expr) -> bool:
    return str(expr.dtype).startswith(("int", "uint"))


__all__ = ["Fact", "FactAnalyzer", "ShapeFacts", "observe_binding", "shape_facts_disabled"]
