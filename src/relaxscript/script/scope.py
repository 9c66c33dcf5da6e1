"""Parse-time context: where the source lives, which names mean R and T, and
the nested name scopes of a function body."""
from __future__ import annotations

import ast
from dataclasses import dataclass, field

from tensorir.errors import ParseError
from tensorir.script.diagnostics import SourceInfo, make_parse_error
from tensorir.script.python_scope import evaluate_python


@dataclass
class ParseContext:
    """Shared by every part of one parse: source positions, namespace names,
    the Python globals of a decorated definition (empty for ``from_source``),
    and a stack of context phrases ("in function 'main'", "parameter 'x'")."""
    source: SourceInfo
    r_names: frozenset = frozenset({"R"})
    t_names: frozenset = frozenset({"T"})
    i_names: frozenset = frozenset({"I"})
    py_globals: dict = field(default_factory=dict)
    metadata: dict = field(default_factory=dict)
    where: list = field(default_factory=list)

    def __post_init__(self):
        # TVM's tests write `relax.call_tir(...)` (its Python module) inside scripts: the
        # same functions as R's, read as R paths here.
        self.r_names = frozenset(self.r_names) | {"relax"}

    def error(self, message: str, node: ast.AST | None) -> ParseError:
        context = ", ".join(self.where) if self.where else None
        return make_parse_error(message, node, self.source, context)

    def span(self, node: ast.AST) -> tuple:
        """``(filename, lineno, col, source_line)`` of ``node`` in the user's file."""
        lineno = getattr(node, "lineno", None)
        col = getattr(node, "col_offset", 0)
        return (self.source.filename,
                None if lineno is None else lineno + self.source.line_offset,
                col + self.source.col_offset,
                self.source.line_text(lineno))

    def describe(self, node: ast.AST) -> str:
        filename, lineno, _col, line = self.span(node)
        return f"{filename}:{lineno}: {line.strip()}"

    def python_value(self, node: ast.expr, bound) -> tuple[bool, object]:
        """``(True, value)`` when ``node`` is plain Python of a decorated definition (no name the
        script binds, ``bound(name)``): ``tensorir.script.python_scope.evaluate_python``."""
        return evaluate_python(node, self.py_globals, bound, self.r_names | self.t_names | self.i_names,
                               self.source.filename, self.error)

    def is_r(self, node: ast.AST) -> bool:
        return isinstance(node, ast.Name) and node.id in self.r_names

    def is_t(self, node: ast.AST) -> bool:
        return isinstance(node, ast.Name) and node.id in self.t_names

    def r_path(self, node: ast.AST) -> str | None:
        """``"nn.softmax"`` for the AST of ``R.nn.softmax``; None if not an R path.
        ``R.Any`` (newer TVM's name of ``R.Object``) reads as ``"Object"``."""
        path = self._path(node, self.r_names)
        return "Object" if path == "Any" else path

    def i_path(self, node: ast.AST) -> str | None:
        """``"module_attrs"`` for the AST of ``I.module_attrs``; None if not an I path."""
        return self._path(node, self.i_names)

    @staticmethod
    def _path(node: ast.AST, roots) -> str | None:
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if parts and isinstance(node, ast.Name) and node.id in roots:
            return ".".join(reversed(parts))
        return None


class Scope:
    """Nested frames of names: graph-level Vars, symbolic Vars, GlobalVars."""

    def __init__(self):
        self.frames: list[dict] = [{}]

    def push(self) -> None:
        self.frames.append({})

    def pop(self) -> dict:
        return self.frames.pop()

    def define(self, name: str, value) -> None:
        self.frames[-1][name] = value

    def lookup(self, name: str):
        for frame in reversed(self.frames):
            if name in frame:
                return frame[name]
        return None
