"""The container of a saved executable: header, manifest, payload, content hash.

Layout (integers little-endian)::

    magic     8 bytes  b"\\x89RSXVM\\r\\n"  (a high-bit byte and CR LF catch text-mode mangling)
    version   uint32   FORMAT_VERSION
    manifest  uint64   length of the manifest (UTF-8 JSON, plain data only)
    payload   uint64   length of the payload (library bytes and constant arrays)
    <manifest bytes> <payload bytes>
    sha256    32 bytes of everything before it

``read_container`` checks the magic, version, lengths and the hash before it
parses anything, so a truncated, altered or foreign file is an
``ExecutableFormatError`` and never reaches the JSON parser or the loader.
The hash detects damage, not intent: anyone can write a valid file, and an
executable holds native code, so load executables only from trusted sources.
"""
from __future__ import annotations

import hashlib
import json
import os
import struct
import tempfile
from pathlib import Path

from tensorir.regular_files import NotRegularFileError, read_regular_file

MAGIC = b"\x89RSXVM\r\n"
FORMAT_VERSION = 4          # 1: the pickle format; 2: before targets encoded their own kernel images;
                            # 3: before kernel calls carried variants
_HEADER = struct.Struct("<8sIQQ")
_DIGEST = 32


class ExecutableFormatError(ValueError):
    """A file that is not a readable relaxscript executable (the message has the path and reason)."""

    def __init__(self, path, reason: str):
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = str(path), reason


def write_container(path, manifest: dict, payload: bytes) -> None:
    """Write the file atomically (a temporary file in the same directory, then a rename);
    like any new temporary file it is readable by its owner only (chmod it to share)."""
    text = json.dumps(manifest, separators=(",", ":"), allow_nan=False).encode("utf-8")
    body = _HEADER.pack(MAGIC, FORMAT_VERSION, len(text), len(payload)) + text + payload
    data = body + hashlib.sha256(body).digest()
    target = Path(path)
    fd, tmp = tempfile.mkstemp(dir=target.parent or ".", prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _reject_constant(name: str):
    raise ValueError(f"non-standard JSON constant {name}")


def read_container(path) -> tuple[dict, memoryview]:
    """``(manifest, payload)`` of a file written by ``write_container``, verified first."""
    try:   # a device (/dev/zero) would be read until memory runs out; opening a FIFO blocked
        data = read_regular_file(path)
    except NotRegularFileError:
        raise ExecutableFormatError(path, "not a regular file") from None
    if not data or not MAGIC.startswith(data[:len(MAGIC)]):
        hint = " (an executable saved with pickle by relaxscript before format 2: rebuild it)" \
            if data[:1] == b"\x80" else ""
        raise ExecutableFormatError(path, f"not a relaxscript executable (no {MAGIC!r} header){hint}")
    if len(data) < _HEADER.size + _DIGEST:
        raise ExecutableFormatError(path, f"truncated: {len(data)} bytes, shorter than the header")
    _, version, manifest_size, payload_size = _HEADER.unpack_from(data)
    if version != FORMAT_VERSION:
        raise ExecutableFormatError(path, f"format version {version}, this relaxscript reads version "
                                          f"{FORMAT_VERSION} (rebuild the executable with this version)")
    expected = _HEADER.size + manifest_size + payload_size + _DIGEST
    if len(data) != expected:
        state = "truncated" if len(data) < expected else "has trailing data"
        raise ExecutableFormatError(path, f"{state}: {len(data)} bytes, the header announces {expected}")
    body = memoryview(data)[:-_DIGEST]
    if hashlib.sha256(body).digest() != data[-_DIGEST:]:
        raise ExecutableFormatError(path, "content hash mismatch: the file was altered or damaged")
    try:
        manifest = json.loads(bytes(body[_HEADER.size:_HEADER.size + manifest_size]).decode("utf-8"),
                              parse_constant=_reject_constant)
    except (ValueError, RecursionError) as err:   # UnicodeDecodeError is a ValueError
        raise ExecutableFormatError(path, f"malformed manifest: {err}") from None
    if not isinstance(manifest, dict):
        raise ExecutableFormatError(path, "malformed manifest: not an object")
    return manifest, body[_HEADER.size + manifest_size:]
