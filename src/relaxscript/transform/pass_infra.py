"""Pass infrastructure: module and function passes, Sequential, and PassContext.

A pass maps an IRModule to a new IRModule and never mutates its input. The
active ``PassContext`` can print the IR after each pass, time each pass, and
(beyond upstream) run the reference interpreter before and after each pass
on random inputs with random values of the symbolic variables, naming the
first pass that changed a result.
"""
from __future__ import annotations

import abc
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

from ..expr import Function
from ..irmodule import IRModule


class PassCheckError(AssertionError):
    """A pass changed the results of a function under the reference interpreter."""


@dataclass
class PassTiming:
    name: str
    seconds: float


@dataclass
class PassContext:
    """Options for running passes; use as ``with PassContext(time_passes=True) as ctx:``.

    ``print_ir``: True prints the module after each pass; a callable receives
    ``(pass_name, module)``. ``check_with_interpreter``: after each pass, run
    every public graph function on ``check_samples`` random bindings and
    compare with the module before the pass (``rtol``/``atol`` for floats).
    ``disabled``: names of passes to skip.
    """
    print_ir: bool | Callable = False
    time_passes: bool = False
    check_with_interpreter: bool = False
    check_samples: int = 2
    check_seed: int = 0
    rtol: float = 1e-4
    atol: float = 1e-5
    disabled: Sequence[str] = ()
    timings: list = field(default_factory=list)

    _stack: list = field(default_factory=list, init=False, repr=False)

    def __enter__(self) -> "PassContext":
        _CONTEXT_STACK.append(self)
        return self

    def __exit__(self, *exc) -> None:
        _CONTEXT_STACK.pop()

    @staticmethod
    def current() -> "PassContext":
        return _CONTEXT_STACK[-1] if _CONTEXT_STACK else _DEFAULT_CONTEXT

    def timing_report(self) -> str:
        total = sum(t.seconds for t in self.timings) or 1e-12
        rows = [f"{t.name:<40} {t.seconds * 1e3:9.2f} ms {100 * t.seconds / total:5.1f}%" for t in self.timings]
        return "\n".join(rows + [f"{'total':<40} {total * 1e3:9.2f} ms"])


_DEFAULT_CONTEXT = PassContext()
_CONTEXT_STACK: list[PassContext] = []


class Pass(abc.ABC):
    """Base class: subclasses implement ``transform_module(mod, ctx)``."""
    name: str = "Pass"

    @abc.abstractmethod
    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        """The new module; never mutates ``mod``."""

    def __call__(self, mod: IRModule) -> IRModule:
        ctx = PassContext.current()
        if self.name in ctx.disabled:
            return mod
        if not isinstance(mod, IRModule):
            raise TypeError(f"pass {self.name} expects an IRModule, got {type(mod).__name__}")
        start = time.perf_counter()
        result = self.transform_module(mod, ctx)
        elapsed = time.perf_counter() - start
        if not isinstance(result, IRModule):
            raise TypeError(f"pass {self.name} returned {type(result).__name__}, not an IRModule")
        if isinstance(self, Sequential):
            return result
        if ctx.time_passes:
            ctx.timings.append(PassTiming(self.name, elapsed))
        if ctx.print_ir:
            if callable(ctx.print_ir):
                ctx.print_ir(self.name, result)
            else:
                print(f"# ---- after {self.name}\n{result.script()}")
        if ctx.check_with_interpreter:
            from .pass_check import check_kept_privacy, check_same_results
            check_kept_privacy(self.name, mod, result)
            check_same_results(self.name, mod, result, ctx)
        return result

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class _FunctionModulePass(Pass):
    def __init__(self, fn: Callable, name: str, kind: str):
        self.fn, self.name, self.kind = fn, name, kind

    def transform_module(self, mod, ctx):
        if self.kind == "module":
            return self.fn(mod, ctx)
        functions = dict(mod.functions)
        changed = False
        for gname, func in mod.functions.items():
            if isinstance(func, Function):
                new = self.fn(func, mod, ctx)
                if new is not func:
                    functions[gname] = new
                    changed = True
        return IRModule(functions, mod.attrs) if changed else mod


def module_pass(fn: Callable | None = None, *, name: str | None = None):
    """Decorator: ``fn(mod, ctx) -> IRModule`` becomes a Pass instance."""
    def wrap(f):
        return _FunctionModulePass(f, name or f.__name__, "module")
    return wrap(fn) if fn is not None else wrap


def function_pass(fn: Callable | None = None, *, name: str | None = None):
    """Decorator: ``fn(func, mod, ctx) -> Function`` applied to every graph function."""
    def wrap(f):
        return _FunctionModulePass(f, name or f.__name__, "function")
    return wrap(fn) if fn is not None else wrap


class Sequential(Pass):
    """Run passes in order (each one timed, printed and checked on its own)."""

    def __init__(self, passes: Sequence[Pass], name: str = "Sequential"):
        self.passes = list(passes)
        self.name = name

    def transform_module(self, mod, ctx):
        for p in self.passes:
            mod = p(mod)
        return mod

    def __repr__(self) -> str:
        return f"Sequential([{', '.join(repr(p) for p in self.passes)}])"
