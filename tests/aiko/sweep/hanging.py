"""A sweep task that hangs where Python never gets control back (``time.sleep`` in C) for runs whose overrides
set ``run.duration_s`` above 1000 s, and is the real run otherwise: the case the client's backstop of
``aiko.sweep.timelimit`` (cancel, restart the worker) is for. Imported by the workers of the test's cluster."""

import time
from typing import Any

from aiko.sweep.timelimit import time_limit
from aiko.sweep.worker import run_dict as real_run_dict


def run_dict(task: dict[str, Any]) -> dict[str, Any]:
    if task["overrides"].get("run.duration_s", 0.0) > 1000.0:
        with time_limit(task["run_id"], task["timeout_s"]):  # listed as running, the timer armed: all in vain
            time.sleep(3600.0)
    return real_run_dict(task)
