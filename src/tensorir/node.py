"""Base class shared by every IR node of both levels.

Each node lists its child fields in ``_fields``; generic visitors, mutators,
structural equality and hashing walk those fields, so a new node type needs
no code in those places. Nodes are immutable by convention: passes build new
nodes (``node.replace(field=value)``) and never assign into existing ones.
"""
from __future__ import annotations


class Node:
    __slots__ = ("span",)
    _fields: tuple[str, ...] = ()
    # Fields compared by value but not walked as children (names, kinds, attrs).
    _attrs: tuple[str, ...] = ()

    def replace(self, **changes):
        """Return a shallow copy with some fields replaced."""
        new = object.__new__(type(self))
        for cls in type(self).__mro__:
            for slot in getattr(cls, "__slots__", ()):
                if hasattr(self, slot):
                    object.__setattr__(new, slot, getattr(self, slot))
        for key, value in changes.items():
            object.__setattr__(new, key, value)
        return new

    def same_as(self, other) -> bool:
        return self is other

    def __repr__(self) -> str:
        from .script.printer import format_node  # late: printer imports IR
        try:
            return format_node(self)
        except Exception:  # noqa: BLE001 - repr must never fail (half-built nodes)
            parts = ", ".join(f"{f}={getattr(self, f, None)!r}" for f in self._attrs + self._fields)
            return f"{type(self).__name__}({parts})"
