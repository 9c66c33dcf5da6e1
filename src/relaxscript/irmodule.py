"""IRModule: the unit of compilation, holding graph-level Functions and PrimFuncs by name."""
from __future__ import annotations

from typing import Iterator, Mapping

from tensorir.function import PrimFunc
from tensorir.node import Node

from .expr import Function, GlobalVar

# The module attribute holding TVM's ``global_infos`` (I.module_global_infos): kept in
# ``attrs`` so that every pass, which rebuilds modules from ``mod.attrs``, carries it along.
GLOBAL_INFOS = "global_infos"


class IRModule(Node):
    """An immutable mapping ``name -> Function | PrimFunc`` plus module attrs.

    Functions refer to each other through ``GlobalVar(name)``. Use
    ``with_function`` / ``without_function`` to derive new modules.
    """
    __slots__ = ("functions", "attrs")
    _fields = ("functions",)
    _attrs = ("attrs",)

    def __init__(self, functions: Mapping[str, Function | PrimFunc] | None = None,
                 attrs: Mapping | None = None):
        self.functions = dict(functions or {})
        self.attrs = dict(attrs or {})

    def __getitem__(self, name: str | GlobalVar):
        key = name.name_hint if isinstance(name, GlobalVar) else name
        try:
            return self.functions[key]
        except KeyError:
            raise KeyError(f"module has no function {key!r}; it has {sorted(self.functions)}") from None

    def __contains__(self, name) -> bool:
        key = name.name_hint if isinstance(name, GlobalVar) else name
        return key in self.functions

    def __iter__(self) -> Iterator[str]:
        return iter(self.functions)

    def __len__(self) -> int:
        return len(self.functions)

    def items(self):
        return self.functions.items()

    def get_global_var(self, name: str) -> GlobalVar:
        from .struct_info_of import signature_of  # late: avoids a cycle with deduction
        if name not in self.functions:
            raise KeyError(f"module has no function {name!r}")
        return GlobalVar(name, signature_of(self.functions[name]))

    def get_global_vars(self) -> list[GlobalVar]:
        """One GlobalVar per function, in the module's order (TVM's ``mod.get_global_vars()``)."""
        return [self.get_global_var(name) for name in self.functions]

    @property
    def global_infos(self) -> dict:
        """``I.module_global_infos`` of the module: name -> tuple of infos (e.g. VDevices)."""
        return dict(self.attrs.get(GLOBAL_INFOS, {}))

    def update_func(self, name: str | GlobalVar, func) -> "IRModule":
        """The module with the existing function ``name`` replaced by ``func`` (TVM's
        ``mod.update_func(gv, func)``; a new module, since modules are immutable here)."""
        key = name.name_hint if isinstance(name, GlobalVar) else name
        if key not in self.functions:
            raise KeyError(f"module has no function {key!r} to update; it has {sorted(self.functions)} "
                           "(use with_function to add one)")
        if not isinstance(func, (Function, PrimFunc)):
            raise TypeError(f"update_func takes a Function or PrimFunc, got {type(func).__name__}")
        return self.with_function(key, func)

    def with_function(self, name: str, func) -> "IRModule":
        functions = dict(self.functions)
        functions[name] = func
        return IRModule(functions, self.attrs)

    def without_function(self, name: str) -> "IRModule":
        functions = {k: v for k, v in self.functions.items() if k != name}
        return IRModule(functions, self.attrs)

    @property
    def relax_functions(self) -> dict[str, Function]:
        return {k: v for k, v in self.functions.items() if isinstance(v, Function)}

    @property
    def prim_funcs(self) -> dict[str, PrimFunc]:
        return {k: v for k, v in self.functions.items() if isinstance(v, PrimFunc)}

    def script(self) -> str:
        from .script.printer import print_module
        return print_module(self)

    def show(self) -> None:
        print(self.script())
