"""What GPU lowering hands to a runtime: kernels, their launch dimensions and their arguments.

Calling convention of every kernel (OpenCL and CUDA alike), in order:
all buffer params (global pointers, in the PrimFunc's order), all workspaces
(global pointers), all ``sym_vars`` as 64-bit integers, and last a pointer to
one int32 status word. The runtime zeroes the status before a function's
launches and reads it after them: ``STATUS_ZERO_DIVISION``
(backends/c/status.py) means an integer divisor was zero (the kernel went on
with 0 in its place, as the C kernels do); ``raise_for_status`` turns it into
the same exception as on C.

Launches run in order on one queue/stream; a launch with a grid extent of 0
is skipped. OpenCL's global size is ``grid * block`` per axis, its local size
``block``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from tensorir.buffer import Buffer
from tensorir.expr import PrimExpr
from tensorir.stmt import Stmt

THREAD_AXES = ("threadIdx.x", "threadIdx.y", "threadIdx.z")
BLOCK_AXES = ("blockIdx.x", "blockIdx.y", "blockIdx.z")


@dataclass
class Workspace:
    """A global temporary of ``size`` elements the runtime allocates for each call (or from a pool)."""
    name: str
    dtype: str
    size: PrimExpr           # over the function's sym_vars
    buffer: Buffer | None = None   # the IR buffer the kernels access


@dataclass
class DeviceKernel:
    symbol: str
    grid: tuple              # three PrimExprs over sym_vars: blocks per axis
    block: tuple             # three ints: threads per block
    shared_bytes: int
    body: Stmt | None = None          # lowered, flattened body with its thread-bound loops
    shared: list = field(default_factory=list)   # Buffers declared in shared memory


@dataclass
class GPUFunction:
    name: str
    buffers: list            # Buffer params, call order
    sym_vars: list           # == backends.kernel_signature.kernel_sym_vars(func)
    workspaces: list         # Workspace
    kernels: list            # DeviceKernel, launched in order

    @property
    def assert_messages(self) -> list[str]:
        """The message of every assert in the kernels, in order: a failed assert reports its
        position in this list after the status word."""
        return [s.message or f"assertion failed in {self.name}" for s in self._asserts()]

    def _asserts(self) -> list:
        from tensorir.functor import collect
        from tensorir.stmt import AssertStmt
        cached = self.__dict__.get("_assert_nodes")
        if cached is None:
            cached = [n for k in self.kernels if k.body is not None
                      for n in collect(k.body, lambda n: isinstance(n, AssertStmt))]
            self.__dict__["_assert_nodes"] = cached
        return cached

    def assert_number(self, stmt) -> int:
        for number, node in enumerate(self._asserts()):
            if node is stmt:
                return number
        raise ValueError(f"{self.name}: the assert is not in this function's kernels")

    def launch_grid(self, values: dict) -> list[tuple[int, int, int]]:
        """Each kernel's grid for sym var values (``{Var: int}`` or ``{name: int}``)."""
        from tensorir.arith.evaluate import evaluate
        env = {v: values[v] if v in values else values[v.name] for v in self.sym_vars}
        return [tuple(int(evaluate(g, env)) for g in k.grid) for k in self.kernels]

    def workspace_sizes(self, values: dict) -> list[int]:
        from tensorir.arith.evaluate import evaluate
        env = {v: values[v] if v in values else values[v.name] for v in self.sym_vars}
        return [int(evaluate(w.size, env)) for w in self.workspaces]
