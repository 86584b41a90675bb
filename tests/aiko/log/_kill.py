"""SIGKILL a child process and note when: the instant every loss bound in the crash tests is measured from."""

import signal
import subprocess
import time


def sigkill_after(child: subprocess.Popen, delay_s: float) -> int:
    """Let ``child`` run ``delay_s``, SIGKILL it and reap it; returns the kill time on CLOCK_MONOTONIC (ns).

    CLOCK_MONOTONIC is system-wide, so the child's log stamps and this instant are on the same clock.
    """
    try:
        time.sleep(delay_s)
        t_kill_ns = time.monotonic_ns()
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
        return t_kill_ns
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
