"""Entry points of the graph-level script parser.

``@ir_module`` (class decorator) -> IRModule; ``@function`` (with or without
parentheses, ``pure=False``) -> Function; ``from_source(text)`` -> IRModule,
or a Function when the text holds a single function. The decorators read the
source with ``inspect``; nothing in a body is executed.

A module is parsed in two passes: first every member's signature becomes a
GlobalVar annotation (prim_funcs are parsed whole by the TensorIR parser),
then bodies are parsed, callees whose return annotation must be deduced
before their callers. The module keeps the order of the source.
"""
from __future__ import annotations

import ast
import inspect
import sys
import textwrap

from tensorir.errors import ParseError
from tensorir.script.diagnostics import SourceInfo, make_parse_error, parse_python
from tensorir.script.python_scope import substitute_python

from .. import expr as rx
from ..irmodule import IRModule
from ..struct_info_of import signature_of
from ..irmodule import GLOBAL_INFOS
from .ir_namespace import vdevice
from .naming import RESERVED
from .constants import find_metadata, read_metadata
from .function_parser import FunctionParser, written_return
from .scope import ParseContext

RELAX_DECORATORS = ("function",)
PRIM_DECORATORS = ("prim_func",)
MODULE_DECORATORS = ("ir_module",)


# ---------------------------------------------------------------- decorators
def ir_module(cls=None, **options):
    """Class decorator: ``@ir_module`` / ``@R.ir_module`` -> IRModule."""
    from tensorir.script.parser import IGNORED_OPTIONS
    options = {k: v for k, v in options.items() if k not in IGNORED_OPTIONS}
    if options:
        raise TypeError(f"ir_module got unexpected options {sorted(options)}")

    def decorate(c):
        ctx, tree = _context_for(c)
        class_def = next(n for n in tree.body if isinstance(n, ast.ClassDef))
        return parse_module(class_def, ctx)
    return decorate if cls is None else decorate(cls)


def function(func=None, *, pure: bool = True, private: bool = False):
    """``@function`` / ``@R.function(pure=False)`` -> Function.

    Inside an ``@ir_module`` class the method is left as is: the module
    decorator parses the whole class (so ``cls.f`` references resolve)."""
    def decorate(f):
        if isinstance(f, rx.Function):
            return f
        if _defined_in_class(f):
            return f
        ctx, tree = _context_for(f)
        func_def = next(n for n in tree.body if isinstance(n, ast.FunctionDef))
        return parse_free_functions([func_def], ctx)[func_def.name]
    return decorate if func is None else decorate(func)


def from_source(text: str, filename: str = "<string>"):
    """Parse script text (as printed by ``mod.script()``) without executing it."""
    source = SourceInfo.from_text(text, filename)
    tree = _parse_python(text, source)
    ctx = ParseContext(source)
    metadata = find_metadata(tree)
    if metadata is not None:
        try:
            ctx.metadata = read_metadata(metadata)
        except (ValueError, TypeError, SyntaxError, OverflowError) as err:
            raise make_parse_error(f"invalid metadata section: {err}", metadata, source) from None
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    for node in tree.body:
        if node is not metadata and not isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.Import,
                                                          ast.ImportFrom)) and not _is_docstring(node):
            raise make_parse_error(f"unexpected {type(node).__name__} at the top level of a script",
                                   node, source)
    if classes:
        if len(classes) > 1 or defs:
            extra = classes[1] if len(classes) > 1 else defs[0]
            raise make_parse_error("a script holds one @R.ir_module class or free functions, not both",
                                   extra, source)
        return parse_module(classes[0], ctx)
    if not defs:
        raise make_parse_error("the text defines no function or module", None, source)
    functions = parse_free_functions(defs, ctx)
    return next(iter(functions.values())) if len(functions) == 1 else IRModule(functions)


# ---------------------------------------------------------------- modules
def parse_module(class_def: ast.ClassDef, ctx: ParseContext) -> IRModule:
    members, attrs = [], {}
    for stmt in class_def.body:
        if isinstance(stmt, ast.FunctionDef):
            members.append(stmt)
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) \
                and "module_attrs" in (ctx.r_path(stmt.value.func), ctx.i_path(stmt.value.func)):
            attrs.update(_module_attrs(stmt.value, ctx))
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) \
                and ctx.i_path(stmt.value.func) == "module_global_infos":
            attrs[GLOBAL_INFOS] = {**attrs.get(GLOBAL_INFOS, {}), **_global_infos(stmt.value, ctx)}
        elif not (isinstance(stmt, ast.Pass) or _is_docstring(stmt)):
            raise ctx.error(f"unexpected {type(stmt).__name__} in an ir_module class; members are "
                            "@R.function and @T.prim_func definitions", stmt)
    functions = _parse_members(members, ctx, class_names={class_def.name})
    return IRModule(functions, attrs)


def parse_free_functions(defs: list, ctx: ParseContext) -> dict:
    """Free-standing functions (they may refer to each other by bare name)."""
    return _parse_members(defs, ctx, class_names=frozenset())


def _parse_members(defs: list, ctx: ParseContext, class_names) -> dict:
    kinds, seen = {}, set()
    for node in defs:
        if node.name in seen:
            raise ctx.error(f"function {node.name!r} is defined twice", node)
        if node.name in RESERVED:  # `cls.R` would print, but `R` itself names the namespace
            raise ctx.error(f"a module function cannot be named {node.name!r} (reserved: "
                            f"{', '.join(sorted(RESERVED))})", node)
        seen.add(node.name)
        kinds[node.name] = _member_kind(node, ctx)
    # Pass 1: signatures.
    from tensorir.script.subroutines import ModuleScope, signature_from_def
    prim_scope = ModuleScope({n.name: signature_from_def(n, ctx.t_names) for n in defs if kinds[n.name] == "prim"},
                             frozenset(class_names) | {"cls"}, bare=not class_names)
    global_vars, functions = {}, {}
    for node in defs:
        if kinds[node.name] == "prim":
            functions[node.name] = _parse_prim_func(node, ctx, prim_scope)
            global_vars[node.name] = rx.GlobalVar(node.name, signature_of(functions[node.name]))
        else:
            sig = FunctionParser(ctx, global_vars, class_names).signature(node)
            global_vars[node.name] = rx.GlobalVar(node.name, sig)
    # Pass 2: bodies, callees without a written return annotation first.
    relax_defs = {n.name: n for n in defs if kinds[n.name] == "relax"}
    for name in _body_order(relax_defs, class_names):
        func = FunctionParser(ctx, global_vars, class_names).parse(relax_defs[name])
        functions[name] = func
        global_vars[name] = rx.GlobalVar(name, signature_of(func))
    return {n.name: functions[n.name] for n in defs}


def _body_order(defs: dict, class_names) -> list[str]:
    """Depth-first post-order over references to functions lacking ``->``."""
    order, state = [], {}

    def visit(name):
        if state.get(name):
            return
        state[name] = "visiting"
        for ref in _references(defs[name], class_names):
            if ref in defs and written_return(defs[ref]) is None and not state.get(ref):
                visit(ref)
        order.append(name)
        state[name] = "done"

    for name in defs:
        visit(name)
    return order


def _references(node: ast.FunctionDef, class_names) -> list[str]:
    out = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) \
                and (sub.value.id in class_names or sub.value.id == "cls"):
            out.append(sub.attr)
        elif isinstance(sub, ast.Name):
            out.append(sub.id)
    return out


def _member_kind(node: ast.FunctionDef, ctx: ParseContext) -> str:
    for dec in node.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", None)
        if name in RELAX_DECORATORS:
            return "relax"
        if name in PRIM_DECORATORS:
            return "prim"
    raise ctx.error(f"function {node.name!r} needs a decorator: @R.function or @T.prim_func", node)


def _parse_prim_func(node: ast.FunctionDef, ctx: ParseContext, module=None):
    from tensorir.script.parser import parse_prim_func_def
    func = parse_prim_func_def(node, ctx.source, ctx.py_globals, module)
    return func if func.name == node.name else func.replace(name=node.name)


def _module_attrs(call: ast.Call, ctx: ParseContext) -> dict:
    if len(call.args) != 1 or call.keywords or not isinstance(call.args[0], ast.Dict):
        raise ctx.error('R.module_attrs takes one dict literal: R.module_attrs({"key": value})', call)
    attrs = _literal(call.args[0], ctx)
    if GLOBAL_INFOS in attrs:
        raise ctx.error(f"the module attribute {GLOBAL_INFOS!r} is written with I.module_global_infos",
                        call.args[0])
    return attrs


def _literal(node: ast.expr, ctx: ParseContext):
    # The literal reader of function attributes: float("nan") included, bytes and sets refused.
    from .scope import Scope
    from .value_parser import ValueParser
    return ValueParser(ctx, Scope(), {}).literal(node)


def _global_infos(call: ast.Call, ctx: ParseContext) -> dict:
    """``I.module_global_infos({"vdevice": [I.vdevice(target, 0, "global"), ...]})``."""
    if len(call.args) != 1 or call.keywords or not isinstance(call.args[0], ast.Dict):
        raise ctx.error('I.module_global_infos takes one dict literal of lists: '
                        '{"vdevice": [I.vdevice(...)]}', call)
    infos = {}
    for key, value in zip(call.args[0].keys, call.args[0].values):
        name = _literal(key, ctx) if key is not None else None
        if not isinstance(name, str):
            raise ctx.error("the keys of I.module_global_infos are strings", key or call)
        if not isinstance(value, (ast.List, ast.Tuple)):
            raise ctx.error(f"global info {name!r} is a list", value)
        infos[name] = tuple(_global_info(item, ctx) for item in value.elts)
    return infos


def _global_info(node: ast.expr, ctx: ParseContext):
    if not (isinstance(node, ast.Call) and "vdevice" in (ctx.i_path(node.func),
                                                          ctx.r_path(node.func))):
        return _literal(node, ctx)   # R.vdevice is TVM's other spelling of I.vdevice
    names = ("target", "vdevice_id", "memory_scope")
    if len(node.args) > 3 or any(k.arg not in names for k in node.keywords):
        raise ctx.error("I.vdevice takes target, vdevice_id and memory_scope", node)
    kwargs = {k.arg: _literal(k.value, ctx) for k in node.keywords}
    kwargs.update({n: _literal(a, ctx) for n, a in zip(names, node.args)})
    try:
        return vdevice(**kwargs)
    except TypeError as err:
        raise ctx.error(str(err), node) from None


# ---------------------------------------------------------------- sources of decorated objects
def _context_for(obj) -> tuple[ParseContext, ast.Module]:
    try:
        lines, first = inspect.getsourcelines(obj)
        filename = inspect.getsourcefile(obj) or "<unknown>"
    except (OSError, TypeError) as err:
        raise ParseError(f"cannot read the source of {getattr(obj, '__name__', obj)!r} ({err}); "
                         "use relaxscript.from_source(text) instead") from None
    raw = "".join(lines)
    text = textwrap.dedent(raw)
    indent = len(lines[0]) - len(text.splitlines(keepends=True)[0]) if lines else 0
    source = SourceInfo.from_text(text, filename, first - 1, indent)
    tree = _parse_python(text, source)
    py_globals = _python_names(obj)
    ctx = ParseContext(source, _names_bound_to(py_globals, "relaxscript.script.namespace", "R"),
                       _names_bound_to(py_globals, "tensorir.script.namespace", "T"),
                       _names_bound_to(py_globals, "relaxscript.script.ir_namespace", "I"), py_globals)
    # TVMScript's reading of plain Python values (HIDDEN, cfg.eps, SHAPE) in a decorated definition
    tree = substitute_python(tree, py_globals, ctx.r_names | ctx.t_names | ctx.i_names, filename, ctx.error)
    return ctx, tree


def _python_names(obj) -> dict:
    func = obj
    names = dict(getattr(sys.modules.get(obj.__module__), "__dict__", {}))
    code = getattr(func, "__code__", None)
    if code is not None and func.__closure__:
        for name, cell in zip(code.co_freevars, func.__closure__):
            try:
                names[name] = cell.cell_contents
            except ValueError:
                pass
    # Locals of the defining function (a class defined inside a test function).
    frame = inspect.currentframe()
    while frame is not None and frame.f_globals.get("__name__", "").startswith("relaxscript.script"):
        frame = frame.f_back
    if frame is not None:
        names.update(frame.f_locals)
    return names


def _names_bound_to(py_globals: dict, module: str, default: str) -> frozenset:
    target = sys.modules.get(module)
    namespace = getattr(target, default, None)
    names = {k for k, v in py_globals.items() if namespace is not None and v is namespace}
    return frozenset(names | {default})


def _defined_in_class(func) -> bool:
    parts = getattr(func, "__qualname__", "").split(".")
    return len(parts) >= 2 and parts[-2] != "<locals>"


def _parse_python(text: str, source: SourceInfo) -> ast.Module:
    return parse_python(text, source)


def _is_docstring(stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) \
        and isinstance(stmt.value.value, str)


__all__ = ["ir_module", "function", "from_source", "parse_module"]
