"""Statement execution with the scalar (reference) semantics of the loop level.

Every loop kind (parallel, vectorized, unrolled, thread-bound) runs as a
serial loop. A ``For`` first offers itself to the vectorised loop-nest
executor (``nest.run_nest``); whatever it declines runs here, one
iteration at a time, and its inner loops get the same offer again.

Buffers created by ``alloc_buffer`` and ``Allocate`` are zero-initialised
each time their scope is entered, so results never depend on garbage.
"""
from __future__ import annotations

import numpy as np

from .. import stmt as S
from ..dispatch import ClassDispatch, handles
from ..errors import AllocationError, KernelAssertionError
from ..expr import Var
from ..functor import collect
from ..thread_sync import ThreadAllreduce
from .empty_reduction import hoisted_form, nest_is_empty
from .evaluator import ExprEvaluator, as_dtype, scalar
from .errors import InterpretError
from .storage import BufferView, compact_strides


class Executor(ClassDispatch):
    def __init__(self, func, vars: dict, views: dict, vectorize: bool = True):
        self.func = func
        self.vars = dict(vars)
        self.views = dict(views)
        self.vectorize = vectorize
        self.recorder = None  # set by the nest executor while it evaluates a nest
        self.evaluator = ExprEvaluator(self)
        self.signature_vars = set(vars)  # bound for the whole run
        self.view_cache: dict = {}  # view Buffer -> (storage view, BufferView, layout is run-constant)
        self.nest_cache: dict = {}  # id(For) -> static nest plan (or None)
        self.thread_cache: dict = {}  # id(For) -> (For, thread_facts)

    # environment ---------------------------------------------------------------
    def eval(self, e, mask=None):
        return self.evaluator.eval(e, mask)

    def eval_int(self, e) -> int:
        value = self.eval(e)
        if np.ndim(value) != 0:
            raise InterpretError("expected a scalar integer")
        return int(value)

    def view(self, buffer) -> BufferView:
        found = self.views.get(buffer)
        if found is not None:
            return found
        if buffer.data is None:
            raise InterpretError(f"buffer {buffer.name!r} is used but never defined (not a parameter, "
                                 f"alloc_buffer, match_buffer, Allocate or a view with data=)")
        return self.storage_view(buffer)

    def storage_view(self, buffer) -> BufferView:
        """A view buffer (``buffer.data`` set): its shape/strides/offset over the storage's data.

        Cached while the storage is the same (an Allocate re-entered gets fresh
        storage) and, when the layout only uses the function's signature vars,
        for the whole run."""
        storage = self.views.get(buffer.data)
        if storage is None:
            raise InterpretError(f"buffer {buffer.name!r} is a view of {buffer.data.name!r}, whose storage "
                                 f"is not defined here (not a parameter or an allocation in scope)")
        cached = self.view_cache.get(buffer)
        if cached is not None and cached[0] is storage and cached[2]:
            return cached[1]
        if storage.dtype != np.dtype(buffer.dtype):
            raise InterpretError(f"view {buffer.name!r} ({buffer.dtype}) of {buffer.data.name!r} "
                                 f"({storage.dtype}) changes the element type")
        shape = [self.eval_int(s) for s in buffer.shape]
        strides = [self.eval_int(s) for s in buffer.strides] or compact_strides(shape)
        view = BufferView(buffer.name, storage.data, shape, strides,
                          storage.offset + self.eval_int(buffer.elem_offset))
        layout_vars = [v for e in buffer.shape + buffer.strides + (buffer.elem_offset,)
                       for v in collect(e, lambda n: isinstance(n, Var))]
        self.view_cache[buffer] = (storage, view, all(v in self.signature_vars for v in layout_vars))
        return view

    def bind(self, var, value):
        """Bind ``var``; returns a token for ``unbind`` that restores any shadowed value."""
        old = self.vars.get(var, _UNBOUND)
        self.vars[var] = value
        return var, old

    def unbind(self, token):
        var, old = token
        if old is _UNBOUND:
            self.vars.pop(var, None)
        else:
            self.vars[var] = old

    # statements ------------------------------------------------------------------------
    def run(self, stmt):
        if stmt is None:
            return
        handler = self.default_handlers[type(stmt)]
        if handler is None:
            raise InterpretError(f"cannot execute statement node {type(stmt).__name__}")
        handler(self, stmt)

    @handles(S.SeqStmt)
    def _seq(self, s):
        for child in s.seq:
            self.run(child)

    @handles(S.Break)
    def _break(self, s):
        raise _Jump(True)

    @handles(S.Continue)
    def _continue(self, s):
        raise _Jump(False)

    # the threads of a GPU block ------------------------------------------------------
    def in_block(self) -> bool:
        """Whether this executor runs one thread of a block (``block_threads``)."""
        return False

    def thread_facts(self, s) -> tuple[bool, bool, bool]:
        """(``s`` is a threadIdx loop, its body synchronizes threads, its body holds threadIdx loops)."""
        entry = self.thread_cache.get(id(s))
        if entry is None:
            from .block_threads import is_thread_loop, synchronizes
            entry = (s, (is_thread_loop(s), synchronizes(s.body), bool(collect(s.body, is_thread_loop))))
            self.thread_cache[id(s)] = entry   # (the loop is kept: its id stays its own)
        return entry[1]

    def sync_call(self, e, mask):
        raise InterpretError(f"{self.func.name}: T.{e.op} outside a threadIdx loop: it synchronizes the "
                             "threads of a GPU block")

    def all_reduce(self, s) -> None:
        raise InterpretError(f"{self.func.name}: T.tvm_thread_allreduce outside a threadIdx loop: it "
                             "combines values of the threads of a GPU block")

    @handles(ThreadAllreduce)
    def _all_reduce(self, s):
        self.all_reduce(s)

    @handles(S.For)
    def _for(self, s):
        thread_loop, syncs, holds_threads = self.thread_facts(s)
        if thread_loop and self.in_block():
            self.run_thread_loop(s)
            return
        if syncs and thread_loop:
            from .block_threads import run_block_threads
            run_block_threads(self, s)
            return
        if syncs or (holds_threads and self.in_block()):   # never vectorized across threads
            self.run_serial(s, self.eval_int(s.min), self.eval_int(s.extent))
            return
        if S.has_loop_jumps(s.body):   # iterations one at a time: a jump decides which run
            self.run_serial(s, self.eval_int(s.min), self.eval_int(s.extent))
            return
        hoisted = hoisted_form(self.func, s)
        if hoisted is not None and nest_is_empty(self, s):
            self.run(hoisted)   # an empty reduction still runs its init, as compiled code does
            return
        if self.vectorize:
            from .nest import run_nest  # late: nest builds on this module
            if run_nest(self, s):
                return
        self.run_serial(s, self.eval_int(s.min), self.eval_int(s.extent))

    def run_serial(self, s, start: int, count: int):
        """Iterations ``start .. start + count - 1`` of loop ``s``, one at a time."""
        token = self.bind(s.loop_var, scalar(s.loop_var.dtype, start))
        try:
            for i in range(start, start + count):
                self.vars[s.loop_var] = scalar(s.loop_var.dtype, i)
                try:
                    self.run(s.body)
                except _Jump as jump:
                    if jump.leave:
                        break
        finally:
            self.unbind(token)

    @handles(S.BufferStore)
    def _store(self, s):
        value = as_dtype(self.eval(s.value), s.buffer.dtype)
        indices = [self.eval(i) for i in s.indices]
        self.view(s.buffer).store(indices, value)

    @handles(S.IfThenElse)
    def _if(self, s):
        if self.eval(s.condition):
            self.run(s.then_case)
        else:
            self.run(s.else_case)

    @handles(S.While)
    def _while(self, s):
        while self.eval(s.condition):
            try:
                self.run(s.body)
            except _Jump as jump:
                if jump.leave:
                    break

    @handles(S.AssertStmt)
    def _assert(self, s):
        if not self.eval(s.condition):
            raise KernelAssertionError(f"{self.func.name}: {s.message}" if s.message
                                       else f"{self.func.name}: assertion failed")

    @handles(S.LetStmt)
    def _let(self, s):
        token = self.bind(s.var, self.eval(s.value))
        try:
            self.run(s.body)
        finally:
            self.unbind(token)

    @handles(S.Evaluate)
    def _evaluate(self, s):
        self.eval(s.value)

    @handles(S.Allocate)
    def _allocate(self, s):
        self.views[s.buffer] = self.allocate(s.buffer)
        try:
            self.run(s.body)
        finally:
            del self.views[s.buffer]

    def allocate(self, buffer) -> BufferView:
        shape = [self.eval_int(d) for d in buffer.shape]
        try:
            if any(d < 0 for d in shape):
                raise ValueError("a dimension is negative")
            return BufferView.allocate(buffer.name, shape, np.dtype(buffer.dtype))
        except (ValueError, MemoryError) as err:   # NumPy's "array is too big" or out of memory
            used = dict.fromkeys(v for d in buffer.shape for v in collect(d, lambda n: isinstance(n, Var)))
            bound = ", ".join(f"{v.name} = {int(self.vars[v])}" for v in used if v in self.vars)
            raise AllocationError(f"{self.func.name}: cannot allocate buffer {buffer.name!r} of shape "
                                  f"{shape} ({buffer.dtype}): {err}"
                                  + (f" (symbolic var {bound})" if bound else "")) from None

    @handles(S.Block)
    def _bare_block(self, block):
        self._block_realize(S.BlockRealize([], None, block))

    @handles(S.BlockRealize)
    def _block_realize(self, realize):
        if not self.eval(realize.predicate):
            return
        block = realize.block
        tokens = []
        try:
            at_reduce_min = True
            for iv, binding in zip(block.iter_vars, realize.iter_values):
                value = self.eval(binding)
                lo, extent = self.eval_int(iv.dom.min), self.eval_int(iv.dom.extent)
                if not lo <= int(value) < lo + extent:
                    raise InterpretError(f"block {block.name!r}: iter var {iv.var.name!r} bound to "
                                         f"{int(value)}, outside its domain [{lo}, {lo + extent})")
                if iv.kind == "R" and int(value) != lo:
                    at_reduce_min = False
                tokens.append(self.bind(iv.var, scalar(iv.var.dtype, value)))
            self._enter_block(block, at_reduce_min)
        finally:
            for token in reversed(tokens):
                self.unbind(token)

    def _enter_block(self, block, at_reduce_min: bool):
        scoped, tokens = [], []
        try:
            for buf in block.alloc_buffers:
                self.views[buf] = self.allocate(buf)
                scoped.append(buf)
            for match in block.match_buffers:
                from .match_buffer import match_view  # late: keeps this file about statements
                view, bound = match_view(self, match)
                self.views[match.buffer] = view
                scoped.append(match.buffer)
                tokens.extend(bound)
            if block.init is not None and at_reduce_min:
                self.run(block.init)
            self.run(block.body)
        finally:
            for buf in scoped:
                self.views.pop(buf, None)
            for token in reversed(tokens):
                self.unbind(token)


class _Unbound:
    pass


_UNBOUND = _Unbound()


class _Jump(Exception):
    """A ``break`` (``leave``) or ``continue`` on its way to the innermost loop."""

    def __init__(self, leave: bool):
        super().__init__("break" if leave else "continue")
        self.leave = leave
