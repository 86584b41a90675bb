"""ur_rtde's own example programs against ``aiko emulate ur3`` in another process: the harness.

The programs are ur_rtde 1.6.5's ``examples/py`` and the Python snippets of its documentation (``doc/``), from its
PyPI sdist, which ``make ur-rtde-examples`` puts in ``~/.cache/aiko/ur_rtde-1.6.5`` (``AIKO_UR_RTDE_EXAMPLES``
elsewhere); nothing of them is in this repository and nothing is downloaded at test time. Each runs unmodified but
for its host address and, where a pose lies out of a UR3's reach (0.5 m), that pose (``POSE_EDITS``, each edit
listed in docs/ur3.md). A receive client in this process watches the arm meanwhile (:class:`Observer`), so each
test checks what the program did, not only what it printed.

``python -m tests.aiko.devices.ur.vendor_examples`` runs them all and prints the table of docs/ur3.md.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import re
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .ur3_emulator_process import REPO, running, stop

EXAMPLES = Path(os.environ.get("AIKO_UR_RTDE_EXAMPLES", Path.home() / ".cache/aiko/ur_rtde-1.6.5"))
HOSTS = ("127.0.0.1", "localhost", "192.168.56.101", "<ROBOT_IP>")
# Poses beyond a UR3's reach, moved inside it (same orientation, same height, nearer the base).
POSE_EDITS = {
    "movel_path_with_blend_example.py": [("-0.143, -0.51, 0.21", "-0.143, -0.47, 0.21"), ("-0.32, -0.61", "-0.32, -0.32")],  # noqa: E501
    "doc:movel_path_with_blend": [("-0.143, -0.51, 0.21", "-0.143, -0.47, 0.21"), ("-0.32, -0.61", "-0.32, -0.32")],  # noqa: E501
    # -0.600 is out of reach, -0.400 at z 0.300 the arm stretched straight (an elbow singularity): 10 cm nearer
    "move_path_async_example.py": [("-0.400", "-0.300"), ("-0.600", "-0.400")],
}  # fmt: skip
# The emulator every program meets: an e-Series (the examples' 500 Hz loops and 5.x functions) with a spring floor
# at z = 0.10 m under the flange, so force mode and contact have something to press on.
# The controller ahead of ordinary load, as a real one is (`ur3_emulator_process.CONTROLLER_NICE`): the examples'
# own timing (a 10 ms sleep before reading an output back) must not depend on how busy the test machine is.
E_SERIES = ("--model", "ur3e", "--plant", "aiko.devices.ur.plants:spring_floor")
CB3 = ("--model", "ur3")


def available() -> bool:
    return (EXAMPLES / "examples/py").is_dir()


def example_source(name: str) -> str:
    """The program's text: ``examples/py/NAME`` or ``doc:NAME``, a snippet of the docs (:func:`doc_snippets`)."""
    if name.startswith("doc:"):
        return doc_snippets()[name]
    return (EXAMPLES / "examples/py" / name).read_text()


def doc_snippets() -> dict[str, str]:
    """The ``.. code-block:: python`` snippets of ur_rtde's docs, named after what they do."""
    out: dict[str, str] = {}
    for rst in sorted((EXAMPLES / "doc").rglob("*.rst")):
        lines = rst.read_text().splitlines()
        i = 0
        while i < len(lines):
            if lines[i].strip() == ".. code-block:: python":
                block = []
                i += 1
                while i < len(lines) and (not lines[i].strip() or lines[i].startswith("   ")):
                    block.append(lines[i])
                    i += 1
                text = "\n".join(line[4:] if line.startswith("    ") else line[3:] for line in block).strip() + "\n"
                out[f"doc:{_snippet_name(text, len(out))}"] = text
            else:
                i += 1
    return out


def _snippet_name(text: str, index: int) -> str:
    for needle, name in (
        ("robotiq_gripper_control", "robotiq_gripper_control"),
        ("robotiq_gripper", "robotiq_gripper"),
        ("FLAG_USE_EXT_UR_CAP", "external_control_ur_cap"),
        ("FLAG_CUSTOM_SCRIPT", "custom_script"),
        ("getCircleTarget", "realtime_control"),
        ("startFileRecording", "record_data"),
        ("moveUntilContact", "move_until_contact"),
        ("forceMode(", "forcemode"),
        ("servoJ(", "servoj"),
        ("speedJ(", "speedj"),
        ("moveL(path)", "movel_path_with_blend"),
        ("stopJ(", "move_async"),
        ("getDigitalOutState", "io"),
        ("setStandardDigitalOut", "basic_io"),
        ("getActualQ()", "basic_receive"),
        ("moveL(", "basic_control"),
    ):
        if needle in text:
            return name
    return f"snippet{index}"


def prepared(name: str, host: str) -> str:
    """The program with ``host`` for its robot address and the UR3-reach pose edits."""
    text = example_source(name)
    for literal in HOSTS:
        text = text.replace(f'"{literal}"', f'"{host}"').replace(f"'{literal}'", f"'{host}'")
    for old, new in POSE_EDITS.get(name, []):
        assert old in text, f"{name}: the pose edit {old!r} no longer applies"
        text = text.replace(old, new)
    return text


def sha256(name: str) -> str:
    return hashlib.sha256(example_source(name).encode()).hexdigest()[:12]


@dataclass
class Observer:
    """Samples the arm through its own receive client while a program runs."""

    host: str
    t: list[float] = field(default_factory=list)
    q: list[list[float]] = field(default_factory=list)
    tcp: list[list[float]] = field(default_factory=list)
    force: list[list[float]] = field(default_factory=list)
    digital_out: list[int] = field(default_factory=list)
    analog_out1: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        import rtde_receive

        self._r = rtde_receive.RTDEReceiveInterface(self.host, 125.0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        r = self._r
        while not self._stop.wait(0.01):
            self.t.append(r.getTimestamp())
            self.q.append(list(r.getActualQ()))
            self.tcp.append(list(r.getActualTCPPose()))
            self.force.append(list(r.getActualTCPForce()))
            self.digital_out.append(int(r.getActualDigitalOutputBits()))
            self.analog_out1.append(r.getStandardAnalogOutput1())

    program_stderr_path: Path | None = None  # what the program has written to stderr so far (set by run_example)

    def program_stderr(self) -> str:
        if self.program_stderr_path is None or not self.program_stderr_path.exists():
            return ""
        return self.program_stderr_path.read_text(errors="replace")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._r.disconnect()

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return np.array(self.q), np.array(self.tcp), np.array(self.force)


@dataclass
class Run:
    name: str
    returncode: int
    stdout: str
    stderr: str
    watched: Observer
    emulator_events: list[str]
    interrupted: bool

    @property
    def refused_by_the_client(self) -> bool:
        return "RTDE control script is not running!" in self.stderr


# prctl looked up now, not in the forked child: a lookup there takes the dynamic loader's lock, which another thread
# of the suite (ur_rtde's, in the observer) may have held at the fork, and the child would never exec
_PRCTL = ctypes.CDLL(None).prctl if sys.platform.startswith("linux") else None


def _start_as_from_a_terminal() -> None:
    """In the program's process before it starts: the program as a lab user starts it from a terminal.

    * SIGINT at its default: a suite started as a background job of a non-interactive shell (``make test &`` in a
      script) inherits SIGINT *ignored*, and so would every program it starts: Python then installs no
      KeyboardInterrupt handler, the programs that run until Ctrl-C never end, and the harness killed them after
      its timeout (4 vendor-example tests failed so; reproduced by starting pytest with SIGINT ignored).
    * Without real-time rights, as an ordinary account has them (RLIMIT_RTPRIO 0, and no CAP_SYS_NICE for a root
      suite): the realtime example makes its main thread SCHED_FIFO 80 (ur_rtde raises its own threads only on a
      real-time kernel) and spins out the end of each period. A suite should not put a real-time process beside a
      real-time Aiko run that a lab PC would not have. Without the rights the example says so ("Failed to set
      real-time process scheduler") and runs at normal priority, as it does on most lab PCs.
    * Killed with the suite (Linux's PR_SET_PDEATHSIG): one left running by a killed harness kept streaming servoL
      to its emulator at FIFO 80 (a fifth of a core) for half an hour, beside everything that ran after it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    resource.setrlimit(resource.RLIMIT_RTPRIO, (0, 0))
    if _PRCTL is not None:
        _PRCTL(24, 23)  # PR_CAPBSET_DROP CAP_SYS_NICE: not in what the exec'd program holds (root only)
        _PRCTL(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def run_example(
    name: str,
    host: str,
    emulator: tuple[str, ...] = E_SERIES,
    args: tuple[str, ...] = (),
    interrupt_after_s: float | None = None,
    interrupt_when: Callable[[Observer], bool] | None = None,
    timeout_s: float = 120.0,
    workdir: Path | None = None,
) -> Run:
    """Run one program against a fresh emulator on ``host``. The ones that run until Ctrl-C (as their comments tell
    the user to stop them) get SIGINT after ``interrupt_after_s``, or once ``interrupt_when(observer)`` holds (what
    the program was meant to do has been seen, however slowly a busy machine did it; ``timeout_s`` at most)."""
    workdir = workdir or Path(os.environ.get("TMPDIR", "/tmp"))
    script = workdir / ("example_" + re.sub(r"\W", "_", name) + ".py")
    script.write_text(prepared(name, host))
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1")
    stderr_path = script.with_suffix(".stderr")  # a file, not a pipe: a condition can read it while the program runs
    with running(host, *emulator) as proc, stderr_path.open("w") as stderr_file:
        watched = Observer(host)
        watched.program_stderr_path = stderr_path
        program = subprocess.Popen(
            [sys.executable, str(script), *args], cwd=workdir, env=env, text=True,
            stdout=subprocess.PIPE, stderr=stderr_file, preexec_fn=_start_as_from_a_terminal,
        )  # fmt: skip
        interrupted = False
        try:
            if interrupt_when is not None:
                deadline = time.monotonic() + timeout_s
                while program.poll() is None and not interrupt_when(watched) and time.monotonic() < deadline:
                    time.sleep(0.05)
            if interrupt_after_s is not None or interrupt_when is not None:
                try:
                    program.wait(timeout=interrupt_after_s or 0.01)
                except subprocess.TimeoutExpired:
                    program.send_signal(signal.SIGINT)
                    interrupted = True
            out, _ = program.communicate(timeout=timeout_s)
            err = watched.program_stderr()
        except subprocess.TimeoutExpired:
            program.kill()
            out, _ = program.communicate()
            err = watched.program_stderr() + f"\n[harness: killed after {timeout_s:g} s]"
        finally:
            if program.poll() is None:  # whatever ended the wait (pytest's timeout, a failing condition): never leave
                program.kill()  # a program behind (see _start_as_from_a_terminal)
                program.wait()
            time.sleep(0.1)
            watched.close()
        _, events = stop(proc)
    stderr_path.unlink(missing_ok=True)
    return Run(name, program.returncode, out, err, watched, events, interrupted)


if __name__ == "__main__":  # pragma: no cover - the table for docs/ur3.md
    import pytest

    sys.exit(pytest.main([str(Path(__file__).with_name("test_vendor_examples.py")), "-q", "-rA"]))
