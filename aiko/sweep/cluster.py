"""A real multi-process Dask cluster on loopback: a ``dask scheduler`` and ``dask worker`` processes, each its own
process group, started on free ports and always stopped. For the suite's cluster test and
``benchmarks/sweep_cluster.py`` (which also kills a worker mid-sweep), and for trying ``aiko sweep --scheduler``
without a cluster at hand.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LoopbackCluster:
    """``with LoopbackCluster(workers=2) as cluster: ... cluster.address ... cluster.kill_worker(0)``."""

    def __init__(self, workers: int = 2, *, log_dir: str | Path | None = None, start_timeout_s: float = 60.0) -> None:
        self.n_workers = workers
        self.port = free_port()
        self.address = f"tcp://127.0.0.1:{self.port}"
        self.log_dir = Path(log_dir) if log_dir else None
        self.start_timeout_s = start_timeout_s
        self.scheduler: subprocess.Popen | None = None
        self.workers: list[subprocess.Popen] = []
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
        self.bare_env = dict(env)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
        self.env = env

    def _spawn(self, name: str, args: list[str], *, with_repo: bool = True) -> subprocess.Popen:
        out = subprocess.DEVNULL
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            out = open(self.log_dir / f"{name}.log", "ab")  # noqa: SIM115 - closed with the process
        return subprocess.Popen(
            [sys.executable, "-m", *args],
            cwd=REPO if with_repo else tempfile.gettempdir(),
            env=self.env if with_repo else self.bare_env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: a kill takes the nanny and its worker together
        )

    def start(self) -> LoopbackCluster:
        self.scheduler = self._spawn(  # without this checkout on its path: a scheduler needs no aiko
            "scheduler",
            ["distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", str(self.port), "--no-dashboard"],
            with_repo=False,
        )
        for _ in range(self.n_workers):
            self.add_worker()
        self.wait_for_workers(self.n_workers)
        return self

    def add_worker(self) -> subprocess.Popen:
        worker = self._spawn(
            f"worker{len(self.workers)}",
            [
                "distributed.cli.dask_worker",
                self.address,
                "--nthreads", "1",
                "--nworkers", "1",
                "--host", "127.0.0.1",
                "--no-dashboard",
                "--death-timeout", "60",
            ],
        )  # fmt: skip
        self.workers.append(worker)
        return worker

    def wait_for_workers(self, n: int) -> None:
        from distributed import Client

        deadline = time.monotonic() + self.start_timeout_s
        while True:
            try:
                with Client(self.address, timeout="5s") as client:
                    client.wait_for_workers(n, timeout=max(1.0, deadline - time.monotonic()))
                    return
            except (OSError, TimeoutError):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the loopback cluster at {self.address} did not get {n} workers") from None
                time.sleep(0.5)

    def kill_worker(self, i: int) -> None:
        """SIGKILL worker ``i`` (its nanny and the worker process): what a crashed machine looks like."""
        _kill_group(self.workers[i], signal.SIGKILL)

    def kill_busy_worker(self, timeout_s: float = 120.0) -> dict:
        """SIGKILL the process group of a worker while it runs a task (waiting up to ``timeout_s`` for one to);
        returns its address and the tasks it was running."""
        from distributed import Client

        deadline = time.monotonic() + timeout_s
        with Client(self.address, timeout="10s") as client:
            pids = client.run(os.getpid)
            while time.monotonic() < deadline:
                for address, keys in client.processing().items():
                    if keys and address in pids:
                        os.killpg(os.getpgid(pids[address]), signal.SIGKILL)
                        return {"worker": address, "running": [str(k) for k in keys]}
                time.sleep(0.05)
        raise RuntimeError(f"no worker of {self.address} ran a task within {timeout_s} s")

    def stop(self) -> None:
        for proc in [*self.workers, self.scheduler]:
            if proc is not None and proc.poll() is None:
                _kill_group(proc, signal.SIGTERM)
        for proc in [*self.workers, self.scheduler]:
            if proc is None:
                continue
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                _kill_group(proc, signal.SIGKILL)
                proc.wait(timeout=10)

    def __enter__(self) -> LoopbackCluster:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _kill_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass
