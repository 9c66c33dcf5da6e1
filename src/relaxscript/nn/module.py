"""``Module`` and ``Parameter``: the PyTorch-style containers of ``relaxscript.nn``.

A Module registers its Parameters and sub-Modules when they are assigned as
attributes (as ``torch.nn.Module`` does), so ``named_parameters()`` lists
every weight under a dotted name (``layers.0.attn.q_proj.weight``). A
Parameter is a declaration (shape, dtype), not data: ``export`` turns each
into a function parameter of the exported IRModule, and while a method is
being exported, reading ``self.weight`` gives that parameter's graph-level
variable, so ``forward`` is written with ``R``-level ops on variables.
"""
from __future__ import annotations

from typing import Iterator

from tensorir import dtype as dt

from ..expr import Var


class Parameter:
    """A weight of a Module: its shape (ints or symbolic dim names) and dtype."""

    def __init__(self, shape, dtype: str = "float32"):
        self.shape = tuple(shape)
        for d in self.shape:
            if not (isinstance(d, str) or (isinstance(d, int) and not isinstance(d, bool) and d >= 0)):
                raise TypeError(f"Parameter: a dimension is a non-negative int or a symbolic name, "
                                f"got {d!r}")
        self.dtype = dt.normalize(dtype)

    def __repr__(self) -> str:
        return f"Parameter({self.shape!r}, {self.dtype!r})"


class Module:
    """Base class of models: assign Parameters and Modules as attributes, write ``forward``."""

    def __init__(self):
        object.__setattr__(self, "_parameters", {})
        object.__setattr__(self, "_modules", {})
        object.__setattr__(self, "_bound", None)   # Parameter -> Var while exporting

    def __setattr__(self, name: str, value) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"{type(self).__name__}.__init__ must call super().__init__() "
                                 f"before assigning {name!r}")
        self._parameters.pop(name, None)
        self._modules.pop(name, None)
        if isinstance(value, Parameter):
            self._parameters[name] = value
        elif isinstance(value, Module):
            self._modules[name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name: str):
        # only reached for names that are not ordinary attributes
        params = self.__dict__.get("_parameters", {})
        if name in params:
            param = params[name]
            bound = self.__dict__.get("_bound")
            return bound[param] if bound is not None else param
        modules = self.__dict__.get("_modules", {})
        if name in modules:
            return modules[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def named_parameters(self, prefix: str = "") -> Iterator[tuple[str, Parameter]]:
        """(dotted name, Parameter) of this module and its sub-modules, in registration order;
        a Parameter shared by two modules is listed once."""
        seen: set[int] = set()
        for name, param in self._named_parameters(prefix):
            if id(param) not in seen:
                seen.add(id(param))
                yield name, param

    def _named_parameters(self, prefix: str):
        for name, param in self._parameters.items():
            yield prefix + name, param
        for name, module in self._modules.items():
            yield from module._named_parameters(f"{prefix}{name}.")

    def parameters(self) -> list[Parameter]:
        return [p for _, p in self.named_parameters()]

    def named_modules(self, prefix: str = "") -> Iterator[tuple[str, "Module"]]:
        yield prefix.rstrip("."), self
        for name, module in self._modules.items():
            yield from module.named_modules(f"{prefix}{name}.")

    def bind_parameters(self, bound: dict[Parameter, Var] | None) -> None:
        """While exporting: reading a Parameter attribute gives its Var (None unbinds)."""
        for _, module in self.named_modules():
            object.__setattr__(module, "_bound", bound)

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} does not define forward")


class ModuleList(Module):
    """A list of sub-modules named ``0``, ``1``, ... (``layers.3.mlp.weight``)."""

    def __init__(self, modules=()):
        super().__init__()
        for index, module in enumerate(modules):
            setattr(self, str(index), module)

    def __getitem__(self, index: int) -> Module:
        return self._modules[str(range(len(self._modules))[index])]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())
