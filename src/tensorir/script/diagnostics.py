"""Source locations for script errors: map AST positions back to the user's file."""
from __future__ import annotations

import ast
import warnings
from dataclasses import dataclass, field

from ..errors import ParseError

# Deepest nesting of syntax nodes a script may have. The parsers, the IR
# passes and the printers recurse over expressions, so a chain such as
# ``n + n + ... + n`` with thousands of terms would exhaust Python's stack
# somewhere downstream; it is refused here, at the user's line, instead.
MAX_NESTING = 160


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


def parse_python(text: str, source: SourceInfo, mode: str = "exec", at: ast.AST | None = None) -> ast.AST:
    """``ast.parse`` with every failure as a ParseError: syntax errors at their
    position, nesting beyond ``MAX_NESTING`` at the deepest node. ``at`` locates
    errors of a snippet (a shape string) at the node holding it."""
    def located(message, lineno, col):
        node = at
        if node is None:
            node = ast.Module(body=[], type_ignores=[])
            node.lineno, node.col_offset = lineno, col
        return make_parse_error(message, node, source)
    try:
        with warnings.catch_warnings():  # e.g. "invalid decimal literal": errors follow if it matters
            warnings.simplefilter("ignore", SyntaxWarning)
            tree = ast.parse(text, mode=mode)
    except SyntaxError as err:
        raise located(f"invalid Python syntax: {err.msg}", err.lineno or 1,
                      max(0, (err.offset or 1) - 1)) from None
    except (RecursionError, MemoryError):
        lines = text.splitlines() or [""]
        longest = max(range(len(lines)), key=lambda i: len(lines[i]))  # Python does not say where
        raise located(f"the text is nested too deeply to parse (at most {MAX_NESTING} levels of "
                      "nested expressions; bind parts of a long expression to names)",
                      longest + 1, 0) from None
    deepest = deeper_than(tree, MAX_NESTING)
    if deepest is not None:
        raise make_parse_error(f"expression nested more than {MAX_NESTING} levels deep; bind parts "
                               "of it to names (or write a long sum as a product)",
                               at if at is not None else deepest, source)
    return tree


def deeper_than(tree: ast.AST, limit: int) -> ast.AST | None:
    """The first node found nested more than ``limit`` levels below ``tree`` (iterative walk)."""
    stack = [(tree, 0, tree)]
    while stack:
        node, depth, located = stack.pop()
        located = node if hasattr(node, "lineno") else located  # operator nodes have no position
        if depth > limit:
            return located
        stack.extend((child, depth + 1, located) for child in ast.iter_child_nodes(node))
    return None
