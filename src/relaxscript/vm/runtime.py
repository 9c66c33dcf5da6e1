"""The virtual machine: runs an Executable's functions on NumPy arrays.

``vm["main"](*arrays)`` checks the arguments (all checks before any kernel
runs; ``vm.bind`` fixes arguments checked once), executes the function's instructions in a tight loop over linked
closures, and returns NumPy arrays (tuples as tuples). Each function keeps
a pool of frames (registers, symbol table, storages, prebuilt ctypes
arrays), so a call allocates nothing but the tensors it creates; recursion
takes a fresh frame.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from tensorir.errors import ShapeDivisionByZeroError, ShapeMismatchError

from backends.target import get_backend

from .bound_call import BoundFunction
from .executable import Executable
from .linker import Frame, FunctionCode
from .instructions import (AllocStorage, AllocTensor, CallFallback, CallFunc, CallKernel, CallLibrary,
                           CallPacked, Kill)

Instrument = Callable[[str, int, str, object], object]


class FunctionRuntime:
    def __init__(self, vm: "VirtualMachine", func):
        self.vm = vm
        self.func = func
        memory = vm.memory
        self.code = FunctionCode(func, memory.device_array_type if memory is not None else None)
        self.pool: list[Frame] = []
        self.num_params = len(func.params)
        self.written_params = getattr(func, "written_params", ())
        self.reports = [_reports(ins, func, self.code.ptr_regs) for ins in func.code]

    def invoke(self, args):
        if len(args) != self.num_params:
            raise ShapeMismatchError(
                f"function '{self.func.name}' takes {self.num_params} argument(s) "
                f"({', '.join(self.func.params)}), got {len(args)}")
        return self.run(args, self.code, self.pool)

    def bind(self, fixed: dict) -> BoundFunction:
        """This function with the arguments ``{index: value}`` fixed (checked once, see bound_call)."""
        return BoundFunction(self, fixed)

    def run(self, args, code: FunctionCode, pool: list):
        """Run with ``len(args) == num_params`` on a frame of ``pool`` linked from ``code``."""
        frame = pool.pop() if pool else Frame(code, self.vm)
        regs = frame.regs
        regs[:self.num_params] = args
        team = self.vm.team
        if team is not None:
            team.enter()   # size the kernels' thread team to the cores free now
        try:
            steps = frame.steps
            pc = 0
            if self.vm.instrument is None:
                try:
                    while pc >= 0:
                        pc = steps[pc]()
                except ZeroDivisionError as err:
                    raise self._division_error(err, pc) from None
            else:
                self._run_instrumented(frame)
            result = frame.result[0]
            if self.vm.memory is not None:
                self._copy_back(args, regs)
                result = self.vm.memory_result(result, args)
        finally:
            if team is not None:
                team.leave()
            regs[:] = frame.template   # drop references to this call's values
            frame.result[0] = None
            pool.append(frame)
        return result

    def _copy_back(self, args, regs) -> None:
        """A NumPy argument that a kernel updated in place on the device gets the device's values."""
        memory = self.vm.memory
        for entry in self.written_params:
            # an index, or (index, register) for a parameter written through another register
            i, reg = (entry, entry) if type(entry) is int else entry
            host, device = args[i], regs[reg]
            if isinstance(host, np.ndarray) and device is not host and isinstance(device, memory.device_array_type):
                host[...] = memory.to_host(device)

    def _division_error(self, err: ZeroDivisionError, pc: int) -> ZeroDivisionError:
        """Python's bare ZeroDivisionError from the symbol code of instruction ``pc`` (a shape such
        as ``n * 4 // k`` with ``k = 0``) as an error naming the function and the instruction; a
        kernel's own (KernelDivisionByZeroError) passes through."""
        ins = self.func.code[pc]
        if type(err) is not ZeroDivisionError or isinstance(ins, (CallPacked, CallFallback, CallFunc)):
            return err   # a packed function's, an op reference's or a callee's own error is theirs
        name = getattr(ins, "name", "") or self.func.reg_names.get(ins.produces(), "")
        what = f"{type(ins).__name__}{f' {name!r}' if name else ''}"
        return ShapeDivisionByZeroError(f"function '{self.func.name}': a shape or symbolic value computed "
                                        f"for {what} (instruction {pc}) divides by zero")

    def _run_instrumented(self, frame: Frame) -> None:
        steps, regs, hook, name = frame.instruction_steps, frame.regs, self.vm.instrument, self.func.name
        pc = 0
        while pc >= 0:
            current = pc
            try:
                pc = steps[current]()
            except ZeroDivisionError as err:
                raise self._division_error(err, current) from None
            for reg, label in self.reports[current]:
                hook(name, current, label, regs[reg])


def _reports(ins, func, allocated: set) -> tuple:
    """(register, name) pairs an instrument sees after ``ins`` runs: the values it
    produced; for a DPS kernel call, the VM-allocated buffers it may have written. A register
    that also holds folded tuple fields is reported under those names too."""
    if isinstance(ins, (AllocTensor, AllocStorage, Kill)):
        return ()
    if isinstance(ins, CallKernel):
        regs = (ins.dst,) if ins.dst is not None else tuple(r for r in ins.buffers if r in allocated)
        pairs = tuple((r, func.reg_names.get(r, "") or ins.name) for r in regs)
    elif isinstance(ins, CallLibrary):
        pairs = tuple((r, func.reg_names.get(r, "")) for r in ins.outputs)
    else:
        dst = ins.produces()
        pairs = ((dst, getattr(ins, "name", "") or func.reg_names.get(dst, "")),) if dst is not None else ()
    aliases = getattr(func, "reg_aliases", {})   # executables saved before aliases existed have none
    return pairs + tuple((r, alias) for r, _ in pairs for alias in aliases.get(r, ()))


class VirtualMachine:
    """``VirtualMachine(exe)``; ``vm["main"](*arrays)``; ``vm.set_instrument(fn)``.

    ``prebind=False`` makes every static allocation per call instead of once per frame
    (``vm/prebind.py``): the same results, to measure what prebinding saves. ``kernel_runs=False``
    links every kernel call as its own step instead of joining runs of them into one native call
    (``linker.link_kernel_runs``): the same results, to measure or profile per kernel."""

    def __init__(self, exe: Executable, prebind: bool = True, kernel_runs: bool = True):
        if not isinstance(exe, Executable):
            raise TypeError(f"VirtualMachine needs an Executable (from rx.build), got {type(exe).__name__}")
        if not isinstance(prebind, bool):
            raise TypeError(f"VirtualMachine's prebind must be True or False, got {prebind!r}")
        if not isinstance(kernel_runs, bool):
            raise TypeError(f"VirtualMachine's kernel_runs must be True or False, got {kernel_runs!r}")
        self.exe = exe
        self.prebind = prebind
        self.kernel_runs = kernel_runs
        self.instrument: Instrument | None = None
        self.team = None
        backend = get_backend(exe.target_info)
        self.native_library = backend.native_library
        self.kernels = backend.load(exe.kernels) if exe.kernels is not None else None
        self.memory = self.kernels.memory if self.kernels is not None else None
        self.team = backend.thread_team()
        self._functions: dict[str, FunctionRuntime] = {}

    def function(self, name: str) -> FunctionRuntime:
        runtime = self._functions.get(name)
        if runtime is None:
            if name not in self.exe.functions:
                raise KeyError(f"the executable has no function {name!r}; it has "
                               f"{sorted(self.exe.functions)}")
            runtime = self._functions[name] = FunctionRuntime(self, self.exe.functions[name])
        return runtime

    def __getitem__(self, name: str):
        runtime = self.function(name)

        def call(*args):
            return runtime.invoke(args)
        call.__name__ = name
        return call

    def invoke(self, name: str, *args):
        return self.function(name).invoke(args)

    def bind(self, name: str, fixed: dict) -> BoundFunction:
        """``vm.bind("decode", {2: w, 3: b})(x, y)`` calls ``decode`` with ``w`` and ``b`` in argument
        places 2 and 3: they are checked now, once, and each call checks only the other arguments.
        Fixed arrays are held as private views (their elements may still change)."""
        return self.function(name).bind(fixed)

    def memory_result(self, result, args):
        """A device target's result: device arrays when the caller passed any, NumPy otherwise."""
        memory = self.memory
        if any(isinstance(a, memory.device_array_type) for a in args):
            return memory.to_device_all(result)
        return memory.to_host(result)

    def set_instrument(self, fn: Instrument | None) -> None:
        """``fn(func_name, instr_index, name, value)`` after each instruction that produces a value."""
        self.instrument = fn
