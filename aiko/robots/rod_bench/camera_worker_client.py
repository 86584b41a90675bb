"""The bench's side of the live HIL camera's worker process (`camera_worker`, whose docstring gives the why and the
protocol): start it, tell it where and when to film, collect its records. A module of its own so that the camera
(`camera`), which starts it, and the worker, which runs the camera, import each other in one direction only."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

# How long the bench waits for the worker's last frame after the run: it may be far behind on a busy PC, and
# filming in the bench instead would compete for the same cores
FINISH_TIMEOUT_S = 120.0
WORKER_MODULE = "aiko.robots.rod_bench.camera_worker"
FRAME_TOPIC = "/bench/markers"  # `camera.MARKERS`: the first of a frame's records, one for every frame
PROGRESS_WINDOW_S = 0.5  # how long the bench watches the worker's pace after the close before it decides
FEW_FRAMES = 5  # a worker this close to the end is waited for, whatever its pace
THREADS_SHARE = 0.6  # the bench's three filming threads on two cores take ~0.6 of their CPU time (`observe_frames`)
REPO = Path(__file__).resolve().parents[3]
log = logging.getLogger(__name__)


class CameraWorker:
    """The bench's side of the worker process: started with the camera (so it is warm before the run starts), told
    where and when to film once the run's clock is known, and asked for its records once the plant's file is
    complete. Every failure of the worker leaves `results` returning None, and the bench films the states itself.
    The worker ends with its input: when the bench ends, however it ends, the pipe closes and the worker stops
    waiting (it films what the file holds and exits)."""

    def __init__(self, experiment: Any) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", WORKER_MODULE],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        self.records: list[tuple[str, dict[str, Any]]] = []
        self.frame_cpu_s: list[float] = []  # the worker's CPU time at each frame's first record
        self.frame_times_s: list[float] = []  # and when it arrived (monotonic)
        self.done: dict[str, Any] | None = None
        self.errors: list[str] = []
        self.following = False
        self.outcome = ""  # what became of it, once `results` has run
        self._ended = threading.Event()
        self._send({"experiment_text": experiment.text, "source": str(experiment.path)})
        threading.Thread(target=self._read, name="camera-worker-out", daemon=True).start()
        threading.Thread(target=self._drain_errors, name="camera-worker-err", daemon=True).start()

    def _send(self, message: dict[str, Any]) -> bool:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(json.dumps(message) + "\n")
            self.proc.stdin.flush()
            return True
        except (BrokenPipeError, OSError, ValueError):
            return False

    def _read(self) -> None:
        assert self.proc.stdout is not None
        try:
            for line in self.proc.stdout:
                try:
                    message = json.loads(line)
                except json.JSONDecodeError:
                    self.errors.append(line.strip())
                    continue
                if "record" in message:
                    topic, payload = message["record"]
                    self.records.append((topic, payload))
                    if topic == FRAME_TOPIC:  # one a frame
                        self.frame_cpu_s.append(float(message.get("cpu_s", 0.0)))
                        self.frame_times_s.append(time.monotonic())
                elif "done" in message:
                    self.done = message["done"]
        finally:
            self._ended.set()

    def _drain_errors(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.errors = [*self.errors[-19:], line.rstrip()]

    def follow(self, side_file: Path, zero_s: float, duration_s: float) -> None:
        message = {"side_file": str(side_file), "zero_s": zero_s, "duration_s": duration_s}
        self.following = self._send(message)

    def end(self) -> None:
        """The plant's file is complete (the backend has closed): the worker films what is left and ends. Before the
        run started (nothing to follow), it just ends. Returns at once; safe to call twice."""
        if self.following:
            self._send({"final": True})
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        except OSError:
            pass

    def results(self, frames: int, timeout_s: float = FINISH_TIMEOUT_S) -> dict[str, Any] | None:
        """`end`, then wait for the worker's last frame: its ``done`` message (``chosen``, ``stats``) with its
        records added as ``records``; None if it was not following, failed, took longer than ``timeout_s``, or
        would take longer than the bench filming all ``frames`` itself (`worth_waiting_for`)."""
        following = self.following
        self.end()
        finished = following and self._ended.wait(PROGRESS_WINDOW_S)
        behind = (
            following
            and not finished
            and not worth_waiting_for(frames, self.frame_cpu_s, self.frame_times_s, time.monotonic())
        )
        if following and not finished and not behind:
            finished = self._ended.wait(timeout_s)
        if not finished:
            self.proc.kill()  # behind, stuck or never started: the bench films instead
        try:
            self.proc.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5.0)
        if not following:
            self.outcome = "not started (the run never began)"
            return None
        if behind:
            self.outcome = f"behind: {len(self.frame_cpu_s)} of {frames} frames filmed when the run closed"
            log.info("the live camera is %s; the bench films them, sooner", self.outcome)
            return None
        if not finished or self.done is None:
            why = " / ".join(self.errors[-3:]) or "no output"
            self.outcome = f"failed: {why}"
            log.warning("the live camera %s; filming after the run", self.outcome)
            return None
        self.outcome = "filmed"
        return {**self.done, "records": self.records}


def worth_waiting_for(frames: int, frame_cpu_s: list[float], frame_times_s: list[float], now_s: float) -> bool:
    """Whether a worker that has filmed ``len(frame_cpu_s)`` of ``frames`` (its CPU time at each, and when each
    arrived, monotonic) gives its last frames sooner than the bench filming all ``frames`` itself.

    Why: the worker runs at nice 10 so that it never takes a core from the emulator or the loop during the run,
    and an unprivileged process cannot raise its priority again afterwards. On a quiet PC it is a few frames behind
    when the run ends; beside other work it is starved (measured beside two busy loops: 28-30 s after the close for
    bench_stick's 200 frames, where the bench filmed them in 5.6-5.8 s). Its pace over the last `PROGRESS_WINDOW_S`
    gives its remaining time; the bench's is the worker's CPU time a frame times `THREADS_SHARE` (the three stages
    on two cores) for every frame. A worker within `FEW_FRAMES` of the end is waited for."""
    done_frames = len(frame_cpu_s)
    remaining = frames - done_frames
    if remaining <= FEW_FRAMES:
        return True
    if done_frames < 2:
        return False  # it never got going: nothing to judge its pace by
    recent = [t for t in frame_times_s if t >= now_s - PROGRESS_WINDOW_S]
    if not recent:
        return False  # starved
    pace_s = PROGRESS_WINDOW_S / len(recent)
    cpu_per_frame_s = (frame_cpu_s[-1] - frame_cpu_s[0]) / (done_frames - 1)
    return remaining * pace_s <= frames * cpu_per_frame_s * THREADS_SHARE
