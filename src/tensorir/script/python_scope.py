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

import numpy as np

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


def names_bound_by_script(tree: ast.AST) -> frozenset:
    """Every name the script text binds anywhere (targets, parameters, definitions, imports,
    ``cls``): a Python value of the same name is never substituted before parsing."""
    names = {"cls"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
    return frozenset(names)


def _literal_node(value):
    """An AST literal for ``value`` (numbers, strings, None and tuples/lists of them), else None.
    NumPy scalars stay values: ``R.const(np.int8(3))`` keeps its dtype through the parser."""
    if isinstance(value, np.generic):
        return None
    if value is None or isinstance(value, (bool, int, float, str)):
        return ast.Constant(value)
    if isinstance(value, (tuple, list)):
        items = [_literal_node(v) for v in value]
        if any(item is None for item in items):
            return None
        kind = ast.Tuple if isinstance(value, tuple) else ast.List
        return kind(elts=items, ctx=ast.Load())
    return None


class _Substitute(ast.NodeTransformer):
    def __init__(self, evaluate):
        self.evaluate = evaluate

    def visit(self, node):
        if isinstance(node, ast.expr) and not isinstance(node, (ast.Constant, ast.Starred)) \
                and isinstance(getattr(node, "ctx", ast.Load()), ast.Load):
            found, value = self.evaluate(node)
            literal = _literal_node(value) if found else None
            if literal is not None:
                return ast.fix_missing_locations(ast.copy_location(literal, node))
        node = self.generic_visit(node)
        if isinstance(node, ast.Call):      # T.grid(*SHAPE): the tuple's items as arguments
            args = []
            for arg in node.args:
                if isinstance(arg, ast.Starred) and isinstance(arg.value, (ast.Tuple, ast.List)):
                    args.extend(arg.value.elts)
                else:
                    args.append(arg)
            node.args = args
        return node


def substitute_python(tree: ast.AST, py_globals: dict, ir_names, filename: str, error) -> ast.AST:
    """``tree`` with each largest plain-Python expression whose value is a literal (numbers,
    strings, tuples of them: ``HIDDEN``, ``cfg.eps``, ``SHAPE``, ``"float" + BITS``) replaced by that
    literal, so every place of the grammar reads it as if written out. Names the script binds
    anywhere are left to the parser (which still evaluates them where the script's scope does
    not hold them); values that are not literals (arrays, functions) too."""
    if not py_globals:
        return tree
    bound = names_bound_by_script(tree)
    return _Substitute(lambda node: evaluate_python(node, py_globals, bound.__contains__, ir_names,
                                                    filename, error)).visit(tree)
