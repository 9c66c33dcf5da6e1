"""The storage pool of memory planning: ``RequestReuseWithSymShape`` of Algorithm 3.

A request is a size in bytes, a PrimExpr that may be symbolic (``2 * n * 4``).
A free storage is reused when the analyzer proves its size equal to the
request (preferred) or at least the request; dtypes do not matter since a
storage is bytes. Requests with a constant size (a static shape, or a
symbolic one evaluated at its upper bound) may also grow the largest free
constant-size storage instead of allocating a new one: its final size is
only emitted after planning, so every tensor placed in it still fits.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from tensorir import expr as E


@dataclass(eq=False)
class StorageToken:
    """One planned storage: its size in bytes and the tensors placed in it."""
    index: int                 # creation order, for names
    size: E.PrimExpr           # bytes; constant for static storages
    first_use: int             # binding index of the first tensor placed in it
    tensors: list = field(default_factory=list)

    @property
    def is_constant(self) -> bool:
        return isinstance(self.size, E.IntImm)


class StoragePool:
    def __init__(self, analyzer):
        self.analyzer = analyzer
        self.free: list[StorageToken] = []
        self.tokens: list[StorageToken] = []

    def request(self, size: E.PrimExpr, at: int) -> StorageToken:
        """A storage of at least ``size`` bytes for a tensor allocated at binding ``at``."""
        token = self._reuse(size)
        if token is None:
            token = StorageToken(len(self.tokens), size, at)
            self.tokens.append(token)
        else:
            self.free.remove(token)
        return token

    def release(self, token: StorageToken) -> None:
        """The last tensor placed in ``token`` is dead: the storage may be reused."""
        if token not in self.free:
            self.free.append(token)

    def _reuse(self, size: E.PrimExpr) -> StorageToken | None:
        prove = self.analyzer
        for token in self.free:
            if prove.can_prove_equal(token.size, size):
                return token
        if isinstance(size, E.IntImm):
            return self._reuse_constant(size.value)
        for token in self.free:
            if prove.can_prove_less_equal(size, token.size):
                return token
        return None

    def _reuse_constant(self, need: int) -> StorageToken | None:
        constant = [t for t in self.free if t.is_constant]
        fitting = [t for t in constant if t.size.value >= need]
        if fitting:
            return min(fitting, key=lambda t: t.size.value)
        if constant:
            largest = max(constant, key=lambda t: t.size.value)
            largest.size = E.IntImm(need)
            return largest
        for token in self.free:
            if self.analyzer.can_prove_less_equal(need, token.size):
                return token
        return None


__all__ = ["StoragePool", "StorageToken"]
