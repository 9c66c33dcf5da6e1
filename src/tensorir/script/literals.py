"""Literal checks and string quoting shared by the script parsers and printers of both levels.

The printers write every string through ``string_literal`` so that any text
(quotes, newlines, non-printable or astral characters) reads back as the same
string and can never end the literal early; the parsers check integer
literals against the range of their dtype, so a dimension such as ``10**30``
is a ParseError rather than a value that overflows later in C.
"""
from __future__ import annotations

import keyword
import re

from .. import dtype as dt

# Any integer literal must fit one of the integer dtypes (int64 .. uint64).
INT_LITERAL_MIN = -(2 ** 63)
INT_LITERAL_MAX = 2 ** 64 - 1

_ASCII_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def string_literal(text: str) -> str:
    """A double-quoted Python literal of ``text``; escapes exactly what needs escaping."""
    out = []
    for ch in text:
        if ch == "\\" or ch == '"':
            out.append("\\" + ch)
        elif ch.isprintable():
            out.append(ch)
        else:  # \n, \x00, \u2028, lone surrogates, ...: repr's escape of that one character
            out.append(repr(ch)[1:-1])
    return '"' + "".join(out) + '"'


def is_identifier(name) -> bool:
    """An ASCII Python identifier that is not a keyword (what printers may write bare)."""
    return isinstance(name, str) and bool(_ASCII_IDENTIFIER.match(name)) and not keyword.iskeyword(name)


def int_literal_problem(value: int, dtype: str | None = None) -> str | None:
    """Why ``value`` cannot be an integer literal (of ``dtype`` when given), or None."""
    if dtype is None:
        if INT_LITERAL_MIN <= value <= INT_LITERAL_MAX:
            return None
        return f"integer literal {value} is out of range (integers are at most 64 bits)"
    if not (dt.is_int(dtype) or dt.is_uint(dtype) or dt.is_bool(dtype)):
        return None
    lo, hi = dt.int_range(dtype)
    if lo <= value <= hi:
        return None
    return f"integer literal {value} does not fit in {dtype} ({lo} .. {hi})"


class TargetAttr:
    """``T.target("llvm")`` / ``T.target({"kind": "cuda", ...})`` as an attribute value (TVM's
    ``"target"`` function attribute). Kept and printed back as written; nothing here compiles
    by it (the build's target decides), so it is a label, compared by its spec."""

    __slots__ = ("spec",)

    def __init__(self, spec):
        if isinstance(spec, dict):
            spec = tuple(sorted(spec.items(), key=lambda kv: str(kv[0])))
        object.__setattr__(self, "spec", spec)

    def __setattr__(self, name, value):
        raise AttributeError("TargetAttr is immutable")

    def __eq__(self, other) -> bool:
        return isinstance(other, TargetAttr) and self.spec == other.spec

    def __hash__(self) -> int:
        return hash(("TargetAttr", self.spec))

    def __repr__(self) -> str:
        return f"TargetAttr({self.spec!r})"
