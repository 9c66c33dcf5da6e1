"""The per-user cache of compiled shared libraries, verified by content hash.

A library is stored as ``lib-<sha256 of its bytes>.so``; a compile key (the
hash of source, flags and compiler) maps to a library through a small record
``key-<key>.lib`` holding the key and that sha256 (named apart from the
earlier digest-only ``src-<key>.lib`` records, so builds of both versions sharing one cache do
not rewrite each other's records). A library is used only after its bytes
hash to the name it is stored under, so a corrupted, truncated or substituted
file is rewritten (or recompiled), never loaded. The directory is private
(mode 0700, owned by the user; a directory anyone else can write to is
refused, since any file in it could have been planted) and every entry is
written to a private temporary file and moved into place atomically.
"""
from __future__ import annotations

import hashlib
import os
import stat
import tempfile
from pathlib import Path

from tensorir.regular_files import read_regular_file


class CacheDirectoryError(OSError):
    """The library cache directory cannot be used safely (the message says which and why)."""

    def __init__(self, path, reason: str):
        super().__init__(f"relaxscript cache directory {path}: {reason} (set $RELAXSCRIPT_CACHE_DIR "
                         "to a private directory)")
        self.path, self.reason = str(path), reason


def cache_dir() -> Path:
    """``$RELAXSCRIPT_CACHE_DIR/c`` or ``$XDG_CACHE_HOME/relaxscript/c`` (default
    ``~/.cache/relaxscript/c``), created private and checked to be ours alone."""
    explicit = os.environ.get("RELAXSCRIPT_CACHE_DIR")
    if explicit:
        root = Path(explicit)
    else:
        root = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "relaxscript"
    path = root / "c"
    try:
        root.mkdir(parents=True, exist_ok=True, mode=0o700)
        path.mkdir(exist_ok=True, mode=0o700)
        info = os.stat(path)
    except OSError as err:
        raise CacheDirectoryError(path, f"cannot be created ({err.strerror or err})") from err
    if not stat.S_ISDIR(info.st_mode):
        raise CacheDirectoryError(path, "is not a directory")
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        raise CacheDirectoryError(path, f"is owned by user id {info.st_uid}, not by this user "
                                        f"({os.getuid()})")
    if info.st_mode & 0o022:
        raise CacheDirectoryError(path, f"can be written by other users (mode {stat.S_IMODE(info.st_mode):o})")
    if info.st_mode & 0o077:
        os.chmod(path, 0o700)   # ours and not writable by others: only tighten reading
    return path


def library_digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _library_path(directory: Path, digest: str) -> Path:
    return directory / f"lib-{digest}.so"


def _holds(path: Path, digest: str) -> bool:
    try:
        return library_digest(read_regular_file(path)) == digest
    except OSError:   # missing, a directory or FIFO, unreadable: rewritten from the bytes we have
        return False


def _write_private(directory: Path, target: Path, data: bytes, prefix: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=prefix)   # mode 0600
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, target)   # atomic: readers see the old entry or the whole new one
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def store_library(data: bytes, digest: str | None = None) -> Path:
    """The cache path of a library with these bytes, written (or rewritten) when the
    cached file is missing or does not hash to ``digest``."""
    directory = cache_dir()
    digest = digest or library_digest(data)
    target = _library_path(directory, digest)
    if not _holds(target, digest):
        _write_private(directory, target, data, ".lib-")
    return target


def _record_text(key: str, digest: str) -> str:
    # the key is written inside the record too: a record copied or renamed onto another key's
    # name (a swapped file) names the wrong key and is ignored, never mapping one source to
    # another source's library (whose kernels take other arguments)
    return f"{key} {digest}"


def lookup_compiled(key: str) -> Path | None:
    """The verified library compiled under ``key``, or None (not cached, or the entry is damaged)."""
    directory = cache_dir()
    try:
        text = read_regular_file(directory / f"key-{key}.lib", 200).decode("ascii").strip()
    except (OSError, UnicodeDecodeError):   # missing, a directory or FIFO, unreadable, not text
        return None
    recorded_key, _, digest = text.partition(" ")
    if recorded_key != key or len(digest) != 64 or not all(c in "0123456789abcdef" for c in digest):
        return None
    target = _library_path(directory, digest)
    return target if _holds(target, digest) else None


def record_compiled(key: str, data: bytes) -> Path:
    """Store a freshly compiled library and remember it under ``key``."""
    digest = library_digest(data)
    target = store_library(data, digest)
    _write_private(target.parent, target.parent / f"key-{key}.lib", _record_text(key, digest).encode("ascii"),
                   ".key-")
    return target
