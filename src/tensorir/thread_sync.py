"""Operations between the threads of a GPU block, as TVM's lowering passes print them.

* ``T.tvm_storage_sync("shared")`` (``"warp"``, ``"global"``, ``"shared.dyn"``): a barrier.
  Every thread of the block reaches it before any goes on; memory written before it is seen
  after it. A statement (``Evaluate`` of a ``Call``).
* ``T.tvm_warp_shuffle(mask, value, lane, width, warp_size)`` and ``..._up`` / ``..._down``
  (``lane`` is then a delta): ``value`` as another lane of the warp holds it, CUDA's
  ``__shfl_sync`` family. ``T.tvm_warp_activemask()``: the lanes of the warp executing it.
  Expressions (``Call``).
* ``T.tvm_thread_allreduce(n, sources.., condition, results.., threads..)`` under
  ``T.attr(T.comm_reducer(lambda x.., y..: ..., identities), "reduce_scope", ..)``: every
  thread of a group (the threads that differ only in ``threads``) contributes its sources
  (the identities where ``condition`` is false) and every thread of the group gets the
  combination in its result buffers. A statement of its own (``ThreadAllreduce``) that keeps
  its reducer; it prints back inside its ``reduce_scope`` attribute.

The loop-level interpreter runs a block that holds any of these with its threads taking
turns between them (``interpreter/block_threads.py``); the GPU targets lower them
(``backends/gpu``).
"""
from __future__ import annotations

from typing import Sequence

from . import dtype as dt
from . import expr as E
from .node import Node
from .stmt import Stmt

STORAGE_SYNC = "tvm_storage_sync"
SHUFFLE = "tvm_warp_shuffle"
SHUFFLE_UP = "tvm_warp_shuffle_up"
SHUFFLE_DOWN = "tvm_warp_shuffle_down"
ACTIVEMASK = "tvm_warp_activemask"
SHUFFLES = (SHUFFLE, SHUFFLE_UP, SHUFFLE_DOWN)
ALLREDUCE = "tvm_thread_allreduce"
SYNC_SCOPES = ("shared", "shared.dyn", "warp", "global")
WARP_SIZE = 32   # the lanes of a warp (CUDA's; the 5th argument of every shuffle must say so)


def storage_sync(scope: str) -> E.Call:
    if scope not in SYNC_SCOPES:
        raise ValueError(f"T.{STORAGE_SYNC} takes one of {', '.join(map(repr, SYNC_SCOPES))}, got {scope!r}")
    return E.Call("int32", STORAGE_SYNC, [E.StringImm(scope)])


def warp_shuffle(op: str, mask, value, lane, width, warp_size) -> E.Call:
    if op not in SHUFFLES:
        raise ValueError(f"unknown warp shuffle T.{op}")
    mask, value, lane, width, warp_size = (E.convert(a) for a in (mask, value, lane, width, warp_size))
    for what, arg in (("mask", mask), ("lane" if op == SHUFFLE else "delta", lane), ("width", width),
                      ("warp size", warp_size)):
        if not dt.is_int(arg.dtype) or dt.lanes(arg.dtype) != 1:
            raise ValueError(f"T.{op}: the {what} must be a scalar integer, got {arg.dtype}")
    if dt.lanes(value.dtype) != 1 or dt.is_bool(value.dtype):
        raise ValueError(f"T.{op} moves a scalar number, got {value.dtype}")
    return E.Call(value.dtype, op, [mask, value, lane, width, warp_size])


def activemask() -> E.Call:
    return E.Call("uint32", ACTIVEMASK, [])


def describe(node) -> str:
    """``T.<name>`` of a synchronizing node and, when the parser recorded it, where it was written."""
    name = ALLREDUCE if isinstance(node, ThreadAllreduce) else node.op
    span = getattr(node, "span", None)
    return f"T.{name}" + (f" at {span}" if isinstance(span, str) else "")


def is_sync_call(node) -> bool:
    return isinstance(node, E.Call) and (node.op == STORAGE_SYNC or node.op in SHUFFLES or node.op == ACTIVEMASK)


def innermost_first(node) -> list:
    """The synchronizing calls in ``node``, each after those in its arguments."""
    from .functor import collect
    out: list = []

    def visit(call):
        if any(c is call for c in out):
            return
        for arg in call.args:
            for inner in collect(arg, is_sync_call):
                visit(inner)
        out.append(call)

    for call in collect(node, is_sync_call):
        visit(call)
    return out


class CommReducer(Node):
    """``T.comm_reducer(lambda x0.., y0..: (results..), [identities..])``: combines two tuples
    of ``len(identities)`` values. ``lhs``/``rhs`` are the lambda's parameters (Vars of the
    identities' dtypes), bound only inside ``results``."""
    __slots__ = ("lhs", "rhs", "results", "identities")
    _fields = ("lhs", "rhs", "results", "identities")

    def __init__(self, lhs: Sequence, rhs: Sequence, results: Sequence, identities: Sequence):
        self.lhs, self.rhs = tuple(lhs), tuple(rhs)
        self.results = tuple(E.convert(r) for r in results)
        self.identities = tuple(E.convert(i) for i in identities)
        n = len(self.identities)
        if not n or len(self.lhs) != n or len(self.rhs) != n or len(self.results) != n:
            raise ValueError(f"T.comm_reducer: {n} identities need a lambda of {2 * n} parameters "
                             f"and {n} results")
        for i, (x, y, r, ident) in enumerate(zip(self.lhs, self.rhs, self.results, self.identities)):
            if not (x.dtype == y.dtype == ident.dtype):
                raise ValueError(f"T.comm_reducer: value {i} mixes dtypes {x.dtype}, {y.dtype}, {ident.dtype}")
            if r.dtype != ident.dtype:
                raise ValueError(f"T.comm_reducer: result {i} is {r.dtype}, its identity {ident.dtype}")

    def combine(self, a: Sequence, b: Sequence) -> tuple:
        """The results with ``a`` for the lhs and ``b`` for the rhs (expressions)."""
        from .functor import substitute
        mapping = dict(zip(self.lhs, a))
        mapping.update(zip(self.rhs, b))
        return tuple(substitute(r, mapping) for r in self.results)


class ThreadAllreduce(Stmt):
    """``T.tvm_thread_allreduce`` with its reducer (see the module doc). ``results`` are
    ``BufferLoad``s naming the elements each thread's combination is written to."""
    __slots__ = ("reducer", "sources", "condition", "results", "threads")
    _fields = ("reducer", "sources", "condition", "results", "threads")

    def __init__(self, reducer: CommReducer, sources: Sequence, condition, results: Sequence,
                 threads: Sequence):
        self.reducer = reducer
        self.sources = tuple(E.convert(s) for s in sources)
        self.condition = E.as_scalar_bool(condition, f"T.{ALLREDUCE}'s condition")
        self.results = tuple(results)
        self.threads = tuple(threads)
        n = len(reducer.identities)
        if len(self.sources) != n or len(self.results) != n:
            raise ValueError(f"T.{ALLREDUCE}: a reducer of {n} values needs {n} sources and {n} results")
        for i, (s, r, ident) in enumerate(zip(self.sources, self.results, reducer.identities)):
            if not isinstance(r, E.BufferLoad):
                raise ValueError(f"T.{ALLREDUCE}: result {i} must be a buffer element, such as red[0]")
            if s.dtype != ident.dtype or r.buffer.dtype != ident.dtype:
                raise ValueError(f"T.{ALLREDUCE}: value {i} is {s.dtype} into a {r.buffer.dtype} buffer, "
                                 f"its reducer's identity {ident.dtype}")
        if not self.threads or not all(isinstance(t, E.Var) for t in self.threads):
            raise ValueError(f"T.{ALLREDUCE} reduces over one or more thread index variables")
