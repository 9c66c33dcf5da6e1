"""Names given per object (by identity), unique among themselves and the taken ones.

The TIR and Relax script printers, the C-family emitters and the fused-kernel builder each keep
such a table; they differ only in how a hint becomes a valid base name."""
from __future__ import annotations


def first_free(base: str, used, separator: str = "_") -> str:
    """``base`` if it is not in ``used``, else the first of ``base<separator>1``, ``…2``, … that is not."""
    name, k = base, 0
    while name in used:
        k += 1
        name = f"{base}{separator}{k}"
    return name


class IdentityNames:
    """``by_id``: the name of each object named so far; ``used``: every name given or taken.
    Named objects are kept alive, so that their ids stay theirs."""

    def __init__(self, taken=()):
        self.by_id: dict[int, str] = {}
        self.used: set[str] = set(taken)
        self._keep_alive: list = []

    def lookup(self, obj) -> str | None:
        return self.by_id.get(id(obj))

    def pin(self, obj, name: str) -> None:
        """Name ``obj`` exactly ``name`` (one the caller reserved in ``used`` for it)."""
        self.by_id[id(obj)] = name
        self._keep_alive.append(obj)

    def assign(self, obj, base: str, separator: str = "_") -> str:
        """A new name for ``obj``: ``base``, suffixed until it is free."""
        name = first_free(base, self.used, separator)
        self.used.add(name)
        self.by_id[id(obj)] = name
        self._keep_alive.append(obj)
        return name
