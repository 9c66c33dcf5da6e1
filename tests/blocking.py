"""``without_blocking(fifo, fn)``: a call that must not block on a FIFO (opening one for reading
waits for a writer for ever). It runs in a thread; if it is still waiting after ``seconds``, a
writer opens the FIFO so the thread finishes, and the test fails instead of hanging the run."""
import os
import threading


def without_blocking(fifo, fn, seconds: float = 60):
    outcome = {}

    def run():
        try:
            outcome["value"] = fn()
        except BaseException as err:   # re-raised in the caller
            outcome["error"] = err
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))   # a writer comes and goes: EOF
        thread.join(seconds)
        raise AssertionError(f"blocked for more than {seconds} s on the FIFO {fifo}")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
