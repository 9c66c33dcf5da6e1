"""gcc driver in front of the verified library cache (``library_cache``).

A compile key is the sha256 of source, flags and compiler; a library compiled
under a key is reused only after its bytes match the hash recorded for it,
so a damaged or substituted cache entry is compiled again, never loaded. gcc
runs in a private temporary directory with relative file names (the output
does not depend on where it was built), so concurrent builds of the same
module produce one library and a second build never calls gcc.
"""
from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from .library_cache import CacheDirectoryError, cache_dir, lookup_compiled, record_compiled

__all__ = ["CompileError", "CacheDirectoryError", "cache_dir", "compile_shared", "find_compiler",
           "DEFAULT_FLAGS"]

DEFAULT_FLAGS = ("-O3", "-march=native", "-fopenmp", "-fPIC", "-shared", "-std=gnu11",
                 "-fno-math-errno", "-Wno-unused-variable", "-Wno-unused-function")


class CompileError(RuntimeError):
    """gcc rejected generated code (a compiler bug: the message carries gcc's output)."""


@functools.lru_cache(maxsize=None)
def compiler_identity(cc: str) -> str:
    try:
        out = subprocess.run([cc, "--version"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as err:
        raise CompileError(f"C compiler {cc!r} is not usable: {err}") from err
    return out.splitlines()[0] if out else cc


def find_compiler() -> str:
    cc = os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")
    if not cc:
        raise CompileError("no C compiler found (install gcc or set $CC)")
    return cc


def compile_shared(source: str, extra_flags: tuple[str, ...] = (),
                   link_flags: tuple[str, ...] = ()) -> tuple[Path, bool]:
    """Compile ``source`` to a shared library in the cache.

    Returns ``(path, compiled)`` where ``compiled`` is False on a cache hit.
    """
    cc = find_compiler()
    flags = DEFAULT_FLAGS + tuple(extra_flags)
    key = hashlib.sha256("\0".join([compiler_identity(cc), *flags, *link_flags, source]).encode()).hexdigest()
    cached = lookup_compiled(key[:32])
    if cached is not None:
        return cached, False
    with tempfile.TemporaryDirectory(dir=cache_dir(), prefix=".build-") as tmp:
        Path(tmp, "module.c").write_text(source)
        cmd = [cc, *flags, "module.c", "-o", "module.so", *link_flags, "-lm"]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp)
        if proc.returncode != 0:
            raise CompileError(f"gcc failed ({' '.join(cmd)}):\n{proc.stderr[-4000:]}")
        library = Path(tmp, "module.so").read_bytes()
    return record_compiled(key[:32], library), True
