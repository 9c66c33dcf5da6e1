"""VM instructions: plain data (ints, strings, tuples), so an executable saves as data.

Registers hold run-time values (arrays, tuples, shapes, scalars); ``t`` is
the function's int64 symbol table. Fields named ``*_code`` hold expression
trees over ``t`` (``sym_code``) produced by shape lowering; the linker
generates and compiles their Python once per function and links each
instruction into a closure.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields

from .sym_code import render_checks, render_expr


class VMBuildError(ValueError):
    """A module the VM cannot compile (unsupported construct or inconsistent shapes)."""


@dataclass
class Instr:
    def produces(self) -> int | None:
        """The register this instruction writes a user-visible value to (for instruments)."""
        return getattr(self, "dst", None)

    def __str__(self) -> str:
        parts = []
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in ("source",) or value in ((), None, "", []):
                continue
            if f.name.endswith("code"):   # expression trees read as the Python they become
                value = tuple(map(render_expr, value)) if f.name == "values_code" else render_expr(value)
            parts.append(f"{f.name}={value!r}")
        return f"{type(self).__name__}({', '.join(parts)})"


@dataclass
class MatchValues(Instr):
    """Check values against annotations and bind symbolic vars (parameters or match_cast).

    ``checks`` are ``sym_code`` check operations, the body of ``def
    _match(regs, t)`` (raising through ``_fail(index, value, ...)`` with
    ``messages[index]``); ``derived`` are ``(slot, tree)`` assignments of
    expressions whose vars are all defined after this check.
    ``dst``/``src``: a match_cast copies ``src`` to ``dst``."""
    checks: list
    messages: list
    dtypes: tuple
    derived: list = field(default_factory=list)
    dst: int | None = None
    src: int | None = None
    name: str = ""

    def __str__(self) -> str:
        copy = f", dst={self.dst} <- {self.src}" if self.dst is not None else ""
        return (f"MatchValues({len(self.messages)} checks, derived slots "
                f"{[slot for slot, _ in self.derived]}{copy})")

    @property
    def source(self) -> str:
        """The generated Python of the check (validating the check data)."""
        copy = (self.dst, self.src) if self.dst is not None else None
        return render_checks(self.checks, self.derived, copy)


@dataclass
class CallSite:
    """Per-call symbol work, for kernel arguments whose shapes are only known at run time.

    ``reads``: ``(reg, axis, slot)`` dims read from argument arrays;
    ``structure``: ``(reg, ndim, dtype or None, message)`` checks of those arrays;
    ``assign``: ``(slot, tree)``; ``checks``: ``(actual tree, expected tree, message)``."""
    reads: tuple = ()
    structure: tuple = ()
    assign: tuple = ()
    checks: tuple = ()

    def empty(self) -> bool:
        return not (self.reads or self.structure or self.assign or self.checks)


@dataclass
class AllocStorage(Instr):
    dst: int
    size_code: tuple
    static_size: int | None = None   # bytes, when constant: kept in the frame across calls
    name: str = ""
    shape_text: str = ""             # for errors: the symbolic size as written, and
    symbols: tuple = ()              # (var name, slot, where it was bound) of its vars


@dataclass
class AllocTensor(Instr):
    """A fresh tensor (``storage`` None) or a view of a storage at a byte offset."""
    dst: int
    shape_code: tuple
    dtype: str
    storage: int | None = None
    offset_code: tuple = ("int", 0)
    static: bool = False             # constant shape and offset in a static storage: view cached
    name: str = ""
    shape_text: str = ""             # for errors: the symbolic shape as written, and
    symbols: tuple = ()              # (var name, slot, where it was bound) of its vars


@dataclass
class CallKernel(Instr):
    kernel: str
    buffers: tuple
    sym_base: int = -1               # first slot of the kernel's symbol vector
    sym_count: int = 0
    scalar_names: tuple = ()         # scalar param names (interp target), values at sym slots
    scalar_slots: tuple = ()
    call_site: CallSite | None = None
    dst: int | None = None           # register holding the call's result (outputs) for instruments
    name: str = ""
    # ((condition tree over t, kernel name), ...): the first whose condition holds runs instead of
    # ``kernel`` (tensorir/variants.py); tested after the call site's prologue filled the slots
    variants: tuple = ()

    def produces(self):
        return None


@dataclass
class CallLibrary(Instr):
    library: str
    inputs: tuple
    outputs: tuple

    def produces(self):
        return None


@dataclass
class CallFallback(Instr):
    """An operator run through its NumPy reference (ops that were not legalized)."""
    dst: int
    op_name: str
    args: tuple
    attrs: dict
    name: str = ""
    tensor_result: bool = False      # scalars the reference returns become 0-d arrays


@dataclass
class CallPacked(Instr):
    dst: int
    library: str
    args: tuple
    name: str = ""
    writable: tuple = ()     # positions in args handed writeable (analysis.packed_call_outputs)


@dataclass
class CallFunc(Instr):
    dst: int
    func: str
    args: tuple
    name: str = ""


@dataclass
class MakeTuple(Instr):
    dst: int
    fields_: tuple
    name: str = ""


@dataclass
class GetItem(Instr):
    dst: int
    src: int
    index: int
    name: str = ""


@dataclass
class Move(Instr):
    dst: int
    src: int
    name: str = ""


@dataclass
class MakeShape(Instr):
    dst: int
    values_code: tuple
    name: str = ""


@dataclass
class MakePrim(Instr):
    dst: int
    code: tuple
    name: str = ""


@dataclass
class ShapeOf(Instr):
    dst: int
    src: int
    name: str = ""


@dataclass
class If(Instr):
    cond: int
    else_pc: int = -1


@dataclass
class Goto(Instr):
    target: int = -1


@dataclass
class Kill(Instr):
    reg: int


@dataclass
class Ret(Instr):
    src: int
    copy_escaping: bool = False      # the value may view a storage this frame reuses


@dataclass
class VMFunction:
    """One compiled graph function."""
    name: str
    params: tuple                    # parameter names, in order
    num_regs: int
    table_size: int
    code: list
    constants: dict                  # register -> constant value, set once per frame
    reg_names: dict = field(default_factory=dict)
    reg_aliases: dict = field(default_factory=dict)   # register -> more names (folded tuple fields)
    # parameters a kernel may write (call_tir_inplace, a direct DPS call): a device target
    # that copied a NumPy argument in copies these back out after the call; an entry is the
    # parameter's index, or (index, register) when the call writes it through another register
    # (a match_cast's copy)
    written_params: tuple = ()

    def as_text(self) -> str:
        lines = [f"function {self.name}({', '.join(self.params)}): "
                 f"{self.num_regs} registers, {self.table_size} symbol slots"]
        lines += [f"  {i:4d}  {ins}" for i, ins in enumerate(self.code)]
        return "\n".join(lines)
