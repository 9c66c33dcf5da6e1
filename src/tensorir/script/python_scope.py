"""Plain Python inside a decorated script, evaluated in the definition's scope.

TVMScript evaluates the parts of a decorated function that are not IR in Python, with the
names of the function's globals and closure: ``T.Buffer((N, cfg.hidden))``,
``R.Tensor((n, HIDDEN))``, ``R.const(np.ones(4))``, ``axis=cfg.axis``. Both parsers do the same
for an expression whose every name comes from that scope (or builtins) and none is bound by
the script itself or names an IR namespace. Text given to ``from_source`` has no Python scope,
so nothing in it is ever evaluated.
"""
from __future__ import annotations

import ast
import builtins
from typing import Callable

_NOT_PLAIN = (ast.Lambda, ast.comprehension, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom, ast.Starred)


def evaluate_python(node: ast.expr, py_globals: dict, bound: Callable[[str], bool], ir_names,
                    filename: str, error) -> tuple[bool, object]:
    """``(True, value)`` for plain Python of the scope ``py_globals``; ``(False, None)`` when
    ``node`` reads a name the script binds (``bound``), an IR namespace (``ir_names``) or an
    unknown name. What the expression raises becomes ``error(message, node)``."""
    if not py_globals:
        return False, None
    names = set()
    for sub in ast.walk(node):
        if isinstance(sub, _NOT_PLAIN):
            return False, None
        if isinstance(sub, ast.Name):
            names.add(sub.id)
    if not names or any(name in ir_names or bound(name) or
                        (name not in py_globals and not hasattr(builtins, name)) for name in names):
        return False, None
    try:
        code = compile(ast.Expression(body=node), filename, "eval")
        return True, eval(code, dict(py_globals))   # the user's own code, run as TVMScript runs it
    except Exception as err:  # noqa: BLE001 -- whatever the user's expression raised, at its line
        raise error(f"evaluating {ast.unparse(node)} in Python raised {type(err).__name__}: {err}",
                    node) from None
