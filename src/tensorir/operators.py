"""How each loop-level operator is spelled, shared by every PrimExpr translator.

The script printers (prim_func text and graph-level annotations), the VM's
Python source and the C emitter read their operator spellings and Python
precedences from here, so they cannot drift apart.
"""
from __future__ import annotations

from . import expr as E

# Python precedence levels (higher binds tighter): script text follows Python's grammar.
PREC_OR, PREC_AND, PREC_NOT, PREC_CMP, PREC_ADD, PREC_MUL, PREC_UNARY, PREC_ATOM = 1, 2, 3, 4, 6, 7, 8, 10

# Operators written infix in Python, with their precedence.
PYTHON_INFIX: dict[type, tuple[str, int]] = {
    E.Add: ("+", PREC_ADD), E.Sub: ("-", PREC_ADD), E.Mul: ("*", PREC_MUL), E.Div: ("/", PREC_MUL),
    E.FloorDiv: ("//", PREC_MUL), E.FloorMod: ("%", PREC_MUL),
    E.EQ: ("==", PREC_CMP), E.NE: ("!=", PREC_CMP), E.LT: ("<", PREC_CMP), E.LE: ("<=", PREC_CMP),
    E.GT: (">", PREC_CMP), E.GE: (">=", PREC_CMP),
    E.And: ("and", PREC_AND), E.Or: ("or", PREC_OR),
}

# Binary operators written as calls in script text.
SCRIPT_CALLS: dict[type, str] = {E.Min: "T.min", E.Max: "T.max"}

# Operators C spells infix with the same meaning (integer Div, FloorDiv and FloorMod differ
# from C's, and Min/Max need helpers, so the emitter handles those itself).
C_INFIX: dict[type, str] = {
    **{cls: PYTHON_INFIX[cls][0] for cls in (E.Add, E.Sub, E.Mul, E.EQ, E.NE, E.LT, E.LE, E.GT, E.GE)},
    E.And: "&&", E.Or: "||",
}


def left_min_prec(prec: int) -> int:
    """The precedence a left operand needs: Python comparisons chain, so ``(a < b) < c``
    keeps its parentheses; every other infix operator is left-associative."""
    return prec + 1 if prec == PREC_CMP else prec


__all__ = ["PREC_OR", "PREC_AND", "PREC_NOT", "PREC_CMP", "PREC_ADD", "PREC_MUL", "PREC_UNARY",
           "PREC_ATOM", "PYTHON_INFIX", "SCRIPT_CALLS", "C_INFIX", "left_min_prec"]
