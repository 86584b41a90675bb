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
from pathlib import Path
from typing import Any

# How long the bench waits for the worker's last frame after the run: it may be far behind on a busy PC, and
# filming in the bench instead would compete for the same cores
FINISH_TIMEOUT_S = 120.0
WORKER_MODULE = "aiko.robots.rod_bench.camera_worker"
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
        self.done: dict[str, Any] | None = None
        self.errors: list[str] = []
        self.following = False
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

    def results(self, timeout_s: float = FINISH_TIMEOUT_S) -> dict[str, Any] | None:
        """`end`, then wait for the worker's last frame: its ``done`` message (``chosen``, ``stats``) with its
        records added as ``records``, or None if it was not following, failed, or took longer than ``timeout_s``."""
        following = self.following
        self.end()
        finished = self._ended.wait(timeout_s)
        try:
            self.proc.wait(timeout=5.0 if finished else 0.0)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5.0)
        if not following:
            return None
        if not finished or self.done is None:
            why = " / ".join(self.errors[-3:]) or "no output"
            log.warning("the live camera failed (%s); filming after the run", why)
            return None
        return {**self.done, "records": self.records}
