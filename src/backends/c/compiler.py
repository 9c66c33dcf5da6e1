"""gcc driver with a per-user, content-addressed cache of shared libraries.

A library is stored as ``<cache>/<sha256 of source+flags+compiler>.so``; it is
compiled into a temporary file in the same directory and moved into place
with ``os.replace`` (atomic), so concurrent builds of the same module are
safe and a second build never calls gcc.
"""
from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

DEFAULT_FLAGS = ("-O3", "-march=native", "-fopenmp", "-fPIC", "-shared", "-std=gnu11",
                 "-fno-math-errno", "-Wno-unused-variable", "-Wno-unused-function")


class CompileError(RuntimeError):
    """gcc rejected generated code (a compiler bug: the message carries gcc's output)."""


def cache_dir() -> Path:
    """``$RELAXSCRIPT_CACHE_DIR`` or ``$XDG_CACHE_HOME/relaxscript`` (default ``~/.cache/relaxscript``)."""
    explicit = os.environ.get("RELAXSCRIPT_CACHE_DIR")
    if explicit:
        root = Path(explicit)
    else:
        root = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "relaxscript"
    path = root / "c"
    path.mkdir(parents=True, exist_ok=True)
    return path


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
    directory = cache_dir()
    target = directory / f"{key[:32]}.so"
    if target.exists():
        return target, False
    with tempfile.TemporaryDirectory(dir=directory, prefix=".build-") as tmp:
        src = Path(tmp) / "module.c"
        src.write_text(source)
        tmp_lib = Path(tmp) / "module.so"
        cmd = [cc, *flags, str(src), "-o", str(tmp_lib), *link_flags, "-lm"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise CompileError(f"gcc failed ({' '.join(cmd)}):\n{proc.stderr[-4000:]}")
        os.replace(tmp_lib, target)  # atomic: readers see either nothing or the whole library
    return target, True
