"""The machine parameters the generated GEMM is shaped by, read once at build time.

Vortex (§4-5) derives a kernel's register tile and cache tiles from the
hardware instead of sampling candidate schedules; this module gathers what that
derivation needs:

- the vector ISA from the compiler's own predefined macros for ``-march=native``
  (``gcc -dM -E``): the code is compiled with those flags, so what they announce
  is what the kernel may use (AVX-512F, AVX2+FMA, AVX, SSE2, else scalar);
- the architectural vector register count that ISA has (32 with AVX-512, 16 for
  x86-64's AVX/SSE; a scalar fallback assumes 16 general float registers);
- the L1 data, L2 and L3 sizes of cpu0 from ``/sys/devices/system/cpu/cpu0/cache``
  (the OS reads them from CPUID), with common defaults when the OS does not say, and the L1
  data cache's associativity (``ways_of_associativity``; 8 when not reported);
- the cores this process may run on (``os.sched_getaffinity``).

Every reader takes its input as an argument (macro text, a /sys root), so tests
feed fake machines.
"""
from __future__ import annotations

import functools
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

SYS_CPU_CACHE = Path("/sys/devices/system/cpu/cpu0/cache")
# Used only when the OS does not report a level (containers without /sys, other OSes):
# typical x86 sizes, so the tiles stay sensible.
DEFAULT_CACHE_BYTES = {1: 32 << 10, 2: 512 << 10, 3: 8 << 20}
DEFAULT_L1D_WAYS = 8


@dataclass(frozen=True)
class VectorISA:
    """A vector instruction set as the kernels see it."""
    name: str
    vector_bytes: int    # one register
    registers: int       # architectural vector registers
    fma: bool            # fused multiply-add (a*b+c in one instruction)

    @property
    def lanes(self) -> int:
        """float32 values per register."""
        return self.vector_bytes // 4


AVX512 = VectorISA("avx512", 64, 32, True)
AVX2 = VectorISA("avx2", 32, 16, True)
AVX = VectorISA("avx", 32, 16, False)
SSE = VectorISA("sse", 16, 16, False)
# No vector unit the compiler knows of: GCC's vector extension still compiles (lane by lane),
# and a 4-lane "vector" keeps the same code shape.
SCALAR = VectorISA("scalar", 16, 16, False)


@dataclass(frozen=True)
class MachineParams:
    isa: VectorISA
    l1d_bytes: int
    l2_bytes: int
    l3_bytes: int
    cores: int
    l1d_ways: int = DEFAULT_L1D_WAYS

    def describe(self) -> str:
        return (f"{self.isa.name} ({self.isa.lanes} float lanes, {self.isa.registers} registers"
                f"{', FMA' if self.isa.fma else ''}), L1d {self.l1d_bytes >> 10} KiB {self.l1d_ways}-way, "
                f"L2 {self.l2_bytes >> 10} KiB, L3 {self.l3_bytes >> 10} KiB, {self.cores} cores")


def isa_from_macros(macros: str) -> VectorISA:
    """The widest vector ISA a compiler's predefined macros (``gcc -dM -E`` output) announce."""
    defined = {line.split()[1] for line in macros.splitlines()
               if line.startswith("#define ") and len(line.split()) >= 2}
    if "__AVX512F__" in defined:
        return AVX512
    if "__AVX2__" in defined and "__FMA__" in defined:
        return AVX2
    if "__AVX__" in defined:
        return AVX
    if "__SSE2__" in defined:
        return SSE
    return SCALAR


def _size_bytes(text: str) -> int:
    """A /sys cache size ("32K", "1024K", "32M", "512")."""
    text = text.strip().upper()
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    value = int(text.rstrip("KMG"))
    if value <= 0:
        raise ValueError(f"cache size {text!r} is not positive")
    return value * scale


def _cache_indices(cache_root: Path) -> list[Path]:
    """The OS's cache entries (``index0``, ``index1``, ...), none when it lists none or cannot."""
    try:
        return sorted(Path(cache_root).glob("index*"))
    except OSError:
        return []


def cache_sizes(cache_root: Path = SYS_CPU_CACHE) -> dict[int, int]:
    """level -> bytes of the data (or unified) caches under ``cache_root``; levels the OS does
    not report (or reports unreadably) get ``DEFAULT_CACHE_BYTES``."""
    sizes: dict[int, int] = {}
    for index in _cache_indices(cache_root):
        try:
            level = int((index / "level").read_text())
            kind = (index / "type").read_text().strip()
            size = _size_bytes((index / "size").read_text())
        except (OSError, ValueError):
            continue   # a partial or malformed entry: that level keeps its default
        if kind in ("Data", "Unified") and level not in sizes:
            sizes[level] = size
    return {level: sizes.get(level, default) for level, default in DEFAULT_CACHE_BYTES.items()}


def l1d_ways(cache_root: Path = SYS_CPU_CACHE) -> int:
    """The L1 data cache's associativity under ``cache_root`` (``DEFAULT_L1D_WAYS`` when the OS does not
    report it, or reports it unreadably or as 0, which /sys uses for fully associative)."""
    for index in _cache_indices(cache_root):
        try:
            if int((index / "level").read_text()) == 1 and (index / "type").read_text().strip() == "Data":
                ways = int((index / "ways_of_associativity").read_text())
                return ways if ways > 0 else DEFAULT_L1D_WAYS
        except (OSError, ValueError):
            continue
    return DEFAULT_L1D_WAYS


def available_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def machine_from(macros: str, cache_root: Path = SYS_CPU_CACHE, cores: int | None = None) -> MachineParams:
    """The parameters for given compiler macros and /sys cache directory (tests pass fakes)."""
    sizes = cache_sizes(cache_root)
    return MachineParams(isa_from_macros(macros), sizes[1], sizes[2], sizes[3],
                         available_cores() if cores is None else cores, l1d_ways(cache_root))


@functools.lru_cache(maxsize=None)
def compiler_macros(march: str = "native") -> str:
    """The macros gcc predefines for ``-march=<march>`` (the C backend compiles with native)."""
    from ..compiler import CompileError, find_compiler
    try:
        return subprocess.run([find_compiler(), f"-march={march}", "-dM", "-E", "-x", "c", "-"],
                              input="", capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as err:
        raise CompileError(f"cannot ask the C compiler for -march={march}'s features: {err}") from err


@functools.lru_cache(maxsize=None)
def machine_params() -> MachineParams:
    """This machine, as the C backend compiles for it."""
    return machine_from(compiler_macros())
