"""The keyboard in the terminal ``aiko drive`` runs in: arrows steer, keys switch gaits, a status line below.

Keys (also printed when the drive starts, :data:`KEY_HELP`):

    ↑ / ↓     speed ± 0.1 (× the gait's own frequency; below 0 the wave runs backwards)
    ← / →     turn left / right one step (a quarter of the largest turn)
    c         centre the turn
    space     pause / resume (the wave stops where it is; the robot holds)
    1 2 3 0   lateral undulation, sidewinding, obstacle-aided, rest
    q         stop: pause, then end the run once the robot stands still (Ctrl-C ends it at once)

Reading keys by hand, on purpose: the terminal goes into cbreak mode (``termios``/``tty`` of the standard library;
Ctrl-C still raises KeyboardInterrupt in the run) and an arrow is its three ANSI bytes ``ESC [ A…D``. ``curses``
would take the whole screen and fight the run's own log lines on stderr; no other dependency is worth it for four
escape sequences. The terminal is restored on every exit path. End of input (the terminal closed) is a lost input.
"""

from __future__ import annotations

import os
import select
import sys
import termios
import threading
import tty
from typing import TextIO

from aiko.core.errors import AikoError
from aiko.robots.aiko.drive.session import InputDevice, Intent

KEY_HELP = (
    "keys: ↑/↓ speed  ←/→ turn  c centre  space pause/resume  "
    "1 lateral undulation  2 sidewinding  3 obstacle-aided  0 rest  q stop (Ctrl-C: at once)"
)

KEYS: dict[bytes, Intent] = {
    b"\x1b[A": Intent("speed_step", 1.0),
    b"\x1b[B": Intent("speed_step", -1.0),
    b"\x1b[D": Intent("turn_step", 1.0),  # left: a positive turn
    b"\x1b[C": Intent("turn_step", -1.0),
    b"\x1bOA": Intent("speed_step", 1.0),  # the same arrows in the terminal's application mode
    b"\x1bOB": Intent("speed_step", -1.0),
    b"\x1bOD": Intent("turn_step", 1.0),
    b"\x1bOC": Intent("turn_step", -1.0),
    b"c": Intent("centre"),
    b" ": Intent("pause_toggle"),
    b"p": Intent("pause_toggle"),
    b"1": Intent("gait", "lateral_undulation"),
    b"2": Intent("gait", "sidewinding"),
    b"3": Intent("gait", "obstacle_aided"),
    b"0": Intent("gait", "rest"),
    b"q": Intent("stop"),
}


def decode_keys(data: bytes) -> tuple[list[Intent], bytes]:
    """The intents in ``data`` and what is left over (the start of an escape sequence not yet complete)."""
    intents: list[Intent] = []
    i = 0
    while i < len(data):
        if data[i : i + 1] == b"\x1b":
            if len(data) - i < 3:
                return intents, data[i:]
            seq = data[i : i + 3]
            if seq in KEYS:
                intents.append(KEYS[seq])
            i += 3
            continue
        key = data[i : i + 1].lower()
        if key in KEYS:
            intents.append(KEYS[key])
        i += 1
    return intents, b""


class KeyboardInput(InputDevice):
    """Keys from a terminal (``stdin``), the status line to ``stderr``."""

    name = "keyboard"

    def __init__(self, stdin: TextIO | None = None, status: TextIO | None = None) -> None:
        super().__init__()
        self.stdin = stdin or sys.stdin
        self.status = status or sys.stderr
        self._fd = -1
        self._saved: list | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if not self.stdin.isatty():
            raise AikoError("--input keyboard needs a terminal on stdin (use --input gamepad or foxglove otherwise)")
        self._fd = self.stdin.fileno()
        self._saved = termios.tcgetattr(self._fd)
        tty.setcbreak(self._fd)  # keys arrive one by one, unechoed; Ctrl-C still interrupts
        self.status.write(KEY_HELP + "\n")
        self.status.flush()
        self._thread = threading.Thread(target=self._read_loop, name="drive-keyboard", daemon=True)
        self._thread.start()

    def _read_loop(self) -> None:
        pending = b""
        while not self._stop.is_set():
            try:
                ready, _, _ = select.select([self._fd], [], [], 0.1)
                if not ready:
                    continue
                data = os.read(self._fd, 64)
            except OSError as exc:
                self.intents.put(Intent("lost", f"terminal: {exc.strerror}"))
                return
            if not data:
                self.intents.put(Intent("lost", "end of input (terminal closed)"))
                return
            intents, pending = decode_keys(pending + data)
            for intent in intents:
                self.intents.put(intent)

    def show_status(self, line: str) -> None:
        try:
            self.status.write("\r\x1b[2K" + line)
            self.status.flush()
        except OSError:
            pass

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(0.5)
        if self._saved is not None:
            try:
                termios.tcsetattr(self._fd, termios.TCSADRAIN, self._saved)
            except termios.error:
                pass
            self._saved = None
            self.status.write("\n")
            self.status.flush()
