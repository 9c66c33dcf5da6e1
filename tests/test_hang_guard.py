"""tests/hang_guard.py: a block past its limit ends the process with its description and the
stacks in a report file and on stderr; a block within it leaves no trace."""
import os
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


def test_a_block_past_its_limit_ends_the_process_with_its_description(tmp_path):
    started = time.monotonic()
    env = dict(os.environ, RELAXSCRIPT_HANG_REPORTS=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", _HANGS], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == HANG_EXIT_CODE
    assert time.monotonic() - started < 30
    assert "not reached" not in done.stdout
    [report] = tmp_path.glob("hang-*.txt")
    for text in (done.stderr, report.read_text()):
        assert "hang_guard: still running after 0.5 s; the program: spin()" in text
        assert "Thread" in text and "line 5" in text   # every thread's stack: where it waits
    assert f"report in {report}" in done.stderr


def test_a_block_within_its_limit_cancels_the_timer():
    with hang_guard(0.2, lambda: 1 / 0):
        pass
    time.sleep(0.4)   # the timer would have ended this process by now
