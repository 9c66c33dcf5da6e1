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
    if not py_globals or id(node) not in _plain_expressions(
            node, lambda name: _from_python(name, py_globals, bound, ir_names)):
        return False, None
    return True, _evaluate(node, py_globals, filename, error)


def _from_python(name: str, py_globals: dict, bound, ir_names) -> bool:
    return name not in ir_names and not bound(name) and (name in py_globals or hasattr(builtins, name))


def _evaluate(node: ast.expr, py_globals: dict, filename: str, error):
    try:
        code = compile(ast.Expression(body=node), filename, "eval")
        return eval(code, dict(py_globals))   # the user's own code, run as TVMScript runs it
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


def _plain_expressions(tree: ast.AST, from_python) -> set:
    """ids of the expressions that read at least one name and only names ``from_python`` accepts
    (one bottom-up pass: each node's answer from its children's)."""
    plain: set = set()

    def visit(node) -> tuple[bool, bool]:       # (only plain names below, some name below)
        ok, named = not isinstance(node, _NOT_PLAIN), False
        if isinstance(node, ast.Name):
            ok, named = ok and from_python(node.id), True
        for child in ast.iter_child_nodes(node):
            child_ok, child_named = visit(child)
            ok, named = ok and child_ok, named or child_named
        if ok and named and isinstance(node, ast.expr):
            plain.add(id(node))
        return ok, named
    visit(tree)
    return plain


class _Substitute(ast.NodeTransformer):
    def __init__(self, plain: set, evaluate):
        self.plain, self.evaluate = plain, evaluate

    def visit(self, node):
        if id(node) in self.plain and not isinstance(node, ast.Starred) \
                and isinstance(getattr(node, "ctx", ast.Load()), ast.Load):
            literal = _literal_node(self.evaluate(node))
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
    plain = _plain_expressions(tree, lambda name: _from_python(name, py_globals, bound.__contains__, ir_names))
    if not plain:
        return tree
    return _Substitute(plain, lambda node: _evaluate(node, py_globals, filename, error)).visit(tree)
