"""IRModule: the unit of compilation, holding graph-level Functions and PrimFuncs by name."""
from __future__ import annotations

from typing import Iterator, Mapping

from tensorir.function import PrimFunc
from tensorir.node import Node

from .expr import Function, GlobalVar


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
