"""What a GPU target's runtime needs of one lowered function, as plain data: its launches.

``backends.gpu.lower_for_gpu`` gives a ``GPUFunction`` (buffers, symbolic
vars, workspaces, kernels with grid sizes over the symbolic vars). A
``LaunchPlan`` keeps what running it takes (kernel symbols, grid and block
sizes, shared memory, workspace sizes), is saved with the executable (its
PrimExprs through the manifest's node table) and computes the launch sizes
from the VM's symbol vector, once per distinct vector. OpenCL and CUDA share
it, so everything but the kernel language is exercised by the OpenCL tests.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tensorir import dtype as dt
from tensorir import expr as E
from tensorir.arith import evaluate

from .kernel_signature import bind_kernel_symbols


@dataclass
class Launch:
    """One kernel launch: ``grid`` blocks per axis (PrimExprs over the sym vars), ``block`` threads."""
    symbol: str
    grid: tuple
    block: tuple
    shared_bytes: int = 0


@dataclass
class LaunchPlan:
    """The launches of one VM kernel, in order, and the global workspaces they share."""
    name: str
    num_buffers: int
    sym_vars: list                 # tensorir Vars, the kernel's symbol order
    workspaces: list               # [(name, dtype, size PrimExpr in elements)]
    launches: list                 # [Launch]
    asserts: list = field(default_factory=list)   # messages of the kernels' asserts, by number

    @staticmethod
    def of(func) -> "LaunchPlan":
        """The plan of a ``backends.gpu.GPUFunction``."""
        return LaunchPlan(func.name, len(func.buffers), list(func.sym_vars),
                          [(w.name, w.dtype, w.size) for w in func.workspaces],
                          [Launch(k.symbol, tuple(k.grid), tuple(int(b) for b in k.block), int(k.shared_bytes))
                           for k in func.kernels], list(func.assert_messages))

    def assert_message(self, number: int) -> str | None:
        """The message of the assert a kernel reported failing (None for a number it has not)."""
        return self.asserts[number] if 0 <= number < len(self.asserts) else None

    # ---------------------------------------------------------------- persistence
    def encode(self, encoder) -> dict:
        return {"name": self.name, "num_buffers": self.num_buffers,
                "sym_vars": [encoder.value(v) for v in self.sym_vars],
                "workspaces": [[w, d, encoder.value(size)] for w, d, size in self.workspaces],
                "launches": [[k.symbol, [encoder.value(g) for g in k.grid], list(k.block), k.shared_bytes]
                             for k in self.launches],
                **({"asserts": list(self.asserts)} if self.asserts else {})}

    @staticmethod
    def decode(entry, decoder) -> "LaunchPlan":
        """A plan ``encode`` wrote; ValueError for anything malformed."""
        if type(entry) is not dict or set(entry) - {"asserts"} != {"name", "num_buffers", "sym_vars", "workspaces",
                                                                  "launches"}:
            raise ValueError("malformed launch plan")
        asserts = entry.get("asserts", [])
        if type(asserts) is not list or not all(isinstance(m, str) for m in asserts):
            raise ValueError("malformed launch plan: assert messages")
        name, count = entry["name"], entry["num_buffers"]
        if not isinstance(name, str) or type(count) is not int or count < 0:
            raise ValueError("malformed launch plan")
        sym_vars = [decoder.value(v) for v in entry["sym_vars"]]
        if not all(isinstance(v, E.Var) for v in sym_vars):
            raise ValueError(f"launch plan {name!r:.60}: a symbolic var is not a Var")
        workspaces = []
        for item in entry["workspaces"]:
            if type(item) is not list or len(item) != 3 or not isinstance(item[0], str) \
                    or not _valid_dtype(item[1]):
                raise ValueError(f"launch plan {name!r:.60}: malformed workspace")
            workspaces.append((item[0], item[1], _expr(decoder.value(item[2]), name)))
        launches = []
        for item in entry["launches"]:
            if type(item) is not list or len(item) != 4 or not isinstance(item[0], str) \
                    or not item[0].isidentifier() or type(item[1]) is not list or len(item[1]) != 3 \
                    or type(item[2]) is not list or len(item[2]) != 3 \
                    or not all(type(b) is int and 1 <= b <= 1024 for b in item[2]) \
                    or type(item[3]) is not int or item[3] < 0:
                raise ValueError(f"launch plan {name!r:.60}: malformed launch")
            launches.append(Launch(item[0], tuple(_expr(decoder.value(g), name) for g in item[1]),
                                   tuple(item[2]), item[3]))
        return LaunchPlan(name, count, sym_vars, workspaces, launches, list(asserts))

    # ---------------------------------------------------------------- run time
    def sizes(self, syms) -> tuple:
        """``(grids, workspace element counts)`` for one symbol vector (a tuple of ints)."""
        env = dict(zip(self.sym_vars, syms))
        grids = [tuple(int(evaluate(g, env)) if not isinstance(g, int) else g for g in k.grid)
                 for k in self.launches]
        spaces = [max(0, int(evaluate(size, env)) if not isinstance(size, int) else size)
                  for _, _, size in self.workspaces]
        return grids, spaces

    def sizes_cached(self):
        """``sizes`` memoised on the last symbol vector (calls repeat one shape)."""
        last = [None, None]

        def sizes(syms: tuple):
            if syms != last[0]:
                last[0], last[1] = syms, self.sizes(syms)
            return last[1]
        return sizes

    def workspace_nbytes(self, counts) -> list[int]:
        return [max(1, count * np.dtype(dt.to_numpy(dtype)).itemsize)
                for (_, dtype, _), count in zip(self.workspaces, counts)]


def _valid_dtype(dtype) -> bool:
    try:
        return isinstance(dtype, str) and dt.normalize(dtype) == dtype
    except (TypeError, ValueError):
        return False


def _expr(value, name: str):
    if isinstance(value, (int, E.PrimExpr)) and not isinstance(value, bool):
        return value
    raise ValueError(f"launch plan {name!r:.60}: a size is not an expression")


def link_device_kernel(ins, nxt: int, frame, prologue, where: str, run, memory, handle):
    """The VM step of one kernel call on a device target.

    ``run(handles, syms, label)`` launches; ``handle(array)`` is what a kernel argument
    passes of a device array (an OpenCL buffer, a CUDA address). A NumPy value in a
    register is copied to the device at its first kernel use and the register keeps the
    copy for the call's later kernels; a frame constant never changes, so it is copied
    once per frame (model weights are constants: one upload, not one per call)."""
    regs, t = frame.regs, frame.table
    to_device, array_type = memory.to_device, memory.device_array_type
    buffers, constants = ins.buffers, frame.constant_regs
    first, count = ins.sym_base, ins.sym_count
    label = f"{where}: kernel '{ins.kernel}'"
    uploaded_constants: dict = {}

    def step():
        if prologue is not None:
            prologue()
        args = []
        for r in buffers:
            value = regs[r]
            if type(value) is not array_type:
                if r in constants:
                    held = uploaded_constants.get(r)
                    if held is None or held[0] is not value:
                        held = uploaded_constants[r] = (value, to_device(value))
                    device_value = held[1]
                else:
                    device_value = to_device(value)
                regs[r] = value = device_value
            args.append(handle(value))
        run(args, tuple(t[first:first + count]) if count else (), label)
        return nxt
    return step


def direct_kernel_call(name: str, func, run, memory, handle):
    """``module[name](*arrays, **scalars)``: a destination-passing call of one kernel;
    NumPy arrays are copied in and written back."""
    array_type = memory.device_array_type

    def call(*arrays, **scalars) -> None:
        syms = bind_kernel_symbols(name, func, arrays, scalars, is_array=lambda a: isinstance(a, array_type))
        device = [memory.to_device(a) for a in arrays]
        run([handle(d) for d in device], tuple(syms), f"kernel {name!r}")
        for host, dev in zip(arrays, device):
            if isinstance(host, np.ndarray):
                host[...] = dev.numpy()
    call.func = func
    return call
