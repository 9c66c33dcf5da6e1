"""Accumulations into one element: what loop fusion and the C emitter both look for.

``for k: B[idx] = B[idx] op f(k)`` with ``op`` one of + * max min, ``idx`` free
of ``k`` and ``f`` not reading ``B`` accumulates into one element. The C
emitter keeps that element in a scalar under ``#pragma omp simd
reduction(op:acc)`` (backends/c/accumulate.py); loop fusion
(transform/fuse_loops.py) lets a fused loop hold one such statement.

A vectorized loop may also hold other statements before or after the
accumulation, as long as none of them touches ``B``.
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import expr as E
from .. import stmt as S
from ..functor import collect
from ..structural import structural_equal

ACCUMULATING_OPS = (E.Add, E.Mul, E.Max, E.Min)


@dataclass
class Accumulation:
    store: S.BufferStore
    op: type           # E.Add / E.Mul / E.Max / E.Min
    operand: E.PrimExpr


def _touches(node, storage) -> bool:
    return bool(collect(node, lambda n: isinstance(n, (S.BufferStore, E.BufferLoad))
                        and n.buffer.storage is storage))


def accumulation_of(store, loop_var) -> Accumulation | None:
    """``store`` as an accumulation over ``loop_var``, or None."""
    if not isinstance(store, S.BufferStore):
        return None
    value = store.value
    if not isinstance(value, ACCUMULATING_OPS) or value.dtype != store.buffer.dtype:
        return None
    if any(collect(i, lambda n: n is loop_var) for i in store.indices):
        return None
    for acc, operand in ((value.a, value.b), (value.b, value.a)):
        if isinstance(acc, E.BufferLoad) and acc.buffer is store.buffer and \
                len(acc.indices) == len(store.indices) and \
                all(x is y or structural_equal(x, y, map_free_vars=False)
                    for x, y in zip(acc.indices, store.indices)) and \
                not _touches(operand, store.buffer.storage):
            return Accumulation(store, type(value), operand)
    return None


def body_statements(loop: S.For) -> tuple:
    return loop.body.seq if isinstance(loop.body, S.SeqStmt) else (loop.body,)


def match_accumulation(loop: S.For) -> Accumulation | None:
    """The accumulation ``loop`` performs: its whole body, or (in a vectorized loop) the one
    statement of its body that accumulates into an element no other statement touches."""
    if loop.kind not in ("serial", "vectorized"):
        return None
    if not isinstance(loop.body, S.SeqStmt):
        return accumulation_of(loop.body, loop.loop_var)
    if loop.kind != "vectorized":
        return None
    found = [acc for stmt in loop.body.seq for acc in [accumulation_of(stmt, loop.loop_var)] if acc is not None]
    if len(found) != 1:
        return None
    acc = found[0]
    if any(_touches(other, acc.store.buffer.storage) for other in loop.body.seq if other is not acc.store):
        return None
    return acc
