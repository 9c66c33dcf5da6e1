"""Parse the TensorIR script form into PrimFuncs.

Public entry points:

``prim_func`` (decorator; also ``T.prim_func``; with or without parentheses)
    Reads the decorated function's source with ``inspect.getsource`` (the body
    is never executed) and returns a ``PrimFunc``. Names the script does not
    define may come from the function's globals and closure when they hold a
    Python int/float/str/bool (``N = 128`` at module level).

``from_source(text, filename="<string>")``
    Parses text without executing it: an optional import line / comments and
    one decorated ``def``.

``parse_prim_func_def(func_def, source, py_globals=None) -> PrimFunc``
    For the graph-level parser: parse one ``ast.FunctionDef`` (e.g. a
    ``@T.prim_func`` method of an ``@ir_module`` class). ``source`` is a
    ``SourceInfo(filename, lines, line_offset, col_offset=0)`` mapping AST
    positions to the user's file; ``py_globals`` supplies constants.

``parse_prim_expr(node, names, source, context=None) -> PrimExpr``
    Evaluate one ``ast.expr`` over symbolic variables (``names`` maps
    identifiers to Vars/PrimExprs): int arithmetic, ``T.max``, ``T.floordiv``,
    typed literals, comparisons. Unknown names raise ParseError
    "undefined symbolic variable".

``make_parse_error(message, node, source, context=None) -> ParseError``
    Build (not raise) a ParseError located at ``node``.

Every script mistake raises ``tensorir.ParseError`` with file, line, column,
the offending source line and a context such as "in function 'f', parameter 'x'".
"""
from __future__ import annotations

import ast
import functools
import inspect
import os
import textwrap

from ..errors import ParseError
from ..expr import PrimExpr
from ..function import PrimFunc
from .diagnostics import SourceInfo, make_parse_error, parse_python
from .expr_parser import MISSING, ExprParser
from .func_parser import FunctionParser
from .namespace import t_namespace_names
from .python_scope import substitute_python


def parse_prim_func_def(func_def: ast.FunctionDef, source: SourceInfo,
                        py_globals: dict | None = None, module=None) -> PrimFunc:
    """``module``: a ``subroutines.ModuleScope`` when ``func_def`` is a member of a module
    whose other prim_funcs it may call."""
    return FunctionParser(func_def, source, py_globals, module).parse()


def parse_prim_expr(node: ast.expr, names: dict, source: SourceInfo,
                    context: str | None = None) -> PrimExpr:
    parser = ExprParser(source, lambda name: names.get(name, MISSING), context)
    parser.undefined_message = "undefined symbolic variable {!r}"
    return parser.expr(node)


def _parse_module(text: str, source: SourceInfo) -> ast.Module:
    return parse_python(text, source)


def from_source(text: str, filename: str = "<string>", py_globals: dict | None = None) -> PrimFunc:
    """Parse the text of one prim_func (never executed)."""
    source = SourceInfo.from_text(text, filename)
    module = _parse_module(text, source)
    defs = [n for n in module.body if isinstance(n, ast.FunctionDef)]
    if len(defs) != 1:
        raise make_parse_error(f"expected exactly one function definition, found {len(defs)}",
                               defs[1] if len(defs) > 1 else None, source)
    for node in module.body:
        if not isinstance(node, (ast.FunctionDef, ast.Import, ast.ImportFrom, ast.Expr, ast.Assign)):
            raise make_parse_error(f"unexpected {type(node).__name__} at module level", node, source)
    return parse_prim_func_def(defs[0], source, py_globals)


def _python_names(func) -> dict:
    names = dict(getattr(func, "__globals__", {}))
    code = getattr(func, "__code__", None)
    if code is not None and func.__closure__:
        for name, cell in zip(code.co_freevars, func.__closure__):
            try:
                names[name] = cell.cell_contents
            except ValueError:  # unbound cell
                pass
    return names


def _parse_python_function(func) -> PrimFunc:
    try:
        raw = inspect.getsource(func)
        filename = inspect.getsourcefile(func) or "<unknown>"
    except (OSError, TypeError) as err:
        raise ParseError(f"cannot read the source of {getattr(func, '__name__', func)!r} ({err}); "
                         "use tensorir.from_source(text) instead") from None
    text = textwrap.dedent(raw)
    indent = len(raw.splitlines()[0]) - len(text.splitlines()[0])
    source = SourceInfo.from_text(text, filename, func.__code__.co_firstlineno - 1, indent)
    module = _parse_module(text, source)
    func_def = next(n for n in module.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))
    if isinstance(func_def, ast.AsyncFunctionDef):
        raise make_parse_error("a prim_func cannot be async", func_def, source)
    py_globals = _python_names(func)
    t_names = t_namespace_names(py_globals)
    # TVMScript's reading of plain Python values (N, cfg.k, SHAPE) in a decorated definition
    func_def = substitute_python(func_def, py_globals, t_names, filename,
                                 lambda message, node: make_parse_error(message, node, source))
    return parse_prim_func_def(func_def, source, py_globals, _enclosing_module(func, filename))


@functools.lru_cache(maxsize=32)
def _file_tree(filename: str, mtime: float):
    """The file's AST (every method of a class asks; a test file holds many; ``mtime``: an
    edited file is read again)."""
    try:
        with open(filename, encoding="utf-8") as f:
            return ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return None


def _enclosing_module(func, filename: str):
    """A method's class as the module its calls may name (``Module.sub(...)``, ``cls.sub``):
    ``@T.prim_func`` runs on each method while the class body runs, before the
    ``@I.ir_module`` decorator sees the class, so the class's prim_func signatures are read
    from its ``def`` lines in the file. None for a function outside a class."""
    from .subroutines import ModuleScope, signature_from_def
    parts = getattr(func, "__qualname__", "").split(".")
    if len(parts) < 2 or parts[-2] == "<locals>":
        return None
    try:
        tree = _file_tree(filename, os.path.getmtime(filename))
    except OSError:
        return None
    if tree is None:
        return None
    line = func.__code__.co_firstlineno
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == parts[-2]:
            members = [n for n in node.body if isinstance(n, ast.FunctionDef)]
            if not any(min([n.lineno] + [d.lineno for d in n.decorator_list]) <= line <= n.end_lineno
                       for n in members):
                continue
            prims = {n.name: signature_from_def(n) for n in members
                     if any("prim_func" in ast.unparse(d) for d in n.decorator_list)}
            return ModuleScope(prims, frozenset({node.name, "cls"}))
    return None


# Decorator options of TVM's that change nothing here: ``s_tir`` marks a schedulable
# function (every prim_func is), ``check_well_formed`` TVM's optional check (ours always runs).
IGNORED_OPTIONS = frozenset({"s_tir", "check_well_formed"})


def prim_func(func=None, *, private: bool = False, **options):
    """Decorator: ``@prim_func``, ``@prim_func()``, ``@T.prim_func(private=True)``."""
    options = {k: v for k, v in options.items() if k not in IGNORED_OPTIONS}
    if options:
        raise TypeError(f"prim_func got unexpected options {sorted(options)}")

    def decorate(f):
        if isinstance(f, PrimFunc):
            return f
        return _parse_python_function(f)
    return decorate if func is None else decorate(func)


__all__ = ["prim_func", "from_source", "parse_prim_func_def", "parse_prim_expr", "SourceInfo",
           "make_parse_error"]
