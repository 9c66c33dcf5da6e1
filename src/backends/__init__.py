"""backends: code generation and runtimes per target, and the library registry.

Depends on ``tensorir`` only; ``relaxscript`` imports this package, never the
other way round.
"""
from __future__ import annotations

from .library import (LibraryEntry, UnknownLibraryError, get_library, has_library, list_libraries,
                      register_library, unregister_library)
from . import library_blas  # noqa: F401,E402  (registers the openblas.* library names)

__all__ = ["LibraryEntry", "UnknownLibraryError", "get_library", "has_library", "list_libraries",
           "register_library", "unregister_library"]
