"""sym_code: the only generator of VM Python; it accepts nothing but its own operators."""
import re

import pytest

from relaxscript.vm.sym_code import SymCodeError, check_message, render_checks, render_expr


def test_expression_trees_render_to_the_python_they_mean():
    tree = ("select", ("<", ("t", 0), ("int", 4)), ("tdiv", ("t", 1), ("int", 2)), ("float", float("inf")))
    source = render_expr(tree)
    assert source == "(_tdiv(t[1], 2) if (t[0] < 4) else float('inf'))"
    assert render_expr(("tuple", ("t", 0), ("*", ("t", 0), ("int", 4)))) == "(t[0], (t[0] * 4), )"


@pytest.mark.parametrize("tree, reason", [
    (("int", True), "an int literal must hold an int"),
    (("int", "__import__('os')"), "an int literal must hold an int"),
    (("t", -1), "a symbol slot must be a non-negative int"),
    (("t", "0]; import os; t[0"), "a symbol slot must be a non-negative int"),
    (("v", 1), "a temporary is only allowed inside checks"),
    (("cast", "eval", ("t", 0)), "unknown cast 'eval'"),
    (("+", ("t", 0)), "operator '+' takes 2 operand"),
    (("getattr", ("t", 0), ("int", 1)), "unknown operator 'getattr'"),
    (("round", "float64", ("t", 0)), "cannot round to 'float64'"),
    (("intrin", "system", "float32", ("t", 0)), "unknown intrinsic"),
    (("intrin", "exp", "float32'); import os; ('", ("t", 0)), "unknown dtype"),
    (("intrin", "exp", "float32", ("t", 0), ("t", 1)), "takes 1 operand(s), got 2"),
    ("t[0]", "expected an expression tuple"),
])
def test_anything_else_is_rejected(tree, reason):
    with pytest.raises(SymCodeError, match=re.escape(reason)):
        render_expr(tree)


def test_float_rounding_and_intrinsics_render_to_the_interpreter_helpers():
    tree = ("round", "float32", ("*", ("intrin", "exp", "float32", ("float", 1.0)), ("float", 0.5)))
    assert render_expr(tree) == "_round((_intrin('exp', 'float32', (float('1.0'), )) * float('0.5')), 'float32')"


def test_checks_render_with_derived_assignments_and_a_copy():
    source = render_checks([("load", 1, 0), ("prim", 1, 0, "int", 0), ("store", 2, ("v", 1))],
                           derived=[(3, ("+", ("t", 2), ("int", 1)))], copy=(5, 0))
    assert source.splitlines() == ["def _match(regs, t):", "    v1 = regs[0]", "    v1 = _as_prim(v1, 'int', 0)",
                                   "    regs[0] = v1", "    t[2] = v1", "    t[3] = (t[2] + 1)",
                                   "    regs[5] = regs[0]"]
    with pytest.raises(SymCodeError, match="unknown scalar kind"):
        render_checks([("prim", 1, 0, "int'); import os; ('", None)])


def test_message_templates_take_only_values():
    assert check_message("x: expected {expected}, got {actual} (n = {0})")
    for bad in ("{actual.__class__}", "{expected[0]}", "{actual!r}", "{0:>{1}}", "{", 3):
        with pytest.raises(SymCodeError):
            check_message(bad)
