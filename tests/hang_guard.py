"""``hang_guard(seconds, describe)``: a block that must finish in ``seconds`` of wall-clock time.

A kernel that never ends (an OpenCL run waiting in a blocking read while PoCL's threads spin)
cannot be interrupted from Python: the main thread is inside a C call. A timer thread then
writes ``describe()`` (the program and its inputs: what a reproduction needs) and every
thread's stack to stderr and ends the process with HANG_EXIT_CODE, so a fuzz run fails with
its reproducer instead of running until the CI job is killed."""
from __future__ import annotations

import faulthandler
import os
import sys
import threading
from contextlib import contextmanager

HANG_EXIT_CODE = 70


@contextmanager
def hang_guard(seconds: float, describe):
    def report():
        try:
            text = describe()
        except BaseException as err:   # the report must still end the process
            text = f"(describing the example failed: {err!r})"
        sys.stderr.write(f"\nhang_guard: still running after {seconds} s; {text}\n")
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
