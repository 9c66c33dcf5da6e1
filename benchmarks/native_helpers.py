"""A small C file compiled here with gcc and loaded (the benchmarks' own measuring loops)."""
from __future__ import annotations

import ctypes
import pathlib
import subprocess
import tempfile


def build_driver(workdir: pathlib.Path, parts: list) -> pathlib.Path:
    """The C program ``parts`` (joined by newlines) written to ``workdir/driver.c`` and compiled with
    the runtime's compiler and flags (as an executable, not a shared library): a standalone driver
    timing generated kernels."""
    from backends.c.compiler import DEFAULT_FLAGS, find_compiler
    source = workdir / "driver.c"
    source.write_text("\n".join(parts))
    binary = workdir / "driver"
    flags = [f for f in DEFAULT_FLAGS if f not in ("-shared", "-fPIC")]
    subprocess.run([find_compiler(), *flags, str(source), "-o", str(binary), "-lm"], check=True)
    return binary


def load_c(source: str, optimization: str = "-O3") -> ctypes.CDLL:
    """``source`` built as a shared library with ``-march=native -fopenmp`` and loaded."""
    with tempfile.TemporaryDirectory() as folder:
        path, library = pathlib.Path(folder) / "loop.c", pathlib.Path(folder) / "loop.so"
        path.write_text(source)
        subprocess.run(["gcc", optimization, "-march=native", "-fopenmp", "-shared", "-fPIC", str(path), "-o",
                        str(library)], check=True)
        return ctypes.CDLL(str(library))


# what a generated kernel compiled outside the runtime needs: the headers it includes and the
# runtime's team size (``rs_threads``), set by the driver
KERNEL_PRELUDE = r"""#include <stdint.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <math.h>
#include <time.h>
#include <omp.h>
#include <sys/mman.h>
static int rs_team_size = 1;
static inline int rs_threads(void) { return rs_team_size; }
"""

# a monotonic clock in microseconds and a comparison of doubles for qsort (medians)
TIMING_C = r"""
static double now_us(void) {
  struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e6 + t.tv_nsec * 1e-3; }
static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b; return x < y ? -1 : x > y; }
"""
