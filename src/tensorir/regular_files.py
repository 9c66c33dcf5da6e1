"""Reading files that must be regular files (executables, model files, cache entries).

``open(path, "rb")`` of a FIFO blocks until some writer opens it (a load waited for
ever), and a device such as ``/dev/zero`` is read until memory runs out. The file is
opened without blocking and checked on the open descriptor, so what is read is what
was checked.
"""
from __future__ import annotations

import os
import stat


class NotRegularFileError(OSError):
    """The path names a FIFO, a device, a directory or a socket, not a regular file."""


def read_regular_file(path, limit: int = -1) -> bytes:
    """The bytes of ``path`` (at most ``limit`` when given); ``NotRegularFileError`` when it is
    not a regular file, ``OSError`` when it cannot be opened or read."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a directory" if stat.S_ISDIR(mode)
                    else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file")
            raise NotRegularFileError(f"{os.fspath(path)}: {kind}, not a regular file")
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as handle:
        return handle.read(limit)
