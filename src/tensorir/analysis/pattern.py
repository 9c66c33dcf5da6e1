"""Pattern kind of a loop program (paper Algorithm 1), read from its loads and stores.

Each block is classified from how its load indices relate to its store
indices; the function's kind is the most general kind of its blocks. No
table keyed by operator names is involved, so hand-written prim_funcs (a
4-bit decode, a custom norm) are classified like generated ones.
"""
from __future__ import annotations

import enum

from .. import expr as E
from .. import stmt as S
from ..dispatch import handles
from ..function import PrimFunc
from ..functor import Visitor, collect


class PatternKind(enum.IntEnum):
    """Ordered from most to least fusible (``max`` combines kinds)."""
    ElementWise = 0
    Broadcast = 1
    Injective = 2
    Reduction = 3
    OutputWiseFusible = 4
    Opaque = 8


class _BlockCollector(Visitor):
    def __init__(self):
        self.realizes: list[S.BlockRealize] = []
        self.stray_stores = 0   # stores outside any non-root block: lowered/opaque code

    @handles(S.BlockRealize)
    def visit_BlockRealize(self, node):
        if node.block.name == "root" and not node.block.iter_vars:
            self.visit(node.block.body)
            return
        self.realizes.append(node)

    @handles(S.BufferStore)
    def visit_BufferStore(self, node):
        self.stray_stores += 1


def _stores(stmt) -> list[S.BufferStore]:
    return collect(stmt, lambda n: isinstance(n, S.BufferStore))


def _loads(node) -> list[E.BufferLoad]:
    return collect(node, lambda n: isinstance(n, E.BufferLoad))


def _is_var_or_const(index) -> bool:
    return isinstance(index, (E.Var, E.IntImm))


def _same_index(a, b) -> bool:
    if isinstance(a, E.Var) or isinstance(b, E.Var):
        return a is b
    if isinstance(a, E.IntImm) and isinstance(b, E.IntImm):
        return a.value == b.value
    return False


def _load_kind(load: E.BufferLoad, store_indices) -> PatternKind:
    """How one load relates to the store (Algorithm 1, lines 10-17)."""
    if len(load.indices) == len(store_indices) and all(
            _same_index(a, b) for a, b in zip(load.indices, store_indices)):
        return PatternKind.ElementWise
    # Broadcast: every load index is a store index var (in order) or a constant.
    if all(_is_var_or_const(i) for i in load.indices):
        positions = []
        for index in load.indices:
            if isinstance(index, E.IntImm):
                continue
            matches = [k for k, s in enumerate(store_indices) if s is index]
            if not matches:
                return PatternKind.Injective
            positions.append(matches[0])
        if positions == sorted(positions) and len(set(positions)) == len(positions):
            return PatternKind.Broadcast
    return PatternKind.Injective


def _same_load(x: E.BufferLoad, y: E.BufferLoad) -> bool:
    return x.buffer is y.buffer and len(x.indices) == len(y.indices) and \
        all(_same_index(a, b) for a, b in zip(x.indices, y.indices))


def _is_multiply_add(store: S.BufferStore) -> bool:
    """``C[s] = C[s] + X * Y`` with X, Y loads (optionally cast): matmul-like (IsFuseMultiplyAdd)."""
    value = store.value
    if not isinstance(value, E.Add):
        return False
    for acc, prod in ((value.a, value.b), (value.b, value.a)):
        if isinstance(acc, E.BufferLoad) and acc.buffer is store.buffer and \
                all(_same_index(a, b) for a, b in zip(acc.indices, store.indices)) and \
                isinstance(prod, E.Mul):
            x, y = [o.value if isinstance(o, E.Cast) else o for o in (prod.a, prod.b)]
            # Two different loads (a sum of squares x*x is a plain reduction, not matmul-like).
            if isinstance(x, E.BufferLoad) and isinstance(y, E.BufferLoad) and not _same_load(x, y):
                return True
    return False


def block_pattern(realize: S.BlockRealize) -> PatternKind:
    block = realize.block
    stores = _stores(block.body)
    if len(stores) != 1 or collect(block.body, lambda n: isinstance(n, (S.BlockRealize, S.IfThenElse, S.While,
                                                                        S.AssertStmt))):
        return PatternKind.Opaque
    store = stores[0]
    if any(iv.kind not in ("S", "R") for iv in block.iter_vars):
        return PatternKind.Opaque  # a scan or opaque iteration: its order matters
    if any(iv.kind == "R" for iv in block.iter_vars):
        return PatternKind.OutputWiseFusible if _is_multiply_add(store) else PatternKind.Reduction
    if not all(isinstance(i, E.Var) for i in store.indices) or \
            len({id(i) for i in store.indices}) != len(store.indices):
        return PatternKind.Opaque  # Algorithm 1 line 4: write indices must be plain and distinct
    has_elementwise = False
    kind = PatternKind.ElementWise
    for load in _loads(store.value):
        k = _load_kind(load, store.indices)
        has_elementwise |= k == PatternKind.ElementWise
        kind = max(kind, k)
    if kind == PatternKind.Broadcast and has_elementwise:
        kind = PatternKind.ElementWise  # C[i, j] = A[i, j] + B[j] (Algorithm 1, lines 19-20)
    return kind


def analyze_pattern(func: PrimFunc) -> PatternKind:
    """The pattern kind of ``func``; a function without blocks (lowered code) is Opaque."""
    if S.has_loop_jumps(func.body):
        return PatternKind.Opaque  # a loop a break/continue leaves: its trip count is data's
    collector = _BlockCollector()
    collector.visit(func.body)
    if collector.stray_stores or not collector.realizes:
        return PatternKind.Opaque
    return max(block_pattern(r) for r in collector.realizes)
