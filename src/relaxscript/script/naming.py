"""Unique, valid Python names for the variables of a printed function."""
from __future__ import annotations

import keyword
import re

# Names the printed text needs for itself.
RESERVED = frozenset({"R", "T", "cls", "metadata", "True", "False", "None"})


def sanitize(hint: str) -> str:
    name = re.sub(r"[^A-Za-z0-9_]", "_", hint or "") or "v"  # ASCII: Python folds some Unicode names
    if name[0].isdigit():
        name = "v" + name
    if keyword.iskeyword(name) or name in RESERVED:
        name += "_"
    return name


class Namer:
    """Assigns each node (by identity) one name, unique within the namer.

    Clashes are resolved deterministically in first-use order: the first
    ``lv`` keeps its name, later ones become ``lv_1``, ``lv_2``, ...
    """

    def __init__(self, taken=()):
        self.names: dict[int, str] = {}
        self.used: set[str] = set(taken)
        self._keep_alive: list = []  # ids stay valid while the namer lives

    def name(self, node, hint: str) -> str:
        found = self.names.get(id(node))
        if found is not None:
            return found
        base = sanitize(hint)
        name, k = base, 0
        sep = "" if base.endswith("_") else "_"
        while name in self.used:
            k += 1
            name = f"{base}{sep}{k}"
        self.used.add(name)
        self.names[id(node)] = name
        self._keep_alive.append(node)
        return name

    def get(self, node) -> str | None:
        return self.names.get(id(node))
