"""The ``I`` namespace (TVMScript's ``from tvm.script import ir as I``): module-level forms.

``@I.ir_module`` decorates a module class (the same as ``@R.ir_module``);
``I.module_attrs({...})`` and ``I.module_global_infos({...})`` are statements
of the class body, read by the parser and never executed. ``I.vdevice(...)``
builds the virtual-device record that global infos list.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

SCRIPT_ONLY = ("module_attrs", "module_global_infos")


@dataclass(frozen=True)
class VDevice:
    """A virtual device as TVM's ``I.vdevice(target, vdevice_id, memory_scope)`` writes it.
    relaxscript keeps it for round trips; it does not place tensors by it."""
    target: Any = None
    vdevice_id: int = 0
    memory_scope: str = "global"


def vdevice(target=None, vdevice_id: int = 0, memory_scope: str = "global") -> VDevice:
    if not isinstance(vdevice_id, int) or isinstance(vdevice_id, bool):
        raise TypeError(f"I.vdevice: vdevice_id must be an int, got {vdevice_id!r}")
    if not isinstance(memory_scope, str):
        raise TypeError(f"I.vdevice: memory_scope must be a string, got {memory_scope!r}")
    return VDevice(target, vdevice_id, memory_scope)


class _ClassBodyStatement:
    """``I.module_attrs`` / ``I.module_global_infos``: Python runs them while it creates the
    decorated class, before the decorator parses the class's source; they do nothing then."""

    def __init__(self, name: str):
        self.name = name

    def __call__(self, infos, *rest, **kwargs):
        if rest or kwargs or not isinstance(infos, dict):
            raise TypeError(f"I.{self.name} takes one dict")
        return None

    def __repr__(self) -> str:
        return f"I.{self.name}"


class _IRNamespace:
    """The object imported as ``I``."""
    vdevice = staticmethod(vdevice)

    def __init__(self):
        for name in SCRIPT_ONLY:
            setattr(self, name, _ClassBodyStatement(name))

    @staticmethod
    def ir_module(cls=None, **options):
        from .parser import ir_module
        return ir_module(cls, **options)

    def __repr__(self) -> str:
        return "I"


I = _IRNamespace()

__all__ = ["I", "VDevice", "vdevice"]
