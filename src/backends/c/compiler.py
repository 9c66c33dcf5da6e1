"""gcc driver in front of the verified library cache (``library_cache``).

A compile key is the sha256 of source, flags, compiler and the CPU features
the flags select (``-march=native`` names none by itself); a library compiled
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
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from .library_cache import CacheDirectoryError, cache_dir, lookup_compiled, record_compiled

__all__ = ["CompileError", "CacheDirectoryError", "cache_dir", "compile_shared", "find_compiler",
           "DEFAULT_FLAGS"]

# -fno-math-errno and -fno-trapping-math change no value (nothing reads errno or the FP exception
# flags): they let gcc call glibc's vector expf/tanhf and if-convert the selects clamping an exp's
# argument in the GEMM epilogues; without them silu's exp ran one lane at a time (+12% on the MLP's
# 512-row product, one thread)
DEFAULT_FLAGS = ("-O3", "-march=native", "-fopenmp", "-fPIC", "-shared", "-std=gnu11",
                 "-fno-math-errno", "-fno-trapping-math", "-Wno-unused-variable", "-Wno-unused-function")


class CompileError(RuntimeError):
    """gcc rejected generated code (a compiler bug: the message carries gcc's output)."""


@functools.lru_cache(maxsize=None)
def compiler_identity(cc: str) -> str:
    try:
        out = subprocess.run([cc, "--version"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as err:
        raise CompileError(f"C compiler {cc!r} is not usable: {err}") from err
    return out.splitlines()[0] if out else cc


@functools.lru_cache(maxsize=None)
def predefined_macros(cc: str, machine_flags: tuple[str, ...]) -> tuple[str, ...]:
    """The ``#define`` lines the compiler predefines under ``machine_flags``, sorted
    (``-march=native`` expands to this CPU's features: __AVX512F__, __AVX2__, ...)."""
    try:
        out = subprocess.run([cc, *machine_flags, "-dM", "-E", "-x", "c", os.devnull],
                             capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as err:
        raise CompileError(f"C compiler {cc!r} cannot list its predefined macros: {err}") from err
    return tuple(sorted(out.splitlines()))


def machine_flags(flags: tuple[str, ...] | None = None) -> tuple[str, ...]:
    """The ``-m`` options of ``flags`` (default: the flags kernels are compiled with now)."""
    return tuple(f for f in (DEFAULT_FLAGS if flags is None else flags) if f.startswith("-m"))


_VECTOR_ISA = re.compile(r"#define __((?:SSE|SSSE|AVX|FMA|F16C)[A-Z0-9_]*)__ 1\Z")


def vector_isa(flags: tuple[str, ...] | None = None) -> list[str]:
    """The vector instruction sets code compiled with ``flags`` may use, named as /proc/cpuinfo
    names them less underscores ("avx2", "avx512f", "avx512vnni", "sse41"): what a saved
    library needs of the CPU that loads it."""
    macros = predefined_macros(find_compiler(), machine_flags(flags))
    names = {m.group(1).lower().replace("_", "") for line in macros if (m := _VECTOR_ISA.match(line))}
    # __SSE_MATH__ / __SSE2_MATH__ say how float math is done, not an instruction set; cpuinfo
    # calls SSE3 "pni"
    return sorted(_CPUINFO_NAMES.get(name, name) for name in names if not name.endswith("math"))


_CPUINFO_NAMES = {"sse3": "pni"}


def missing_isa(needed, cpuinfo: str = "/proc/cpuinfo") -> list[str]:
    """The instruction sets of ``needed`` (``vector_isa`` names) this CPU lacks; none when the CPU's
    flags cannot be read (no /proc: nothing to check against)."""
    try:
        with open(cpuinfo) as handle:
            flags = next((line.split(":", 1)[1].split() for line in handle if line.startswith("flags")), None)
    except OSError:
        return []
    if flags is None:
        return []
    have = {flag.replace("_", "") for flag in flags}
    return [name for name in needed if name not in have]


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
    # the CPU features the flags select are in the key, so a cache shared by machines with
    # different CPUs (a home directory on several hosts) never hands one machine a library
    # built for another's instructions (SIGILL)
    machine = "\n".join(predefined_macros(cc, machine_flags(flags)))
    key = hashlib.sha256("\0".join([compiler_identity(cc), machine, *flags, *link_flags, source]).encode()).hexdigest()
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
