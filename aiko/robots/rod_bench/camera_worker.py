"""The HIL camera filming live: a process of its own that films the rod plant's states as the plant writes them.

Why a process: a frame costs ~14 ms of CPU (render ~3, track ~7, observe ~4 ms on the bench's 640 x 480 side view
at 50 Hz), which in the bench's process would take the interpreter from the control loop. Here it runs at a lower
priority (nice 10): it takes a core only when the UR3 emulator and the bench's loop leave one. On a quiet
two-core PC it keeps up with the run, so when the arm stops only the last frames are left to film (filming after
the run took 2-2.5 s of a 4 s experiment's ~12 s command); on a busy one it falls behind and catches up after the
run, which costs the run nothing.

It is the same camera as filming after the run (`HilCamera`: framed before the run on the experiment's simulation,
the same frames, tracker and observer, the same state selection), so its records are those to the last bit; the
bench still checks that the states it filmed are the run's before it records them, and films them itself if not.

Protocol, one JSON object a line. On stdin: the experiment (``{"experiment_text", "source"}``); once the run's
clock is known, where and when to film (``{"side_file", "zero_s", "duration_s"}``: the plant's side file, the
controller time of the run's time 0, the run's duration); once the plant's file is complete (the emulator has
stopped), ``{"final": true}``. On stdout: ``{"ready": true}`` once the camera is warm; ``{"record": [topic,
payload]}`` for each record, as it is made (stamped by the bench from the payload's run time ``t_s``); and last
``{"done": {"chosen": [[t_s, q], ...], "stats": {...}}}``.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

import numpy as np

POLL_S = 0.01  # how often the side file is read for new states while none is waiting
NICE = 10  # below the emulator and the loop (nice 0): see the module doc and `worth_waiting_for`


class _Out:
    """stdout, one JSON line at a time, from any thread."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    def send(self, message: dict[str, Any]) -> None:
        line = json.dumps(message)
        with self._lock:
            self._stream.write(line + "\n")
            self._stream.flush()

    def record(self, channel: Any, _t_ns: int, payload: dict[str, Any]) -> None:
        # the worker's CPU time so far beside each record: the bench judges from it what filming costs here
        self.send({"record": [channel.topic, payload], "cpu_s": time.process_time()})


def followed_states(
    side_file: Path,
    zero_s: float,
    duration_s: float,
    rate_hz: float,
    final: threading.Event,
    chosen: list[tuple[float, np.ndarray]],
) -> Iterator[tuple[float, np.ndarray]]:
    """The states to film ((run time, q), at the camera's rate) as the plant writes them to ``side_file``, chosen
    as the bench chooses them after the run (`bench_run._rod_states`, `HilCamera._chosen`), each appended to
    ``chosen`` too; ends once ``final`` is set and the file is read to its end. A line the plant is still writing
    waits for its end; one that is not JSON is skipped, as the bench's own reading does."""
    from aiko.robots.rod_bench.rod_samples import ROD_STATE

    period_s = 1.0 / rate_hz
    partial = ""
    with side_file.open() as lines:
        while True:
            last_pass = final.is_set()  # set before this pass read: everything the plant wrote is read by it
            while True:
                line = lines.readline()
                if not line:
                    break
                if not line.endswith("\n"):
                    partial += line
                    continue
                line, partial = partial + line, ""
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    continue
                state = row.get("channels", {}).get(ROD_STATE.topic) if isinstance(row, dict) else None
                if state is None:
                    continue
                t_s = float(row["controller_time_s"]) - zero_s
                if not 0.0 <= t_s <= duration_s + 1e-9:
                    continue
                if not chosen or t_s - chosen[-1][0] >= period_s - 1e-6:
                    chosen.append((t_s, np.asarray(state["q"], dtype=float)))
                    yield chosen[-1]
            if last_pass:
                return
            final.wait(POLL_S)


def main() -> int:
    try:
        os.nice(NICE)
    except (AttributeError, OSError):
        pass
    out = _Out(sys.stdout)
    config = json.loads(sys.stdin.readline())

    from aiko.core.clock import SimulatedClock
    from aiko.robots.rod_bench.bench_experiment import bench_experiment_from_text
    from aiko.robots.rod_bench.camera import HilCamera, observe_frames

    experiment = bench_experiment_from_text(config["experiment_text"], config.get("source", "<bench>"))
    camera = HilCamera(experiment)
    camera.open()  # framed, and its kernels loaded
    out.send({"ready": True})
    line = sys.stdin.readline()
    if not line:
        return 0  # the bench ended before its run started
    where = json.loads(line)
    final = threading.Event()

    def wait_for_final() -> None:
        for message in sys.stdin:
            if json.loads(message).get("final"):
                break
        final.set()  # the final line, or the bench gone

    threading.Thread(target=wait_for_final, name="camera-worker-stdin", daemon=True).start()
    assert experiment.camera is not None
    chosen: list[tuple[float, np.ndarray]] = []
    states = followed_states(
        Path(where["side_file"]), float(where["zero_s"]), float(where["duration_s"]), experiment.camera.rate_hz,
        final, chosen,
    )  # fmt: skip
    pipeline, frames = camera._film(states)
    stats = observe_frames(frames, pipeline, out, SimulatedClock())
    out.send({"done": {"chosen": [[t_s, q.tolist()] for t_s, q in chosen], "stats": stats}})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
