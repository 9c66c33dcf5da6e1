"""The graph-level reference interpreter: evaluates Relax IR on NumPy values.

One ``Frame`` per function call holds that call's variable values and its
symbolic-variable scope (``ShapeEnv``). Expressions dispatch on their class
(``@handles``); calls of Ops go first to the interpreter's builtins (cross-level
calls, shape values, memory ops) and otherwise to the op registry's NumPy
reference. Arguments and results are checked against the annotations at
every function boundary and at every ``match_cast``.
"""
from __future__ import annotations

import math

from typing import Any, Callable

import numpy as np

from tensorir import dtype as dt
from tensorir.dispatch import ClassDispatch, handles
from tensorir.errors import IndexOutOfRangeError, IRError, ShapeMismatchError
from tensorir.function import PrimFunc

from .. import expr as rx
from ..analysis.written_params import packed_call_outputs, written_parameters
from ..irmodule import IRModule
from ..struct_info import TensorStructInfo
from .builtins import BUILTINS, run_prim_func
from .checks import CheckItem, check_values
from .allocation import allocation_error, env_symbols, impossible_shape, shape_text
from .shape_env import ShapeEnv, UnboundSymbolError, coerce, format_prim_expr
from .values import Closure, ShapeTuple

Instrument = Callable[[str, rx.Var, Any], Any]


class Interpreter:
    def __init__(self, mod: IRModule, instrument: Instrument | None = None,
                 check_bindings: bool = False):
        self.mod = mod
        self.instrument = instrument
        self.check_bindings = check_bindings
        self._written: dict[int, tuple] = {}    # id(function) -> (function, written parameter indices)
        self._packed_outputs: dict | None = None  # analysis.packed_call_outputs of every function

    def packed_outputs(self, call: rx.Call) -> frozenset:
        """The argument positions an ``R.call_packed`` may write (its fresh allocations)."""
        if self._packed_outputs is None:
            table: dict = {}
            for func in self.mod.relax_functions.values():
                table.update(packed_call_outputs(func))
            self._packed_outputs = table
        return self._packed_outputs.get(id(call), frozenset())

    def closure_of_global(self, gvar_or_name) -> Closure | PrimFunc:
        name = gvar_or_name.name_hint if isinstance(gvar_or_name, rx.GlobalVar) else gvar_or_name
        func = self.mod[name]
        return func if isinstance(func, PrimFunc) else Closure(self, func, name)

    def call_function(self, closure: Closure, args: list):
        func = closure.func
        if len(args) != len(func.params):
            names = ", ".join(p.name_hint for p in func.params)
            raise ShapeMismatchError(f"function '{closure.name}' takes {len(func.params)} "
                                     f"argument(s) ({names}), got {len(args)}")
        frame = Frame(self, closure.name, closure.outer, ShapeEnv(closure.shape_env))
        items = [CheckItem(f"parameter '{p.name_hint}'", p.name_hint, a, p.struct_info)
                 for p, a in zip(func.params, args)]
        for param, value in zip(func.params, check_values(frame.shape_env, closure.name, items)):
            frame.vars[param] = value
        self._check_writeable(closure, frame)
        result = frame.eval(func.body)
        if func.ret_struct_info is None:
            return result
        ret = CheckItem("return value", "result", result, func.ret_struct_info)
        return check_values(frame.shape_env, closure.name, [ret])[0]


    def _check_writeable(self, closure: Closure, frame: "Frame") -> None:
        """Parameters a cross-level call writes must be writeable arrays, checked before any
        kernel runs, as the VM does (``analysis/written_params.py``)."""
        func = closure.func
        written = self._written.get(id(func))
        if written is None:    # the function is kept in the entry: its id stays its own
            written = self._written[id(func)] = (func, written_parameters(func, self.mod))
        for i in written[1]:
            param = func.params[i]
            value = frame.vars[param]
            if isinstance(value, np.ndarray) and not value.flags.writeable:
                raise ShapeMismatchError(f"function '{closure.name}', parameter '{param.name_hint}': "
                                         f"{param.name_hint}: expected a writeable array, got a read-only "
                                         f"{value.dtype} array of shape {value.shape}")


class Frame(ClassDispatch):
    """Values of one call: graph-level variables and symbolic variables."""

    def __init__(self, interp: Interpreter, func_name: str, outer: "Frame | None", shape_env: ShapeEnv):
        self.interp = interp
        self.func_name = func_name
        self.outer = outer  # the frame a closure was made in (free variables live there)
        self.shape_env = shape_env
        self.vars: dict[rx.Var, Any] = {}
        self.binding_name = ""   # the binding being evaluated, for allocation errors

    @handles(rx.Var)
    def lookup(self, var: rx.Var):
        frame = self
        while frame is not None:
            if var in frame.vars:
                return frame.vars[var]
            frame = frame.outer
        raise IRError(f"function '{self.func_name}': variable '{var.name_hint}' "
                      f"is used before it is bound")

    def eval(self, expr: rx.Expr):
        handler = self.handler_for(type(expr))
        if handler is None:
            raise IRError(f"function '{self.func_name}': the interpreter cannot evaluate "
                          f"{type(expr).__name__}")
        return handler(self, expr)

    # ---------------------------------------------------------------- expressions
    @handles(rx.Constant)
    def constant(self, expr: rx.Constant):
        return expr.data

    @handles(rx.ShapeExpr)
    def shape(self, expr: rx.ShapeExpr):
        return ShapeTuple(self.eval_prim(v) for v in expr.values)

    @handles(rx.PrimValue)
    def prim_value(self, expr: rx.PrimValue):
        return coerce(self.eval_prim(expr.value), expr.value.dtype)

    @handles(rx.StringImm)
    def string(self, expr: rx.StringImm):
        return expr.value

    @handles(rx.Tuple)
    def tuple_value(self, expr: rx.Tuple):
        return tuple(self.eval(f) for f in expr.fields)

    @handles(rx.Function)
    def closure(self, expr: rx.Function):
        return Closure(self.interp, expr, expr.attrs.get("global_symbol", "<lambda>"), self, self.shape_env)

    def eval_prim(self, expr):
        try:
            return self.shape_env.evaluate(expr)
        except UnboundSymbolError as err:
            raise ShapeMismatchError(f"function '{self.func_name}': {format_prim_expr(expr)} uses "
                                     f"symbolic var {err.var.name}, which has no value here") from None

    @handles(rx.TupleGetItem)
    def tuple_get_item(self, expr: rx.TupleGetItem):
        value = self.eval(expr.tuple_value)
        if not isinstance(value, tuple) or isinstance(value, ShapeTuple):
            raise ShapeMismatchError(f"function '{self.func_name}': indexing [{expr.index}] "
                                     f"needs a tuple, got {type(value).__name__}")
        if not -len(value) <= expr.index < len(value):
            raise ShapeMismatchError(f"function '{self.func_name}': index {expr.index} out of range "
                                     f"for a tuple of {len(value)} fields")
        return value[expr.index]

    @handles(rx.If)
    def if_expr(self, expr: rx.If):
        cond = self.eval(expr.cond)
        array = np.asarray(cond)
        if array.size != 1:
            raise ShapeMismatchError(f"function '{self.func_name}': an if condition must be a scalar, "
                                     f"got shape {array.shape}")
        return self.eval(expr.true_branch if bool(array.reshape(()).item()) else expr.false_branch)

    @handles(rx.SeqExpr)
    def seq(self, expr: rx.SeqExpr):
        for block in expr.blocks:
            for binding in block.bindings:
                self.run_binding(binding)
        return self.eval(expr.body)

    @handles(rx.GlobalVar)
    def global_var(self, expr: rx.GlobalVar):
        return self.interp.closure_of_global(expr)

    @handles(rx.ExternFunc)
    def extern(self, expr: rx.ExternFunc):
        from backends.library import get_library
        return get_library(expr.global_symbol)

    @handles(rx.Op)
    def op_value(self, expr: rx.Op):
        raise IRError(f"function '{self.func_name}': operator {expr.name} used as a value")

    # ---------------------------------------------------------------- bindings
    def run_binding(self, binding: rx.Binding) -> None:
        self.binding_name = binding.var.name_hint
        if isinstance(binding, rx.MatchCast):
            value = self.eval(binding.value)
            name = binding.var.name_hint
            item = CheckItem(f"match_cast of '{name}'", name, value, binding.struct_info)
            value = check_values(self.shape_env, self.func_name, [item])[0]
        elif isinstance(binding.value, rx.Function):
            # Bound before evaluation finishes so a local function can call itself.
            value = Closure(self.interp, binding.value, binding.var.name_hint, self, self.shape_env)
        else:
            value = self.eval(binding.value)
            if self.interp.check_bindings:
                # Deduction oracle: the value must fit the annotation the normalizer deduced.
                name = binding.var.name_hint
                item = CheckItem(f"binding '{name}' (deduced annotation)", name, value,
                                 binding.var.struct_info)
                check_values(self.shape_env, self.func_name, [item])
        self.vars[binding.var] = value
        if self.interp.instrument is not None:
            self.interp.instrument(self.func_name, binding.var, value)

    # ---------------------------------------------------------------- calls
    @handles(rx.Call)
    def call(self, call: rx.Call):
        op = call.op
        if isinstance(op, rx.Op):
            return self.call_op(call)
        callee = self.interp.closure_of_global(op) if isinstance(op, rx.GlobalVar) else self.eval(op)
        args = [self.eval(a) for a in call.args]
        if isinstance(op, rx.ExternFunc):   # R.call_packed: writes only the allocations it is given
            from backends.library import guarded_call, read_only
            writable = self.interp.packed_outputs(call)
            args = [a if i in writable else read_only(a) for i, a in enumerate(args)]
            result = guarded_call(op.global_symbol, f"function '{self.func_name}'", callee, args)
            return () if result is None else result
        return self.apply(callee, args)

    def apply(self, callee, args: list):
        if isinstance(callee, Closure):
            return self.interp.call_function(callee, args)
        if isinstance(callee, PrimFunc):
            run_prim_func(callee, args)
            return ()
        if callable(callee):
            result = callee(*args)
            return () if result is None else result
        raise IRError(f"function '{self.func_name}': cannot call a value of type "
                      f"{type(callee).__name__}")

    def call_op(self, call: rx.Call):
        name = call.op.name
        builtin = BUILTINS.get(name)
        if builtin is not None:
            return builtin(self, call)
        from ..op.registry import get_op_spec, reference_attrs
        spec = get_op_spec(name)
        if spec.reference is None:
            raise IRError(f"function '{self.func_name}': operator {name} has no NumPy "
                          f"reference and no interpreter builtin")
        args = [self.eval(a) for a in call.args]
        try:
            result = spec.reference(*args, **reference_attrs(call))
        except ShapeMismatchError:
            raise
        except (ValueError, MemoryError) as err:
            failure = self._allocation_failure(call, err)
            if failure is not None:
                raise failure from None
            if isinstance(err, MemoryError):
                raise
            empty = self._empty_reshape(call, args)
            if empty is not None:
                return empty
            self._op_failed(name, args, err)
        except IndexError as err:   # an index tensor's value outside its axis
            self._op_failed(name, args, err, IndexOutOfRangeError)
        if isinstance(result, np.generic) or (
                isinstance(call.struct_info, TensorStructInfo) and not isinstance(result, np.ndarray)):
            result = np.asarray(result)
        return result

    def _op_failed(self, name: str, args: list, err: Exception, error_type=ShapeMismatchError):
        """A data-dependent mismatch deduction could not rule out (e.g. broadcasting n with m)."""
        shapes = ", ".join(str(tuple(a.shape)) if isinstance(a, np.ndarray) else repr(a) for a in args)
        raise error_type(f"function '{self.func_name}': R.{name[len('relax.'):]} failed "
                                 f"on arguments {shapes}: {err}") from err

    def _deduced_shape(self, call: rx.Call) -> tuple | None:
        """The call's deduced result shape in this frame's values, or None where it has none or it
        cannot be evaluated here (an unbound symbol, reshape's inferred -1 of a zero count)."""
        sinfo = call.struct_info
        if not isinstance(sinfo, TensorStructInfo) or sinfo.shape is None:
            return None
        try:
            return tuple(int(self.shape_env.evaluate(d)) for d in sinfo.shape)
        except (UnboundSymbolError, ZeroDivisionError):
            return None

    def _empty_reshape(self, call: rx.Call, args: list):
        """A reshape of no elements with a -1 (NumPy cannot infer it: any value fits) gets the
        deduced shape, as a build does (``(n, 3)`` to ``(n, -1)`` is ``(n, 3)`` for every ``n``,
        0 included); None where that shape is unknown here or does not hold no elements."""
        if call.op.name != "relax.reshape" or not isinstance(args[0], np.ndarray) or args[0].size:
            return None
        shape = self._deduced_shape(call)
        if shape is None or any(d < 0 for d in shape) or math.prod(shape) != 0:
            return None
        return np.reshape(args[0], shape)

    def _allocation_failure(self, call: rx.Call, err: Exception):
        """An AllocationError when the op's deduced result shape is impossible here (or NumPy ran
        out of memory making it); None when the failure is something else."""
        sinfo = call.struct_info
        shape = self._deduced_shape(call)
        if shape is None or sinfo.dtype is None:
            return None
        dtype = dt.to_numpy(sinfo.dtype)
        reason = impossible_shape(shape, np.dtype(dtype).itemsize)
        if reason is None and not isinstance(err, MemoryError):
            return None
        return allocation_error(self.func_name, f"tensor '{self.binding_name}' (R.{call.op.name[6:]})",
                                shape_text(sinfo.shape), shape, dtype,
                                env_symbols(sinfo.shape, self.shape_env), reason)
