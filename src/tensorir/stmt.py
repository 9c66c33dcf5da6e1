"""Statements of the loop level: loops, blocks, stores and control flow."""
from __future__ import annotations

from typing import Mapping, Sequence

from .buffer import Buffer
from . import dtype as dt
from .expr import IntImm, PrimExpr, Var, _checked_indices, as_bool, as_scalar_bool, convert, index_lanes
from .node import Node

FOR_KINDS = ("serial", "parallel", "vectorized", "unrolled", "thread_binding")
ITER_KINDS = ("S", "R", "scan", "opaque")  # spatial, reduce, ordered (T.axis.scan), opaque (T.axis.opaque)


class Stmt(Node):
    __slots__ = ()


class Range(Node):
    """Half-open interval ``[min, min + extent)``."""
    __slots__ = ("min", "extent")
    _fields = ("min", "extent")

    def __init__(self, min, extent):
        self.min = convert(min)
        self.extent = convert(extent)

    @staticmethod
    def from_min_max(lo, hi_exclusive) -> "Range":
        return Range(lo, convert(hi_exclusive) - convert(lo))


class BufferRegion(Node):
    """The part of a buffer a block touches: one Range per dimension."""
    __slots__ = ("buffer", "region")
    _fields = ("buffer", "region")

    def __init__(self, buffer: Buffer, region: Sequence[Range]):
        self.buffer = buffer
        self.region = tuple(region)

    @staticmethod
    def full(buffer: Buffer) -> "BufferRegion":
        return BufferRegion(buffer, [Range(0, s) for s in buffer.shape])


class MatchBufferRegion(Node):
    """``buffer = T.match_buffer(source_region, ...)`` inside a block."""
    __slots__ = ("buffer", "source")
    _fields = ("buffer", "source")

    def __init__(self, buffer: Buffer, source: BufferRegion):
        self.buffer = buffer
        self.source = source


class IterVar(Node):
    """A block iteration variable with its domain and kind: "S" (spatial), "R" (reduce), "scan"
    (iterations in order, each may read what earlier ones wrote) or "opaque" (nothing assumed).
    Passes treat the last two like reduce vars: never parallel, never inlined."""
    __slots__ = ("var", "dom", "kind")
    _fields = ("var", "dom")
    _attrs = ("kind",)

    def __init__(self, var: Var, dom: Range, kind: str):
        if kind not in ITER_KINDS:
            raise ValueError(f"iter var kind must be one of {ITER_KINDS}, got {kind!r}")
        self.var, self.dom, self.kind = var, dom, kind


class BufferStore(Stmt):
    __slots__ = ("buffer", "value", "indices")
    _fields = ("buffer", "value", "indices")

    def __init__(self, buffer: Buffer, value, indices: Sequence):
        self.buffer = buffer
        self.value = convert(value)
        self.indices, vector = _checked_indices(buffer, indices)
        lanes = index_lanes(buffer, self.indices) if vector else 1
        if (1 if self.value.dtype in dt.SCALAR_NAMES else dt.lanes(self.value.dtype)) != lanes:
            raise TypeError(f"a store to buffer {buffer.name!r} writes {lanes} lane(s) (its indices) "
                            f"but the value ({self.value.dtype}) has {dt.lanes(self.value.dtype)}"
                            + ("; T.Broadcast(value, lanes) repeats a scalar" if lanes > 1 else ""))


class SeqStmt(Stmt):
    __slots__ = ("seq",)
    _fields = ("seq",)

    def __init__(self, seq: Sequence[Stmt]):
        self.seq = tuple(seq)


class Evaluate(Stmt):
    __slots__ = ("value",)
    _fields = ("value",)

    def __init__(self, value):
        self.value = convert(value)


class IfThenElse(Stmt):
    __slots__ = ("condition", "then_case", "else_case")
    _fields = ("condition", "then_case", "else_case")

    def __init__(self, condition, then_case: Stmt, else_case: Stmt | None = None):
        self.condition = as_scalar_bool(condition, "an if condition")
        self.then_case, self.else_case = then_case, else_case


class While(Stmt):
    """``while condition: body`` (TVM's tir.While): the condition is evaluated again before
    every iteration; the body changes what it reads through buffer stores."""
    __slots__ = ("condition", "body")
    _fields = ("condition", "body")

    def __init__(self, condition, body: Stmt):
        self.condition = as_scalar_bool(condition, "a while condition")
        self.body = body


class AssertStmt(Stmt):
    """``assert condition, "message"`` (TVM's tir.AssertStmt): where the condition is false the
    function stops with an error carrying ``message`` (the statements after it do not run)."""
    __slots__ = ("condition", "message")
    _fields = ("condition",)
    _attrs = ("message",)

    def __init__(self, condition, message: str):
        if not isinstance(message, str):
            raise TypeError(f"an assert's message is a string, got {type(message).__name__}")
        self.condition = as_scalar_bool(condition, "an assert condition")
        self.message = message


class Break(Stmt):
    """``break``: leaves the innermost enclosing loop (a serial ``for`` or a ``while``; TVM's
    loop jump). The parser allows it only there, never across a block."""
    __slots__ = ()


class Continue(Stmt):
    """``continue``: ends this iteration of the innermost enclosing serial ``for``/``while``."""
    __slots__ = ()


def has_loop_jumps(node) -> bool:
    """Whether ``node`` holds a ``break``/``continue`` anywhere."""
    from .functor import collect
    return bool(collect(node, lambda n: isinstance(n, (Break, Continue))))


def jumps_to(loop) -> bool:
    """Whether a ``break``/``continue`` in ``loop``'s body leaves or continues ``loop`` itself
    (not a loop nested in it)."""
    stack = [loop.body]
    while stack:
        node = stack.pop()
        if isinstance(node, (Break, Continue)):
            return True
        if isinstance(node, (For, While)) or node is None:
            continue
        if isinstance(node, SeqStmt):
            stack.extend(node.seq)
        elif isinstance(node, IfThenElse):
            stack.extend((node.then_case, node.else_case))
        elif isinstance(node, (LetStmt, Allocate)):
            stack.append(node.body)
    return False


class LetStmt(Stmt):
    __slots__ = ("var", "value", "body")
    _fields = ("var", "value", "body")

    def __init__(self, var: Var, value, body: Stmt):
        self.var, self.value, self.body = var, convert(value), body


class For(Stmt):
    """A loop ``for loop_var in range(min, min + extent)`` of a given kind.

    ``thread_tag`` names the GPU axis ("blockIdx.x", "threadIdx.x", ...) for
    kind "thread_binding".
    """
    __slots__ = ("loop_var", "min", "extent", "kind", "body", "thread_tag", "annotations")
    _fields = ("loop_var", "min", "extent", "body")
    _attrs = ("kind", "thread_tag", "annotations")

    def __init__(self, loop_var: Var, min, extent, kind: str, body: Stmt,
                 thread_tag: str | None = None, annotations: Mapping | None = None):
        if kind not in FOR_KINDS:
            raise ValueError(f"loop kind must be one of {FOR_KINDS}, got {kind!r}")
        if (kind == "thread_binding") != (thread_tag is not None):
            raise ValueError("thread_tag is required exactly for thread_binding loops")
        self.loop_var = loop_var
        self.min, self.extent = convert(min), convert(extent)
        if dt.lanes(self.min.dtype) != 1 or dt.lanes(self.extent.dtype) != 1:
            raise TypeError("a loop's bounds must be scalars, not vectors")
        self.kind, self.body, self.thread_tag = kind, body, thread_tag
        self.annotations = dict(annotations or {})


class Allocate(Stmt):
    """Scoped allocation of ``buffer`` for ``body`` (lowered form; printed as T.decl_buffer)."""
    __slots__ = ("buffer", "body")
    _fields = ("buffer", "body")

    def __init__(self, buffer: Buffer, body: Stmt):
        self.buffer, self.body = buffer, body


class Block(Stmt):
    """A unit of computation with its iteration domain and accessed regions.

    ``init`` (if any) runs the first time each spatial point is visited, i.e.
    when every reduce iter var is at its domain minimum.
    """
    __slots__ = ("name", "iter_vars", "reads", "writes", "body", "init",
                 "alloc_buffers", "match_buffers", "annotations")
    _fields = ("iter_vars", "reads", "writes", "alloc_buffers", "match_buffers", "init", "body")
    _attrs = ("name", "annotations")

    def __init__(self, name: str, iter_vars: Sequence[IterVar], reads: Sequence[BufferRegion],
                 writes: Sequence[BufferRegion], body: Stmt, init: Stmt | None = None,
                 alloc_buffers: Sequence[Buffer] = (), match_buffers: Sequence[MatchBufferRegion] = (),
                 annotations: Mapping | None = None):
        self.name = name
        self.iter_vars = tuple(iter_vars)
        self.reads, self.writes = tuple(reads), tuple(writes)
        self.body, self.init = body, init
        self.alloc_buffers = tuple(alloc_buffers)
        self.match_buffers = tuple(match_buffers)
        self.annotations = dict(annotations or {})


class BlockRealize(Stmt):
    """An instance of a block: the values bound to its iter vars, and a predicate."""
    __slots__ = ("iter_values", "predicate", "block")
    _fields = ("iter_values", "predicate", "block")

    def __init__(self, iter_values: Sequence, predicate, block: Block):
        if len(iter_values) != len(block.iter_vars):
            raise ValueError(f"block {block.name!r} has {len(block.iter_vars)} iter vars "
                             f"but {len(iter_values)} bindings")
        self.iter_values = tuple(convert(v) for v in iter_values)
        self.predicate = as_bool(predicate if predicate is not None else IntImm(True, "bool"))
        self.block = block


def seq(*stmts: Stmt) -> Stmt:
    """Flatten nested SeqStmts; a single statement is returned as is."""
    flat: list[Stmt] = []
    for s in stmts:
        if s is None:
            continue
        if isinstance(s, SeqStmt):
            flat.extend(s.seq)
        else:
            flat.append(s)
    return flat[0] if len(flat) == 1 else SeqStmt(flat)


def is_true(e: PrimExpr) -> bool:
    return isinstance(e, IntImm) and e.dtype == "bool" and e.value is True
