"""The record of applied schedule primitives: printable as Python, replayable."""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from ..expr import PrimExpr
from .state import BlockRV, LoopRV

# Primitives whose result is a list of handles (printed with tuple unpacking).
LIST_RESULTS = {"get_loops", "split", "get_child_blocks", "get_producers", "get_consumers"}


@dataclass
class Instruction:
    kind: str                      # the Schedule method name
    inputs: list                   # positional arguments (handles, literals, lists)
    outputs: list = field(default_factory=list)

    def render(self) -> str:
        args = ", ".join(_render_value(v) for v in self.inputs)
        call = f"sch.{self.kind}({args})"
        if not self.outputs:
            return call
        if self.kind in LIST_RESULTS:
            names = ", ".join(repr(o) for o in self.outputs)
            return f"{names}{',' if len(self.outputs) == 1 else ''} = {call}"
        return f"{self.outputs[0]!r} = {call}"


def _render_value(value) -> str:
    if isinstance(value, (BlockRV, LoopRV)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_render_value(v) for v in value) + "]"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, PrimExpr):
        from ..script.printer import format_node
        return format_node(value)
    return repr(value)


class Trace:
    """Every primitive applied to a Schedule, in order."""

    def __init__(self, instructions: list[Instruction] | None = None):
        self.instructions: list[Instruction] = list(instructions or [])

    def append(self, inst: Instruction) -> None:
        self.instructions.append(inst)

    def __len__(self) -> int:
        return len(self.instructions)

    def __iter__(self):
        return iter(self.instructions)

    def __str__(self) -> str:
        return "\n".join(inst.render() for inst in self.instructions)

    __repr__ = __str__

    def apply_to(self, sch) -> None:
        """Replay on another Schedule (typically a fresh one of the same function)."""
        handles: dict[int, object] = {}

        def remap(value):
            if isinstance(value, (BlockRV, LoopRV)):
                key = (type(value), value.index)
                if key not in handles:
                    raise ValueError(f"trace uses {value!r} before defining it")
                return handles[key]
            if isinstance(value, (list, tuple)):
                return [remap(v) for v in value]
            return value

        for inst in self.instructions:
            result = getattr(sch, inst.kind)(*[remap(v) for v in inst.inputs])
            results = list(result) if inst.kind in LIST_RESULTS else [result] if inst.outputs else []
            if len(results) != len(inst.outputs):
                raise ValueError(f"replaying {inst.render()!r} gave {len(results)} result(s), "
                                 f"expected {len(inst.outputs)}")
            for old, new in zip(inst.outputs, results):
                handles[(type(old), old.index)] = new
