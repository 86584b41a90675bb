"""A gamepad through Linux's input subsystem (``evdev``), and recorded gamepad streams replayed through the same
mapping.

Why evdev: it is the kernel's own event interface, read by the well-kept ``evdev`` package (python-evdev, BSD),
works over ssh and without a display or a window (pygame/SDL2 needs a video subsystem and an event pump; ``inputs``
is unmaintained), and gives each event its kernel timestamp. Every gamepad the kernel knows (Xbox, PlayStation,
Logitech F710, 8BitDo, …) reports the standard codes below. Linux only, like the lab PC; ``pip install
aiko[gamepad]``.

Mapping (standard evdev codes):

    left stick, vertical (ABS_Y)      speed: released = 0 (the wave holds), full forward = max_speed × the gait's
                                      own frequency, full back = −1 (backwards): the gait runs while it is pushed
    right stick, horizontal (ABS_RX)  turn (left stick horizontal, ABS_X, too)
    A / B / X / Y (BTN_SOUTH/EAST/WEST/NORTH)   lateral undulation / rest / obstacle-aided / sidewinding
    START                             pause / resume
    SELECT                            stop
    D-pad (ABS_HAT0X/Y)               turn and speed in steps, like the keyboard's arrows

A recorded stream is one JSON object per line, ``{"t_s": …, "type": …, "code": …, "value": …}`` (the kernel
event's time, type, code and value), plus the device's axis ranges on the first line (``{"absinfo": {code: [min,
max]}}``). ``aiko drive --input gamepad --gamepad-record FILE`` writes one while driving;
``--gamepad-replay FILE`` feeds one, with its original timing, through exactly the same mapping a live pad goes
through. A pad that is unplugged (``ENODEV``) or a stream that ends is a lost input.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path
from typing import Any, TextIO

from aiko.core.errors import AikoError
from aiko.robots.aiko.drive.session import InputDevice, Intent

log = logging.getLogger(__name__)

# linux/input-event-codes.h (stable kernel ABI)
EV_KEY, EV_ABS = 0x01, 0x03
ABS_X, ABS_Y, ABS_RX, ABS_RY, ABS_HAT0X, ABS_HAT0Y = 0x00, 0x01, 0x03, 0x04, 0x10, 0x11
BTN_SOUTH, BTN_EAST, BTN_NORTH, BTN_WEST = 0x130, 0x131, 0x133, 0x134
BTN_SELECT, BTN_START = 0x13A, 0x13B

BUTTONS: dict[int, Intent] = {
    BTN_SOUTH: Intent("gait", "lateral_undulation"),
    BTN_NORTH: Intent("gait", "sidewinding"),
    BTN_WEST: Intent("gait", "obstacle_aided"),
    BTN_EAST: Intent("gait", "rest"),
    BTN_START: Intent("pause_toggle"),
    BTN_SELECT: Intent("stop"),
}
DEAD_ZONE = 0.12  # of full deflection: a stick at rest reads a few percent off centre
STICK_QUANTUM = 0.05  # commands move in 5 % steps: a trembling thumb does not flood the log


def normalise(value: int, low: int, high: int) -> float:
    """An axis reading in [-1, 1] with the dead zone removed (0 inside it), rescaled so full deflection is 1."""
    centre, half = (low + high) / 2, (high - low) / 2
    x = (value - centre) / half if half > 0 else 0.0
    x = max(-1.0, min(1.0, x))
    if abs(x) <= DEAD_ZONE:
        return 0.0
    return (abs(x) - DEAD_ZONE) / (1 - DEAD_ZONE) * (1 if x > 0 else -1)


def quantise(x: float) -> float:
    return round(round(x / STICK_QUANTUM) * STICK_QUANTUM, 6)


def axis_speed(deflection: float, max_speed: float) -> float:
    """Stick forward (evdev: negative Y) → faster: released 0, full forward ``max_speed``, full back −1."""
    forward = -deflection
    return quantise(forward * (max_speed if forward >= 0 else 1.0))


class GamepadMapping:
    """Kernel events → intents: the one mapping for live pads and replayed streams."""

    def __init__(self, absinfo: dict[int, tuple[int, int]], max_speed: float = 1.5) -> None:
        self.absinfo = absinfo
        self.max_speed = max_speed
        self._last: dict[str, float] = {}
        self._turn_axes: dict[int, float] = {}

    def __call__(self, type_: int, code: int, value: int) -> list[Intent]:
        if type_ == EV_KEY and value == 1 and code in BUTTONS:
            return [BUTTONS[code]]
        if type_ != EV_ABS:
            return []
        if code == ABS_HAT0X and value != 0:
            return [Intent("turn_step", -float(value))]  # hat left (-1) turns left (+)
        if code == ABS_HAT0Y and value != 0:
            return [Intent("speed_step", -float(value))]  # hat up (-1) is faster
        low, high = self.absinfo.get(code, (-32768, 32767))
        x = normalise(value, low, high)
        if code == ABS_Y:
            return self._changed("speed", axis_speed(x, self.max_speed))
        if code in (ABS_X, ABS_RX):
            self._turn_axes[code] = x
            deflection = max(self._turn_axes.values(), key=abs)
            return self._changed("turn", quantise(-deflection))  # stick left (negative) turns left (+)
        return []

    def _changed(self, kind: str, value: float) -> list[Intent]:
        if self._last.get(kind) == value:
            return []
        self._last[kind] = value
        return [Intent(kind, value)]


class GamepadInput(InputDevice):
    """A live evdev gamepad, or a recorded stream replayed in real time (``replay``)."""

    name = "gamepad"

    def __init__(self, device: str | None = None, record: str | None = None, replay: str | None = None) -> None:
        super().__init__()
        if device and replay:
            raise AikoError("--gamepad and --gamepad-replay exclude each other")
        self.device_path = device
        self.record_path = record
        self.replay_path = replay
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._device: Any = None
        self._record: TextIO | None = None
        self.mapping: GamepadMapping | None = None

    def start(self) -> None:
        if self.replay_path:
            self._events, absinfo = read_stream(self.replay_path)
            self.name = "gamepad"
            target = self._replay_loop
        else:
            self._device, absinfo = open_gamepad(self.device_path)
            target = self._read_loop
        self.mapping = GamepadMapping(absinfo)
        if self.record_path:
            self._record = open(self.record_path, "w")  # noqa: SIM115 - closed in close()
            self._record.write(json.dumps({"absinfo": {str(k): list(v) for k, v in absinfo.items()}}) + "\n")
        self._thread = threading.Thread(target=target, name="drive-gamepad", daemon=True)
        self._thread.start()

    def _emit(self, t_s: float, type_: int, code: int, value: int) -> None:
        if self._record is not None:
            self._record.write(json.dumps({"t_s": t_s, "type": type_, "code": code, "value": value}) + "\n")
        assert self.mapping is not None
        for intent in self.mapping(type_, code, value):
            self.intents.put(intent)

    def _read_loop(self) -> None:
        import select

        device = self._device
        while not self._stop.is_set():
            try:
                ready, _, _ = select.select([device.fd], [], [], 0.1)
                if not ready:
                    continue
                for event in device.read():
                    self._emit(event.timestamp(), event.type, event.code, event.value)
            except BlockingIOError:
                continue  # woken with nothing to read (EAGAIN): the pad is still there
            except OSError as exc:  # ENODEV: unplugged, out of range, battery dead
                self.intents.put(Intent("lost", f"gamepad {device.path}: {exc.strerror or exc}"))
                return

    def _replay_loop(self) -> None:
        events = self._events
        if not events:
            self.intents.put(Intent("lost", "the recorded gamepad stream is empty"))
            return
        t0_stream, t0 = events[0][0], time.monotonic()
        for t_s, type_, code, value in events:
            delay = (t_s - t0_stream) - (time.monotonic() - t0)
            if delay > 0 and self._stop.wait(delay):
                return
            self._emit(t_s, type_, code, value)
        self.intents.put(Intent("lost", "end of the recorded gamepad stream"))

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(0.5)
        if self._device is not None:
            try:
                self._device.close()
            except OSError:
                pass
        if self._record is not None:
            self._record.close()
            self._record = None


def read_stream(path: str | Path) -> tuple[list[tuple[float, int, int, int]], dict[int, tuple[int, int]]]:
    """A recorded gamepad stream (see the module docstring); a bad line is one clear error."""
    absinfo: dict[int, tuple[int, int]] = {}
    events: list[tuple[float, int, int, int]] = []
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as exc:
        raise AikoError(f"--gamepad-replay {path}: {exc.strerror}") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            if "absinfo" in item:
                absinfo = {int(k): (int(v[0]), int(v[1])) for k, v in item["absinfo"].items()}
                continue
            events.append((float(item["t_s"]), int(item["type"]), int(item["code"]), int(item["value"])))
        except (ValueError, KeyError, TypeError, IndexError):
            raise AikoError(f"--gamepad-replay {path}:{number}: not a gamepad event line: {line[:80]!r}") from None
    return events, absinfo


def open_gamepad(path: str | None) -> tuple[Any, dict[int, tuple[int, int]]]:
    """The evdev device at ``path``, or the first one with a gamepad's buttons; its axis ranges."""
    try:
        import evdev
    except ImportError:
        raise AikoError("--input gamepad needs the evdev package (Linux): pip install 'aiko[gamepad]'") from None
    try:
        paths = [path] if path else evdev.list_devices()
        for candidate in paths:
            device = evdev.InputDevice(candidate)
            keys = device.capabilities().get(EV_KEY, [])
            if path or BTN_SOUTH in keys:
                absinfo = {code: (info.min, info.max) for code, info in device.capabilities().get(EV_ABS, [])}
                return device, absinfo
            device.close()
    except OSError as exc:
        raise AikoError(f"--input gamepad: cannot open {path or 'the input devices'}: {exc.strerror}") from None
    raise AikoError(
        "--input gamepad: no gamepad found in /dev/input (is it plugged in, and may this user read /dev/input/event*?)"
    )
