"""Lazy public names for a package: each name's submodule is imported on first use,
so importing a package stays cheap and its submodules stay independent."""
from __future__ import annotations

import importlib
from typing import Callable


def lazy_exports(package: str, table: dict[str, str], namespace: dict) -> tuple[Callable, Callable]:
    """``(__getattr__, __dir__)`` for ``package``: ``table`` maps a public name to the
    module defining it (a name equal to the module's last component is the module)."""

    def __getattr__(name: str):
        module_name = table.get(name)
        if module_name is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(module_name)
        value = module if module_name.endswith("." + name) else getattr(module, name)
        namespace[name] = value
        return value

    def __dir__():
        return sorted(set(namespace) | set(table))

    return __getattr__, __dir__
