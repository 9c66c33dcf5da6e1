"""Executable: VM functions + constants + compiled kernels, savable without recompiling.

An executable holds native code (a C library, OpenCL source, PTX): load one
only from a source you trust, as you would a shared library. The file format
(``file_format``) is plain data checked by a content hash before anything is
parsed; the kernels are decoded by their target (``backends.target``) from
the verified bytes and the VM's checks are generated from the manifest, so no
Python code is taken from the file.
"""
from __future__ import annotations

from backends.target import KernelImage, Target, TargetError, TargetMismatchError, get_backend

from .file_format import ExecutableFormatError, read_container, write_container
from .instructions import VMFunction
from .manifest import Decoder, Encoder, check_function


class Executable:
    """The product of ``rx.build``.

    ``functions``: name -> ``VMFunction``; ``target``: the target's string
    ("c", "interp", "opencl", "cuda -arch=sm_80"); ``kernels``: the target's
    ``KernelImage`` (None when the functions call no kernel); ``compiled``:
    whether building ran a compiler (False on a cache hit and after ``load``).
    """

    def __init__(self, target, functions: dict, kernels: KernelImage | None = None, compiled: bool = False):
        self.target_info = Target.parse(target)
        self.target = str(self.target_info)
        self.functions: dict[str, VMFunction] = dict(functions)
        self.kernels = kernels
        self.compiled = compiled

    @property
    def c_library(self):
        """The C target's ``CLibraryImage`` (None for other targets)."""
        return self.kernels if self.target_info.kind == "c" else None

    @property
    def prim_funcs(self) -> dict:
        """The interp target's prim_funcs (empty for other targets)."""
        return dict(getattr(self.kernels, "prim_funcs", None) or {})

    def function_names(self) -> list[str]:
        return list(self.functions)

    def as_text(self) -> str:
        """The VM code of every function (for reading and debugging)."""
        return "\n\n".join(f.as_text() for f in self.functions.values())

    # ---------------------------------------------------------------- persistence
    def save(self, path) -> None:
        """Write the executable (instructions, constants, the target's kernel image).

        The file is written atomically; see ``file_format`` for the layout."""
        encoder = Encoder()
        kernels = self.kernels.encode(encoder) if self.kernels is not None else None
        manifest = {"target": self.target, "library": kernels,
                    "functions": [encoder.value(f) for f in self.functions.values()]}
        manifest["nodes"] = encoder.nodes   # filled while encoding IR nodes (interp's prim_funcs)
        write_container(path, manifest, b"".join(encoder.chunks))

    @classmethod
    def load(cls, path) -> "Executable":
        """Read an executable written by ``save``; kernels are reused, never recompiled.

        Raises ``ExecutableFormatError`` (a ``ValueError``) naming the path and the
        reason for a truncated, altered, foreign or older-version file. An
        executable is native code: load only files from a trusted source."""
        manifest, payload = read_container(path)
        try:
            return cls._from_manifest(manifest, payload)
        except TargetMismatchError as err:
            raise ExecutableFormatError(path, str(err)) from None
        except (ValueError, TypeError, KeyError, IndexError, RecursionError) as err:
            raise ExecutableFormatError(path, f"malformed manifest: {err}") from None

    @classmethod
    def _from_manifest(cls, manifest: dict, payload) -> "Executable":
        decoder = Decoder(payload)
        spec = manifest["target"]
        try:
            target = Target.parse(spec)
        except TargetError:
            raise ValueError(f"unknown target {spec!r:.40}") from None
        decoder.node_table(manifest["nodes"])
        entry = manifest["library"]
        kernels = get_backend(target).decode(target, entry, decoder) if entry is not None else None
        names = set(kernels.kernel_names()) if kernels is not None else set()
        functions = {}
        for item in manifest["functions"]:
            func = decoder.value(item)
            check_function(func, names)
            functions[func.name] = func
        return cls(target, functions, kernels, compiled=False)

    def __repr__(self) -> str:
        return f"<Executable target={self.target!r} functions={self.function_names()}>"
