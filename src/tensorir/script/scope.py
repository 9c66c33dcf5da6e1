"""Name scopes and the per-block state used while parsing a prim_func body."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .. import expr as E
from ..buffer import Buffer
from ..stmt import BufferRegion, IterVar, MatchBufferRegion, Range, Stmt
from .expr_parser import MISSING


class Scope:
    """Nested name bindings (innermost wins); Python constants from globals come last."""

    def __init__(self, py_globals: dict | None = None):
        self.frames: list[dict[str, Any]] = [{}]
        self.py_globals = py_globals or {}

    def push(self) -> None:
        self.frames.append({})

    def pop(self) -> None:
        self.frames.pop()

    def define(self, name: str, value) -> None:
        self.frames[-1][name] = value

    def bound(self, name: str) -> bool:
        """Whether the script itself binds ``name`` (Python globals do not count)."""
        return any(name in frame for frame in self.frames)

    def lookup(self, name: str):
        for frame in reversed(self.frames):
            if name in frame:
                return frame[name]
        value = self.py_globals.get(name, MISSING)
        if isinstance(value, (bool, int, float, str)):
            return value
        return MISSING


@dataclass
class LoopInfo:
    var: E.Var
    dom: Range


@dataclass
class BlockFrame:
    """What a block (or the implicit root) collects from its top-level statements."""
    is_root: bool = False
    iter_vars: list[IterVar] = field(default_factory=list)
    iter_values: list[E.PrimExpr] = field(default_factory=list)
    has_axes: bool = False
    reads: list[BufferRegion] | None = None
    writes: list[BufferRegion] | None = None
    predicate: E.PrimExpr | None = None
    init: Stmt | None = None
    alloc_buffers: list[Buffer] = field(default_factory=list)
    match_buffers: list[MatchBufferRegion] = field(default_factory=list)
    annotations: dict = field(default_factory=dict)
