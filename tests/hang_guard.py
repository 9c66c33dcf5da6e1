"""``hang_guard(seconds, describe)``: a block that must finish in ``seconds`` of wall-clock time.

A kernel that never ends (an OpenCL run waiting in a blocking read while PoCL's threads spin)
cannot be interrupted from Python: the main thread is inside a C call. A timer thread then
writes ``describe()`` (the program and its inputs: what a reproduction needs) and every
thread's stack to a report file and to stderr, and ends the process with HANG_EXIT_CODE, so a
fuzz run fails with its reproducer instead of running until the CI job is killed. The file
matters: pytest's capture holds stderr in a temporary file an exiting process loses (an xdist
worker then shows only "crashed"). Reports go to $RELAXSCRIPT_HANG_REPORTS, default
``<tempdir>/relaxscript-hangs``, one ``hang-<pid>.txt`` each."""
from __future__ import annotations

import faulthandler
import os
import sys
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path

HANG_EXIT_CODE = 70


def report_dir() -> Path:
    return Path(os.environ.get("RELAXSCRIPT_HANG_REPORTS") or Path(tempfile.gettempdir()) / "relaxscript-hangs")


@contextmanager
def hang_guard(seconds: float, describe):
    def report():
        try:
            text = describe()
        except BaseException as err:   # the report must still end the process
            text = f"(describing the example failed: {err!r})"
        message = f"\nhang_guard: still running after {seconds} s; {text}\n"
        path = report_dir() / f"hang-{os.getpid()}.txt"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "w") as out:
                out.write(message)
                out.flush()
                faulthandler.dump_traceback(out, all_threads=True)
            message += f"hang_guard: report in {path}\n"
        except OSError as err:
            message += f"hang_guard: could not write {path}: {err}\n"
        sys.stderr.write(message)
        sys.stderr.flush()
        faulthandler.dump_traceback(all_threads=True)
        os._exit(HANG_EXIT_CODE)
    timer = threading.Timer(seconds, report)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
