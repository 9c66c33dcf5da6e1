"""The interp target: the image is the prim_funcs themselves, run by ``tensorir.interpret``.

The loop interpreter runs unscheduled blocks, so the pipeline schedules
nothing and dispatches no library calls for it."""
from __future__ import annotations

from dataclasses import dataclass

from tensorir.errors import IndexOutOfRangeError, KernelDivisionByZeroError
from tensorir.interpreter.errors import InterpretDivisionByZeroError

from ..kernel_signature import kernel_sym_vars
from ..target import KernelImage, KernelModule, Target, TargetBackend


@dataclass
class InterpImage(KernelImage):
    prim_funcs: dict
    target: Target = Target("interp")
    source: str = ""
    compiled: bool = False

    def kernel_names(self) -> list[str]:
        return list(self.prim_funcs)

    def encode(self, encoder) -> dict:
        return {"prim_funcs": encoder.value(dict(self.prim_funcs))}


class InterpKernelModule(KernelModule):
    """Runs kernels with ``tensorir.interpret`` (scalar params from the symbol table)."""

    def __init__(self, image: InterpImage):
        self.image = image
        self.funcs = image.prim_funcs

    def link(self, ins, nxt: int, frame, prologue, where: str):
        import tensorir
        regs, t = frame.regs, frame.table
        func = self.funcs[ins.kernel]
        buffers, names, slots = ins.buffers, ins.scalar_names, ins.scalar_slots

        def step():
            if prologue is not None:
                prologue()
            try:
                tensorir.interpret(func, *[regs[r] for r in buffers], **{n: t[s] for n, s in zip(names, slots)})
            except IndexOutOfRangeError as err:   # named like the compiled targets' report
                raise IndexOutOfRangeError(f"{where}: kernel '{ins.kernel}': {err}") from None
            except InterpretDivisionByZeroError:   # the C target's error and message
                raise KernelDivisionByZeroError(f"{where}: kernel '{ins.kernel}': integer division by zero") \
                    from None
            return nxt
        return step

    def __getitem__(self, name: str):
        import tensorir
        func = self.funcs[name]

        def call(*arrays, **scalars) -> None:
            tensorir.interpret(func, *arrays, **scalars)
        call.func = func
        call.sym_vars = kernel_sym_vars(func)
        return call


class InterpBackend(TargetBackend):
    kind = "interp"
    schedule = None
    library_dispatch = True

    def build(self, target: Target, kernels: dict) -> InterpImage:
        return InterpImage(dict(kernels))

    def decode(self, target: Target, entry, decoder) -> InterpImage:
        from tensorir.function import PrimFunc
        if type(entry) is not dict or set(entry) != {"prim_funcs"}:
            raise ValueError("malformed interp kernel entry")
        prim_funcs = decoder.value(entry["prim_funcs"])
        if type(prim_funcs) is not dict or not all(
                isinstance(k, str) and isinstance(f, PrimFunc) for k, f in prim_funcs.items()):
            raise ValueError("prim_funcs must map names to prim_funcs")
        return InterpImage(prim_funcs)

    def load(self, image: InterpImage) -> InterpKernelModule:
        return InterpKernelModule(image)


BACKEND = InterpBackend()
