"""Executable: VM functions + constants + compiled kernels, savable without recompiling."""
from __future__ import annotations

import pickle
from pathlib import Path

from .instructions import VMFunction

_FORMAT = "relaxscript-vm-1"


class Executable:
    """The product of ``rx.build``.

    ``functions``: name -> ``VMFunction``; ``target``: "c" or "interp";
    ``c_library``: a ``CLibraryImage`` (C source + library bytes) for "c";
    ``prim_funcs``: name -> PrimFunc run by the interpreter for "interp";
    ``compiled``: whether building this executable ran the C compiler
    (False on a cache hit and after ``load``); ``notes``: pipeline steps
    that were skipped and why.
    """

    def __init__(self, target: str, functions: dict, c_library=None, prim_funcs=None,
                 notes=(), compiled: bool = False):
        self.target = target
        self.functions: dict[str, VMFunction] = dict(functions)
        self.c_library = c_library
        self.prim_funcs = dict(prim_funcs or {})
        self.notes = list(notes)
        self.compiled = compiled

    def function_names(self) -> list[str]:
        return list(self.functions)

    def as_text(self) -> str:
        """The VM code of every function (for reading and debugging)."""
        return "\n\n".join(f.as_text() for f in self.functions.values())

    # ---------------------------------------------------------------- persistence
    def save(self, path) -> None:
        """Write the executable (instructions, constants, C source and library bytes)."""
        state = {"format": _FORMAT, "target": self.target, "functions": self.functions,
                 "c_library": self.c_library, "prim_funcs": self.prim_funcs, "notes": self.notes}
        Path(path).write_bytes(pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL))

    @classmethod
    def load(cls, path) -> "Executable":
        """Read an executable written by ``save``; the C library is reused, never recompiled."""
        state = pickle.loads(Path(path).read_bytes())  # noqa: S301 - our own file format
        if not isinstance(state, dict) or state.get("format") != _FORMAT:
            raise ValueError(f"{path}: not a relaxscript executable (format {_FORMAT})")
        return cls(state["target"], state["functions"], state["c_library"], state["prim_funcs"],
                   state["notes"], compiled=False)

    def __repr__(self) -> str:
        return f"<Executable target={self.target!r} functions={self.function_names()}>"
