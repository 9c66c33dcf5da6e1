"""BlockBuilder: builds graph-level functions binding by binding, deducing annotations.

Usage (TVM style)::

    bb = BlockBuilder()
    n = tir.size_var("n")
    x = Var("x", TensorStructInfo((n, 4), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            lv = bb.emit(op.nn.relu(x))          # DataflowVar, annotated (n, 4)
            gv = bb.emit_output(lv)              # Var, visible after the block
        bb.emit_func_output(gv)
    mod = bb.get()

Every emitted expression is normalized (see ``normalize.Normalizer``), so
passes that rebuild IR through a BlockBuilder never write annotations.
"""
from __future__ import annotations

import contextlib
from typing import Sequence

from tensorir.errors import IRError
from tensorir.structural import structural_equal

from .expr import (BindingBlock, DataflowBlock, DataflowVar, Expr, Function, GlobalVar, MatchCast,
                   SeqExpr, Tuple, Var, VarBinding)
from .irmodule import IRModule
from .normalize import DeductionContext, DeductionError, Normalizer, is_leaf  # noqa: F401 (re-export)
from .struct_info import StructInfo
from .struct_info_of import signature_of
from .shape_facts import FactAnalyzer, ShapeFacts, observe_binding
from .struct_info_util import erase_to_well_defined, symbolic_vars_of

__all__ = ["BlockBuilder", "DeductionError", "DeductionContext"]


class _BlockFrame:
    def __init__(self, is_dataflow: bool):
        self.is_dataflow = is_dataflow
        self.bindings: list = []

    def to_block(self, original: BindingBlock | None = None) -> BindingBlock:
        if original is not None and len(original.bindings) == len(self.bindings) and all(
                a is b for a, b in zip(original.bindings, self.bindings)):
            return original
        return (DataflowBlock if self.is_dataflow else BindingBlock)(self.bindings)


class _FunctionFrame:
    def __init__(self, name: str, params: Sequence[Var], attrs, pure: bool, private: bool):
        self.name, self.params, self.attrs, self.pure = name, list(params), dict(attrs or {}), pure
        self.private = private
        self.blocks: list[BindingBlock] = []
        self.global_var: GlobalVar | None = None


class BlockBuilder(Normalizer):
    """Builds functions into an IRModule; every expression is normalized on the way in."""

    def __init__(self, mod: IRModule | None = None, analyzer=None):
        self._mod = mod if mod is not None else IRModule()
        # Deduction sees the shape facts of the function being built (shape_facts.py);
        # a caller's own analyzer is used as given.
        self.analyzer = analyzer if analyzer is not None else FactAnalyzer()
        self._facts_stack: list = []             # one ShapeFacts per open function scope
        self._func: _FunctionFrame | None = None
        self._frames: list[_BlockFrame] = []
        self._scopes: list[set] = []
        self._bound_values: dict[Var, Expr] = {}

    # ---------------------------------------------------------------- module
    def get(self) -> IRModule:
        return self._mod

    def add_func(self, func, name: str) -> GlobalVar:
        """Add a Function or PrimFunc; an identical function already present is reused
        and a taken name gets a numeric suffix."""
        if isinstance(func, Function) and func.struct_info is None:
            func = self._normalize_detached(func)
        for existing_name, existing in self._mod.items():
            if existing is func or (type(existing) is type(func) and structural_equal(existing, func)):
                return GlobalVar(existing_name, signature_of(existing))
        unique, suffix = name, 0
        while unique in self._mod:
            suffix += 1
            unique = f"{name}_{suffix}"
        self._mod = self._mod.with_function(unique, func)
        return GlobalVar(unique, signature_of(func))

    def update_func(self, name: str, func) -> GlobalVar:
        if isinstance(func, Function) and func.struct_info is None:
            func = self._normalize_detached(func)
        self._mod = self._mod.with_function(name, func)
        return GlobalVar(name, signature_of(func))

    def _normalize_detached(self, expr: Expr) -> Expr:
        """Normalize outside of whatever function is being built."""
        saved = self._swap_frames([])
        try:
            return self.normalize(expr)
        finally:
            self._swap_frames(saved)

    # ---------------------------------------------------------------- symbolic scopes
    def begin_scope(self, params: Sequence[Var] | None = None) -> None:
        """Open a scope; symbolic vars in the params' annotations become defined."""
        self._scopes.append(set())
        if params is not None:   # a function's scope: its facts start empty
            self._facts_stack.append((len(self._scopes), ShapeFacts()))
            self._set_facts()
        if params:
            self.define_symbolic_vars(symbolic_vars_of([p.struct_info for p in params]))

    def end_scope(self) -> None:
        if self._facts_stack and self._facts_stack[-1][0] == len(self._scopes):
            self._facts_stack.pop()
            self._set_facts()
        self._scopes.pop()

    def _set_facts(self) -> None:
        if isinstance(self.analyzer, FactAnalyzer):
            self.analyzer.facts = self._facts_stack[-1][1] if self._facts_stack else None

    @property
    def shape_facts(self) -> ShapeFacts | None:
        """The facts known at this point of the function being built (None outside one)."""
        return self._facts_stack[-1][1] if self._facts_stack else None

    def define_symbolic_vars(self, variables) -> None:
        if not self._scopes:
            self._scopes.append(set())
        self._scopes[-1].update(variables)

    def is_symbolic_var_defined(self, var) -> bool:
        return any(var in scope for scope in self._scopes)

    # ---------------------------------------------------------------- functions and blocks
    @contextlib.contextmanager
    def function(self, name: str, params: Sequence[Var] = (), attrs=None, pure: bool = True,
                 private: bool = False):
        """Build function ``name``; end the body with ``emit_func_output``. ``private``: as
        ``@R.function(private=True)`` (never a build's entry)."""
        if self._func is not None:
            raise IRError(f"cannot begin function {name!r} inside function {self._func.name!r}")
        for p in params:
            if not isinstance(p, Var) or p.struct_info is None:
                raise IRError(f"function {name!r}: every parameter must be a Var with an annotation, "
                              f"got {p!r}")
        frame = _FunctionFrame(name, params, attrs, pure, private)
        self._func = frame
        saved = self._swap_frames([_BlockFrame(False)])
        self.begin_scope(params)
        try:
            yield frame
            if frame.global_var is None:
                raise IRError(f"function {name!r} ended without bb.emit_func_output(...)")
        finally:
            self.end_scope()
            self._swap_frames(saved)
            self._func = None

    @contextlib.contextmanager
    def dataflow(self):
        """A dataflow block: bindings get DataflowVars unless emitted with ``emit_output``."""
        if self._func is None:
            raise IRError("bb.dataflow() must be used inside bb.function(...)")
        if self._frames[-1].is_dataflow:
            raise IRError("dataflow blocks do not nest")
        self._flush_plain_block()
        self._frames[-1] = _BlockFrame(True)
        try:
            yield
        finally:
            block = self._frames[-1].to_block()
            if block.bindings:
                self._func.blocks.append(block)
            self._frames[-1] = _BlockFrame(False)

    def _flush_plain_block(self) -> None:
        frame = self._frames[-1]
        if frame.bindings:
            self._func.blocks.append(frame.to_block())
        self._frames[-1] = _BlockFrame(False)

    def emit_func_output(self, output, ret_struct_info: StructInfo | None = None) -> GlobalVar:
        """End the current function with ``output`` and add it to the module."""
        frame = self._func
        if frame is None:
            raise IRError("bb.emit_func_output must be called inside bb.function(...)")
        if frame.global_var is not None:
            raise IRError(f"function {frame.name!r} already has an output")
        if self._frames[-1].is_dataflow:
            raise IRError("bb.emit_func_output inside a dataflow block; emit_output the value and "
                          "leave the block first")
        if isinstance(output, (list, tuple)):
            output = Tuple(output)
        output = self.normalize_argument(output)
        self._flush_plain_block()
        body = SeqExpr(frame.blocks, output)
        param_vars = set(symbolic_vars_of([p.struct_info for p in frame.params]))
        body.struct_info = erase_to_well_defined(output.struct_info, param_vars)
        func = Function(frame.params, body, ret_struct_info, frame.pure, frame.attrs, frame.private)
        func = self.finish_function(func, func)
        frame.global_var = self.add_func(func, frame.name)
        return frame.global_var

    def in_block(self) -> bool:
        return bool(self._frames)

    def in_dataflow_block(self) -> bool:
        return bool(self._frames) and self._frames[-1].is_dataflow

    def begin_block(self, is_dataflow: bool) -> None:
        """Start collecting bindings of a block (for passes rebuilding a SeqExpr)."""
        self._push_frame(is_dataflow)

    def end_block(self, original: BindingBlock | None = None) -> BindingBlock:
        """Finish the innermost block; returns ``original`` when its bindings are unchanged."""
        return self._pop_frame(original)

    def _push_frame(self, is_dataflow: bool) -> None:
        self._frames.append(_BlockFrame(is_dataflow))

    def _pop_frame(self, original: BindingBlock | None = None) -> BindingBlock:
        return self._frames.pop().to_block(original)

    def _swap_frames(self, frames: list) -> list:
        saved, self._frames = self._frames, frames
        return saved

    def _current_frame(self, what: str) -> _BlockFrame:
        if not self._frames:
            raise IRError(f"bb.{what} needs an open block (inside bb.function(...))")
        return self._frames[-1]

    # ---------------------------------------------------------------- emitting bindings
    def emit(self, expr: Expr, name_hint: str = "lv") -> Var:
        """Bind ``expr`` to a fresh var (a DataflowVar inside a dataflow block)."""
        frame = self._current_frame("emit")
        value = self.normalize(expr)
        var = (DataflowVar if frame.is_dataflow else Var)(name_hint, value.struct_info)
        self.emit_normalized(VarBinding(var, value))
        return var

    def emit_output(self, output, name_hint: str = "gv") -> Var:
        """Bind ``output`` to a Var that stays visible after the dataflow block."""
        frame = self._current_frame("emit_output")
        if not frame.is_dataflow:
            raise IRError("bb.emit_output is only meaningful inside bb.dataflow()")
        if isinstance(output, (list, tuple)):
            output = Tuple(output)
        value = self.normalize(output)
        var = Var(name_hint, value.struct_info)
        self.emit_normalized(VarBinding(var, value))
        return var

    def match_cast(self, value: Expr, struct_info: StructInfo, name_hint: str = "lv") -> Var:
        """``var = R.match_cast(value, struct_info)``; new symbolic vars become defined."""
        frame = self._current_frame("match_cast")
        var = (DataflowVar if frame.is_dataflow else Var)(name_hint, struct_info)
        self.normalize_binding(MatchCast(var, self.normalize_argument(value), struct_info))
        return var

    def emit_normalized(self, binding) -> None:
        """Append an already-normalized binding to the current block."""
        frame = self._current_frame("emit_normalized")
        if isinstance(binding, MatchCast):
            self.define_symbolic_vars(symbolic_vars_of(binding.struct_info))
        if isinstance(binding, VarBinding):
            self._bound_values[binding.var] = binding.value
        frame.bindings.append(binding)
        if len(self._frames) == 1 and not self._nested_seqs and self._facts_stack:   # not in an If branch
            observe_binding(self._facts_stack[-1][1], binding)

    def lookup_binding(self, var: Var) -> Expr | None:
        """The value bound to ``var`` by a VarBinding emitted through this builder."""
        return self._bound_values.get(var)
