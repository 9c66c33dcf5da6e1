"""Kernel source from lowered GPU stages: everything but the kernel language's spelling.

``KernelEmitter`` walks a stage (flat buffers, thread-bound loops,
``ThreadReduce``) and writes C-family source; a dialect subclass
(backends/opencl/codegen.py, backends/cuda/codegen.py) supplies qualifiers,
type names, index builtins, the barrier, math spellings and, optionally, its
own cross-thread reduction. Rules every dialect gets from here:

* a bound loop reads its index builtin; one shorter than its axis (or, for
  ``blockIdx``, than the grid) runs under ``if (index < extent)``;
* a store to global or shared memory outside the loops of some launch axis
  of size > 1 is made by index 0 of that axis only (a store to a "local"
  buffer is made by every thread: each has its own copy);
* barriers go between statements of thread-uniform code (no guard that
  depends on the thread) when a later statement touches memory an earlier
  one wrote (or overwrites shared memory it read), and at the end of a
  uniform loop's body that writes what it reads; a barrier needed for shared
  memory inside thread-dependent code is a ``GPULoweringError``;
* an integer divisor that may be zero is tested, as in the C target: a zero
  one gives 0 and sets the status word to ``STATUS_ZERO_DIVISION``;
* an assert whose condition is false claims the status word for
  ``STATUS_ASSERT_FAILED`` (unless another failure did), records its number
  (``GPUFunction.assert_messages``) in the int32 after the word and sets the
  thread's ``rs_failed``: the rest of every enclosing sequence runs under
  ``if (!rs_failed)``, loops stop, and later launches of the function skip
  their work. A thread-dependent condition followed by a barrier (or a warp
  shuffle) is a ``GPULoweringError``: the threads that stop would leave the
  others waiting.
"""
from __future__ import annotations

from tensorir import dtype as dt
from tensorir import expr as E
from tensorir import stmt as S
from tensorir.arith import Analyzer
from tensorir.dispatch import handles
from tensorir.functor import Visitor, collect
from tensorir.script.expr_printer import format_expr
from tensorir.structural import structural_equal

from ..c.status import (ASSERT_NUMBER_BASE, STATUS_ASSERT_FAILED, STATUS_INDEX_OUT_OF_RANGE, STATUS_NEGATIVE_POWER,
                        STATUS_ZERO_DIVISION)
from ..source_emitter import (SourceEmitter, float_floor_divmod_helpers, float_to_int_helpers,
                              overflow_safe_division_helpers, parenthesized)
from ..source_names import Names
from .cross_thread_reduce import ThreadReduce, identity
from .errors import GPULoweringError
from .function import BLOCK_AXES, THREAD_AXES, DeviceKernel, GPUFunction
from .launch import scratch_dtype
from .names import RESERVED
from tensorir.thread_sync import ACTIVEMASK, STORAGE_SYNC, WARP_SIZE, describe, is_sync_call

_AXIS = {"x": 0, "y": 1, "z": 2}
REDUCE_INFIX = {"sum": "+", "prod": "*"}


def _storage_scope(buf) -> str:
    return buf.storage.scope


def _memory(stmt, local: bool = False) -> tuple[set, set, set]:
    """(written, read, read shared) storages of non-local buffers in ``stmt`` (ids)."""
    written, read, read_shared = set(), set(), set()
    for node in collect(stmt, lambda n: isinstance(n, (S.BufferStore, E.BufferLoad))):
        if _storage_scope(node.buffer) == "local":
            continue
        key = id(node.buffer.storage)
        if isinstance(node, S.BufferStore):
            written.add(key)
        else:
            read.add(key)
            if _storage_scope(node.buffer) == "shared":
                read_shared.add(key)
    return written, read, read_shared


class _ThreadOwnAccesses(Visitor):
    """Global storages whose every access in the walked statements is at one index expression,
    made where every launch axis of the block with more than one thread is covered by a bound
    loop: each thread then touches only its own element, and no barrier is needed for it. (A
    value written by one thread for all, e.g. ``S[bx]`` outside the threadIdx loops, does not
    qualify: its writer is thread 0 only.)"""

    def __init__(self, covered: set, block: tuple):
        self.covered = set(covered)
        self.needed = {tag for axis, tag in enumerate(THREAD_AXES) if block[axis] > 1}
        self.by_storage: dict = {}

    @handles(E.PrimExpr)
    def visit_PrimExpr(self, node):
        if isinstance(node, E.BufferLoad):
            self.access(node)
        self.generic_visit(node)

    @handles(S.For)
    def visit_For(self, loop: S.For):
        added = loop.kind == "thread_binding" and loop.thread_tag not in self.covered
        if added:
            self.covered.add(loop.thread_tag)
        self.generic_visit(loop)
        if added:
            self.covered.discard(loop.thread_tag)

    @handles(S.BufferStore)
    def visit_BufferStore(self, node: S.BufferStore):
        self.access(node)
        self.generic_visit(node)

    def access(self, node) -> None:
        if _storage_scope(node.buffer) == "global":
            self.by_storage.setdefault(id(node.buffer.storage), []).append(
                (node, self.needed <= self.covered))

    def own(self) -> set:
        out = set()
        for key, accesses in self.by_storage.items():
            first = accesses[0][0]
            if all(full and n.buffer is first.buffer and len(n.indices) == len(first.indices) and
                   all(structural_equal(a, b, map_free_vars=False) for a, b in zip(n.indices, first.indices))
                   for n, full in accesses):
                out.add(key)
        return out


class KernelEmitter(SourceEmitter):
    # ------------------------------------------------------------ dialect hooks
    LANGUAGE = "GPU"
    KERNEL = ""            # qualifier of a kernel function
    GLOBAL = ""            # address space of global pointers
    SHARED = ""            # qualifier of a shared-memory array
    HELPER = ""            # qualifier of a helper function
    BARRIER = ""
    COMPARE_AND_SWAP = ""  # (int pointer, expected, new) -> the old value, atomically
    ATOMIC_MAX = ""        # (int pointer, value): the larger of the two stored, atomically
    TYPES: dict = {}       # dtype -> value type name
    BOOL_STORAGE = "unsigned char"

    def thread_index(self, axis: int) -> str:
        raise NotImplementedError

    def block_index(self, axis: int) -> str:
        raise NotImplementedError

    def half_load(self, pointer: str, index: str) -> str:
        raise NotImplementedError

    def half_store(self, pointer: str, index: str, value: str) -> str:
        raise NotImplementedError

    def half_storage(self) -> str:
        raise NotImplementedError

    def math(self, op: str, dtype: str, args: list[str]) -> str:
        raise NotImplementedError

    def float_special(self, value: float, dtype: str) -> str:
        raise NotImplementedError

    def int64_literal(self, value: int) -> str:
        raise NotImplementedError

    # ------------------------------------------------------------ setup
    def __init__(self, func: GPUFunction, kernel: DeviceKernel):
        super().__init__(Names(RESERVED))
        self.func, self.kernel = func, kernel
        self.covered: set[str] = set()
        self.divergent = False
        self.thread_vars: set[int] = set()
        self.uniform_vars: set[int] = {id(v) for v in func.sym_vars}   # the same in every thread
        self.bound_by_tag: dict = {}     # axis -> the innermost enclosing loop bound to it
        self.divergent_asserts: list = []   # (line, assert) of thread-dependent asserts
        self.loop_lines: list = []          # (first, last) line of every emitted loop
        self.assert_cache: dict = {}
        self.sync_values: dict = {}         # id(Call) -> the name holding its value (prepare_sync_calls)

    def where(self) -> str:
        return f"{self.func.name!r} (kernel {self.kernel.symbol})"

    # ------------------------------------------------------------ spelling (SourceEmitter's hooks)
    def error(self, message: str) -> Exception:
        return GPULoweringError(f"{self.where()}: {message}")

    def value_type(self, dtype: str) -> str:
        return self.vtype(dtype)

    def float_literal_text(self, value: float, dtype: str) -> str:
        if value != value or value in (float("inf"), float("-inf")):
            return self.float_special(value, dtype)
        text = repr(float(value))
        if "e" not in text and "." not in text:
            text += ".0"
        return text if dtype == "float64" else f"{text}f"

    def math_call(self, e: E.Call, args: list[str]) -> str:
        return self.math(e.op, e.args[0].dtype if e.args else e.dtype, args)

    def zero_divisor_report(self) -> str:
        return "rs_divided_by_zero(rs_status)"

    def negative_power_report(self) -> str:
        return "rs_negative_power(rs_status)"

    def index_check(self, index: str, extent: str) -> str:
        return f"rs_checked_index({index}, {extent}, rs_status)"

    def helper_suffix(self, dtype: str) -> str:
        return "float32" if dtype == "float16" else dtype   # float16 computes in float32

    def vtype(self, dtype: str) -> str:
        """Type of a value of ``dtype`` (float16 computes in float32)."""
        if dtype == "float16":
            return self.TYPES["float32"]
        try:
            return self.TYPES[dtype]
        except KeyError:
            raise GPULoweringError(f"{self.where()}: the {self.LANGUAGE} target has no type for "
                                   f"{dtype!r}") from None

    def atype(self, buf) -> str:
        """Element type of an array the kernel declares (per-thread or shared)."""
        return self.stype(buf.dtype)

    def load_half(self, buf, name: str, index: str) -> str:
        return self.half_load(name, index)

    def store_half(self, buf, name: str, index: str, value: str) -> str:
        return self.half_store(name, index, value)

    def stype(self, dtype: str) -> str:
        """Type of an element of a buffer of ``dtype``."""
        if dtype == "float16":
            return self.half_storage()
        if dtype == "bool":
            return self.BOOL_STORAGE
        return self.vtype(dtype)

    # ------------------------------------------------------------ expressions
    @handles(E.BufferLoad, table="expr")
    def load(self, e: E.BufferLoad) -> str:
        name, index = self.buffer_name(e.buffer), self.flat_index(e.buffer, e.indices)
        if e.buffer.dtype == "float16":
            return self.load_half(e.buffer, name, index)
        if e.buffer.dtype == "bool":
            return f"({name}[{index}] != 0)"
        return f"{name}[{index}]"

    def flat_index(self, buf, indices) -> str:
        if len(indices) != 1:
            raise GPULoweringError(f"{self.where()}: buffer {buf.name!r} is not flattened")
        flat = indices[0]
        if not E.is_const_int(buf.elem_offset, 0):
            flat = E.add(buf.elem_offset, flat)
        return self.index_text(flat)

    # ------------------------------------------------------------ statements
    def barrier(self, reason: str, hazard: set) -> None:
        if not self.divergent:
            self.emit(self.BARRIER)
            return
        names = sorted({n.buffer.storage.name for n in collect(self.kernel.body, lambda n: isinstance(
            n, (S.BufferStore, E.BufferLoad)) and id(n.buffer.storage) in hazard)})
        raise GPULoweringError(
            f"{self.where()}: {reason} ({', '.join(names)}) needs a barrier, but the code runs under a "
            "condition that depends on the thread (a guard, or a thread loop shorter than the block); "
            "move the statements out of it")

    @handles(S.SeqStmt, table="stmt")
    def seq(self, s: S.SeqStmt) -> None:
        parts = list(s.seq)
        for i, part in enumerate(parts):
            self.stmt(part)
            if i + 1 < len(parts):
                rest = S.SeqStmt(parts[i + 1:])
                self.sync_between(part, rest)
                if self.has_assert(part):
                    # a failed assert stops the thread: what follows runs only while none failed
                    self.emit("if (!rs_failed) {")
                    self.nested(rest)
                    self.emit("}")
                    return

    def has_assert(self, stmt) -> bool:
        key = id(stmt)
        if key not in self.assert_cache:   # (the statement is kept with its answer: its id stays its own)
            self.assert_cache[key] = (stmt, bool(collect(stmt, lambda n: isinstance(n, S.AssertStmt))))
        return self.assert_cache[key][1]

    def own_elements(self, *stmts) -> set:
        finder = _ThreadOwnAccesses(self.covered, self.kernel.block)
        for stmt in stmts:
            finder.visit(stmt)
        return finder.own()

    def sync_between(self, first, rest) -> None:
        written, read, read_shared = _memory(first)
        later_written, later_read, _ = _memory(rest)
        hazard = (written & (later_read | later_written)) | (read_shared & later_written)
        hazard -= self.own_elements(first, rest)
        if hazard:
            self.barrier("a later statement touching memory an earlier one wrote", hazard)

    @handles(S.BufferStore, table="stmt")
    def store(self, s: S.BufferStore) -> None:
        name, index = self.buffer_name(s.buffer), self.flat_index(s.buffer, s.indices)
        if s.buffer.dtype == "float16":
            line = self.store_half(s.buffer, name, index, self.cast_to(s.value, "float32")) + ";"
        elif s.buffer.dtype == "bool":
            line = f"{name}[{index}] = ({self.BOOL_STORAGE})({self.expr(s.value)});"
        else:
            line = f"{name}[{index}] = {self.cast_to(s.value, s.buffer.dtype)};"
        guard = [] if _storage_scope(s.buffer) == "local" else self.single_writer()
        if guard:
            self.emit(f"if ({' && '.join(guard)}) {{ {line} }}")
        else:
            self.emit(line)

    def single_writer(self) -> list[str]:
        """Conditions that leave one writer along every launch axis not covered by a bound loop."""
        out = []
        for axis, tag in enumerate(THREAD_AXES):
            if self.kernel.block[axis] > 1 and tag not in self.covered:
                out.append(f"{self.thread_index(axis)} == 0")
        for axis, tag in enumerate(BLOCK_AXES):
            if not E.is_const_int(self.kernel.grid[axis], 1) and tag not in self.covered:
                out.append(f"{self.block_index(axis)} == 0")
        return out

    def thread_dependent(self, e) -> bool:
        return bool(collect(e, lambda n: isinstance(n, E.BufferLoad) or
                            (isinstance(n, E.Var) and id(n) in self.thread_vars)))

    @handles(S.IfThenElse, table="stmt")
    def if_then_else(self, s: S.IfThenElse) -> None:
        saved = self.divergent
        self.divergent = saved or self.thread_dependent(s.condition)
        super().if_then_else(s)
        self.divergent = saved

    @handles(S.While, table="stmt")
    def while_loop(self, s: S.While) -> None:
        saved = self.divergent   # threads may leave the loop after different trip counts
        self.divergent = saved or self.thread_dependent(s.condition)
        first = len(self.lines)
        stop = "!rs_failed && " if self.has_assert(s.body) else ""
        self.emit(f"while ({stop}{parenthesized(self.expr(s.condition))}) {{")
        self.nested(s.body)
        self.emit("}")
        self.loop_lines.append((first, len(self.lines) - 1))
        self.divergent = saved

    @handles(S.LetStmt, table="stmt")
    def let(self, s: S.LetStmt) -> None:
        # a let of a thread-dependent value is itself thread-dependent (guards on it diverge)
        dependent = self.thread_dependent(s.value)
        uniform = self.uniform(s.value)
        if dependent:
            self.thread_vars.add(id(s.var))
        if uniform:
            self.uniform_vars.add(id(s.var))
        try:
            super().let(s)
        finally:
            self.thread_vars.discard(id(s.var))
            self.uniform_vars.discard(id(s.var))

    def uniform(self, e) -> bool:
        """Whether ``e`` certainly has one value in every thread of a block: no loads, only the
        function's scalars, blockIdx indices and lets of those."""
        return not collect(e, lambda n: isinstance(n, E.BufferLoad) or
                           (isinstance(n, E.Var) and id(n) not in self.uniform_vars))

    @handles(S.AssertStmt, table="stmt")
    def assert_stmt(self, s: S.AssertStmt) -> None:
        number = self.func.assert_number(s)
        if self.divergent or not self.uniform(s.condition):
            self.divergent_asserts.append((len(self.lines), s))
        # no `return`: PoCL loses a later thread's failure in a kernel that returned early (uniformly)
        # before a barrier; the flag keeps the control flow structured (see seq and the loops)
        self.emit(f"if (!{parenthesized(self.expr(s.condition))}) {{ "
                  f"rs_assert_failed(rs_status, {number}); rs_failed = 1; }}")

    def check_asserts(self) -> None:
        """Refuse a thread-dependent assert a block's threads may pass and fail apart when a
        barrier (or a warp shuffle) can follow it: after it in the code, or anywhere in a loop
        around it (the next iteration)."""
        def syncs(line: str) -> bool:
            return self.BARRIER in line or "__shfl" in line
        for position, s in self.divergent_asserts:
            later = any(syncs(line) for line in self.lines[position + 1:])
            looped = any(start <= position <= end and any(syncs(line) for line in self.lines[start:end + 1])
                         for start, end in self.loop_lines)
            if later or looped:
                raise GPULoweringError(
                    f"{self.where()}: the assert `{format_expr(s.condition)}` ({s.message!r}) may fail in some "
                    "threads of a block and not others, and the kernel synchronizes its threads after it (a "
                    "barrier or a cross-thread reduction): the threads that stop there would leave the others "
                    "waiting; check it outside the kernel or make its condition the same for the whole block")

    @handles(S.Allocate, table="stmt")
    def allocate(self, s: S.Allocate) -> None:
        buf = s.buffer
        if buf.scope == "shared":  # declared at the top of the kernel
            self.stmt(s.body)
            return
        size = buf.shape[0] if buf.shape else E.IntImm(1)
        if not isinstance(size, E.IntImm):
            raise GPULoweringError(f"{self.where()}: per-thread buffer {buf.name!r} has the symbolic "
                                   f"size {size!r}")
        name = self.names.get(buf, buf.name)
        self.scoped(f"{self.atype(buf)} {name}[{max(1, size.value)}];", s.body)

    @handles(S.For, table="stmt")
    def loop(self, s: S.For) -> None:
        self.bind_loop_var(s)
        if s.kind == "thread_binding":
            self.bound_loop(s)
            return
        var = self.names.get(s.loop_var, s.loop_var.name)
        ctype = self.vtype(s.loop_var.dtype)
        saved = self.divergent
        self.divergent = saved or self.thread_dependent(s.min) or self.thread_dependent(s.extent)
        end = s.extent if E.is_const_int(s.min, 0) else E.add(s.min, s.extent)
        if self.uniform(s.min) and self.uniform(s.extent):
            self.uniform_vars.add(id(s.loop_var))
        if s.kind == "unrolled" and isinstance(s.extent, E.IntImm) and not self.has_assert(s.body):
            self.emit("#pragma unroll")
        first = len(self.lines)
        stop = "!rs_failed && " if self.has_assert(s.body) else ""   # a failed assert ends the loop
        self.emit(f"for ({ctype} {var} = {self.expr(s.min)}; {stop}{var} < {self.expr(end)}; ++{var}) {{")
        self.nested(s.body)
        written, read, read_shared = _memory(s.body)
        # a global element each thread reads and writes at one index is its own (accumulations)
        hazard = ((written & read) | (read_shared & written)) - self.own_elements(s.body)
        if hazard:
            self.indent += 1
            self.barrier("a loop whose iterations read memory others wrote", hazard)
            self.indent -= 1
        self.emit("}")
        self.loop_lines.append((first, len(self.lines) - 1))
        self.divergent = saved
        self.uniform_vars.discard(id(s.loop_var))

    def bound_loop(self, s: S.For) -> None:
        tag = s.thread_tag
        axis = _AXIS[tag[-1]]
        is_thread = tag in THREAD_AXES
        if tag in self.covered:
            reason = self.rebinding_refusal(self.bound_by_tag[tag], s)
            if reason:
                raise GPULoweringError(f"{self.where()}: loop {s.loop_var.name!r} is bound to {tag} inside "
                                       f"another loop bound to {tag}, and {reason}")
        index = self.thread_index(axis) if is_thread else self.block_index(axis)
        var = self.names.get(s.loop_var, s.loop_var.name)
        ctype = self.vtype(s.loop_var.dtype)
        if is_thread:
            full = isinstance(s.extent, E.IntImm) and s.extent.value == self.kernel.block[axis]
        else:
            full = Analyzer().can_prove_equal(s.extent, self.kernel.grid[axis])
        self.emit("{")
        self.indent += 1
        start = "" if E.is_const_int(s.min, 0) else f"{self.expr(s.min)} + "
        self.emit(f"const {ctype} {var} = {start}({ctype}){index};")
        saved = (set(self.covered), self.divergent, set(self.thread_vars))
        saved_outer = self.bound_by_tag.get(tag)
        self.bound_by_tag[tag] = s
        self.covered.add(tag)
        if is_thread:
            self.thread_vars.add(id(s.loop_var))
        if not is_thread:
            self.uniform_vars.add(id(s.loop_var))
        if not full:
            self.emit(f"if (({ctype}){index} < {self.expr(s.extent)}) {{")
            self.divergent = self.divergent or is_thread
            self.nested(s.body)
            self.emit("}")
        else:
            self.stmt(s.body)
        self.covered, self.divergent, self.thread_vars = saved
        if saved_outer is None:
            self.bound_by_tag.pop(tag, None)
        else:
            self.bound_by_tag[tag] = saved_outer
        self.uniform_vars.discard(id(s.loop_var))
        self.indent -= 1
        self.emit("}")

    @staticmethod
    def rebinding_refusal(outer: S.For, inner: S.For) -> str | None:
        """Why ``inner``, bound to the axis ``outer`` is bound to, cannot run as the same index
        (None: it can). Serially (the interpreter) every ``outer`` iteration runs all of
        ``inner``; on the GPU thread i runs inner iteration i only. Both leave the same memory
        when ``inner`` covers no more than ``outer``, does not depend on ``outer``'s index and
        repeats the same stores each time: nothing it reads is written in ``outer``, nothing it
        writes is read in it (dlight's cooperative fetch of a shared tile inside the compute's
        threadIdx loop)."""
        if not (E.is_const_int(outer.min, 0) and E.is_const_int(inner.min, 0)):
            return "the loops do not both start at 0"
        if not Analyzer().can_prove(E.LE(inner.extent, outer.extent)):
            return "the inner loop may be longer than the outer one"
        if collect(inner.body, lambda n: n is outer.loop_var):
            return f"the inner loop uses the outer one's index {outer.loop_var.name!r}"
        accesses = (S.BufferStore, E.BufferLoad)
        stores = collect(inner.body, lambda n: isinstance(n, S.BufferStore))
        written = {id(n.buffer.storage) for n in stores}
        read_inside = {id(n.buffer.storage) for n in collect(inner.body, lambda n: isinstance(n, E.BufferLoad))}
        own = {id(n) for n in stores}
        written_outside = {id(n.buffer.storage) for n in collect(outer.body, lambda n: isinstance(n, S.BufferStore))
                           if id(n) not in own}
        if any(_storage_scope(n.buffer) == "local" for n in stores):
            # a per-thread array: serially each outer thread fills all of it, here only its element
            return "it writes a per-thread (local) buffer"
        if written & read_inside or read_inside & written_outside or \
                collect(inner.body, lambda n: isinstance(n, (ThreadReduce, S.AssertStmt, S.While))) or \
                not collect(inner.body, lambda n: isinstance(n, accesses)):
            return "its iterations are not a copy the outer loop may repeat"
        return None

    # ------------------------------------------------------------ barriers and warp shuffles
    def stmt(self, s) -> None:
        calls = [c for e in _direct_exprs(s) for c in collect(e, is_sync_call)]
        if calls:
            if isinstance(s, S.While):
                raise GPULoweringError(f"{self.where()}: {describe(calls[0])} in a while loop's condition")
            self.prepare_sync_calls(calls)
        super().stmt(s)

    def prepare_sync_calls(self, calls: list) -> None:
        """Code a statement's synchronizing calls need before it (OpenCL's emulated shuffles)."""

    @handles(E.Call, table="expr")
    def call(self, e: E.Call) -> str:
        if not is_sync_call(e):
            return super().call(e)
        if id(e) in self.sync_values:
            return self.sync_values[id(e)]
        if e.op == STORAGE_SYNC:
            raise GPULoweringError(f"{self.where()}: {describe(e)} is a statement, not a value")
        if e.op == ACTIVEMASK:
            return self.activemask(e)
        self.check_shuffle(e)
        mask, value, lane = (self.expr(a) for a in e.args[:3])
        return self.shuffle(e, mask, value, lane, e.args[3].value)

    def check_shuffle(self, e: E.Call) -> None:
        width, warp_size = e.args[3], e.args[4]
        if not E.is_const_int(warp_size, WARP_SIZE):
            raise GPULoweringError(f"{self.where()}: {describe(e)} names a warp of {format_expr(warp_size)} "
                                   f"lanes; the GPU targets here have warps of {WARP_SIZE}")
        if not isinstance(width, E.IntImm) or width.value < 1 or width.value > WARP_SIZE \
                or width.value & (width.value - 1):
            raise GPULoweringError(f"{self.where()}: {describe(e)} has the width {format_expr(width)}; it must be "
                                   f"a constant power of two up to {WARP_SIZE}")

    def shuffle(self, e: E.Call, mask: str, value: str, lane: str, width: int) -> str:
        raise NotImplementedError

    def shuffle_scratch(self, threads: int) -> list[str]:
        """Shared arrays the dialect's shuffles need (declared at the kernel's top)."""
        return []

    def activemask(self, e: E.Call) -> str:
        raise NotImplementedError

    def warp_barrier(self) -> str:
        return self.BARRIER

    @handles(S.Evaluate, table="stmt")
    def evaluate(self, s: S.Evaluate) -> None:
        call = s.value
        if not (isinstance(call, E.Call) and call.op == STORAGE_SYNC):
            super().evaluate(s)
            return
        scope = call.args[0].value
        if scope == "global":
            raise GPULoweringError(f"{self.where()}: {describe(call)}(\"global\") synchronizes every block of "
                                   "the grid; the GPU targets here do not (split the kernel instead)")
        if self.divergent:
            raise GPULoweringError(f"{self.where()}: {describe(call)} runs under a condition that depends on "
                                   "the thread (a guard, or a thread loop shorter than the block): every thread "
                                   "of the block must reach a barrier")
        self.emit(self.warp_barrier() if scope == "warp" else self.BARRIER)

    # ------------------------------------------------------------ cross-thread reduction
    @handles(ThreadReduce, table="stmt")
    def thread_reduce_stmt(self, s: ThreadReduce) -> None:
        if self.divergent:
            raise GPULoweringError(f"{self.where()}: a cross-thread reduction runs under a condition "
                                   "that depends on the thread; every thread of the block must reach it")
        if s.thread_tag in self.covered and not s.in_thread_loop:
            raise GPULoweringError(f"{self.where()}: a reduction over {s.thread_tag} sits inside a loop "
                                   f"bound to {s.thread_tag}")
        if s.in_thread_loop and s.thread_tag not in self.covered:
            raise GPULoweringError(f"{self.where()}: a T.tvm_thread_allreduce over {s.thread_tag} outside "
                                   "the loop bound to it")
        self.emit("{")
        self.indent += 1
        self.thread_reduce(s)
        self.stmt(s.body)
        self.indent -= 1
        self.emit("}")

    def combine_text(self, op: str, dtype: str, a: str, b: str) -> str:
        if op in REDUCE_INFIX:
            return f"({a} {REDUCE_INFIX[op]} {b})"
        return f"rs_{op}_{self.helper_suffix(dtype)}({a}, {b})"

    def linear_thread_id(self) -> str:
        i64 = self.TYPES["int64"]
        tx, ty, tz = (f"(({i64}){self.thread_index(axis)})" for axis in range(3))
        return f"({tx} + {self.kernel.block[0]} * ({ty} + {self.kernel.block[1]} * {tz}))"

    def thread_reduce(self, s: ThreadReduce) -> None:
        """A tree in shared memory: log2(threads) halving steps, each behind a barrier; every
        thread then reads its group's total. Dialects may replace it (CUDA: warp shuffles)."""
        axis = _AXIS[s.thread_tag[-1]]
        block = self.kernel.block
        count = block[axis]
        stride = 1 if axis == 0 else block[0] if axis == 1 else block[0] * block[1]
        dtype = scratch_dtype(s.value.dtype)
        ctype = self.vtype(dtype)
        scratch = f"rs_red_{dtype}"
        i64 = self.TYPES["int64"]
        lin, pos, step = self.names.fresh("rs_lin"), self.names.fresh("rs_pos"), self.names.fresh("rs_step")
        self.emit(f"const {i64} {lin} = {self.linear_thread_id()};")
        self.emit(f"const {i64} {pos} = ({i64}){self.thread_index(axis)};")
        self.emit(f"{scratch}[{lin}] = ({ctype})({self.expr(s.value)});")
        self.emit(self.BARRIER)
        half = 1
        while half * 2 < count:
            half *= 2
        if count > 1:
            self.emit(f"for ({i64} {step} = {half}; {step} > 0; {step} >>= 1) {{")
            mine, other = f"{scratch}[{lin}]", f"{scratch}[{lin} + {step} * {stride}]"
            self.emit(f"  if ({pos} < {step} && {pos} + {step} < {count}) "
                      f"{mine} = {self.combine_text(s.op, dtype, mine, other)};")
            self.emit(f"  {self.BARRIER}")
            self.emit("}")
        result = self.names.get(s.result, s.result.name)
        self.emit(f"const {self.vtype(s.result.dtype)} {result} = "
                  f"({self.vtype(s.result.dtype)}){scratch}[{lin} - {pos} * {stride}];")
        self.emit(self.BARRIER)

    # ------------------------------------------------------------ kernel
    def kernel_source(self) -> str:
        kernel = self.kernel
        params = []
        for buf in self.func.buffers:
            params.append(f"{self.GLOBAL} {self.stype(buf.dtype)}* {self.names.get(buf, buf.name)}".strip())
        for ws in self.func.workspaces:
            params.append(f"{self.GLOBAL} {self.stype(ws.dtype)}* {self.names.get(ws.buffer, ws.name)}".strip())
        header = []
        i64 = self.TYPES["int64"]
        for i, var in enumerate(self.func.sym_vars):
            if not dt.is_int(var.dtype):
                raise GPULoweringError(f"{self.func.name!r}: scalar parameter {var.name!r} has dtype "
                                       f"{var.dtype}; kernels take only integer scalars")
            params.append(f"{i64} rs_sym{i}")
            name = self.names.get(var, var.name)
            header.append(f"const {self.vtype(var.dtype)} {name} = ({self.vtype(var.dtype)})rs_sym{i};")
        params.append(f"{self.GLOBAL} int* rs_status".strip())
        for buf in kernel.shared:
            size = buf.shape[0] if buf.shape else E.IntImm(1)
            header.insert(0, f"{self.SHARED} {self.atype(buf)} {self.names.get(buf, buf.name)}"
                             f"[{max(1, size.value)}];")
        threads = kernel.block[0] * kernel.block[1] * kernel.block[2]
        header[:0] = self.shuffle_scratch(threads)
        for dtype in sorted({scratch_dtype(n.value.dtype)
                             for n in collect(kernel.body, lambda n: isinstance(n, ThreadReduce))}):
            header.insert(0, f"{self.SHARED} {self.vtype(dtype)} rs_red_{dtype}[{threads}];")
        position = next((i for i, k in enumerate(self.func.kernels) if k is kernel), 0)
        earlier = any(k.body is not None and self.has_assert(k.body) for k in self.func.kernels[:position])
        if earlier or self.has_assert(kernel.body):
            header.append("int rs_failed = 0;")
        if earlier:
            # an earlier launch's assert failed: the function stops there, as on the C target. One
            # thread reads the word for the block (this kernel's own asserts may be writing it), so
            # the whole block agrees
            header.insert(0, f"{self.SHARED} int rs_stop;")
            header += [f"if ({self.linear_thread_id()} == 0) rs_stop = *rs_status;", self.BARRIER,
                       "rs_failed = rs_stop == STATUS_ASSERT_FAILED;"]
            self.emit("if (!rs_failed) {")
            self.nested(kernel.body)
            self.emit("}")
        else:
            self.stmt(kernel.body)
        self.check_asserts()
        lines = [f"{self.KERNEL} void {kernel.symbol}({', '.join(params)}) {{".lstrip()]
        lines += ["  " + line for line in header] + ["  (void)rs_status;"] + self.lines + ["}"]
        return "\n".join(lines)


def _direct_exprs(s) -> list:
    """The expressions a statement evaluates itself (not those of the statements inside it)."""
    if isinstance(s, S.BufferStore):
        return [s.value, *s.indices]
    if isinstance(s, (S.LetStmt, S.Evaluate)):
        return [s.value]
    if isinstance(s, (S.IfThenElse, S.AssertStmt, S.While)):
        return [s.condition]
    if isinstance(s, S.For):
        return [s.min, s.extent]
    if isinstance(s, ThreadReduce):
        return [s.value]
    return []


def helper_prelude(emitter_cls, dtypes) -> str:
    """Helpers every kernel may call: integer floor division, the zero-divisor report,
    NaN-propagating min/max per dtype (as NumPy's minimum/maximum)."""
    h, g, i64 = emitter_cls.HELPER, emitter_cls.GLOBAL, emitter_cls.TYPES["int64"]
    u64 = emitter_cls.TYPES["uint64"]
    status = f"{(g + ' int').strip()}* status"
    lines = [
        f"#define STATUS_ZERO_DIVISION ({STATUS_ZERO_DIVISION})",
        f"#define STATUS_INDEX_OUT_OF_RANGE ({STATUS_INDEX_OUT_OF_RANGE})",
        f"#define STATUS_ASSERT_FAILED ({STATUS_ASSERT_FAILED})",
        f"#define STATUS_NEGATIVE_POWER ({STATUS_NEGATIVE_POWER})",
        f"{h} {i64} rs_negative_power({status}) "
        f"{{ {emitter_cls.COMPARE_AND_SWAP}(status, 0, STATUS_NEGATIVE_POWER); return 0; }}".strip(),
        # T.int_pow (see the C prelude)
        f"{h} {u64} rs_int_pow({u64} b, {u64} e) {{ {u64} r = 1; "
        "while (e) { if (e & 1) r *= b; b *= b; e >>= 1; } return r; }".strip(),
        # compare-and-swap: a zero divisor does not overwrite an assert's or an index's report
        f"{h} {i64} rs_divided_by_zero({status}) "
        f"{{ {emitter_cls.COMPARE_AND_SWAP}(status, 0, STATUS_ZERO_DIVISION); return 0; }}".strip(),
        # a false assert claims the word (unless another failure did) and records its number in the
        # int32 after it, as ASSERT_NUMBER_BASE - number with an atomic max: the first assert in
        # program order among those failing is reported. (No branch on the swap's result: PoCL drops
        # `if (atomic_cmpxchg(..) == 0) store` in some kernels with barriers, losing the failure.)
        f"{h} void rs_assert_failed({status}, int number) {{ "
        f"{emitter_cls.COMPARE_AND_SWAP}(status, 0, STATUS_ASSERT_FAILED); "
        f"{emitter_cls.ATOMIC_MAX}(status + 1, {ASSERT_NUMBER_BASE} - number); }}".strip(),
        # T.checked_index (see the C prelude): the first failing thread claims the status word
        # and records the value and the extent after it (DEVICE_STATUS_BYTES)
        f"{h} {i64} rs_index_out_of_range({status}, {i64} i, {i64} n) {{ "
        f"if ({emitter_cls.COMPARE_AND_SWAP}(status, 0, STATUS_INDEX_OUT_OF_RANGE) == 0) {{ "
        f"(({(g + ' ' + i64).strip()}*)status)[1] = i; (({(g + ' ' + i64).strip()}*)status)[2] = n; }} "
        "return 0; }".strip(),
        f"{h} {i64} rs_checked_index({i64} i, {i64} n, {status}) {{ {i64} w = i < 0 ? i + n : i; "
        "return (w >= 0 && w < n) ? w : rs_index_out_of_range(status, i, n); }".strip(),
        # b == -1 apart: the smallest int64 / -1 traps (see the C prelude)
        f"{h} {i64} rs_floordiv({i64} a, {i64} b) {{ if (b == -1) return ({i64})(({u64})0 - ({u64})a); "
        f"{i64} q = a / b; return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q; }}".strip(),
        f"{h} {i64} rs_floormod({i64} a, {i64} b) {{ if (b == -1) return 0; {i64} r = a % b; "
        "return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }".strip(),
        overflow_safe_division_helpers(h, emitter_cls.TYPES),
    ]
    lines.append(float_to_int_helpers(h, {d: emitter_cls.TYPES[d] for d in dtypes}))
    lines.append(float_floor_divmod_helpers(h, {d: emitter_cls.TYPES[d] for d in dtypes}, overloaded_math=True))
    for dtype in dtypes:
        ct = emitter_cls.TYPES[dtype]
        nan = " || a != a" if dt.is_float(dtype) else ""
        lines.append(f"{h} {ct} rs_min_{dtype}({ct} a, {ct} b) {{ return (a < b{nan}) ? a : b; }}".strip())
        lines.append(f"{h} {ct} rs_max_{dtype}({ct} a, {ct} b) {{ return (a > b{nan}) ? a : b; }}".strip())
    return "\n".join(lines)


def module_source(emitter_cls, header: str, funcs: list[GPUFunction]) -> str:
    """One translation unit: ``header``, the helpers, then every kernel of every function."""
    if isinstance(funcs, GPUFunction):
        funcs = [funcs]
    symbols = [k.symbol for f in funcs for k in f.kernels]
    if len(set(symbols)) != len(symbols):
        raise GPULoweringError(f"two kernels share a symbol: {sorted(symbols)}")
    dtypes = [d for d in emitter_cls.TYPES if d != "float16"]
    parts = [header, helper_prelude(emitter_cls, dtypes)]
    for func in funcs:
        for kernel in func.kernels:
            parts.append(emitter_cls(func, kernel).kernel_source())
    return "\n\n".join(parts) + "\n"


def identity_text(emitter: KernelEmitter, op: str, dtype: str) -> str:
    return emitter.expr(identity(op, dtype))
