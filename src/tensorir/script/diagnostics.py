"""Source locations for script errors: map AST positions back to the user's file."""
from __future__ import annotations

import ast
from dataclasses import dataclass, field

from ..errors import ParseError


@dataclass
class SourceInfo:
    """Where a parsed snippet lives in the user's source.

    ``lines`` are the snippet's lines exactly as they were handed to
    ``ast.parse`` (index ``node.lineno - 1``); ``line_offset`` is added to AST
    line numbers and ``col_offset`` to AST columns (the indentation removed by
    dedenting a method or nested function) to get positions in ``filename``.
    """
    filename: str = "<string>"
    lines: list[str] = field(default_factory=list)
    line_offset: int = 0
    col_offset: int = 0

    @staticmethod
    def from_text(text: str, filename: str = "<string>", line_offset: int = 0,
                  col_offset: int = 0) -> "SourceInfo":
        return SourceInfo(filename, text.splitlines(), line_offset, col_offset)

    def line_text(self, lineno: int | None) -> str:
        if lineno is None or not 1 <= lineno <= len(self.lines):
            return ""
        return " " * self.col_offset + self.lines[lineno - 1]


def make_parse_error(message: str, node: ast.AST | None, source: SourceInfo | None,
                     context: str | None = None) -> ParseError:
    """A ParseError pointing at ``node`` in the user's file (not raised, returned)."""
    source = source or SourceInfo()
    lineno = getattr(node, "lineno", None)
    col = getattr(node, "col_offset", None)
    return ParseError(
        message,
        filename=source.filename,
        lineno=None if lineno is None else lineno + source.line_offset,
        col=None if col is None else col + source.col_offset,
        source_line=source.line_text(lineno),
        context=context,
    )
