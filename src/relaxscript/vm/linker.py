"""Instruction -> closure linking for one frame.

Each instruction becomes a zero-argument closure that captures the frame's
registers, symbol table and prebuilt ctypes argument arrays, does its work
and returns the next program counter (-1 after ``Ret``). The Python of the
checks and expressions that shape lowering describes is generated
(``sym_code``) and compiled once per function (``FunctionCode``) and shared
by all frames.
"""
from __future__ import annotations

import ctypes
import dataclasses
from math import prod

import numpy as np

from tensorir.errors import ShapeMismatchError

from ..interpreter.allocation import allocation_error, impossible_shape
from ..interpreter.values import ShapeTuple
from . import instructions as I
from .call_site import link_call_site
from .device_memory import link_device_alloc_storage, link_device_alloc_tensor, link_host_library
from .native_library import link_native_library
from .prebind import _written_registers, next_pcs, prebind_static_allocations
from backends.aligned_memory import aligned_bytes
from .result_pool import RESULTS
from .sym_table import RUNTIME_NAMES, compile_expr
from .values import copy_views, data_pointer, make_match_namespace, own_value, truthy


class FunctionCode:
    """Per-function compiled pieces (shared by every frame of that function)."""

    def __init__(self, func: I.VMFunction, device_array_type=None):
        self.func = func
        self.device_array_type = device_array_type
        self.matchers = {}
        self.exprs = {}
        for pc, ins in enumerate(func.code):
            if isinstance(ins, I.MatchValues):
                namespace = {**RUNTIME_NAMES, **make_match_namespace(ins.messages, ins.dtypes, device_array_type)}
                exec(compile(ins.source, f"<vm {func.name} check {pc}>", "exec"), namespace)  # noqa: S102
                self.matchers[pc] = namespace["_match"]
        # registers that get a data pointer when written (allocations)
        self.ptr_regs = {ins.dst for ins in func.code if isinstance(ins, (I.AllocTensor, I.AllocStorage))}

    def expr(self, tree: tuple):
        fn = self.exprs.get(tree)
        if fn is None:
            fn = self.exprs[tree] = compile_expr(tree, f"<vm {self.func.name}>")
        return fn


class Frame:
    """Registers, symbol table and linked code of one activation of a function."""

    def __init__(self, code: FunctionCode, vm):
        func = code.func
        self.template = [None] * func.num_regs
        for reg, value in func.constants.items():
            self.template[reg] = value
        self.ptrs = [None] * func.num_regs
        self.ptr_regs = code.ptr_regs
        self.constant_regs = frozenset(func.constants)
        self.table = (ctypes.c_int64 * max(1, func.table_size))()
        self.storages: dict[int, np.ndarray] = {}
        self.result = [None]
        # static storages and views: made now, in the template every call starts from (host only)
        skipped = (prebind_static_allocations(func, self.template, self.ptrs)
                   if vm.memory is None and vm.prebind else frozenset())
        self.regs = list(self.template)
        self.fixed_ptr_regs = frozenset(func.code[pc].dst for pc in skipped)
        runs_next = next_pcs(len(func.code), skipped)
        # one step per instruction: what instruments see
        self.instruction_steps = [_skipped_step(runs_next[pc]) if pc in skipped
                                  else _link(ins, pc, runs_next, code, self, vm)
                                  for pc, ins in enumerate(func.code)]
        # what a plain call runs: the same, with runs of kernel calls joined into one step each
        self.steps = link_kernel_runs(func, self.instruction_steps, runs_next, code, self, vm)


def _jump_targets(code: list, runs_next: list) -> set:
    targets = set()
    for ins in code:
        if isinstance(ins, I.If) and ins.else_pc >= 0:
            targets.add(runs_next[ins.else_pc])
        elif isinstance(ins, I.Goto) and ins.target >= 0:
            targets.add(runs_next[ins.target])
    return targets


def _same_every_call(func: I.VMFunction, code: FunctionCode) -> dict:
    """Registers whose value is the same object on every call of a frame: constants and the
    arguments a bound function fixed (``vm.bind``), when no instruction writes them."""
    written = _written_registers(func.code)
    values = {r: v for r, v in func.constants.items() if not written[r]}
    for index, value in getattr(code, "fixed_args", {}).items():
        if not written[index] and type(value) is np.ndarray:
            values[index] = value
    return values


def link_kernel_runs(func: I.VMFunction, steps: list, runs_next: list, code: FunctionCode, frame: Frame,
                     vm) -> list:
    """``steps`` with each run of consecutive kernel calls replaced by one step at the run's first pc,
    when the target links runs (``KernelModule.link_run``).

    Kernels change no register and no symbol slot, so the run's other work moves around them: the
    call sites' symbol work and the allocations among the calls run first, in program order, and
    the ``Kill``s after. A run never spans a jump target, and ends before a call with variants,
    before a call site that writes a slot an earlier call of the run reads, and before an
    allocation into a register an earlier member of the run used. An error of that early work is
    raised before the run's kernels, not between them."""
    kernels = vm.kernels
    link_run = getattr(kernels, "link_run", None)
    if link_run is None or vm.memory is not None or not vm.kernel_runs:
        return steps
    code_list = func.code
    targets = _jump_targets(code_list, runs_next)
    fixed_values = None
    out = list(steps)
    where = f"function '{func.name}'"
    pc = runs_next[0]
    while pc < len(code_list):
        calls, early, kills, read_slots, used, last = [], [], [], set(), set(), pc
        p = pc
        while p < len(code_list) and (p == pc or p not in targets):
            ins = code_list[p]
            kind = type(ins)
            if kind is I.Kill:
                kills.append(ins.reg)
                used.add(ins.reg)
            elif kind is I.AllocTensor or kind is I.AllocStorage:
                if ins.dst in used:
                    break
                early.append(steps[p])
                used.add(ins.dst)
            elif kind is I.CallKernel and not ins.variants:
                site = ins.call_site
                if site is not None and not site.empty():
                    writes = {slot for _, _, slot in site.reads} | {slot for slot, _ in site.assign}
                    if writes & read_slots:
                        break
                    early.append(link_call_site(ins, code, frame, None))
                calls.append(ins)
                read_slots.update(range(ins.sym_base, ins.sym_base + ins.sym_count))
                used.update(ins.buffers)
            else:
                break
            last = p
            p = runs_next[p + 1]
        if len(calls) >= 2:
            if fixed_values is None:
                fixed_values = _same_every_call(func, code)
            step = link_run(calls, tuple(early), runs_next[last + 1], frame, fixed_values, tuple(kills), where)
            if step is not None:
                out[pc] = step
        pc = runs_next[p + 1] if p == pc else p
    return out


def _skipped_step(nxt: int):
    """A prebound allocation's slot (a call reaches it only as pc 0): on to the next one that runs."""
    return lambda: nxt


def _sym_pointer(frame: Frame, base: int):
    if base < 0:
        return None
    return ctypes.c_void_p(ctypes.addressof(frame.table) + 8 * base)


def _link(ins, pc: int, runs_next: list, code: FunctionCode, frame: Frame, vm):
    """``runs_next[p]``: the first pc at or after ``p`` that is not a prebound allocation."""
    nxt = runs_next[pc + 1]
    regs, t = frame.regs, frame.table
    kind = type(ins)

    if kind is I.MatchValues:
        match = code.matchers[pc]

        def step():
            match(regs, t)
            return nxt
        return step

    memory = vm.memory
    if kind is I.AllocTensor:
        if memory is not None:
            return link_device_alloc_tensor(ins, nxt, code, frame, memory, _allocation_failure(ins, code, t))
        return _link_alloc_tensor(ins, nxt, code, frame)

    if kind is I.AllocStorage:
        if memory is not None:
            return link_device_alloc_storage(ins, nxt, code, frame, memory, _allocation_failure(ins, code, t))
        return _link_alloc_storage(ins, nxt, code, frame)

    if kind is I.CallKernel:
        prologue = link_call_site(ins, code, frame, memory.device_array_type if memory is not None else None)
        if ins.variants:
            return _link_variants(ins, nxt, code, frame, vm, prologue)
        return vm.kernels.link(ins, nxt, frame, prologue, f"function '{code.func.name}'")

    if kind is I.CallLibrary:
        from backends.library import get_library
        entry = get_library(ins.library)
        inputs, outputs = ins.inputs, ins.outputs
        if memory is not None:
            return link_host_library(ins, nxt, code, frame, memory, entry)
        if entry.dps and entry.numpy_impl is not None:
            # already in destination-passing form: call it directly (the entry checks its operands)
            impl, operands = entry.numpy_impl, tuple(inputs) + tuple(outputs)

            def step():
                try:
                    impl(*[regs[r] for r in operands])
                except ShapeMismatchError as err:
                    raise ShapeMismatchError(f"function '{code.func.name}': {err}") from None
                return nxt
            if vm.native_library:
                return link_native_library(ins, nxt, code, frame, entry, step) or step
            return step

        def step():
            try:
                entry.run_dps([regs[i] for i in inputs], [regs[o] for o in outputs])
            except ShapeMismatchError as err:
                raise ShapeMismatchError(f"function '{code.func.name}': {err}") from None
            return nxt
        return step

    if kind is I.CallFallback:
        return _link_fallback(ins, nxt, code, frame, memory)

    if kind is I.CallPacked:
        from backends.library import get_library
        entry = get_library(ins.library)
        dst, args = ins.dst, ins.args

        host = memory.to_host if memory is not None else (lambda v: v)

        def step():
            result = entry(*[host(regs[a]) for a in args])
            regs[dst] = () if result is None else result
            return nxt
        return step

    if kind is I.CallFunc:
        dst, args, callee_name = ins.dst, ins.args, ins.func
        callee = []

        def step():
            if not callee:
                callee.append(vm.function(callee_name))
            regs[dst] = callee[0].invoke([regs[a] for a in args])
            return nxt
        return step

    if kind is I.MakeTuple:
        dst, fields = ins.dst, ins.fields_

        def step():
            regs[dst] = tuple([regs[f] for f in fields])
            return nxt
        return step

    if kind is I.GetItem:
        dst, src, index = ins.dst, ins.src, ins.index

        def step():
            regs[dst] = regs[src][index]
            return nxt
        return step

    if kind is I.Move:
        dst, src = ins.dst, ins.src

        def step():
            regs[dst] = regs[src]
            return nxt
        return step

    if kind is I.MakeShape:
        dst = ins.dst
        values = code.expr(("tuple", *ins.values_code))

        def step():
            regs[dst] = ShapeTuple(values(t))
            return nxt
        return step

    if kind is I.MakePrim:
        dst, value = ins.dst, code.expr(ins.code)

        def step():
            regs[dst] = value(t)
            return nxt
        return step

    if kind is I.ShapeOf:
        dst, src = ins.dst, ins.src

        def step():
            regs[dst] = ShapeTuple(regs[src].shape)
            return nxt
        return step

    if kind is I.If:
        cond, else_pc = ins.cond, (runs_next[ins.else_pc] if ins.else_pc >= 0 else ins.else_pc)
        host = memory.to_host if memory is not None else (lambda v: v)

        def step():
            return nxt if truthy(host(regs[cond])) else else_pc
        return step

    if kind is I.Goto:
        target = runs_next[ins.target] if ins.target >= 0 else ins.target
        return lambda: target

    if kind is I.Kill:
        reg = ins.reg

        def step():
            regs[reg] = None
            return nxt
        return step

    if kind is I.Ret:
        src, result, copy = ins.src, frame.result, ins.copy_escaping
        copy_of = memory.copy_views if memory is not None else copy_views

        def step():
            result[0] = copy_of(regs[src]) if copy else regs[src]
            return -1
        return step

    raise TypeError(f"unknown VM instruction {kind.__name__}")


def _link_variants(ins: I.CallKernel, nxt: int, code: FunctionCode, frame: Frame, vm, prologue):
    """A kernel call with guarded variants: after the call site's symbol work, the first
    condition that holds picks its kernel's step (each linked like a plain call)."""
    t = frame.table
    where = f"function '{code.func.name}'"

    def linked(kernel: str):
        return vm.kernels.link(dataclasses.replace(ins, kernel=kernel, call_site=None, variants=()),
                               nxt, frame, None, where)
    default = linked(ins.kernel)
    choices = tuple((code.expr(tree), linked(name)) for tree, name in ins.variants)
    if len(choices) == 1:   # the common case: one test, no loop
        ((cond, chosen),) = choices

        def step():
            if prologue is not None:
                prologue()
            return chosen() if cond(t) else default()
        return step

    def step():
        if prologue is not None:
            prologue()
        for cond, run in choices:
            if cond(t):
                return run()
        return default()
    return step


def _link_alloc_tensor(ins: I.AllocTensor, nxt: int, code: FunctionCode, frame: Frame):
    regs, ptrs, t = frame.regs, frame.ptrs, frame.table
    dst, dtype = ins.dst, np.dtype(ins.dtype)
    shape_of = code.expr(ins.shape_code)
    fail = _allocation_failure(ins, code, t)
    if ins.storage is None:
        empty = RESULTS.empty    # large results reuse blocks freed by earlier calls

        def step():
            shape = shape_of(t)
            try:
                array = empty(shape, dtype)
            except (ValueError, MemoryError):   # a negative dim, or too many bytes
                raise fail(shape) from None
            regs[dst] = array
            ptrs[dst] = data_pointer(array)
            return nxt
        return step
    storage, offset_of, itemsize = ins.storage, code.expr(ins.offset_code), dtype.itemsize
    cached = []

    def view():
        shape = shape_of(t)
        offset = offset_of(t)
        if impossible_shape(shape, itemsize) is not None:
            raise fail(shape)
        nbytes = itemsize * prod(shape)
        buf = regs[storage]
        if offset + nbytes > buf.shape[0]:
            raise ShapeMismatchError(f"function '{code.func.name}': tensor '{ins.name}' "
                                     f"({nbytes} bytes at offset {offset}) exceeds its storage "
                                     f"of {buf.shape[0]} bytes")
        return buf[offset:offset + nbytes].view(dtype).reshape(shape), ptrs[storage] + offset

    if ins.static:
        def step():
            if not cached:
                cached.extend(view())   # the storage lives as long as the frame
            regs[dst], ptrs[dst] = cached
            return nxt
        return step

    last = [None, None, None, None]   # storage, shape, offset, (view, pointer)

    def step():
        # Symbolic shapes: rebuild the view only when the storage, shape or offset changed.
        shape, offset, buf = shape_of(t), offset_of(t), regs[storage]
        if last[0] is not buf or last[1] != shape or last[2] != offset:
            last[:] = [buf, shape, offset, view()]
        regs[dst], ptrs[dst] = last[3]
        return nxt
    return step


def _link_alloc_storage(ins: I.AllocStorage, nxt: int, code: FunctionCode, frame: Frame):
    regs, ptrs, t = frame.regs, frame.ptrs, frame.table
    dst = ins.dst
    if ins.static_size is not None:
        storage = aligned_bytes(max(1, ins.static_size))
        pointer = data_pointer(storage)

        def step():
            regs[dst] = storage
            ptrs[dst] = pointer
            return nxt
        return step
    size_of = code.expr(ins.size_code)
    held = frame.storages
    fail = _allocation_failure(ins, code, t)

    def step():
        size = max(1, size_of(t))
        buf = held.get(dst)
        if buf is None or buf.shape[0] < size:   # grow-only: reused by later calls
            try:
                buf = held[dst] = aligned_bytes(size)
            except (ValueError, MemoryError):
                raise fail((size,)) from None
            ptrs[dst] = data_pointer(buf)
        regs[dst] = buf
        return nxt
    return step


def _allocation_failure(ins, code: FunctionCode, t):
    """``fail(shape)``: the AllocationError of an allocation instruction, its vars read from ``t``."""
    is_storage = isinstance(ins, I.AllocStorage)
    dtype = np.uint8 if is_storage else np.dtype(ins.dtype)
    what = f"{'storage' if is_storage else 'tensor'} '{ins.name}'"
    # executables saved before these fields existed have none
    text, symbols = getattr(ins, "shape_text", ""), getattr(ins, "symbols", ())

    def fail(shape):
        return allocation_error(code.func.name, what, text, shape, dtype,
                                [(name, t[slot], origin) for name, slot, origin in symbols])
    return fail


def _link_fallback(ins: I.CallFallback, nxt: int, code: FunctionCode, frame: Frame, memory):
    from ..op.registry import get_op_spec
    regs = frame.regs
    spec = get_op_spec(ins.op_name)
    if spec.reference is None:
        raise I.VMBuildError(f"function '{code.func.name}': operator {ins.op_name} has no NumPy "
                             "reference and was not lowered")
    reference, attrs, args, dst = spec.reference, ins.attrs, ins.args, ins.dst
    as_tensor = ins.tensor_result
    label = ins.op_name[len("relax."):]
    host = memory.to_host if memory is not None else (lambda v: v)   # references run on NumPy

    def step():
        values = [host(regs[a]) for a in args]
        try:
            result = reference(*values, **attrs)
        except ShapeMismatchError:
            raise
        except (ValueError, IndexError) as err:
            shapes = ", ".join(str(tuple(v.shape)) if isinstance(v, np.ndarray) else repr(v) for v in values)
            raise ShapeMismatchError(f"function '{code.func.name}': R.{label} failed on arguments "
                                     f"{shapes}: {err}") from err
        if as_tensor and not isinstance(result, np.ndarray):
            result = np.asarray(result)
        regs[dst] = own_value(result, values)
        return nxt
    return step
