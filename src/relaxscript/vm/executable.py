"""Executable: VM functions + constants + compiled kernels, savable without recompiling.

An executable holds native code (its C library): load one only from a source
you trust, as you would a shared library. The file format (``file_format``)
is plain data checked by a content hash before anything is parsed; the
library is loaded from the verified bytes and the VM's checks are generated
from the manifest, so no code is taken from the file other than the library.
"""
from __future__ import annotations

import re

from .file_format import ExecutableFormatError, read_container, write_container
from .instructions import VMFunction
from .manifest import Decoder, Encoder, check_function

_TARGETS = ("c", "interp")
_SYMBOL = re.compile(r"rs_kernel_[A-Za-z0-9_]*\Z")   # the names build_c_library gives


class Executable:
    """The product of ``rx.build``.

    ``functions``: name -> ``VMFunction``; ``target``: "c" or "interp";
    ``c_library``: a ``CLibraryImage`` (C source + library bytes) for "c";
    ``prim_funcs``: name -> PrimFunc run by the interpreter for "interp";
    ``compiled``: whether building this executable ran the C compiler
    (False on a cache hit and after ``load``).
    """

    def __init__(self, target: str, functions: dict, c_library=None, prim_funcs=None,
                 compiled: bool = False):
        self.target = target
        self.functions: dict[str, VMFunction] = dict(functions)
        self.c_library = c_library
        self.prim_funcs = dict(prim_funcs or {})
        self.compiled = compiled

    def function_names(self) -> list[str]:
        return list(self.functions)

    def as_text(self) -> str:
        """The VM code of every function (for reading and debugging)."""
        return "\n\n".join(f.as_text() for f in self.functions.values())

    # ---------------------------------------------------------------- persistence
    def save(self, path) -> None:
        """Write the executable (instructions, constants, C source and library bytes).

        The file is written atomically; see ``file_format`` for the layout."""
        encoder = Encoder()
        library = None
        if self.c_library is not None:
            from backends.c.library_cache import library_digest
            lib = self.c_library
            library = {"source": lib.source, "symbols": dict(lib.symbols),
                       "sha256": library_digest(lib.library), **encoder.payload(bytes(lib.library))}
        manifest = {"target": self.target, "library": library,
                    "functions": [encoder.value(f) for f in self.functions.values()],
                    "prim_funcs": encoder.value(dict(self.prim_funcs))}
        manifest["nodes"] = encoder.nodes   # filled while encoding the prim_funcs
        write_container(path, manifest, b"".join(encoder.chunks))

    @classmethod
    def load(cls, path) -> "Executable":
        """Read an executable written by ``save``; the C library is reused, never recompiled.

        Raises ``ExecutableFormatError`` (a ``ValueError``) naming the path and the
        reason for a truncated, altered, foreign or older-version file. An
        executable is native code: load only files from a trusted source."""
        manifest, payload = read_container(path)
        try:
            return cls._from_manifest(manifest, payload)
        except (ValueError, TypeError, KeyError, IndexError, RecursionError) as err:
            raise ExecutableFormatError(path, f"malformed manifest: {err}") from None

    @classmethod
    def _from_manifest(cls, manifest: dict, payload) -> "Executable":
        decoder = Decoder(payload)
        target = manifest["target"]
        if target not in _TARGETS:
            raise ValueError(f"unknown target {target!r:.40}")
        decoder.node_table(manifest["nodes"])
        prim_funcs = decoder.value(manifest["prim_funcs"])
        if type(prim_funcs) is not dict:
            raise ValueError("prim_funcs must be a dict")
        from tensorir.function import PrimFunc
        if not all(isinstance(k, str) and isinstance(f, PrimFunc) for k, f in prim_funcs.items()):
            raise ValueError("prim_funcs must map names to prim_funcs")
        c_library = cls._library(decoder, manifest["library"], target)
        if c_library is not None and target != "c":
            raise ValueError(f"a {target!r} executable with a C library")
        kernels = c_library.symbols if c_library is not None else prim_funcs if target == "interp" else {}
        functions = {}
        for entry in manifest["functions"]:
            func = decoder.value(entry)
            check_function(func, kernels)
            functions[func.name] = func
        return cls(target, functions, c_library, prim_funcs, compiled=False)

    @staticmethod
    def _library(decoder: Decoder, entry, target: str):
        if entry is None:   # an interp executable, or a C one that calls no kernel
            return None
        from backends.c.library_cache import library_digest

        from .kernels import CLibraryImage
        source, symbols = entry["source"], entry["symbols"]
        if not isinstance(source, str) or type(symbols) is not dict or not all(
                isinstance(k, str) and isinstance(v, str) and _SYMBOL.match(v) for k, v in symbols.items()):
            raise ValueError("malformed library entry")
        data = decoder.bytes_at(entry)
        if library_digest(data) != entry["sha256"]:
            raise ValueError("the library bytes do not match their recorded sha256")
        return CLibraryImage(source, data, symbols)

    def __repr__(self) -> str:
        return f"<Executable target={self.target!r} functions={self.function_names()}>"
