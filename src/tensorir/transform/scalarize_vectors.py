"""scalarize_vectors: vector code (``T.Ramp``, ``T.Broadcast``, vector dtypes) as loops over lanes.

The code generators write scalars: a store of ``n`` lanes becomes a loop of ``n`` scalar stores,
lane ``k`` of each operand being ``base + stride * k`` for a ramp, the value for a broadcast, and
the same operation on lane ``k`` of the operands otherwise (the operations are lane-wise).

A vector store reads all its lanes before it writes any. Where the value reads the buffer being
stored to, the lanes are first computed into a scratch buffer and stored by a second loop, so that
``A[T.Ramp(1, 1, 4)] = A[T.Ramp(0, 1, 4)]`` shifts four elements rather than repeating one.
A vector let binds a scratch buffer of its lanes.
"""
from __future__ import annotations

from .. import dtype as dt
from .. import expr as E
from ..buffer import Buffer
from ..dispatch import handles
from ..errors import IRError
from ..function import PrimFunc
from ..functor import Mutator, collect
from ..stmt import Allocate, BufferStore, Evaluate, For, LetStmt, seq


def _has_vectors(node) -> bool:
    return bool(collect(node, lambda n: isinstance(n, E.PrimExpr) and E.is_vector(n)))


class _Scalarizer(Mutator):
    def __init__(self, func_name: str):
        super().__init__()
        self.func_name = func_name
        self.lets: dict = {}      # vector Var -> the scratch buffer holding its lanes
        self.count = 0

    def fresh(self, hint: str) -> str:
        self.count += 1
        return f"{hint}{self.count}"

    def lane(self, e, k: E.Var):
        """Lane ``k`` of ``e`` (a scalar is the same in every lane)."""
        if not E.is_vector(e):
            return e
        if isinstance(e, E.Ramp):
            step = E.cast(e.base.dtype, k)
            return E.add(e.base, step if E.is_const_int(e.stride, 1) else E.mul(e.stride, step))
        if isinstance(e, E.Broadcast):
            return e.value
        if isinstance(e, E.Var):
            if e not in self.lets:
                raise IRError(f"{self.func_name!r}: vector variable {e.name!r} is used but not bound")
            return E.BufferLoad(self.lets[e], [k])
        if isinstance(e, E.BinaryOp):
            return type(e)(self.lane(e.a, k), self.lane(e.b, k))
        if isinstance(e, E.Not):
            return E.Not(self.lane(e.a, k))
        if isinstance(e, E.Select):
            return E.Select(self.lane(e.condition, k), self.lane(e.true_value, k), self.lane(e.false_value, k))
        if isinstance(e, E.Cast):
            return E.Cast(dt.element(e.dtype), self.lane(e.value, k))
        if isinstance(e, E.Call):
            return E.Call(dt.element(e.dtype), e.op, [self.lane(a, k) for a in e.args])
        if isinstance(e, E.BufferLoad):
            return E.BufferLoad(e.buffer, [self.lane(i, k) for i in e.indices])
        raise IRError(f"{self.func_name!r}: cannot split the vector expression {type(e).__name__} into lanes")

    def lane_loop(self, lanes: int, make) -> For:
        k = E.Var(self.fresh("lane"), "int64")
        return For(k, 0, lanes, "serial", make(k))

    @handles(BufferStore)
    def visit_BufferStore(self, node: BufferStore):
        lanes = dt.lanes(node.value.dtype)
        if lanes == 1:
            return node   # a scalar store's value and indices are scalars throughout
        target = node.buffer.storage
        reads_target = any(load.buffer.storage is target for load in collect(
            node.value, lambda n: isinstance(n, E.BufferLoad)))

        def store(value_of):
            return self.lane_loop(lanes, lambda k: BufferStore(
                node.buffer, value_of(k), [self.lane(i, k) for i in node.indices]))
        if not reads_target:
            return store(lambda k: self.lane(node.value, k))
        scratch = Buffer(self.fresh("lanes"), [lanes], node.buffer.dtype, scope="local")
        fill = self.lane_loop(lanes, lambda k: BufferStore(scratch, self.lane(node.value, k), [k]))
        return Allocate(scratch, seq(fill, store(lambda k: E.BufferLoad(scratch, [k]))))

    @handles(Evaluate)
    def visit_Evaluate(self, node: Evaluate):
        lanes = dt.lanes(node.value.dtype)
        if lanes == 1:
            return node
        return self.lane_loop(lanes, lambda k: Evaluate(self.lane(node.value, k)))

    @handles(LetStmt)
    def visit_LetStmt(self, node: LetStmt):
        lanes = dt.lanes(node.var.dtype)
        if lanes == 1:
            return self.generic_visit(node)
        scratch = Buffer(self.fresh(node.var.name + "_lanes"), [lanes], dt.element(node.var.dtype), scope="local")
        fill = self.lane_loop(lanes, lambda k: BufferStore(scratch, self.lane(node.value, k), [k]))
        self.lets[node.var] = scratch
        body = self.visit(node.body)
        return Allocate(scratch, seq(fill, body))

    @handles(Buffer)
    def visit_Buffer(self, node: Buffer):
        return node


def scalarize_vectors(func: PrimFunc) -> PrimFunc:
    """``func`` with every vector operation written as a loop over its lanes (unchanged when it
    has none)."""
    if not _has_vectors(func.body):
        return func
    return func.with_body(_Scalarizer(func.name).visit(func.body))
