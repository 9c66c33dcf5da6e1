"""Recognise reduction loops the C emitter can vectorize.

``for k: B[idx] = B[idx] op f(k)`` with ``idx`` free of ``k`` and ``f`` not
reading ``B`` accumulates into one element. Written as is, gcc will not
vectorize it (it must not reassociate float additions on its own), so the
emitter keeps the element in a scalar and emits
``#pragma omp simd reduction(op:acc)``, which allows partial sums per lane
(the same reassociation ``rfactor`` makes explicitly).

A vectorized loop may also hold other statements before or after the
accumulation (tensorir/transform/fuse_loops.py puts a stage and the
reduction that reads it in one loop); none of them may touch ``B``.
"""
from __future__ import annotations

from dataclasses import dataclass

from tensorir import expr as E
from tensorir import stmt as S
from tensorir.functor import collect

from .hoist import expr_key

# IR combiner -> OpenMP reduction identifier
_OMP_OPS = {E.Add: "+", E.Mul: "*", E.Max: "max", E.Min: "min"}


@dataclass
class Accumulation:
    store: S.BufferStore
    op: type           # E.Add / E.Mul / E.Max / E.Min
    operand: E.PrimExpr

    @property
    def omp_op(self) -> str:
        return _OMP_OPS[self.op]


def _same_indices(a, b) -> bool:
    return len(a) == len(b) and all(x is y or expr_key(x) == expr_key(y) for x, y in zip(a, b))


def _accumulation(loop: S.For, store) -> Accumulation | None:
    if not isinstance(store, S.BufferStore):
        return None
    value = store.value
    if type(value) not in _OMP_OPS or value.dtype != store.buffer.dtype:
        return None
    if any(collect(i, lambda n: n is loop.loop_var) for i in store.indices):
        return None
    for acc, operand in ((value.a, value.b), (value.b, value.a)):
        if isinstance(acc, E.BufferLoad) and acc.buffer is store.buffer and \
                _same_indices(acc.indices, store.indices) and \
                not collect(operand, lambda n: isinstance(n, E.BufferLoad) and n.buffer is store.buffer):
            return Accumulation(store, type(value), operand)
    return None


def _touches(stmt, storage) -> bool:
    return bool(collect(stmt, lambda n: isinstance(n, (S.BufferStore, E.BufferLoad))
                        and n.buffer.storage is storage))


def match_accumulation(loop: S.For) -> Accumulation | None:
    """The accumulation ``loop`` performs: its whole body, or (in a vectorized loop) the one
    statement of its body that accumulates into an element no other statement touches."""
    if loop.kind not in ("serial", "vectorized"):
        return None
    if not isinstance(loop.body, S.SeqStmt):
        return _accumulation(loop, loop.body)
    if loop.kind != "vectorized":
        return None
    found = [(stmt, acc) for stmt in loop.body.seq for acc in [_accumulation(loop, stmt)] if acc is not None]
    if len(found) != 1:
        return None
    stmt, acc = found[0]
    storage = acc.store.buffer.storage
    if any(_touches(other, storage) for other in loop.body.seq if other is not stmt):
        return None
    return acc
