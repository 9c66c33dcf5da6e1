"""Symbolic integer arithmetic for shapes and indices.

``simplify`` puts integer expressions in a readable canonical
sum-of-products form; ``Analyzer`` adds loop ranges, bindings and
constraints, and proves equalities, inequalities and divisibility. sympy is
only the optional slow fallback (``use_sympy=True``) and a test oracle.
"""
from .analyzer import Analyzer, ArithError, simplify
from .evaluate import EvaluationError, evaluate
from .sympy_bridge import from_sympy, prove_with_sympy, to_sympy

__all__ = ["Analyzer", "ArithError", "EvaluationError", "evaluate", "from_sympy",
           "prove_with_sympy", "simplify", "to_sympy"]
