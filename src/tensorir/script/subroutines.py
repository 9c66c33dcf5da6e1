"""What a prim_func's call sites need to know about its module's other prim_funcs.

TVMScript calls another prim_func of the module as ``Module.sub(args)`` (or ``cls.sub``,
or a sibling's bare name among free-standing functions). Every member is parsed on its
own, in any order, so the callee's signature is read from its ``def`` line before any body:
the parameter kinds and dtypes (a literal argument takes the parameter's dtype) and the
``-> T.int32`` result dtype (the call expression's dtype).
"""
from __future__ import annotations

import ast
from dataclasses import dataclass

from .namespace import DTYPE_NAMES


@dataclass(frozen=True)
class SubroutineSig:
    """``params``: one ``(kind, dtype)`` per parameter, kind "scalar" (a ``T.int32`` value),
    "pointer" (``T.handle("float32")``), "handle" (an untyped ``T.handle`` a
    ``T.match_buffer`` shapes) or "buffer" (``T.Buffer``). ``ret``: the result dtype or None."""
    name: str
    params: tuple
    ret: str | None


@dataclass(frozen=True)
class ModuleScope:
    """The module a prim_func is parsed in: callee signatures by name, and the names a call
    may be qualified with (the ``@I.ir_module`` class's name and ``cls``); ``bare``: siblings
    are called by their bare names (free-standing functions)."""
    signatures: dict
    prefixes: frozenset = frozenset({"cls"})
    bare: bool = False

    def callee(self, func: ast.expr, lookup_missing) -> str | None:
        """The module function ``func`` (a call's ``func`` node) names, or None."""
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
                and func.value.id in self.prefixes and func.attr in self.signatures \
                and lookup_missing(func.value.id):
            return func.attr
        if self.bare and isinstance(func, ast.Name) and func.id in self.signatures \
                and lookup_missing(func.id):
            return func.id
        return None


def _t_dtype(node, t_names) -> str | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in t_names:
        if node.attr in DTYPE_NAMES:
            return node.attr
        if node.attr == "boolean":
            return "bool"
    return None


def signature_from_def(func_def: ast.FunctionDef, t_names=frozenset({"T"})) -> SubroutineSig:
    """The signature as written (what the parser of the function itself then checks)."""
    params = []
    for arg in func_def.args.args:
        ann = arg.annotation
        dtype = _t_dtype(ann, t_names)
        if dtype is not None:
            params.append(("scalar", dtype))
        elif isinstance(ann, ast.Call) and isinstance(ann.func, ast.Attribute) \
                and isinstance(ann.func.value, ast.Name) and ann.func.value.id in t_names \
                and ann.func.attr == "handle" and ann.args and isinstance(ann.args[0], ast.Constant) \
                and isinstance(ann.args[0].value, str):
            params.append(("pointer", ann.args[0].value))
        elif isinstance(ann, ast.Attribute) and ann.attr == "handle":
            params.append(("handle", None))
        else:
            params.append(("buffer", None))
    return SubroutineSig(func_def.name, tuple(params), _t_dtype(func_def.returns, t_names))
