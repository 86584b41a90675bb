"""A helper process that ends with the program that started it.

A program that starts an emulator for itself (``aiko bench run --backend hil`` starts ``aiko emulate ur3``) puts its
own pid in ``AIKO_EXIT_WITH_PARENT``; the emulator's serve loop then ends when that program is gone, however it went
(a segfault in a vendor library, SIGKILL), instead of serving on its loopback address for ever and refusing the next
run's emulator that address. Polling ``getppid`` (a re-parented process has another parent) works wherever Python
runs and needs no ``preexec_fn`` (unsafe in a program with threads) nor Linux's ``PR_SET_PDEATHSIG`` (tied to the
thread that forked, not the process).
"""

from __future__ import annotations

import os
import threading

EXIT_WITH_PARENT_ENV = "AIKO_EXIT_WITH_PARENT"
PARENT_POLL_S = 0.5


def exit_with_parent_env() -> dict[str, str]:
    """The environment entry that ties a child started now to this process."""
    return {EXIT_WITH_PARENT_ENV: str(os.getpid())}


def watch_parent(done: threading.Event) -> bool:
    """If ``AIKO_EXIT_WITH_PARENT`` names this process's parent, set ``done`` once that parent is gone (a daemon
    thread polls every 0.5 s); returns whether it watches."""
    parent = os.environ.get(EXIT_WITH_PARENT_ENV, "")
    if not parent.isdigit():
        return False
    parent_pid = int(parent)

    def watch() -> None:
        while not done.wait(PARENT_POLL_S):
            if os.getppid() != parent_pid:  # re-parented: the program that started us has ended
                done.set()

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()
    return True
