"""The always-correct way out for a cache that does not fit one block: read the source instead.

A "shared"/"local" buffer filled by plain copies ``cache[idx] = src[idx]``
of a global buffer the launch does not write (what ``cache_read`` makes)
holds exactly what ``src`` holds where it was filled. When compaction finds
no constant per-block size for it (a tile read at two unrelated bases,
e.g. rotary tables indexed by both the query and the key tile), its loads
read ``src`` directly and the copies go: slower, never wrong.
"""
from __future__ import annotations

from tensorir import expr as E
from tensorir.dispatch import handles
from tensorir.functor import Mutator, collect
from tensorir.stmt import BufferStore, Evaluate, For, IfThenElse, LetStmt, SeqStmt, Stmt, seq
from tensorir.structural import structural_equal


def copy_source(buf, stmt: Stmt):
    """The global buffer ``buf`` is a plain copy of in ``stmt``, or None."""
    stores = collect(stmt, lambda n: isinstance(n, BufferStore) and n.buffer is buf)
    if not stores:
        return None
    source = None
    for store in stores:
        value = store.value
        if not isinstance(value, E.BufferLoad) or value.buffer.storage.scope != "global" or \
                len(value.indices) != len(store.indices) or \
                not all(structural_equal(a, b, map_free_vars=False) for a, b in zip(value.indices, store.indices)):
            return None
        if source is not None and value.buffer is not source:
            return None
        source = value.buffer
    if collect(stmt, lambda n: isinstance(n, BufferStore) and n.buffer.storage is source.storage):
        return None
    return source


class _ReadSource(Mutator):
    def __init__(self, cache, source):
        super().__init__()
        self.cache, self.source = cache, source

    @handles(E.BufferLoad)
    def visit_BufferLoad(self, node: E.BufferLoad):
        node = self.generic_visit(node)
        return E.BufferLoad(self.source, node.indices) if node.buffer is self.cache else node

    @handles(BufferStore)
    def visit_BufferStore(self, node: BufferStore):
        if node.buffer is self.cache:
            return Evaluate(0)
        return self.generic_visit(node)

    @handles(For, IfThenElse, LetStmt, SeqStmt)
    def visit_control(self, node):
        node = self.generic_visit(node)
        return _drop_empty(node)


def _is_empty(stmt) -> bool:
    return isinstance(stmt, Evaluate) and isinstance(stmt.value, (E.IntImm, E.FloatImm))


def _drop_empty(node):
    if isinstance(node, SeqStmt):
        kept = [s for s in node.seq if not _is_empty(s)]
        return seq(*kept) if kept else Evaluate(0)
    if isinstance(node, (For, LetStmt)) and _is_empty(node.body):
        return Evaluate(0)
    if isinstance(node, IfThenElse) and _is_empty(node.then_case) and \
            (node.else_case is None or _is_empty(node.else_case)):
        return Evaluate(0)
    return node


def read_source_instead(cache, source, stmt: Stmt) -> Stmt:
    return _ReadSource(cache, source).visit(stmt)
