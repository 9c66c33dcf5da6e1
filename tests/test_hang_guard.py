"""tests/hang_guard.py: a block past its limit ends the process with its description and the
stacks on stderr; a block within it leaves no trace."""
import subprocess
import sys
import time

from tests.hang_guard import HANG_EXIT_CODE, hang_guard

_HANGS = """
import time
from tests.hang_guard import hang_guard
with hang_guard(0.5, lambda: "the program: spin()"):
    time.sleep(60)
print("not reached")
"""


def test_a_block_past_its_limit_ends_the_process_with_its_description():
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", _HANGS], capture_output=True, text=True, timeout=60)
    assert done.returncode == HANG_EXIT_CODE
    assert time.monotonic() - started < 30
    assert "hang_guard: still running after 0.5 s; the program: spin()" in done.stderr
    assert "time.sleep" not in done.stdout and "not reached" not in done.stdout
    assert "Thread" in done.stderr and "line 5" in done.stderr   # every thread's stack, where it waits


def test_a_block_within_its_limit_cancels_the_timer():
    with hang_guard(0.2, lambda: 1 / 0):
        pass
    time.sleep(0.4)   # the timer would have ended this process by now
