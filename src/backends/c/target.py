"""The C target: gcc + OpenMP kernels in one shared library, OpenBLAS library calls, CPU schedules."""
from __future__ import annotations

import re

from ..target import Target, TargetBackend, TargetMismatchError
from .runtime import CKernelModule, CLibraryImage, build_library

_SYMBOL = re.compile(r"rs_kernel_[A-Za-z0-9_]*\Z")   # the names build_library gives
_ISA_NAME = re.compile(r"[a-z0-9]{1,32}\Z")


class CBackend(TargetBackend):
    kind = "c"
    schedule = "cpu"
    library_dispatch = True
    native_library = True

    def build(self, target: Target, kernels: dict) -> CLibraryImage:
        return build_library(kernels)

    def decode(self, target: Target, entry, decoder) -> CLibraryImage:
        from .compiler import missing_isa
        from .library_cache import library_digest
        if type(entry) is not dict:
            raise ValueError("malformed library entry")
        source, symbols = entry.get("source"), entry.get("symbols")
        if not isinstance(source, str) or type(symbols) is not dict or not all(
                isinstance(k, str) and isinstance(v, str) and _SYMBOL.match(v) for k, v in symbols.items()):
            raise ValueError("malformed library entry")
        isa = entry.get("isa", [])   # absent in files written before it was recorded
        if type(isa) is not list or len(isa) > 64 or not all(isinstance(n, str) and _ISA_NAME.match(n) for n in isa):
            raise ValueError("malformed library entry")
        data = decoder.bytes_at(entry)
        if library_digest(data) != entry.get("sha256"):
            raise ValueError("the library bytes do not match their recorded sha256")
        missing = missing_isa(isa)
        if missing:   # its code would stop the process with an illegal instruction
            raise TargetMismatchError(f"its C kernels were compiled for a CPU with {', '.join(missing)}, which "
                                      f"this CPU lacks: build the module again on this machine")
        return CLibraryImage(source, data, symbols, isa=tuple(isa))

    def load(self, image: CLibraryImage) -> CKernelModule:
        return CKernelModule(image)

    def thread_team(self):
        from ..threading import team
        return team()

    def built_cache_folder(self):
        from .library_cache import cache_dir
        return cache_dir()   # private, checked: the libraries' own folder

    def machine_identity(self) -> str:
        """The C compiler and its flags, the CPU features they select, the CPU's cache sizes
        (schedules read them)."""
        import hashlib
        import os
        import pathlib
        from . import compiler
        cc = compiler.find_compiler()
        sizes = sorted(str(entry) + "=" + entry.read_text().strip()
                       for entry in pathlib.Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"))
        parts = [compiler.compiler_identity(cc), *compiler.DEFAULT_FLAGS,
                 *compiler.predefined_macros(cc, compiler.machine_flags()), *sizes, str(os.cpu_count())]
        return hashlib.sha256("\n".join(parts).encode()).hexdigest()


BACKEND = CBackend()
