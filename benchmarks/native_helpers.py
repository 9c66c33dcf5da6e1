"""A small C file compiled here with gcc and loaded (the benchmarks' own measuring loops)."""
from __future__ import annotations

import ctypes
import pathlib
import subprocess
import tempfile


def load_c(source: str, optimization: str = "-O3") -> ctypes.CDLL:
    """``source`` built as a shared library with ``-march=native -fopenmp`` and loaded."""
    with tempfile.TemporaryDirectory() as folder:
        path, library = pathlib.Path(folder) / "loop.c", pathlib.Path(folder) / "loop.so"
        path.write_text(source)
        subprocess.run(["gcc", optimization, "-march=native", "-fopenmp", "-shared", "-fPIC", str(path), "-o",
                        str(library)], check=True)
        return ctypes.CDLL(str(library))
